"""The Inspector: see what is in the queues and fix it (list, delete, run, archive, pause, ...).

Operations on a queue raise QueueNotFoundError when the queue is unknown (not in
``asyncq:queues``), operations on a task TaskNotFoundError when it does not exist, and
TaskStateError when its state does not allow the operation (e.g. deleting a running task).
Bulk operations work in batches of 1 000 tasks per atomic step, so they never block Redis for
long; they are not atomic as a whole.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any, Self

from .._broker import (
    ARCHIVE_MAX_AGE_MS,
    ARCHIVE_MAX_SIZE,
    ArchiveLimits,
    Broker,
    BulkOp,
    ConnectionOptions,
    DailyStats,
    GroupInfo,
    MinuteStats,
    PublishedRules,
    QueueInfo,
    RedisLike,
    ServerInfo,
    TaskMatches,
    TaskRecord,
    open_broker,
    server_info,
)
from .._client._cancel import CancelOutcome, request_cancel
from .._clock import SYSTEM_CLOCK, Clock
from .._defaults import INSPECT_FIND_SCAN
from .._errors import (
    DecodeError,
    QueueNotEmptyError,
    QueueNotFoundError,
    TaskNotFoundError,
    TaskStateError,
)
from .._limits import (
    ConcurrencyLimit,
    LimitUse,
    RateLimit,
    clear_limit_value,
    limit_ops_of,
    queue_cap,
    set_limit_value,
    set_queue_cap,
)
from .._log import get_logger
from .._model._info import TaskInfo, TaskState
from .._model._message import decode_message
from .._model._payload import encode_payload
from .._model._records import record_info
from .._scheduler._store import (
    SchedulerEntry,
    SchedulerEvent,
    list_scheduler_entries,
    list_scheduler_events,
)
from .._validate import to_int, to_seconds, validate_queue_name
from .._workflow._control import cancel_workflow, list_workflows, read_workflow
from .._workflow._info import WorkflowInfo
from ._inspect_args import (
    ARCHIVABLE,
    COUNTER_DAYS,
    DELETABLE,
    QUEUED_STATES,
    RUNNABLE,
    WAITING_STEP,
    ArchivedCount,
    check_code,
    check_page,
    check_removable,
    check_state,
    check_task_id,
    utc_dates,
)
from ._recovery import recover_task
from ._retired import deprecated

RULES_TTL = 2.0
"""How long an Inspector reuses the handler registrations it read from the live workers."""


class Inspector:
    """Inspect and manage queues, tasks and servers: ``async with Inspector(url) as inspector:``.

    ``redis`` is a URL — single node, ``redis+cluster://`` or ``redis+sentinel://`` — or a list
    of cluster startup nodes (the inspector owns and closes the connection; ``connection``, a
    ``ConnectionOptions``, sets TLS, timeouts...), or a ``redis.asyncio.Redis``/``RedisCluster``
    created with ``decode_responses=False`` (left open on close). ``broker=`` (or a Broker in
    place of ``redis``, e.g. ``Inspector(client.broker)``) works through an existing Broker,
    also left open. On a cluster every queue is read on the master that holds it.
    """

    def __init__(self, redis: RedisLike | Broker | None = None, *, broker: Broker | None = None,
                 clock: Clock | None = None,
                 connection: ConnectionOptions | None = None) -> None:
        self._clock = clock or SYSTEM_CLOCK
        self._broker, self._owns_broker = open_broker(redis, broker, clock=self._clock,
                                                      connection=connection)
        self._ops = self._broker.inspect
        self._published: tuple[float, PublishedRules] | None = None

    @property
    def broker(self) -> Broker:
        """The Broker the inspector works through."""
        return self._broker

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connection if the inspector created it."""
        if self._owns_broker:
            await self._broker.close()

    async def ping(self) -> float:
        """Check that Redis answers (a readiness probe): the round trip in seconds; raises
        BrokerError (saying why) when Redis cannot be reached."""
        began = time.perf_counter()
        await self._broker.ping()
        return time.perf_counter() - began

    # -- helpers

    async def _require_queue(self, queue: str) -> None:
        if not isinstance(queue, str):
            raise TypeError(f"queue name must be a str, got {queue!r}")
        if not await self._ops.queue_exists(queue):
            raise QueueNotFoundError(f"queue {queue!r} not found")

    def _info(self, rec: TaskRecord, now: int, rules: PublishedRules) -> TaskInfo:
        return record_info(rec, now, rules)

    async def _rules(self) -> PublishedRules:
        """The handler registrations the live workers published (read at most every
        RULES_TTL seconds): a TaskInfo shows the values that will apply."""
        at = time.monotonic()
        if self._published is None or at - self._published[0] > RULES_TTL:
            self._published = (at, PublishedRules(await self.workers()))
        return self._published[1]

    # -- queues

    async def queues(self) -> list[str]:
        """Names of every known queue, sorted."""
        return await self._ops.queue_names()

    async def queue_info(self, queue: str) -> QueueInfo:
        """Sizes per state, today's and all-time counters, pause flag, latency, memory, and
        the queue's concurrency limit with what it counts."""
        await self._require_queue(queue)
        (info,) = await self._with_caps([await self._ops.queue_info(queue,
                                                                     self._clock.now_ms())])
        return info

    async def queue_infos(self, queues: Sequence[str] | None = None, *,
                          memory: bool = True) -> list[QueueInfo]:
        """``queue_info`` of every known queue (or of ``queues``, which need not be known: an
        unknown one reads as empty), read in one pipeline (two more for the caps): a
        dashboard's or an exporter's cost grows with the number of queues, not with round
        trips. ``memory=False`` skips
        the sampled memory estimate (``memory_usage`` reads 0), about three quarters of the
        cost: for refreshes several times a second."""
        names = await self.queues() if queues is None else list(queues)
        return await self._with_caps(await self._ops.queue_infos(names, self._clock.now_ms(),
                                                                 memory))

    async def _with_caps(self, infos: list[QueueInfo]) -> list[QueueInfo]:
        """``infos`` with the queues' concurrency limits (two more round trips in all: one
        reading the caps, one counting the capped queues' slots)."""
        caps = await limit_ops_of(self._broker).queue_caps([i.queue for i in infos])
        return [i if cap is None else dataclasses.replace(
                    i, concurrency_limit=cap.limit, concurrency_in_use=cap.in_use,
                    concurrency_waiting=cap.waiting)
                for i, cap in zip(infos, caps, strict=True)]

    async def limits(self, queue: str | None = None) -> list[LimitUse]:
        """Every rate and concurrency limit used in ``queue`` (in every known queue when
        None), one entry per limit and key value: its size in force, what is in use now and
        how many tasks wait for it; a queue's cap is an entry of kind "queue", and a value set
        at run time says so (``runtime``, with the ``declared`` size). What a dashboard's
        limits page shows."""
        ops = limit_ops_of(self._broker)
        names = await self.queues() if queue is None else [validate_queue_name(queue)]
        return [use for q in names for use in await ops.usage(q)]

    async def set_queue_concurrency(self, queue: str, n: int) -> int:
        """Let at most ``n`` tasks of ``queue`` run at once across every worker, from the next
        start on (workers read it in the step that admits a start: no restart). A raise lets
        waiting tasks start at once; a cut stops nothing that runs. Kept in Redis until
        ``clear_queue_concurrency``; the queue need not exist yet. Returns how many waiting
        tasks it let start."""
        return await set_queue_cap(limit_ops_of(self._broker), queue, n)

    async def clear_queue_concurrency(self, queue: str) -> int:
        """Remove the cap of ``queue`` (``set_queue_concurrency``): its waiting tasks start
        as workers are free. Returns how many it let start."""
        return await set_queue_cap(limit_ops_of(self._broker), queue, None)

    async def queue_concurrency(self, queue: str) -> LimitUse | None:
        """The cap of ``queue`` (``limit``), with how many of its tasks run under it now
        (``in_use``) and wait for a slot (``waiting``); None when it has none."""
        return await queue_cap(limit_ops_of(self._broker), queue)

    async def set_limit(self, queue: str, limit: ConcurrencyLimit | RateLimit) -> int:
        """Replace, in ``queue``, what the handlers declare for the limit of ``limit``'s
        kind and name (``asyncq.RateLimit("50/s", name="stripe")``; a limit declared without
        a name is named after its handler's pattern) by ``limit``, for every key value,
        until ``clear_limit``: it wins over the code's declaration, read by the next claim
        (no restart). Returns how many waiting tasks it let start."""
        return await set_limit_value(limit_ops_of(self._broker), queue, limit)

    async def clear_limit(self, queue: str, kind: str, name: str) -> int:
        """Drop the value ``set_limit`` gave the ``kind`` ("concurrency" or "rate") limit
        ``name`` of ``queue``: what the handlers declare applies again. Returns how many
        waiting tasks it let start."""
        return await clear_limit_value(limit_ops_of(self._broker), queue, kind, name)

    async def history(self, queue: str, days: int = 7) -> list[DailyStats]:
        """Processed/failed counts for today and the ``days - 1`` previous UTC days, newest
        first (counters are kept 90 days)."""
        _check_days(days)
        await self._require_queue(queue)
        return (await self.history_of([queue], days))[queue]

    async def history_of(self, queues: Sequence[str], days: int = 7
                         ) -> dict[str, list[DailyStats]]:
        """``history`` of many queues in pipelined reads (one per queue, not one round trip
        each: the dashboard's overview of thousands of queues); a queue that does not exist
        reads as counts of 0."""
        _check_days(days)
        dates = utc_dates(self._clock.now_ms(), days)
        every = await self._ops.daily_counts_of(list(queues), [d.isoformat() for d in dates])
        return {queue: [DailyStats(queue, d, p, f)
                        for d, (p, f) in zip(dates, counts, strict=True)]
                for queue, counts in zip(queues, every, strict=True)}

    async def groups(self, queue: str) -> list[GroupInfo]:
        """The groups of a queue with the number of tasks waiting in each, by name."""
        await self._require_queue(queue)
        return [GroupInfo(g, n) for g, n in await self._ops.groups(queue)]

    async def pause(self, queue: str) -> bool:
        """Stop workers from taking tasks of ``queue``; False if it was already paused."""
        await self._require_queue(queue)
        return await self._broker.pause(queue)

    async def unpause(self, queue: str) -> bool:
        """Let workers take tasks of ``queue`` again; False if it was not paused."""
        await self._require_queue(queue)
        return await self._broker.unpause(queue)

    async def delete_queue(self, queue: str, *, force: bool = False) -> None:
        """Delete a queue and all its keys.

        Without ``force`` the queue must hold no pending, active, scheduled, retry, archived or
        aggregating task (QueueNotEmptyError); completed tasks are deleted with it. With
        ``force`` every task is deleted, in batches, except that a queue with running (active)
        tasks is never deleted (QueueNotEmptyError: wait for them or cancel them).
        """
        await self._require_queue(queue)
        now = self._clock.now_ms()
        days = [d.isoformat() for d in utc_dates(now, COUNTER_DAYS)]
        code, active, queued = await self._ops.remove_queue(queue, "check", days)
        check_removable(queue, code, active, queued, force)
        for _ in range(10):
            if force:
                for state in QUEUED_STATES:
                    await self._ops.bulk("delete", queue, state.value)
                for group, _size in await self._ops.groups(queue):
                    await self._ops.bulk("delete", queue, "aggregating", group)
            else:
                await self._ops.bulk("delete", queue, "completed")
            code, active, queued = await self._ops.remove_queue(
                queue, "force" if force else "remove", days)
            if code == 1:
                await self._ops.unregister_queue(queue)
                return
            check_removable(queue, code, active, queued, force)
        raise QueueNotEmptyError(f"queue {queue!r}: tasks keep arriving; stop the producers "
                                 "and try again")

    # -- tasks

    async def list_tasks(self, queue: str, state: TaskState | str, page: int = 1,
                         page_size: int = 30, group: str | None = None) -> list[TaskInfo]:
        """One page (1-based) of the tasks in ``state``.

        Pending and active tasks come in processing order (oldest first); the others by
        ascending score (scheduled/retry: run time; archived: archive time; completed: expiry;
        aggregating: time added to the group, which ``group`` names). Active tasks whose lease
        ran out are marked ``is_orphaned``. A page past the end is empty.
        """
        st = check_state(state)
        check_page(page, page_size)
        if st is TaskState.AGGREGATING and not group:
            raise ValueError("aggregating tasks are listed per group: give the group")
        if st is not TaskState.AGGREGATING and group is not None:
            raise ValueError("group only applies to aggregating tasks")
        await self._require_queue(queue)
        records = await self._ops.list_tasks(queue, st.value, group, (page - 1) * page_size,
                                             page_size)
        now = self._clock.now_ms()
        rules = await self._rules() if records else PublishedRules(())
        out = []
        for rec in records:
            try:
                out.append(self._info(rec, now, rules))
            except DecodeError:
                continue  # a record we cannot read is skipped, not fatal to the listing
        return out

    async def find_tasks(self, queue: str, state: TaskState | str, *,
                         task_type: str = "", error: str = "", group: str | None = None,
                         start: int = 0, limit: int = 30,
                         scan: int = INSPECT_FIND_SCAN) -> TaskMatches:
        """The tasks in ``state`` whose type contains ``task_type`` and whose last error
        contains ``error`` (case-insensitive; "" matches every task), in ``list_tasks``
        order: at most ``limit`` of them, examining at most ``scan`` tasks from position
        ``start`` (0: the first). A search of a long list is resumed with
        ``start=matches.next_start``; each step holds Redis for one script call of at most
        1 000 tasks."""
        st = check_state(state)
        for name, text_value in (("task_type", task_type), ("error", error)):
            if not isinstance(text_value, str):
                raise TypeError(f"{name} must be a str, got {text_value!r}")
        for name, value, least in (("start", start, 0), ("limit", limit, 1), ("scan", scan, 1)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"{name} must be an int, got {value!r}")
            if value < least:
                raise ValueError(f"{name} must be >= {least}, got {value}")
        if st is TaskState.AGGREGATING and not group:
            raise ValueError("aggregating tasks are listed per group: give the group")
        if st is not TaskState.AGGREGATING and group is not None:
            raise ValueError("group only applies to aggregating tasks")
        await self._require_queue(queue)
        records, next_start, scanned = await self._ops.find_tasks(
            queue, st.value, group, start, limit, task_type, error, scan)
        now = self._clock.now_ms()
        rules = await self._rules() if records else PublishedRules(())
        tasks = []
        for rec in records:
            try:
                tasks.append(self._info(rec, now, rules))
            except DecodeError:
                continue
        return TaskMatches(tasks, next_start, scanned)

    async def find_task(self, task_id: str) -> TaskInfo:
        """The task ``task_id`` in whichever queue holds it (its ids are UUIDs unless you chose
        them): one pipelined read over every queue. TaskNotFoundError when no queue has it,
        ValueError when several do (then name the queue)."""
        task_id = check_task_id(task_id)
        queues = await self._ops.queue_names()
        records = await self._ops.tasks([(q, task_id) for q in queues])
        found = [(q, rec) for q, rec in zip(queues, records, strict=True) if rec is not None]
        if not found:
            raise TaskNotFoundError(f"task {task_id!r} not found in any queue")
        if len(found) > 1:
            names = ", ".join(q for q, _ in found)
            raise ValueError(f"task id {task_id!r} exists in several queues ({names}): name "
                             f"the queue")
        return self._info(found[0][1], self._clock.now_ms(), await self._rules())

    async def task_info(self, queue: str, task_id: str) -> TaskInfo:
        """One task, with its result and when it runs next (``next_process_at``)."""
        task_id = check_task_id(task_id)
        await self._require_queue(queue)
        rec = await self._ops.task(queue, task_id)
        if rec is None:
            raise TaskNotFoundError(f"task {task_id!r} not found in queue {queue!r}")
        return self._info(rec, self._clock.now_ms(), await self._rules())

    async def delete_task(self, queue: str, task_id: str) -> None:
        """Delete a task in any state but active (releasing the unique lock it owns)."""
        task_id = check_task_id(task_id)
        await self._require_queue(queue)
        code = await self._ops.delete_task(queue, task_id)
        check_code(code, queue, task_id,
                         {-1: "cannot delete an active task; cancel it instead (or, if its "
                              "worker is gone, recover it first)"})

    async def run_task(self, queue: str, task_id: str) -> None:
        """Make a scheduled, retry, archived, completed or aggregating task pending now."""
        task_id = check_task_id(task_id)
        await self._require_queue(queue)
        code = await self._ops.run_task(queue, task_id)
        check_code(code, queue, task_id, {-1: "the task is already running",
                                                -2: "the task is already pending",
                                                -3: WAITING_STEP})

    async def archive_task(self, queue: str, task_id: str) -> int:
        """Archive a pending, scheduled, retry, completed or aggregating task. Returns how many
        of the oldest archived tasks the archive's limits deleted to make room (usually 0; a
        trim is also logged as a warning)."""
        task_id = check_task_id(task_id)
        await self._require_queue(queue)
        code, trimmed = await self._ops.archive_task(queue, task_id)
        check_code(code, queue, task_id,
                         {-1: "cannot archive an active task; cancel it instead",
                          -2: "the task is already archived", -3: WAITING_STEP})
        if trimmed:
            _log_trim(queue, 1, trimmed)
        return trimmed

    async def minute_stats(self, queue: str) -> list[MinuteStats]:
        """The queue's last hour, oldest first: tasks processed and failed per minute, and
        its backlog, from the samples recorded once a minute by whichever asyncq process comes
        first: any worker's janitor round (every registered queue, served or not, so each
        minute is exact to within ``janitor_interval``) or a dashboard in use
        (``record_minutes``). Empty until two minutes were sampled."""
        await self._require_queue(queue)
        return _minute_stats(await self._ops.minute_samples(queue))

    async def minute_stats_of(self, queues: Sequence[str]) -> dict[str, list[MinuteStats]]:
        """``minute_stats`` of many queues in pipelined reads (one per queue); a queue that
        does not exist has none."""
        every = await self._ops.minute_samples_of(list(queues))
        return {queue: _minute_stats(samples)
                for queue, samples in zip(queues, every, strict=True)}

    async def record_minutes(self, queues: Sequence[str] | None = None) -> int:
        """Record this minute's sample of ``queues`` (None: every registered queue) for
        ``minute_stats``, pipelined; a queue sampled this minute already (by any process) is
        left as it is. Returns how many samples were written."""
        names = await self.queues() if queues is None else list(queues)
        return await self._ops.record_minutes(names) if names else 0

    async def archive_limits(self, queue: str) -> ArchiveLimits:
        """The caps of the queue's archive in force: its own (``set_archive_limits``), else
        the defaults (10 000 tasks, 90 days)."""
        await self._require_queue(queue)
        max_size, max_age_ms = await self._ops.archive_limits(queue)
        return ArchiveLimits(max_size, timedelta(milliseconds=max_age_ms),
                             (max_size, max_age_ms) != (ARCHIVE_MAX_SIZE, ARCHIVE_MAX_AGE_MS))

    async def set_archive_limits(self, queue: str, *, max_size: int | None = None,
                                 max_age: float | timedelta | None = None) -> int:
        """Set the caps of the queue's archive, kept in Redis so every worker, Inspector and
        dashboard applies them: at most ``max_size`` tasks, none older than ``max_age``
        (seconds or a timedelta); None puts that cap back to its default (10 000 tasks, 90
        days). The archive is trimmed to them at once (batches of 1 000): returns how many
        archived tasks that deleted (also logged as a warning). They go with the queue
        (``delete_queue``), as its pause does."""
        size = to_int(max_size, "max_size", minimum=1, allow_none=True)
        seconds = to_seconds(max_age, "max_age", allow_zero=False, allow_none=True)
        await self._require_queue(queue)
        trimmed = await self._ops.set_archive_limits(
            queue, size, None if seconds is None else round(seconds * 1000))
        if trimmed:
            _log_trim(queue, 0, trimmed)
        return trimmed

    async def archive_overflow(self, queue: str, adding: int) -> int:
        """How many of the oldest archived tasks the archive's limits (``archive_limits``)
        would delete if ``adding`` more tasks were archived now: what to tell whoever is
        about to ``archive_all`` (the count ``archive_all`` returns may differ if tasks
        arrive or leave meanwhile)."""
        if not isinstance(adding, int) or isinstance(adding, bool) or adding < 0:
            raise ValueError(f"adding must be an int >= 0, got {adding!r}")
        await self._require_queue(queue)
        return await self._ops.archive_overflow(queue, adding)

    async def recover_task(self, queue: str, task_id: str) -> None:
        """Send back an active task whose lease expired or whose worker is gone (retried now,
        or archived when its retries are used up). TaskStateError when its lease is live:
        cancel it instead."""
        task_id = check_task_id(task_id)
        await self._require_queue(queue)
        await recover_task(self._ops, self._clock, queue, task_id, await self._rules())

    async def update_task_payload(self, queue: str, task_id: str, payload: object) -> None:
        """Replace the payload of a scheduled task (bytes as they are, else JSON)."""
        task_id = check_task_id(task_id)
        raw, enc = encode_payload(payload)
        await self._require_queue(queue)
        for _ in range(10):
            rec = await self._ops.task(queue, task_id)
            if rec is None:
                raise TaskNotFoundError(f"task {task_id!r} not found in queue {queue!r}")
            msg = decode_message(rec.msg)
            msg.enc = enc
            code = await self._ops.update_payload(queue, task_id, rec.msg, msg.encode(), raw)
            check_code(code, queue, task_id,
                             {-1: "only a scheduled task's payload can be updated"})
            if code == 1:
                return
        raise TaskStateError(f"task {task_id!r} keeps changing; try again")

    async def _bulk(self, op: BulkOp, queue: str, state: TaskState | str, group: str | None,
                    allowed: frozenset[TaskState], verb: str) -> ArchivedCount:
        st = check_state(state)
        if st not in allowed:
            ok = ", ".join(sorted(s.value for s in allowed))
            raise TaskStateError(f"cannot {verb} {st.value} tasks; {verb} applies to: {ok}")
        if st is not TaskState.AGGREGATING and group is not None:
            raise ValueError("group only applies to aggregating tasks")
        await self._require_queue(queue)
        if st is TaskState.AGGREGATING and not group:
            groups: Sequence[str] = [g for g, _ in await self._ops.groups(queue)]
        else:
            groups = [group or ""]
        total = trimmed = 0
        for g in groups:
            done, dropped = await self._ops.bulk(op, queue, st.value, g or None)
            total, trimmed = total + done, trimmed + dropped
        if trimmed:
            _log_trim(queue, total, trimmed)
        return ArchivedCount(total, trimmed)

    async def delete_all(self, queue: str, state: TaskState | str,
                         group: str | None = None) -> int:
        """Delete every task in ``state`` (not active); aggregating tasks of ``group``, or of
        every group when it is None. Returns how many were deleted."""
        return int(await self._bulk("delete", queue, state, group, DELETABLE, "delete"))

    async def run_all(self, queue: str, state: TaskState | str, group: str | None = None) -> int:
        """Make every scheduled/retry/archived/completed/aggregating task of ``state`` pending,
        after the tasks already pending. Returns how many were moved."""
        return int(await self._bulk("run", queue, state, group, RUNNABLE, "run"))

    async def archive_all(self, queue: str, state: TaskState | str,
                          group: str | None = None) -> ArchivedCount:
        """Archive every pending/scheduled/retry/completed/aggregating task of ``state``.

        Returns how many were archived, an int whose ``trimmed`` says how many of the oldest
        archived tasks were deleted meanwhile: the archive keeps at most 10 000 tasks (and none
        older than 90 days) unless ``set_archive_limits`` says otherwise. A trim is also
        logged as a warning.
        """
        return await self._bulk("archive", queue, state, group, ARCHIVABLE, "archive")

    async def cancel(self, task_id: str, *, queue: str | None = None) -> CancelOutcome:
        """Cancel ``task_id``: removed if it waits to run, stopped and archived by its worker
        if it runs (even if its pub/sub connection was reconnecting); returns what was done.
        See ``Client.cancel``."""
        return await request_cancel(self._broker, check_task_id(task_id), queue)

    # -- workflows

    async def workflows(self, limit: int = 100) -> list[WorkflowInfo]:
        """The newest workflows (without their steps); ones whose state expired are dropped
        from the list."""
        return await list_workflows(self._broker, limit)

    async def workflow(self, workflow_id: str) -> WorkflowInfo:
        """A workflow with each step's state (done, failed, cancelled, or its task's state);
        TaskNotFoundError when it does not exist (or expired)."""
        info = await read_workflow(self._broker, workflow_id)
        if info is None:
            raise TaskNotFoundError(f"workflow {workflow_id!r} not found (it never existed, "
                                    "or its retention ended)")
        return info

    async def cancel_workflow(self, workflow_id: str) -> bool:
        """Cancel a workflow that has not ended; True when it was cancelled now."""
        return await cancel_workflow(self._broker, workflow_id)

    # -- servers, schedulers and Redis

    async def redis_info(self) -> dict[str, Any]:
        """The Redis server's INFO fields (``redis_version``, ``used_memory_human``...). On a
        cluster: the first master's, with clients and memory summed over every master and
        ``cluster_masters`` set to their number."""
        return await self._ops.redis_info()

    async def workers(self) -> list[ServerInfo]:
        """Live worker processes with the tasks they run, by host and pid."""
        out = []
        for record in await self._ops.servers(self._clock.now_ms()):
            out.append(server_info(record))  # (the broker skips what it cannot read)
        out.sort(key=lambda s: (s.host, s.pid, s.id))
        return out

    async def servers(self) -> list[ServerInfo]:
        """Deprecated spelling of :meth:`workers` (one word per concept: a worker process is
        a worker); kept for one release, it warns and returns what ``workers`` does."""
        deprecated("Inspector.servers()", "Inspector.workers()")
        return await self.workers()

    async def scheduler_entries(self) -> list[SchedulerEntry]:
        """Entries of the live schedulers (cron specs and the tasks they enqueue)."""
        return await list_scheduler_entries(self._broker)

    async def scheduler_history(self, entry_id: str, page: int = 1,
                                page_size: int = 30) -> list[SchedulerEvent]:
        """Enqueue events of one scheduler entry, newest first."""
        check_page(page, page_size)
        return await list_scheduler_events(self._broker, entry_id, page, page_size)


def _log_trim(queue: str, archived: int, trimmed: int) -> None:
    # (A logger made here, not at import: it follows the logging set up by then.)
    get_logger("inspector").warning(
        "archive over its cap: oldest archived tasks deleted", queue=queue,
        archived=archived, deleted=trimmed)


def _check_days(days: object) -> None:
    if not isinstance(days, int) or isinstance(days, bool) or days < 1:
        raise ValueError(f"days must be an int >= 1, got {days!r}")


def _minute_stats(samples: Sequence[tuple[int, int, int, int]]) -> list[MinuteStats]:
    """Samples (newest first) as per-stretch stats, oldest first."""
    out = []
    for newer, older in itertools.pairwise(samples):
        minutes = newer[0] - older[0]
        processed, failed = newer[1] - older[1], newer[2] - older[2]
        if minutes <= 0 or processed < 0 or failed < 0:
            continue  # out of order, or the counters were reset (queue deleted)
        out.append(MinuteStats(datetime.fromtimestamp(newer[0] * 60, UTC),
                               timedelta(minutes=minutes), processed, failed, newer[3]))
    out.reverse()
    return out
