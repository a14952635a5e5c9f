"""The groups of Broker operations carried as attributes: ``inspect`` (InspectOps),
``schedules`` (ScheduleOps), ``limits`` (LimitOps), ``maintenance`` (MaintenanceOps),
``aggregation`` (AggregationOps) and ``workers`` (WorkerOps); ``workflows`` is in ``_wf_ops``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol

from ._inspect_values import QueueInfo
from ._limit_values import LimitClaim, LimitHold, LimitSpec, LimitUse
from ._values import (
    Backlog,
    BulkOp,
    DeleteMode,
    FireCode,
    NewTask,
    Outcome,
    RawTask,
    SchedulerEntryRecord,
    SchedulerEventRecord,
    TaskRecord,
    WorkerRecord,
)


class InspectOps(Protocol):
    """What the Inspector reads and changes. Bulk operations take at most ``batch_size`` tasks
    per atomic script call, so a huge queue never blocks Redis for long. Every method raises
    BrokerError when Redis fails."""

    batch_size: int

    async def queue_names(self) -> list[str]:
        """Every registered queue name, sorted."""
        ...

    async def queue_exists(self, queue: str) -> bool:
        """Whether ``queue`` is registered."""
        ...

    async def unregister_queue(self, queue: str) -> None:
        """Drop ``queue`` from the registered queues (after its keys were removed)."""
        ...

    async def queue_info(self, queue: str, now_ms: int) -> QueueInfo:
        """Sizes per state, counters of the UTC day of ``now_ms`` and all time, pause flag,
        latency of the oldest pending task and sampled memory use, as of ``now_ms``."""
        ...

    async def queue_infos(self, queues: Sequence[str], now_ms: int,
                          memory: bool = True) -> list[QueueInfo]:
        """``queue_info`` of many queues in one pipeline, in the order given; without
        ``memory`` the sampled memory estimate is skipped (``memory_usage`` reads 0)."""
        ...

    async def daily_counts(self, queue: str, days: Sequence[str]) -> list[tuple[int, int]]:
        """``(processed, failed)`` for each UTC date (``YYYY-MM-DD``) of ``days``, in order."""
        ...

    async def groups(self, queue: str) -> list[tuple[str, int]]:
        """``(group, tasks waiting in it)`` for every group of ``queue``, sorted by name."""
        ...

    async def remove_queue(self, queue: str, mode: DeleteMode,
                           days: Sequence[str]) -> tuple[int, int, int]:
        """Drop the keys of an emptied queue (``mode`` "check" changes nothing).

        Returns ``(code, active, queued)``: code 1 removed (or removable), -1 tasks are
        active, -2 tasks are queued, -3 completed tasks remain; ``days`` name the daily
        counters to delete."""
        ...

    async def list_tasks(self, queue: str, state: str, group: str | None, offset: int,
                         count: int) -> list[TaskRecord]:
        """Up to ``count`` tasks of ``state`` from ``offset``, in processing order (pending
        and active oldest first; the sorted sets by ascending score); aggregating tasks are
        those of ``group`` (ValueError without one)."""
        ...

    async def find_tasks(self, queue: str, state: str, group: str | None, start: int,
                         count: int, type_text: str, error_text: str,
                         scan: int) -> tuple[list[TaskRecord], int | None, int]:
        """Up to ``count`` tasks of the state (in ``list_tasks`` order) whose type and last
        error contain ``type_text`` / ``error_text`` (case-insensitive; '' matches all),
        examining entries from position ``start`` on, at most ``scan`` of them. Returns the
        matches, the position to resume from (None: the end was reached), and how many
        entries were examined."""
        ...

    async def task(self, queue: str, task_id: str) -> TaskRecord | None:
        """One task, None when there is no such task."""
        ...

    async def tasks(self, keys: Sequence[tuple[str, str]]) -> list[TaskRecord | None]:
        """Many tasks given as (queue, id) pairs, pipelined: one record or None per pair."""
        ...

    async def task_owner(self, queue: str, task_id: str) -> str | None:
        """The server id of the worker holding ``task_id``'s lease (None: no owner)."""
        ...

    async def server_alive(self, server_id: str) -> bool:
        """Whether worker ``server_id`` still publishes its state (its heartbeat runs)."""
        ...

    async def recover_task(self, outcome: Outcome, owner: str, lease_cutoff_ms: int | str) -> bool:
        """Write ``outcome`` (retry or archive) for an active task: held by ``owner`` (any, if
        ''), whose lease ended by ``lease_cutoff_ms`` (any lease, if ''). False: it was not."""
        ...

    async def delete_task(self, queue: str, task_id: str) -> int:
        """Delete a task: 1 deleted, 0 not found, -1 active (not deleted)."""
        ...

    async def run_task(self, queue: str, task_id: str) -> int:
        """Make a task pending now: 1 done, 0 not found, -1 active, -2 already pending."""
        ...

    async def archive_task(self, queue: str, task_id: str) -> tuple[int, int]:
        """Archive a task: (1 done, 0 not found, -1 active, -2 already archived, -3 a waiting
        workflow step; how many of the oldest archived tasks the caps deleted)."""
        ...

    async def archive_overflow(self, queue: str, adding: int) -> int:
        """How many archived tasks the caps (size, age) would delete if ``adding`` tasks were
        archived now."""
        ...

    async def minute_samples(self, queue: str) -> list[tuple[int, int, int, int]]:
        """The queue's once-a-minute samples (``record_minute``), newest first: (minute since
        the epoch, processed total, failed total, backlog)."""
        ...

    async def daily_counts_of(self, queues: Sequence[str],
                              days: Sequence[str]) -> list[list[tuple[int, int]]]:
        """``daily_counts`` of many queues, pipelined (one read per queue, sent to its
        queue's node on a cluster), in the order given; a queue without counters reads 0."""
        ...

    async def minute_samples_of(self, queues: Sequence[str]
                                ) -> list[list[tuple[int, int, int, int]]]:
        """``minute_samples`` of many queues, pipelined, in the order given."""
        ...

    async def record_minutes(self, queues: Sequence[str]) -> int:
        """``Broker.record_minute`` of many queues, pipelined: whichever process samples first
        in a minute writes the queue's sample, the others nothing. Returns how many samples
        this call wrote."""
        ...

    async def archive_limits(self, queue: str) -> tuple[int, int]:
        """The queue's archive caps in force: most tasks kept, age limit in ms (its own, else
        the defaults)."""
        ...

    async def set_archive_limits(self, queue: str, max_size: int | None,
                                 max_age_ms: int | None) -> int:
        """Store the queue's archive caps (None: back to the default) and trim its archive to
        them at once, batch by batch; returns how many archived tasks were deleted."""
        ...

    async def update_payload(self, queue: str, task_id: str, old_msg: bytes, new_msg: bytes,
                             payload: bytes) -> int:
        """Replace a scheduled task's message and payload if its message is still
        ``old_msg``: 1 updated, 0 not found, -1 not scheduled, -2 changed since read."""
        ...

    async def bulk(self, op: BulkOp, queue: str, state: str,
                   group: str | None = None) -> tuple[int, int]:
        """Apply ``op`` to every task of ``state`` (of ``group`` for aggregating), batch by
        batch; returns how many tasks it applied to, and (archive only) how many of the oldest
        archived tasks were deleted to keep the archive within its caps."""
        ...

    async def redis_info(self) -> dict[str, Any]:
        """The server's INFO fields; on a cluster the first master's, with clients and memory
        summed over the masters and ``cluster_masters`` set to their number."""
        ...

    async def servers(self, now_ms: int) -> list[WorkerRecord]:
        """Every live server with the tasks it runs (records it cannot read are skipped);
        entries that expired by ``now_ms`` are pruned."""
        ...


