"""What ``Client.wait``, ``Client.result`` and ``Client.events`` do, over one EventHub.

No polling: a wait subscribes first (and makes the queue's scripts publish), then reads the
task's current state, so a task that ended before the wait began is answered at once and one
that ends during the read is not missed. After every resubscription the waits of the queue
read the state again, since events may have been lost while disconnected.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime
from types import TracebackType
from typing import Any, Self

import anyio

from .._broker import Broker, TaskRecord
from .._clock import Clock, ms_to_datetime
from .._defaults import DEFAULT_QUEUE, EVENTS_BUFFER
from .._errors import (
    AsyncqError,
    BrokerError,
    ResultNotKeptError,
    TaskNotFoundError,
    TimeLimitError,
)
from .._log import get_logger
from .._model._events import TaskEvent
from .._model._info import TaskFailedError, TaskInfo, TaskState
from .._model._records import record_info
from .._service._background import TaskSet
from .._validate import validate_queue_name as validate_queue
from .._validate import workflow_queue
from .._workflow._control import read_workflow
from .._workflow._info import WorkflowHandle, is_workflow_id, workflow_failed
from ._event_hub import EventHub, Gone, Stream

#: How many events one ``events()`` iterator buffers for a slow reader before dropping them.
STREAM_BUFFER = EVENTS_BUFFER

_FINAL = (TaskState.COMPLETED, TaskState.ARCHIVED)


class WaitTimeoutError(TimeLimitError):
    """``Client.wait``/``result``/``apply``: the timeout ran out before the task ended (a
    ``TimeoutError``). ``info`` is the task's last known state — read when the wait began,
    updated by the events heard since — and None when it could not be read in time;
    ``last_error`` is the error of its last failed run, if any."""

    def __init__(self, message: str, info: TaskInfo | None = None) -> None:
        super().__init__(message)
        self.info = info
        self.last_error = None if info is None else info.last_error


@dataclasses.dataclass
class _Seen:
    """What one wait learned of its task, for the error a timeout raises."""

    target: tuple[str, str] | None = None
    enqueueing: bool = False  # (apply: the enqueue was sent)
    info: TaskInfo | None = None
    event: TaskEvent | None = None


def _not_found(queue: str, task_id: str) -> TaskNotFoundError:
    return TaskNotFoundError(
        f"task {task_id!r} not found in queue {queue!r}: it never existed, or it ended and "
        "nothing of it is kept any more (a result is kept 10 min and a completion mark 1 "
        "min by default, nothing at retention=0; an archived task until the archive's cap "
        "or age). Give it a longer retention=... to wait for it later")


def _missed(queue: str, task_id: str, lost_since: datetime | None) -> Gone:
    """A waited-for task found gone after a resubscription: its final event was missed."""
    if lost_since is not None:
        how = ("while this client's connection for task events was broken (lost at "
               f"{lost_since:%H:%M:%S} UTC)")
    else:
        how = "while this client was changing its subscription to task events"
    return Gone(
        f"task {task_id!r} in queue {queue!r} ended {how}, and it kept nothing to read "
        "afterwards (retention=0): its outcome was missed. Leave it the default retention "
        "(or a longer one) so that a wait survives a lost connection")


class Waiting:
    """The client's waits and event streams."""

    def __init__(self, broker: Broker, clock: Clock) -> None:
        self._broker = broker
        self._clock = clock
        self.hub = EventHub(broker)
        self.hub.on_resubscribe(self._recheck_soon)
        #: Batched reads and rechecks after a resubscription, started from callbacks; ``close``
        #: cancels and awaits them.
        self._background = TaskSet(self._failed)
        self._log = get_logger("client")
        self._reads: list[tuple[tuple[str, str], asyncio.Future[TaskRecord | None]]] = []

    async def close(self) -> None:
        await self._background.close(0)
        await self.hub.close()

    def _failed(self, exc: BaseException) -> None:
        # A read's failure reached its waiters, a recheck's ends at the next resubscription:
        # what gets here is a bug, logged rather than lost.
        self._log.error("background read failed", error=repr(exc))

    async def _read(self, queue: str, task_id: str) -> TaskInfo | None:
        """The task's current state. Reads asked for in the same loop iteration go to Redis
        together in one pipeline, so 10 000 waits starting at once cost a few round trips
        and never more connections than one."""
        fut: asyncio.Future[TaskRecord | None] = asyncio.get_running_loop().create_future()
        self._reads.append(((queue, task_id), fut))
        if len(self._reads) == 1:
            asyncio.get_running_loop().call_soon(self._flush_reads)
        rec = await fut
        return None if rec is None else record_info(rec, self._clock.now_ms())

    def _flush_reads(self) -> None:
        batch, self._reads = self._reads, []
        self._background.spawn(self._read_batch(batch))

    async def _read_batch(self, batch: list[tuple[tuple[str, str],
                                                  asyncio.Future[TaskRecord | None]]]) -> None:
        # Only futures still awaited are resolved: a waiter that gave up cancelled its own.
        try:
            records = await self._broker.inspect.tasks([key for key, _ in batch])
        except BaseException as exc:
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(_own_copy(exc))
            if not isinstance(exc, Exception):
                raise
            return
        for (_, fut), rec in zip(batch, records, strict=True):
            if not fut.done():
                fut.set_result(rec)

    async def wait(self, task: TaskInfo | WorkflowHandle[Any] | str, queue: str | None,
                   timeout: float | None) -> TaskInfo:
        return (await self._wait(task, queue, timeout))[0]

    async def result(self, task: TaskInfo | WorkflowHandle[Any] | str, queue: str | None,
                     timeout: float | None) -> Any:
        return await self._outcome(*await self._wait(task, queue, timeout))

    async def apply(self, enqueue: Callable[[], Awaitable[TaskInfo]], queue: str,
                    timeout: float | None) -> Any:
        """``enqueue()`` once ``queue`` is listened to, then the task's result; the timeout
        covers both."""
        seen = _Seen()
        with anyio.move_on_after(timeout):
            await self.hub.watch([queue])
            try:
                seen.enqueueing = True
                info = await enqueue()
                seen.target = (info.queue, info.id)
                return await self._outcome(*await self._wait_for(info.queue, info.id, seen))
            finally:
                self.hub.unwatch([queue])
        if seen.target is None:
            if seen.enqueueing:
                raise BrokerError(f"no answer from Redis to the enqueue within {timeout:g} s "
                                  "(the task may have been stored)", transient=True)
            raise self._timed_out(queue, "", timeout, seen)
        raise self._timed_out(*seen.target, timeout, seen)

    async def _wait(self, task: TaskInfo | WorkflowHandle[Any] | str, queue: str | None,
                    timeout: float | None) -> tuple[TaskInfo, TaskEvent | None]:
        queue, task_id = _target(task, queue)
        seen = _Seen((queue, task_id))
        with anyio.move_on_after(timeout):
            return await self._wait_for(queue, task_id, seen)
        raise self._timed_out(queue, task_id, timeout, seen)

    async def _wait_for(self, queue: str, task_id: str,
                        seen: _Seen) -> tuple[TaskInfo, TaskEvent | None]:
        await self.hub.watch([queue])
        try:
            return await self._wait_watched(queue, task_id, seen)
        finally:
            self.hub.unwatch([queue])

    async def _wait_watched(self, queue: str, task_id: str,
                            seen: _Seen) -> tuple[TaskInfo, TaskEvent | None]:
        fut = self.hub.waiter(queue, task_id)
        generation = self.hub.generation
        try:
            base = seen.info = await self._read_until_answered(queue, task_id)
            if base is not None and base.state in _FINAL:
                return base, None
            if base is None:
                # Gone already: its final event may still be on its way to the subscription
                # (the read took another connection), so let the subscription catch up first.
                await self.hub.settle(queue)
            outcome = self.hub.recent(queue, task_id) or (fut.result() if fut.done() else None)
            if base is None and outcome is None and self.hub.subscribed(queue) \
                    and self.hub.generation == generation:
                raise _not_found(queue, task_id)  # (listened all along: it ended before)
            # Else the subscription broke meanwhile: the recheck of its resubscription tells
            # (the task's event, or that it was missed).
            if outcome is None:
                outcome = await fut
            if isinstance(outcome, Gone):
                raise TaskNotFoundError(outcome.why)
            return await self._final(base, outcome), outcome
        finally:
            seen.event = self.hub.latest(queue, task_id) or seen.event
            self.hub.forget(queue, task_id, fut)

    def _timed_out(self, queue: str, task_id: str, timeout: float | None,
                   seen: _Seen) -> AsyncqError:
        """The error of a wait whose ``timeout`` ran out: a BrokerError when the queue's
        events could not be listened to meanwhile (Redis unreachable), else a
        WaitTimeoutError with the task's last known state."""
        if not task_id:
            what = f"apply in queue {queue!r}"  # (not enqueued: it could not listen first)
        elif is_workflow_id(task_id) and queue == workflow_queue(task_id):
            what = f"workflow {task_id!r}"
        else:
            what = f"task {task_id!r} in queue {queue!r}"
        after = f"{timeout:g} s"
        failure = self.hub.last_failure
        if not self.hub.subscribed(queue) and (failure is not None or seen.info is None):
            # (Not subscribed for a moment only, without a failure, while the client changes
            # its subscription: that is a plain timeout.)
            cause = f": {failure}" if failure is not None else \
                " (subscribing to its events got no answer)"
            err = BrokerError(f"{what}: no outcome within {after}, and Redis cannot be reached "
                              f"to listen to its events{cause}", transient=True)
            err.__cause__ = failure
            return err
        info = _known(seen.info, seen.event)
        if info is None:
            return WaitTimeoutError(f"{what}: no outcome within {after} (its state could not be "
                                    "read in time)")
        details = []
        if info.retried:
            details.append(f"retried {info.retried} time{'s' if info.retried > 1 else ''}")
        if info.next_process_at is not None and info.state in (TaskState.RETRY,
                                                               TaskState.SCHEDULED):
            details.append(f"next run at {info.next_process_at:%H:%M:%S} UTC")
        if info.last_error:
            details.append(f"last error: {info.last_error}")
        detail = f" ({', '.join(details)})" if details else ""
        return WaitTimeoutError(f"{what} still {info.state.value} after {after}{detail}", info)

    async def _final(self, base: TaskInfo | None, event: TaskEvent) -> TaskInfo:
        """The TaskInfo a final event leaves: read again when the task is still stored
        (archived, or completed with retention), else built from the event."""
        if event.state is not TaskState.DELETED and (
                event.state is TaskState.ARCHIVED or event.result_kept):
            stored = await self._read_again(event)
            if stored is not None and stored.state is event.state:
                return stored
        if base is None:
            base = _from_event(event)
        completed = event.state is TaskState.COMPLETED
        return dataclasses.replace(
            base, state=event.state, retried=event.retried,
            last_error=event.last_error or (None if completed else base.last_error),
            last_failed_at=None if completed else event.at,
            completed_at=event.at if completed else None, next_process_at=None,
            result=event.result, result_encoding=event.result_encoding)

    async def _read_until_answered(self, queue: str, task_id: str) -> TaskInfo | None:
        """The task's stored state, read again with backoff while Redis cannot be reached (the
        wait's timeout ends it, as it ends the subscription's own retries)."""
        backoff = 0.05
        while True:
            try:
                return await self._read(queue, task_id)
            except BrokerError as exc:
                if not exc.transient:
                    raise
                await anyio.sleep(backoff)
                backoff = min(1.0, backoff * 2)

    async def _read_again(self, event: TaskEvent) -> TaskInfo | None:
        """The stored task a final event told of. A read failing on a broken connection (Redis
        just restarted) is tried again within the wait's timeout; when the event itself
        carries what the waiter needs (no result, or the result), it is the answer instead."""
        backoff = 0.05
        while True:
            try:
                return await self._read(event.queue, event.id)
            except BrokerError as exc:
                if not exc.transient:
                    raise
                if event.state is TaskState.COMPLETED and not event.result_too_large:
                    return None  # (built from the event)
                await anyio.sleep(backoff)
                backoff = min(1.0, backoff * 2)

    async def _outcome(self, info: TaskInfo, event: TaskEvent | None) -> Any:
        """What ``result`` returns for a task that ended, or the error it raises."""
        if info.state is not TaskState.COMPLETED:
            if is_workflow_id(info.id) and info.queue == workflow_queue(info.id):
                try:
                    workflow = await read_workflow(self._broker, info.id)
                except AsyncqError:
                    workflow = None  # (the message then names the workflow only)
                raise workflow_failed(info, workflow)
            raise TaskFailedError(info)
        if info.result is None and event is not None and event.result_too_large:
            raise ResultNotKeptError(
                f"task {info.id!r} returned a result larger than 64 KiB with retention=0, "
                "so the result was not kept: leave it the default retention (or give a "
                "longer one) to read large results")
        if info.result is None or info.result_encoding == "b":
            return info.result
        return info.result_json()

    def _recheck_soon(self, queues: frozenset[str], lost_since: datetime | None) -> None:
        waiting = self.hub.waiting_in(queues)
        if waiting:
            self._background.spawn(self._recheck(waiting, lost_since))

    async def _recheck(self, waiting: list[tuple[str, str]], lost_since: datetime | None) -> None:
        """After a resubscription: a task that ended meanwhile ends its waits now (the reads
        go to Redis together, in one pipeline)."""
        infos = await asyncio.gather(*(self._read(q, t) for q, t in waiting),
                                     return_exceptions=True)
        for (queue, task_id), info in zip(waiting, infos, strict=True):
            if isinstance(info, AsyncqError):
                return  # the connection failed again: the next resubscription rechecks
            if isinstance(info, BaseException):
                raise info
            if info is None:
                heard = self.hub.recent(queue, task_id)
                self.hub.resolve(queue, task_id,
                                 heard or _missed(queue, task_id, lost_since))
            elif info.state in _FINAL:
                self.hub.resolve(queue, task_id, TaskEvent(
                    id=task_id, queue=queue, type=info.type, previous=None, state=info.state,
                    at=info.completed_at or info.last_failed_at or _now(self._clock),
                    retried=info.retried, last_error=info.last_error, result=info.result,
                    result_encoding=info.result_encoding, result_kept=True))


