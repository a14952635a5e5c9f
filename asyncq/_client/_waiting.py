"""What ``Client.wait``, ``Client.result`` and ``Client.events`` do, over one EventHub.

No polling: a wait subscribes first (and makes the queue's scripts publish), then reads the
task's current state, so a task that ended before the wait began is answered at once and one
that ends during the read is not missed. After every resubscription the waits of the queue
read the state again, since events may have been lost while disconnected.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable
from datetime import datetime
from types import TracebackType
from typing import Any, Self

import anyio

from .._broker import Broker, TaskRecord
from .._clock import Clock, ms_to_datetime
from .._defaults import DEFAULT_QUEUE, EVENTS_BUFFER
from .._errors import AsyncqError, ResultNotKeptError, TaskNotFoundError
from .._log import get_logger
from .._model._events import TaskEvent
from .._model._info import TaskFailedError, TaskInfo, TaskState
from .._model._records import record_info
from .._service._background import TaskSet
from .._validate import validate_queue_name as validate_queue
from .._validate import workflow_queue
from .._workflow._info import WorkflowHandle, is_workflow_id
from ._event_hub import EventHub, Stream

#: How many events one ``events()`` iterator buffers for a slow reader before dropping them.
STREAM_BUFFER = EVENTS_BUFFER


def _not_found(queue: str, task_id: str) -> TaskNotFoundError:
    return TaskNotFoundError(
        f"task {task_id!r} not found in queue {queue!r}: it never existed, or it ended and "
        "was removed before this client listened to the queue (a task without retention "
        "leaves nothing behind). Use client.apply(), or enqueue with retention=... to wait "
        "for it later")


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
        try:
            records = await self._broker.inspect.tasks([key for key, _ in batch])
        except BaseException as exc:
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for (_, fut), rec in zip(batch, records, strict=True):
            if not fut.done():
                fut.set_result(rec)

    async def wait(self, task: TaskInfo | WorkflowHandle[Any] | str, queue: str | None,
                   timeout: float | None) -> TaskInfo:
        return (await self._wait(task, queue, timeout))[0]

    async def _wait(self, task: TaskInfo | WorkflowHandle[Any] | str, queue: str | None,
                    timeout: float | None) -> tuple[TaskInfo, TaskEvent | None]:
        queue, task_id = _target(task, queue)
        with anyio.fail_after(timeout):
            await self.hub.watch([queue])
            try:
                return await self._wait_watched(queue, task_id)
            finally:
                self.hub.unwatch([queue])

    async def _wait_watched(self, queue: str,
                            task_id: str) -> tuple[TaskInfo, TaskEvent | None]:
        fut = self.hub.waiter(queue, task_id)
        try:
            base = await self._read(queue, task_id)
            if base is not None and base.state in (TaskState.COMPLETED, TaskState.ARCHIVED):
                return base, None
            if base is None:
                # Gone already: its final event may still be on its way to the subscription
                # (the read took another connection), so let the subscription catch up first.
                await self.hub.settle(queue)
            event = self.hub.recent(queue, task_id) or (fut.result() if fut.done() else None)
            if event is None and base is None:
                raise _not_found(queue, task_id)
            if event is None:
                event = await fut
            return await self._final(base, event), event
        finally:
            self.hub.forget(queue, task_id, fut)

    async def _final(self, base: TaskInfo | None, event: TaskEvent) -> TaskInfo:
        """The TaskInfo a final event leaves: read again when the task is still stored
        (archived, or completed with retention), else built from the event."""
        if event.state is not TaskState.DELETED and (
                event.state is TaskState.ARCHIVED or event.result_kept):
            stored = await self._read(event.queue, event.id)
            if stored is not None and stored.state is event.state:
                return stored
        if base is None:
            base = TaskInfo(id=event.id, queue=event.queue, type=event.type or "",
                            payload=b"", state=event.state, max_retry=0)
        completed = event.state is TaskState.COMPLETED
        return dataclasses.replace(
            base, state=event.state, retried=event.retried,
            last_error=event.last_error or (None if completed else base.last_error),
            last_failed_at=None if completed else event.at,
            completed_at=event.at if completed else None, next_process_at=None,
            result=event.result, result_encoding=event.result_encoding)

    async def result(self, task: TaskInfo | WorkflowHandle[Any] | str, queue: str | None,
                     timeout: float | None) -> Any:
        info, event = await self._wait(task, queue, timeout)
        if info.state is not TaskState.COMPLETED:
            raise TaskFailedError(info)
        if info.result is None and event is not None and event.result_too_large:
            raise ResultNotKeptError(
                f"task {info.id!r} returned a result larger than 64 KiB and has no "
                "retention, so the result was not kept: enqueue it with retention=... to "
                "read large results")
        if info.result is None or info.result_encoding == "b":
            return info.result
        return info.result_json()

    def _recheck_soon(self, queues: frozenset[str]) -> None:
        waiting = self.hub.waiting_in(queues)
        if waiting:
            self._background.spawn(self._recheck(waiting))

    async def _recheck(self, waiting: list[tuple[str, str]]) -> None:
        """After a resubscription: a task that ended meanwhile ends its waits now."""
        for queue, task_id in waiting:
            try:
                info = await self._read(queue, task_id)
            except AsyncqError:
                return  # the connection failed again: the next resubscription rechecks
            if info is None:
                self.hub.resolve(queue, task_id, _not_found(queue, task_id))
            elif info.state in (TaskState.COMPLETED, TaskState.ARCHIVED):
                self.hub.resolve(queue, task_id, TaskEvent(
                    id=task_id, queue=queue, type=info.type, previous=None, state=info.state,
                    at=info.completed_at or info.last_failed_at or _now(self._clock),
                    retried=info.retried, last_error=info.last_error, result=info.result,
                    result_encoding=info.result_encoding, result_kept=True))


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