class ScheduleOps(Protocol):
    """What schedulers write (claimed firings, history, published entries) and tools read.
    Every method raises BrokerError when Redis fails."""

    async def fire(self, task: NewTask, entry_id: str, tick_ms: int,
                   prune_before_ms: int) -> FireCode:
        """Claim the firing ``(entry_id, tick_ms)`` and store ``task`` in one atomic script.

        Returns 2 when that tick (or a newer one) was already claimed, nothing stored; else
        the store's EnqueueCode (the tick stays claimed whatever it is). Claims of ticks
        older than ``prune_before_ms`` are dropped."""
        ...

    async def record_event(self, event: SchedulerEventRecord, max_events: int,
                           ttl_ms: int) -> None:
        """Add ``event`` to its entry's history, keeping the ``max_events`` newest; the
        history expires ``ttl_ms`` after its last event."""
        ...

    async def publish_entries(self, scheduler_id: str, entries: Sequence[SchedulerEntryRecord],
                              ttl_ms: int, now_ms: int) -> None:
        """Replace the scheduler's published entries for ``ttl_ms``."""
        ...

    async def clear_entries(self, scheduler_id: str) -> None:
        """Remove the scheduler's published entries."""
        ...

    async def entries(self) -> list[SchedulerEntryRecord]:
        """The entries of every live scheduler, scheduler by scheduler (records it cannot
        read are skipped); schedulers whose entries expired are pruned from the index."""
        ...

    async def events(self, entry_id: str, start: int, stop: int) -> list[SchedulerEventRecord]:
        """Events of an entry's history from rank ``start`` to ``stop`` (inclusive), newest
        first (records it cannot read are skipped); empty for an unknown entry."""
        ...