def _from_event(event: TaskEvent) -> TaskInfo:
    return TaskInfo(id=event.id, queue=event.queue, type=event.type or "", payload=b"",
                    state=event.state, max_retry=0)


def _known(info: TaskInfo | None, event: TaskEvent | None) -> TaskInfo | None:
    """The last known state of a task: as read, updated by a later event heard."""
    if event is None:
        return info
    base = info or _from_event(event)
    retry = event.state is TaskState.RETRY
    return dataclasses.replace(
        base, state=event.state, retried=max(event.retried, base.retried),
        last_error=event.last_error or base.last_error,
        last_failed_at=event.at if retry else base.last_failed_at,
        next_process_at=event.next_process_at)


def _own_copy(exc: BaseException) -> BaseException:
    """A BrokerError of its own for each waiter a failed read reaches (one exception object
    raised in thousands of tasks would collect all their tracebacks)."""
    if type(exc) is not BrokerError:
        return exc
    copy = BrokerError(str(exc), transient=exc.transient, refused=exc.refused)
    copy.__cause__ = exc.__cause__
    return copy


class EventStream:
    """``Client.events()``: an async iterator of TaskEvent and EventsLost items.

    Use it as ``async with client.events(...) as events:`` — the subscription is in place when
    the block starts, so nothing enqueued inside it is missed — then ``async for``. Iterating
    without ``async with`` subscribes on the first step; call ``aclose()`` when done."""

    def __init__(self, waiting: Waiting, queues: Iterable[str], task_ids: Iterable[str] | None,
                 states: Iterable[TaskState | str] | None, buffer: int = STREAM_BUFFER) -> None:
        self._hub = waiting.hub
        self.queues = frozenset(validate_queue(q) for q in queues)
        if not self.queues:
            raise ValueError("events() needs at least one queue")
        wanted = None if states is None else frozenset(TaskState(s).value for s in states)
        if not isinstance(buffer, int) or isinstance(buffer, bool) or buffer < 2:
            raise ValueError(f"buffer must be an int >= 2, got {buffer!r}")
        self._stream = Stream(self.queues, None if task_ids is None else frozenset(task_ids),
                              wanted, buffer)
        self._started = False
        self._closed = False

    async def start(self) -> None:
        """Subscribe (idempotent); returns once events of the queues are published."""
        if self._started:
            return
        self._started = True
        self._hub.add_stream(self._stream)
        try:
            await self._hub.watch(self.queues)
        except BaseException:
            self._hub.remove_stream(self._stream)
            self._started = False
            raise

    async def aclose(self) -> None:
        if self._started and not self._closed:
            self._closed = True
            self._hub.remove_stream(self._stream)
            self._hub.unwatch(self.queues)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Any:
        if self._closed:
            raise StopAsyncIteration
        await self.start()
        return await self._stream.items.get()


def _target(task: TaskInfo | WorkflowHandle[Any] | str, queue: str | None) -> tuple[str, str]:
    if isinstance(task, TaskInfo):
        return task.queue, task.id
    if isinstance(task, WorkflowHandle):
        return workflow_queue(task.id), task.id
    if not isinstance(task, str) or not task:
        raise TypeError(f"task must be a TaskInfo or a task id (str), not {task!r}")
    if queue is None:
        # A workflow's record is laid out like a task of its pseudo-queue wf:<id>.
        if is_workflow_id(task):
            return workflow_queue(task), task
        queue = DEFAULT_QUEUE
    return validate_queue(queue), task


def _now(clock: Clock) -> datetime:
    return ms_to_datetime(clock.now_ms())
