"""RedisBroker: the Broker protocol over redis.asyncio, one Lua script per task transition.

It composes one ScriptRunner (the only object that talks to Redis) with the operation groups
built on it: ``maintenance``, ``aggregation`` and ``workers`` (``_maintenance``: the worker's
background work), ``inspect`` (RedisInspectOps), ``schedules`` (RedisScheduleOps), ``limits``
(RedisLimitOps) and ``Listeners`` (pub/sub, exposed as the ``listen*`` methods).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

from redis.asyncio import Redis, RedisCluster
from redis.exceptions import RedisError

from .._clock import SYSTEM_CLOCK, Clock
from .._errors import DecodeError
from .._model._events import TaskEvent
from .._model._message import TaskMessage
from . import _keys as K
from ._calls import (
    ARCHIVE_CAPS,
    EXPIRED_PER_DEQUEUE,
    ScriptCall,
    batch_call,
    done_batch_call,
    finish_call,
    finish_calls,
    finish_results,
    store_call,
)
from ._coalesce import Coalescer
from ._connected import ConnectedBroker
from ._inspect import RedisInspectOps
from ._limit_ops import RedisLimitOps
from ._listen import Listeners
from ._maintenance import RedisAggregationOps, RedisMaintenanceOps, RedisWorkerOps
from ._messages import Handoff, WorkerSignal
from ._protocol import EnqueueCode, EventFlush, NewTask, Outcome, RawTask
from ._replies import enqueue_code, must_register, number, raw_tasks, register
from ._runner import reply_error
from ._schedules import RedisScheduleOps
from ._values import ALL_CAPABILITIES
from ._workflows import RedisWorkflowOps

if TYPE_CHECKING:
    from ._asynq._layout import LayoutGuard

_BATCH_RUN = 250  # tasks per enqueue_batch call
_BATCH_CHUNK = 8  # enqueue_batch calls per round trip


#: A task handed off in one hop is returned by its worker's dequeue only once it is this old:
#: its message, normally heard within a millisecond, is given the first chance.
HANDOFF_GRACE_MS = 1000

class RedisBroker(ConnectedBroker):
    """The Redis implementation of the Broker protocol.

    ``redis`` (a single node, a Sentinel-managed master or a ``RedisCluster``) must be created
    with ``decode_responses=False``. ``owns_client`` says whether ``close()`` closes it (True
    when asyncq created it from a URL); ``also_close`` is awaited after it (the Sentinel
    connections of a client asyncq created).
    """

    def __init__(self, redis: Redis | RedisCluster, *, owns_client: bool = False,
                 clock: Clock = SYSTEM_CLOCK, ping_interval: float = 15.0,
                 reply_timeout: float | None = 5.0,
                 also_close: Callable[[], Awaitable[None]] | None = None) -> None:
        super().__init__(redis, owns_client=owns_client, also_close=also_close)
        self.clock = clock
        self.ping_interval = ping_interval
        """``listen`` pings a pub/sub connection that heard nothing for this long (0: never)."""
        self.reply_timeout = reply_timeout or 5.0
        """How long ``listen`` waits for the answer to such a ping before reconnecting."""
        self.maintenance = RedisMaintenanceOps(self.runner, clock)
        self.aggregation = RedisAggregationOps(self.runner, clock, self.maintenance)
        self.workers = RedisWorkerOps(self.runner, clock)
        self.inspect = RedisInspectOps(self.runner, clock)
        self.schedules = RedisScheduleOps(self.runner, clock)
        self.limits = RedisLimitOps(self.runner, clock)
        """Rate and concurrency limit state (see ``asyncq._limits``)."""
        self.listeners = Listeners(self.runner, ping_interval, self.reply_timeout)
        self.workflows = RedisWorkflowOps(self.runner, clock, self.listen)
        self.capabilities = ALL_CAPABILITIES
        # Overlapping store() calls (a web app's concurrent requests) share round trips: on
        # lean connections by themselves, else through a Coalescer.
        self._lean = self.runner.lean
        self._layout: LayoutGuard | None = None
        """The layout check a store makes first (the guarded broker's), in this coroutine:
        one coroutine layer fewer on every enqueue than an override calling this one."""
        self._stores: Coalescer[ScriptCall, Any] = Coalescer(self.runner.run_call,
                                                             self._run_stores, max_in_flight=2)
        # So do the progress writes of a worker's many running tasks.
        self._progress: Coalescer[ScriptCall, Any] = Coalescer(
            self.runner.run_call, self._run_stores, max_in_flight=2)

    async def _close_own(self) -> None:
        await self._stores.aclose()
        await self._progress.aclose()

    # -- producing

    async def register_queues(self, queues: Sequence[str]) -> None:
        await register(self.runner, queues)

    async def store(self, task: NewTask) -> EnqueueCode:
        layout = self._layout
        if layout is not None and task.msg.queue not in layout.checked:
            await layout.check((task.msg.queue,))  # (every enqueue's but the first skips it)
        # (a message stamped by its producer needs no second read of the clock)
        call = store_call(task, task.msg.enqueued_at_ms or self.clock.now_ms())
        if self._lean:  # the lean connection writes overlapping calls together itself
            runner = self.runner  # (its run_lean, inlined: one coroutine layer fewer)
            try:
                code = await runner.submit_lean(*call)
            except RedisError as exc:
                raise await runner.failed(call.name, exc) from exc
            if isinstance(code, RedisError):
                code = await runner.lean_error_reply(*call, code)
        else:
            code = await self._stores.call(call)
        if code == 1:
            return 1
        if must_register(code):
            await self.register_queues((task.msg.queue,))
        return enqueue_code(code)

    async def _run_stores(self, calls: Sequence[ScriptCall]) -> list[Any]:
        """Calls that overlapped (stores, progress writes), in one pipeline: a reply or a
        BrokerError each."""
        out = await self.runner.run_many(calls)
        return [reply_error(call.name, r) if isinstance(r, Exception) else r
                for call, r in zip(calls, out, strict=True)]

    async def store_many(self, tasks: Sequence[NewTask]) -> list[EnqueueCode | Exception]:
        """Store tasks in input order: runs of ready-now tasks of one queue go through one
        ``enqueue_batch`` script call each, other tasks through their own script."""
        now = self.clock.now_ms()
        calls: list[ScriptCall] = []
        sizes: list[int] = []  # tasks per call; 0 marks a single-task (non-batch) call
        run: list[NewTask] = []

        def close_run() -> None:
            if run:
                calls.append(batch_call(run, now))
                sizes.append(len(run))
                run.clear()

        for task in tasks:
            ready = (not task.msg.group
                     and task.process_at_ms <= (task.msg.enqueued_at_ms or now))
            if ready and (not run or (run[0].msg.queue == task.msg.queue
                                      and len(run) < _BATCH_RUN)):
                run.append(task)
                continue
            close_run()
            if ready:
                run.append(task)
            else:
                calls.append(store_call(task, now))
                sizes.append(0)
        close_run()
        out = await self.runner.run_many(calls, preload=True, chunk=_BATCH_CHUNK)
        results: list[EnqueueCode | Exception] = []
        codes: list[Any] = []
        for call, reply, size in zip(calls, out, sizes, strict=True):
            if isinstance(reply, Exception):
                results.extend([reply_error(call.name, reply)] * max(size, 1))
                codes.extend([0] * max(size, 1))
                continue
            codes.extend(reply if size else [reply])
            results.extend(enqueue_code(code) for code in (reply if size else [reply]))
        await self.register_queues(sorted({t.msg.queue for t, code in zip(tasks, codes, strict=True)
                                           if must_register(code)}))
        return results

    async def request_cancel(self, queue: str, task_id: str) -> int:
        qk = K.queue_keys(queue)
        return number(await self.runner.run(
            "cancel", [qk.task(task_id), qk.pending, qk.scheduled, qk.retry, qk.archived,
                       qk.completed, qk.groups, qk.aggregation_sets, qk.cancel(task_id)],
            [task_id, qk.group_prefix, K.CANCEL_MARKER_TTL_MS, K.CANCEL_CHANNEL]))

    async def publish_cancel(self, task_id: str) -> None:
        await self.runner.command("publishing cancellation", "PUBLISH", K.CANCEL_CHANNEL,
                                  task_id)

    # -- running

    async def dequeue(
        self, queue: str, count: int, owner: str, lease_ms: int, waiter_ttl_ms: int,
        request_id: str = "", one_hop: bool = False,
    ) -> tuple[list[RawTask], int]:
        qk = K.queue_keys(queue)
        now = self.clock.now_ms()
        flat = await self.runner.run(
            "dequeue",
            [qk.pending, qk.active, qk.lease, qk.paused, qk.waiters, qk.dequeued(owner),
             qk.idle, qk.handoff(owner), K.limits_registry(queue)],
            [now + lease_ms, count, qk.task_prefix, owner, waiter_ttl_ms,
             request_id, lease_ms, qk.cancel_prefix, lease_ms if one_hop else "",
             HANDOFF_GRACE_MS, now, *ARCHIVE_CAPS, EXPIRED_PER_DEQUEUE, K.WAKE_CHANNEL, queue],
        )
        tasks, bad = raw_tasks(flat, 2, width=5, capped=flat[1] == 1)
        await self.maintenance.quarantine(queue, bad)
        return tasks, int(flat[0]) + len(bad)

    async def finish(self, outcomes: Sequence[Outcome], owner: str) -> list[bool | Exception]:
        """Write many outcomes in one pipelined round trip; False = the lease was lost."""
        now = self.clock.now_ms()
        if len(outcomes) == 1:
            return [bool(await self.runner.run_call(finish_call(outcomes[0], owner, now)))]
        calls = finish_calls(outcomes, owner, now, finish_call, done_batch_call)
        replies = await self.runner.run_many([call for call, _ in calls])
        return finish_results(calls, replies, reply_error)

    async def extend_leases(
        self, queue: str, task_ids: Sequence[str], owner: str, lease_ms: int
    ) -> list[int]:
        if not task_ids:
            return []
        qk = K.queue_keys(queue)
        flags = await self.runner.run(
            "extend_lease", [qk.lease],
            [self.clock.now_ms() + lease_ms, owner, qk.task_prefix, qk.cancel_prefix, *task_ids],
        )
        return [int(f) for f in flags]

    async def write_result(self, queue: str, task_id: str, data: bytes,
                           encoding: str = "b") -> int:
        qk = K.queue_keys(queue)
        return int(await self.runner.run("write_result", [qk.task(task_id)], [data, encoding]))

    async def set_progress(self, queue: str, task_id: str, owner: str, report: bytes) -> bool:
        qk = K.queue_keys(queue)
        return bool(await self._progress.call(
            ScriptCall("progress", [qk.task(task_id)], [task_id, owner, report])))

    # -- listening (see Listeners)

    def listen(self, channels: Sequence[str]) -> AsyncIterator[tuple[str, str] | None]:
        """Raw pub/sub on named channels: the workflow outboxes' wake-ups, and tests. Not on
        the Broker protocol, whose listeners take queue names and yield decoded values."""
        return self.listeners.listen(channels)

    def listen_signals(self, queues: Collection[str], *,
                       new_queues: bool = False) -> AsyncIterator[WorkerSignal | None]:
        return self.listeners.signals(queues, new_queues=new_queues)

    def listen_handoffs(self, queues: Sequence[str],
                        owner: str) -> AsyncIterator[Handoff | None]:
        return self.listeners.handoffs(queues, owner)

    def listen_events(self, queues: Sequence[str]) -> AsyncIterator[TaskEvent | EventFlush]:
        return self.listeners.events(queues)

    async def leave_idle(self, queues: Sequence[str], owner: str, lease_ms: int) -> None:
        await self.runner.commands("leaving the idle workers", [
            ("ZREM", K.queue_keys(q).idle, f"{lease_ms}:{owner}") for q in queues])

    def watch_pending(self, queue: str) -> None:
        """None: in this layout every enqueue, requeue and forward wakes idle workers."""
        return None

    async def set_listening(self, queues: Sequence[str], ttl_ms: int) -> None:
        await self.runner.commands("flagging event listeners", [
            ("SET", K.queue_keys(q).listening, "1", "PX", ttl_ms) for q in queues])

    # -- reads and queue control (the groups: maintenance, aggregation, workers)

    async def read_tasks(self, queue: str,
                         task_ids: Sequence[str]
                         ) -> list[tuple[TaskMessage | DecodeError, bytes] | None]:
        return await self.maintenance.read_tasks(queue, task_ids)

    async def pause(self, queue: str) -> bool:
        return await self.maintenance.pause(queue)

    async def unpause(self, queue: str) -> bool:
        return await self.maintenance.unpause(queue)
