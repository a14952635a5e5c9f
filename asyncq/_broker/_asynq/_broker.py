"""AsynqBroker: the Broker protocol over Go asynq's own Redis layout (``wire=asynq``).

Same door as RedisBroker (one ScriptRunner, here also running the ``asynq_*`` scripts of
``lua/``), other keys and records: tasks are hashes ``asynq:{q}:t:<id>`` whose ``msg`` is a
protobuf TaskMessage (``_codec``), times are Unix seconds (``pending_since`` nanoseconds), and
each transition does what Go's does (``internal/rdb/rdb.go``), so Go servers, clients and
inspectors share the queues. The worker reads asyncq's JSON message and the payload as usual:
the translation happens here and in ``_codec``.

What this layout lacks is left out of ``capabilities`` (workflows, progress for now), and
using it anyway raises a BrokerError (refused) saying so.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Collection, Sequence
from typing import Any

from redis.asyncio import Redis, RedisCluster

from ... import _defaults
from ..._clock import SYSTEM_CLOCK, Clock
from ..._errors import BrokerError, DecodeError
from ..._model._events import TaskEvent
from ..._model._message import TaskMessage
from .._calls import EVENT_RESULT_MAX, ScriptCall, finish_calls, finish_results
from .._connected import ConnectedBroker
from .._listen import Listeners
from .._messages import Handoff, WorkerSignal
from .._ops import InspectOps, LimitOps, ScheduleOps
from .._replies import text
from .._runner import reply_error
from .._values import Capability, EnqueueCode, EventFlush, NewTask, Outcome, RawTask
from .._wf_ops import WorkflowOps
from . import _codec, _wake
from . import _keys as K
from ._events import EventSource
from ._groups import AsynqAggregation, AsynqMaintenance
from ._inspect import AsynqInspectOps
from ._layout import LayoutGuard
from ._limits import AsynqLimitOps
from ._reads import MARK_KEEP_MS, TaskReads
from ._recovery import AsynqRecovery
from ._schedules import AsynqScheduleOps
from ._scripts import asynq_scripts
from ._servers import AsynqServers
from ._unavailable import unavailable

STATS_TTL_S = 90 * 86_400  # daily counters expire 90 days after their first count (Go's statsTTL)
ARCHIVE_MAX_SIZE = 10_000  # Go's maxArchiveSize
ARCHIVE_MAX_AGE_S = 90 * 86_400  # Go's archivedExpirationInDays
_STORE_CHUNK = 500  # store scripts per pipelined round trip of store_many

assert ARCHIVE_MAX_SIZE == _defaults.ARCHIVE_MAX_SIZE


def _ceil_s(ms: int) -> int:
    """Unix ms -> Unix s, rounded up: a task due at 12.3 s is never run before it."""
    return -(-ms // 1000)


def store_call(task: NewTask, now_ms: int) -> ScriptCall:
    """The script storing ``task``: ``asynq_schedule`` (due later), ``asynq_add_to_group`` or
    ``asynq_enqueue``, as asynq's client decides."""
    msg = task.msg
    if msg.expires_at_ms:  # (Go asynq's TaskMessage has no expiry its servers would honour)
        raise ValueError("expires_in/expires_at is not available with wire=asynq: Go asynq's "
                         "task message has no expiry; enqueue without it, or use asyncq's own "
                         "layout")
    now_ms = msg.enqueued_at_ms or now_ms
    qk = K.queue_keys(msg.queue)
    lock = K.lock_key(msg.queue, *task.unique) if task.unique else ""
    ttl = max(task.unique_ttl_ms, 1000) if lock else 0  # Go's least unique TTL: 1 s
    msg.unique_key = lock  # (the message carries the lock's name: the worker releases it)
    pb = _codec.encode(_codec.from_asyncq(msg, task.payload, lock))
    amsg = msg.encode()
    lock_key = lock or qk.unique_prefix
    if task.process_at_ms > now_ms:
        return ScriptCall("asynq_schedule", [qk.task(msg.id), qk.scheduled, lock_key],
                          [msg.id, pb, amsg, _ceil_s(task.process_at_ms), ttl, msg.group])
    if msg.group:
        return ScriptCall("asynq_add_to_group",
                          [qk.task(msg.id), qk.group(msg.group), qk.groups, lock_key],
                          [msg.id, pb, amsg, now_ms // 1000, ttl, msg.group])
    return ScriptCall("asynq_enqueue", [qk.task(msg.id), qk.pending, lock_key],
                      [msg.id, pb, amsg, now_ms * 1_000_000, ttl, K.WAKE_CHANNEL, msg.queue])


def finish_call(o: Outcome, owner: str, now_ms: int) -> ScriptCall:
    """The script writing outcome ``o`` of a task leased to ``owner``."""
    qk = K.queue_keys(o.queue)
    now_s = now_ms // 1000
    day = K.day_string(now_ms)
    stats_expiry = now_s + STATS_TTL_S
    task_key = qk.task(o.task_id)
    if o.kind == "done":
        # The result travels only with the completion event; retention_ms > 0 leaves a mark.
        return ScriptCall("asynq_done", [task_key, qk.active, qk.lease, qk.processed_day(day),
                                         qk.processed, K.extra_keys(o.queue).marks],
                          [o.task_id, owner, stats_expiry, o.result or b"",
                           "" if o.result is None else o.result_enc, o.error,
                           EVENT_RESULT_MAX, "1" if o.retention_ms else "0", now_ms,
                           MARK_KEEP_MS])
    if o.kind == "complete":
        return ScriptCall("asynq_complete",
                          [task_key, qk.active, qk.lease, qk.completed, qk.processed_day(day),
                           qk.processed],
                          [o.task_id, owner, stats_expiry, now_s,
                           now_s + _ceil_s(o.retention_ms),
                           "" if o.result is None else o.result_enc, o.result or b"",
                           EVENT_RESULT_MAX])
    if o.kind == "requeue":
        return ScriptCall("asynq_requeue", [task_key, qk.active, qk.lease, qk.pending],
                          [o.task_id, owner, now_ms * 1_000_000, K.WAKE_CHANNEL, o.queue])
    counters = [qk.processed_day(day), qk.failed_day(day), qk.processed, qk.failed]
    if o.kind == "retry":
        return ScriptCall("asynq_retry", [task_key, qk.active, qk.lease, qk.retry, *counters],
                          [o.task_id, owner, _ceil_s(o.retry_at_ms), o.error, now_s,
                           "1" if o.is_failure else "0", stats_expiry, o.traceback,
                           _codec.go_error(o.error)])
    return ScriptCall("asynq_archive", [task_key, qk.active, qk.lease, qk.archived, *counters],
                      [o.task_id, owner, o.error, now_s, now_s - ARCHIVE_MAX_AGE_S,
                       ARCHIVE_MAX_SIZE, stats_expiry, qk.task_prefix, o.traceback,
                       _codec.go_error(o.error)])


def done_batch_call(queue: str, outcomes: Sequence[Outcome], owner: str,
                    now_ms: int) -> ScriptCall:
    """One ``asynq_done_batch`` call writing "done" outcomes of ``queue``."""
    qk = K.queue_keys(queue)
    keys = [qk.active, qk.lease, qk.processed_day(K.day_string(now_ms)), qk.processed,
            K.extra_keys(queue).marks]
    args: list[Any] = [owner, now_ms // 1000 + STATS_TTL_S, EVENT_RESULT_MAX, now_ms,
                       MARK_KEEP_MS]
    for o in outcomes:
        keys.append(qk.task(o.task_id))
        args += (o.task_id, o.result or b"", "" if o.result is None else o.result_enc, o.error,
                 "1" if o.retention_ms else "0")
    return ScriptCall("asynq_done_batch", keys, args)


def _code(value: Any) -> EnqueueCode:
    code = int(value)
    return 1 if code == 1 else 0 if code == 0 else -1


class AsynqBroker(ConnectedBroker):
    """The Broker protocol over Go asynq's layout; built like RedisBroker (``redis`` created
    with ``decode_responses=False``; ``owns_client``: ``close()`` closes it)."""

    wire = "asynq"

    def __init__(self, redis: Redis | RedisCluster, *, owns_client: bool = False,
                 clock: Clock = SYSTEM_CLOCK, ping_interval: float = 15.0,
                 reply_timeout: float | None = 5.0,
                 also_close: Callable[[], Awaitable[None]] | None = None) -> None:
        super().__init__(redis, owns_client=owns_client, also_close=also_close)
        self.clock = clock
        self.runner.scripts = {**self.runner.scripts, **asynq_scripts()}
        self.listeners = Listeners(self.runner, ping_interval, reply_timeout or 5.0)
        self.event_source = EventSource(self.runner, clock, ping_interval, reply_timeout or 5.0)
        self.layout = LayoutGuard(self.runner, "asynq")
        self._registered: set[str] = set()
        self.workers = AsynqServers(self.runner, clock)  # server state, cancellation
        self.recovery = AsynqRecovery(self.runner, clock)  # recoverer, janitor, groups
        self._inspect = AsynqInspectOps(
            self.runner, clock, servers=self.workers.read,
            reads=TaskReads(self.runner, clock, self.event_source), forget=self._forget_queue)
        self.inspect: InspectOps = self._inspect
        self.maintenance = AsynqMaintenance(self.runner, clock, self.recovery, self._inspect)
        self.aggregation = AsynqAggregation(self.recovery, self._inspect)
        self.schedules: ScheduleOps = AsynqScheduleOps(self.runner, clock, store_call,
                                                       self.register_queues)
        self.limits: LimitOps = AsynqLimitOps(self.runner, clock)
        self.capabilities: frozenset[Capability] = frozenset()

    @property
    def workflows(self) -> WorkflowOps:
        """Refused: a workflow's state and its steps change together in keys Go asynq has no
        notion of (callers check ``capabilities`` first)."""
        raise BrokerError(
            "workflows are not available with wire=asynq (a workflow's state and its steps "
            "change together in keys Go asynq has no notion of, and a Go server finishing a "
            "step would never advance it); run workflows on a queue of asyncq's own layout",
            refused=True)

    def _forget_queue(self, queue: str) -> None:
        """A removed queue is checked and registered again at its next use."""
        self.layout.forget(queue)
        self._registered.discard(queue)


    # -- producing

    async def register_queues(self, queues: Sequence[str]) -> None:
        """Check the queues' layout, then add the new ones to ``asynq:queues`` (as Go's client
        does, once per process and queue)."""
        await self.layout.check(queues)
        new = [q for q in dict.fromkeys(queues) if q not in self._registered]
        if new:
            added = await self.runner.command("registering queues", "SADD", K.QUEUES, *new)
            self._registered.update(new)
            if added:  # announced to asyncq workers serving a pattern (as _replies.register)
                await self.runner.command("announcing new queues", "PUBLISH",
                                          K.NEW_QUEUES_CHANNEL, "\n".join(new))

    async def store(self, task: NewTask) -> EnqueueCode:
        await self.register_queues((task.msg.queue,))
        return _code(await self.runner.run_call(store_call(task, self.clock.now_ms())))

    async def store_many(self, tasks: Sequence[NewTask]) -> list[EnqueueCode | Exception]:
        """One script per task, pipelined (the scripts loaded first, so a re-sent call never
        runs after a later one), as Go's BatchEnqueue."""
        if not tasks:
            return []
        await self.register_queues([t.msg.queue for t in tasks])
        now = self.clock.now_ms()
        calls = [store_call(t, now) for t in tasks]
        out = await self.runner.run_many(calls, preload=True, chunk=_STORE_CHUNK)
        return [reply_error(call.name, r) if isinstance(r, Exception) else _code(r)
                for call, r in zip(calls, out, strict=True)]

    async def request_cancel(self, queue: str, task_id: str) -> int:
        return await self.workers.request_cancel(queue, task_id)

    async def publish_cancel(self, task_id: str) -> None:
        await self.workers.publish_cancel(task_id)

    # -- running

    async def dequeue(
        self, queue: str, count: int, owner: str, lease_ms: int, waiter_ttl_ms: int,
        request_id: str = "", one_hop: bool = False,
    ) -> tuple[list[RawTask], int]:
        """Lease like Go's Dequeue, plus asyncq's waiters flag and idle registration (see
        ``_wake``); no request replay in this layout: a lost reply leaves its tasks to the
        recoverer once their lease ends."""
        await self.layout.check((queue,))
        qk = K.queue_keys(queue)
        xk = K.extra_keys(queue)
        now = self.clock.now_ms()
        flat = await self.runner.run(
            "asynq_dequeue",
            [qk.pending, qk.active, qk.lease, qk.paused, xk.waiters, xk.idle, xk.handoff(owner),
             K.limits_registry(queue)],
            [(now + lease_ms) // 1000, count, qk.task_prefix, owner, now, waiter_ttl_ms,
             lease_ms if one_hop else "", _wake.HANDOFF_GRACE_MS])
        tasks: list[RawTask] = []
        dropped = int(flat[0])
        capped = flat[1] == 1
        for i in range(2, len(flat), 4):
            try:
                task_id = text(flat[i])
            except UnicodeDecodeError:
                dropped += 1  # (leased, never returned: the recoverer takes it back)
                continue
            task = _codec.raw_task(task_id, flat[i + 1], flat[i + 2], flat[i + 3])
            tasks.append(task._replace(capped=True) if capped else task)
        return tasks, dropped

    def listen_handoffs(self, queues: Sequence[str],
                        owner: str) -> AsyncIterator[Handoff | None]:
        return _wake.handoffs(self.runner, queues, owner, self.event_source.reply_timeout,
                              self.event_source.idle)

    async def leave_idle(self, queues: Sequence[str], owner: str, lease_ms: int) -> None:
        await _wake.leave_idle(self.runner, queues, owner, lease_ms)

    def watch_pending(self, queue: str) -> AsyncGenerator[None]:
        """Go's enqueue wakes nobody: a blocked wait on the pending list (``_wake``)."""
        return _wake.pending_appears(self.runner, queue, self.event_source.reply_timeout)

    async def finish(self, outcomes: Sequence[Outcome], owner: str) -> list[bool | Exception]:
        now = self.clock.now_ms()
        if len(outcomes) == 1:
            return [bool(await self.runner.run_call(finish_call(outcomes[0], owner, now)))]
        calls = finish_calls(outcomes, owner, now, finish_call, done_batch_call)
        replies = await self.runner.run_many([call for call, _ in calls])
        return finish_results(calls, replies, reply_error)

    async def extend_leases(self, queue: str, task_ids: Sequence[str], owner: str,
                            lease_ms: int) -> list[int]:
        if not task_ids:
            return []
        qk = K.queue_keys(queue)
        flags = await self.runner.run(
            "asynq_extend_lease", [qk.lease],
            [(self.clock.now_ms() + lease_ms) // 1000, owner, qk.task_prefix, *task_ids])
        return [int(f) for f in flags]

    async def write_result(self, queue: str, task_id: str, data: bytes,
                           encoding: str = "b") -> int:
        qk = K.queue_keys(queue)
        return int(await self.runner.run("asynq_write_result", [qk.task(task_id)],
                                         [data, encoding]))

    async def set_progress(self, queue: str, task_id: str, owner: str, report: bytes) -> bool:
        raise unavailable("set_progress")

    def listen_signals(self, queues: Collection[str], *,
                       new_queues: bool = False) -> AsyncIterator[WorkerSignal | None]:
        """Cancel requests published on ``asynq:cancel`` (by Go's Inspector or asyncq), and
        asyncq's wake-ups of ``queues`` (and its announcements of new queues)."""
        return _wake.signals(self.listeners, queues, new_queues=new_queues)

    def listen_events(self, queues: Sequence[str]) -> AsyncIterator[TaskEvent | EventFlush]:
        return self.event_source.listen(queues)

    async def set_listening(self, queues: Sequence[str], ttl_ms: int) -> None:
        await self.event_source.set_listening(queues, ttl_ms)

    # -- reads and queue control (the groups: maintenance, aggregation, workers)

    async def read_tasks(self, queue: str,
                         task_ids: Sequence[str]
                         ) -> list[tuple[TaskMessage | DecodeError, bytes] | None]:
        qk = K.queue_keys(queue)
        replies = await self.runner.commands("reading tasks", [
            ("HMGET", qk.task(i), K.F_MSG, K.F_AMSG) for i in task_ids])
        out: list[tuple[TaskMessage | DecodeError, bytes] | None] = []
        for task_id, (msg, amsg) in zip(task_ids, replies, strict=True):
            if msg is None:
                out.append(None)
                continue
            raw = _codec.raw_task(task_id, msg, amsg, 0)
            out.append((raw.msg, raw.payload))
        return out

    async def pause(self, queue: str) -> bool:
        """As Go's Inspector: the paused key holds the Unix time of the pause."""
        qk = K.queue_keys(queue)
        return bool(await self.runner.command("pausing", "SET", qk.paused,
                                              self.clock.now_ms() // 1000, "NX"))

    async def unpause(self, queue: str) -> bool:
        """As Go's Inspector, then a wake-up on asyncq's channel: idle asyncq workers take the
        queue's tasks at once (after Go's own unpause, which wakes nobody, at their idle poll)."""
        done = bool(await self.runner.command("unpausing", "DEL", K.queue_keys(queue).paused))
        if done:
            await self.runner.command("waking the queue's workers", "PUBLISH", K.WAKE_CHANNEL,
                                      queue)
        return done
