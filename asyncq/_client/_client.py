"""The async Client that applications use to enqueue tasks and cancel running ones."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from types import TracebackType
from typing import Any, Self, TypeVar, Unpack

import anyio

from .. import _tracing
from .._broker import Broker, ConnectionOptions, EnqueueCode, NewTask, RedisLike, open_broker
from .._clock import SYSTEM_CLOCK, Clock
from .._defaults import DEFAULT_QUEUE, EVENTS_BUFFER, WORKFLOW_RETENTION
from .._errors import AsyncqError, BrokerError
from .._model._enqueue import prepare, prepare_plain, store_error, stored_info
from .._model._flow import Flow
from .._model._info import TaskInfo, TaskState
from .._model._options import ApplyOptions, EnqueueOptions
from .._model._task import Task
from .._service._backoff import Backoff
from .._workflow._info import WorkflowHandle, is_workflow_id
from .._workflow._start import enqueue_after, start_workflow
from ._cancel import CancelOutcome, cancel_flow, request_cancel
from ._waiting import EventStream, Waiting

_T = TypeVar("_T")
O = TypeVar("O")  # noqa: E741


class Client:
    """Enqueues tasks. Use as ``async with Client("redis://...") as client:``.

    ``redis`` is a URL (the client owns and closes the connection) or a ``redis.asyncio.Redis``
    created with ``decode_responses=False`` (left open on close: it is yours). ``connection``
    (a ``ConnectionOptions``: timeouts, health checks) applies to a URL. ``broker=`` (or a
    Broker in place of ``redis``) enqueues through an existing Broker, left open on close.

    ``retry_attempts`` (default 0): how many times ``enqueue``/``enqueue_many`` try again, with
    exponential backoff and jitter, when the connection to Redis fails, breaks or times out.
    **Idempotency**: such a failure can come after Redis stored the task (only the reply was
    lost). A retry then finds the task already there; the client recognises its own earlier
    attempt (same id, message and payload) and reports success instead of
    ``TaskIDConflictError`` — with or without a ``task_id`` of yours. What it cannot
    recognise is a task that was stored, run and deleted (no retention) between the attempts:
    the retry enqueues it again, so it runs twice. A unique task's lock is likewise gone once
    the first copy completed. Give tasks a ``retention`` if a retried enqueue must never
    re-create a task that already ran.
    """

    def __init__(self, redis: RedisLike | Broker | None = None, *, broker: Broker | None = None,
                 clock: Clock | None = None, connection: ConnectionOptions | None = None,
                 retry_attempts: int = 0) -> None:
        if (not isinstance(retry_attempts, int) or isinstance(retry_attempts, bool)
                or retry_attempts < 0):
            raise ValueError(f"retry_attempts must be an int >= 0, got {retry_attempts!r}")
        self._clock = clock or SYSTEM_CLOCK
        self._retry_attempts = retry_attempts
        # Only a broker made here is closed by close(); one passed in belongs to the caller.
        self._broker, self._owns_broker = open_broker(redis, broker, clock=self._clock,
                                                      connection=connection)
        self._waiting: Waiting | None = None

    @property
    def broker(self) -> Broker:
        """The Broker the client works through (share it: ``Inspector(client.broker)``)."""
        return self._broker

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        """Stop listening to events; close the connection if the client created it (from a
        URL)."""
        if self._waiting is not None:
            await self._waiting.close()
            self._waiting = None
        if self._owns_broker:
            await self._broker.close()

    async def ping(self) -> float:
        """Check that Redis answers, for a host application's readiness probe: the round trip
        in seconds; raises BrokerError (saying why) when Redis cannot be reached."""
        began = time.perf_counter()
        await self._broker.ping()
        return time.perf_counter() - began

    async def enqueue(self, task: Task | str, payload: object = None,
                      **options: Unpack[EnqueueOptions]) -> TaskInfo:
        """Store a task; options given here (``EnqueueOptions``) override the Task's own
        ("last wins").

        Raises ValueError/TypeError for bad options, DuplicateTaskError, TaskIDConflictError,
        or BrokerError when Redis fails.

        ``after=[task, ...]`` (TaskInfo, ``(queue, id)`` or an id in the same queue): the task
        is stored WAITING and runs once every one of them succeeded (see Workflows).
        """
        now = self._clock.now_ms()
        if type(task) is str and "after" not in options:
            new = prepare_plain(task, payload, options, now)  # (``enqueue("type", ...)``)
        else:
            if isinstance(task, Task):
                if payload is not None:
                    raise TypeError("pass the payload in the Task, not to enqueue(), when "
                                    "given a Task")
            else:
                task = Task(task, payload)  # (a type that is not a str is refused there)
            if "after" in options:
                after = options.pop("after")
                return await enqueue_after(self._broker, task, options, after)
            new = prepare(task, options, now)
        if _tracing.active is None and not self._retry_attempts:
            # The hot path of every enqueue: no span, no closure, no backoff to set up.
            code = await self._broker.store(new)
            if code == 0 or code == -1:
                await self._refused(code, new)
            return stored_info(new, now)
        tracer = _tracing.active
        if tracer is None:
            return await self._store(new, now)
        with tracer.producing([new]):
            return await self._store(new, now)

    async def _store(self, new: NewTask, now: int) -> TaskInfo:
        if self._retry_attempts:
            code, retried = await self._with_retries(lambda: self._broker.store(new))
        else:
            code, retried = await self._broker.store(new), False
        if code == 0 and retried:
            mine, _ = await self._with_retries(lambda: self._stored_by_us([new]))
            if mine[0]:
                code = 1
        await self._refused(code, new)
        return stored_info(new, now)

    async def _refused(self, code: EnqueueCode, new: NewTask) -> None:
        """Raise the error of a store reply that did not store (none for a stored task)."""
        holder = None
        if code == -1 and new.msg.unique_key:
            holder = (await self._broker.lock_holders([new.msg.unique_key]))[0]
        err = store_error(code, new, holder)
        if err is not None:
            raise err

    async def enqueue_many(self, tasks: Iterable[Task]) -> list[TaskInfo | AsyncqError]:
        """Store many tasks in few round trips; the result holds a TaskInfo or error per item.

        Every item is validated before anything is sent: a bad item raises ValueError/TypeError
        naming its index, and nothing is enqueued.
        """
        now = self._clock.now_ms()
        prepared: list[NewTask] = []
        for i, task in enumerate(tasks):
            if not isinstance(task, Task):
                raise TypeError(f"item {i}: expected a Task, got {task!r}")
            try:
                prepared.append(prepare(task, {}, now))
            except (ValueError, TypeError) as exc:
                raise type(exc)(f"item {i}: {exc}") from exc
        if not prepared:
            return []
        tracer = _tracing.active
        if tracer is None:
            return await self._store_many(prepared)
        with tracer.producing(prepared):
            return await self._store_many(prepared)

    async def _store_many(self, prepared: list[NewTask]) -> list[TaskInfo | AsyncqError]:
        now = prepared[0].msg.enqueued_at_ms
        try:
            codes, retried = await self._with_retries(
                lambda: self._broker.store_many(prepared))
        except AsyncqError as exc:
            return [exc for _ in prepared]
        if retried:
            conflicts = [i for i, code in enumerate(codes) if code == 0]
            try:
                mine, _ = await self._with_retries(
                    lambda: self._stored_by_us([prepared[i] for i in conflicts]))
            except BrokerError:
                mine = [False] * len(conflicts)
            for i, own in zip(conflicts, mine, strict=True):
                if own:
                    codes[i] = 1
        locks = [new.msg.unique_key for new, code in zip(prepared, codes, strict=True)
                 if code == -1 and new.msg.unique_key]
        holders = dict(zip(locks, await self._broker.lock_holders(locks), strict=True)) \
            if locks else {}
        out: list[TaskInfo | AsyncqError] = []
        for new, code in zip(prepared, codes, strict=True):
            if isinstance(code, AsyncqError):
                out.append(code)
            elif isinstance(code, Exception):
                out.append(AsyncqError(str(code)))
            else:
                err = store_error(code, new, holders.get(new.msg.unique_key))
                out.append(err or stored_info(new, now))
        return out

    async def _with_retries(self, call: Callable[[], Awaitable[_T]]) -> tuple[_T, bool]:
        """``call()``, tried again up to ``retry_attempts`` times when the connection fails;
        also says whether it was retried."""
        backoff = Backoff(base=0.05, cap=2.0)
        while True:
            try:
                return await call(), backoff.failures > 0
            except BrokerError as exc:
                if backoff.failures >= self._retry_attempts or not exc.transient:
                    raise
                await anyio.sleep(backoff.next_delay())

    async def _stored_by_us(self, news: Sequence[NewTask]) -> list[bool]:
        """Whether each task as stored is the one sent (same message and payload): then a
        conflict on a retry means an earlier attempt, whose reply was lost, stored it."""
        by_queue: dict[str, list[int]] = {}
        for i, new in enumerate(news):
            by_queue.setdefault(new.msg.queue, []).append(i)
        out = [False] * len(news)
        for queue, indexes in by_queue.items():
            stored = await self._broker.read_tasks(queue, [news[i].msg.id for i in indexes])
            for i, found in zip(indexes, stored, strict=True):
                out[i] = found == (news[i].msg, news[i].payload)
        return out

    # -- events and results

    @property
    def _waits(self) -> Waiting:
        if self._waiting is None:
            self._waiting = Waiting(self._broker, self._clock)
        return self._waiting

    def events(self, queues: str | Iterable[str] = DEFAULT_QUEUE, *,
               task_ids: Iterable[str] | None = None,
               states: Iterable[TaskState | str] | None = None,
               buffer: int = EVENTS_BUFFER) -> EventStream:
        """Task events of ``queues`` (optionally only of ``task_ids`` / into ``states``), as an
        async iterator of ``TaskEvent`` — plus an ``EventsLost`` item after a broken
        connection came back. ``async with client.events(...) as events:`` subscribes before
        the block starts; then ``async for event in events``. A reader that falls more
        than ``buffer`` events behind gets an ``EventsLost`` in place of the backlog."""
        return EventStream(self._waits, [queues] if isinstance(queues, str) else queues,
                           task_ids, states, buffer)

    async def wait(self, task: TaskInfo | WorkflowHandle[Any] | str, *,
                   queue: str | None = None, timeout: float | None = None) -> TaskInfo:
        """Wait until the task is completed, archived or deleted and return its final
        TaskInfo (``task``: what ``enqueue`` returned, or an id in ``queue``, "default" when
        not given). A workflow (its handle, or its id "wf-..." without ``queue``) ends
        completed, or archived when it failed or was cancelled.

        Raises WaitTimeoutError (a TimeoutError carrying the task's last known state) after
        ``timeout`` seconds; BrokerError when Redis cannot be reached to listen or read — at
        once when the wait starts, or when the timeout runs out while the connection is
        down (a wait without timeout outlasts an outage); TaskNotFoundError for an unknown
        id, or a task that ended, keeping nothing, while the connection was lost."""
        return await self._waits.wait(task, queue, timeout)

    async def result(self, task: TaskInfo | WorkflowHandle[Any] | str, *,
                     queue: str | None = None, timeout: float | None = None) -> Any:
        """Wait for the task and return its handler's result (JSON decoded; bytes stay bytes;
        None when it returned nothing). Raises TaskFailedError when it was archived, revoked
        or deleted (for a workflow: naming the step that failed), the other errors as
        ``wait``."""
        return await self._waits.result(task, queue, timeout)

    async def apply(self, task: Task | str, payload: object = None, *,
                    timeout: float | None = None, **options: Unpack[ApplyOptions]) -> Any:
        """Enqueue a task and wait for its result (``enqueue`` then ``result``), listening to
        its queue before it is enqueued so a fast task's result is never missed, whatever
        its retention. ``timeout`` bounds both; errors as ``result``, and BrokerError as
        ``enqueue`` (also when the enqueue itself got no answer within ``timeout``)."""
        queue = options.get("queue") or (task.queue if isinstance(task, Task) else DEFAULT_QUEUE)
        return await self._waits.apply(lambda: self.enqueue(task, payload, **options), queue,
                                       timeout)

    async def enqueue_workflow(self, flow: Flow[Any, O], *, workflow_id: str | None = None,
                               on_error: Flow[Any, Any] | None = None,
                               retention: float = WORKFLOW_RETENTION,
                               after: Sequence[Any] = ()) -> WorkflowHandle[O]:
        """Start a workflow (``chain``/``group``/``chord`` of steps): its first steps are
        enqueued, the others wait in Redis for the steps before them. ``on_error``: a step
        run once if the workflow fails (a piped step receives ``{"workflow_id", "step_id",
        "type", "error"}``). ``retention`` (seconds): how long its state is kept once it
        ended. ``after``: tasks (TaskInfo, ``(queue, id)``, or ids in the first step's queue)
        that must succeed first. Raises ValueError/TypeError before anything is written."""
        return await start_workflow(self._broker, flow, workflow_id=workflow_id,
                                    on_error=on_error, retention=retention, after=after)

    async def cancel(self, task_id: str, *, queue: str | None = None) -> CancelOutcome:
        """Cancel ``task_id``, as Celery's revoke: a cancelled task never runs. Returns what
        was done (true when something was): REMOVED, the task was waiting to run (pending,
        scheduled, retry...) and is deleted; REQUESTED, it is running and its worker stops it
        (even if it was reconnecting when asked; a process-run handler's child is killed)
        and archives it; ENDED, it had already ended; NOT_FOUND. ``queue`` saves looking the
        task up in every queue.

        A workflow id ("wf-...", without ``queue``) cancels the workflow: its steps not
        running are deleted, its running ones cancelled; REQUESTED if it had not ended."""
        if queue is None and is_workflow_id(task_id):
            return await cancel_flow(self._broker, task_id)
        return await request_cancel(self._broker, task_id, queue)