class LimitOps(Protocol):
    """Rate and concurrency limit state shared by every worker (see ``asyncq._limits``), per
    queue. Every method raises BrokerError when Redis fails."""

    def now_ms(self) -> int:
        """The clock limit times are read with (the one leases are written with)."""
        ...

    async def acquire(self, queue: str, owner: str, claims: Sequence[LimitClaim], *,
                      queue_cap: bool = False) -> list[int]:
        """Take every limit of each claim, or defer its task: per claim 0 taken (1: taken,
        a slot of the queue's cap among them), -1 its task is not active under ``owner``
        (nothing done), else the Unix ms it is deferred to (the task was moved to scheduled
        by the same atomic step; a manual claim, ``owner`` '', is only told when to try
        again). ``queue_cap``: each claim also takes a slot of the queue's concurrency cap,
        when the queue has one (its size is read in that step)."""
        ...

    async def release(self, queue: str, owner: str, holds: Sequence[LimitHold]) -> int:
        """Give back concurrency slots; returns how many waiting tasks were woken (made
        pending)."""
        ...

    async def renew(self, queue: str, hold: LimitHold, until_ms: int) -> bool:
        """Extend a manual hold to ``until_ms``; False when it is gone (it ended, or was
        taken as expired)."""
        ...

    async def set_value(self, queue: str, spec: LimitSpec,
                        value: LimitSpec | None) -> tuple[str, str, int]:
        """Set (``value``) or clear (None) the run-time value of the limit ``spec`` names
        (kind "queue": the queue's concurrency cap), waking the waiting tasks it lets start;
        returns (the previous run-time value, the declared one, tasks woken), '' for none."""
        ...

    async def usage(self, queue: str) -> list[LimitUse]:
        """Every limit used or set in ``queue`` and each of its keys, with what is in use
        now (the queue's cap first, when it has one)."""
        ...

    async def queue_caps(self, queues: Sequence[str]) -> list[LimitUse | None]:
        """The concurrency cap of each of ``queues`` with what it counts now; None for a
        queue without one."""
        ...


class MaintenanceOps(Protocol):
    """What the worker's background components call to keep a queue healthy: forwarding due
    tasks, recovering lost leases, repairing records, cleanup, samples and the backlog. Every
    method raises BrokerError when Redis fails."""

    async def forward(self, queue: str, source: Literal["scheduled", "retry"],
                      limit: int) -> tuple[int, int]:
        """Move up to ``limit`` due tasks of ``source`` to pending (or their group).

        Returns ``(moved, next due)``: next due is the Unix ms of the earliest task left,
        -1 when none is left; ids without a task record are dropped (counted as moved)."""
        ...

    async def list_lease_expired(self, queue: str, cutoff_ms: int,
                                 limit: int) -> list[RawTask]:
        """Up to ``limit`` active tasks whose lease ended by ``cutoff_ms`` (any owner)."""
        ...

    async def recover(self, outcome: Outcome, lease_cutoff_ms: int) -> bool:
        """Retry or archive a task whose lease ended by ``lease_cutoff_ms`` (any owner);
        False when its lease was renewed meanwhile (nothing written)."""
        ...

    async def reclaim_orphans(self, queue: str, limit: int) -> int:
        """Give active tasks without a lease entry one ending now (examining at most ``limit``
        active ids), so the recoverer takes them; returns how many leases were attached."""
        ...

    async def scan_task_keys(
        self, cursor: int, count: int
    ) -> tuple[int, list[tuple[str, str]]]:
        """One SCAN step over the task keys of every queue: ``(next cursor, [(queue, task
        id), ...])``; the cursor is 0 again once the whole keyspace was walked."""
        ...

    async def repair_tasks(self, queue: str, task_ids: Sequence[str],
                           pending_search: int) -> list[str]:
        """Put task records found in no list or sorted set back where their state says:
        one action per id ('' nothing done, '?' undecided, else the state restored or
        'archived:<reason>'; see repair_tasks.lua)."""
        ...

    async def delete_expired_completed(self, queue: str, limit: int) -> int:
        """Delete up to ``limit`` completed tasks whose retention ended; returns how many."""
        ...

    async def record_minute(self, queue: str) -> bool:
        """Sample the queue's counters and backlog for the last hour's charts, once per minute
        whoever calls (True: this call wrote the minute's sample)."""
        ...

    async def backlog(self, queue: str, horizon_ms: int) -> Backlog:
        """What ``queue`` holds to run now or soon, read atomically: pending tasks, scheduled
        and retry tasks due by ``horizon_ms`` (Unix ms), groups, and whether it is paused."""
        ...


class AggregationOps(Protocol):
    """Groups of tasks waiting to be aggregated and the sets staged from them (what the
    worker's aggregator calls). Every method raises BrokerError when Redis fails."""

    async def list_groups(self, queue: str) -> list[str]:
        """Names of the groups of ``queue`` holding tasks, sorted."""
        ...

    async def check(self, queue: str, group: str, set_id: str, grace_ms: int,
                    max_delay_ms: int, max_size: int, set_deadline_ms: int) -> int:
        """Stage the group's tasks in the aggregation set ``set_id`` if the group is ready;
        returns how many tasks were staged (0: not ready, nothing changed)."""
        ...

    async def read_set(self, queue: str, group: str, set_id: str) -> list[RawTask]:
        """The tasks staged in an aggregation set."""
        ...

    async def delete_set(self, queue: str, group: str, set_id: str) -> int:
        """Delete an aggregation set and its tasks; returns how many tasks were deleted."""
        ...

    async def return_set(self, queue: str, group: str, set_id: str) -> int:
        """Give a staged set's tasks back to ``group`` now (its aggregation failed); returns
        how many."""
        ...

    async def reclaim_stale_sets(self, queue: str) -> int:
        """Return the tasks of aggregation sets whose deadline passed to their groups;
        returns how many sets were reclaimed."""
        ...


class WorkerOps(Protocol):
    """A worker's published state (its heartbeat writes it, ``InspectOps.servers`` reads it
    back). Every method raises BrokerError when Redis fails."""

    async def write(self, record: WorkerRecord, ttl_ms: int) -> None:
        """Publish a worker's state and its running tasks (``record.running``) for
        ``ttl_ms``, replacing what it published before."""
        ...

    async def clear(self, server_id: str) -> None:
        """Remove a worker's published state."""
        ...
