"""The Broker protocol: every Redis interaction of asyncq goes through one of these methods.

Client, Worker, Inspector and Scheduler depend on these protocols, never on redis-py or on
``RedisBroker``, so a cluster-aware or fault-injecting broker can stand in for it. A Broker
carries two groups of operations as attributes: ``inspect`` (``InspectOps``: what the Inspector
reads and changes) and ``schedules`` (``ScheduleOps``: what schedulers write and tools read).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, Protocol, runtime_checkable

from .._inspect_models import QueueInfo
from .._message import TaskMessage

LEASE_LOST = 0
LEASE_KEPT = 1
CANCEL_REQUESTED = 2  # lease kept, and a cancellation of the task was requested


class RawTask(NamedTuple):
    """A task as read from Redis, before its message is decoded."""

    id: str
    msg: bytes
    payload: bytes
    retried: int
    #: when it last became pending (Unix ms; 0 when unknown): a dequeue's queue wait starts here
    pending_since: int = 0


class NewTask(NamedTuple):
    """Everything needed to store a new task."""

    msg: TaskMessage
    payload: bytes
    process_at_ms: int  # 0 or <= now: ready now
    unique_key: str | None  # lock key name, None when not unique
    unique_ttl_ms: int


EnqueueCode = Literal[1, 0, -1]  # 1 stored, 0 id conflict, -1 unique duplicate
FireCode = Literal[2, 1, 0, -1]  # 2 the tick was claimed elsewhere, else as EnqueueCode
BulkOp = Literal["delete", "run", "archive"]
RemoveMode = Literal["check", "remove", "force"]
#: ``await flush(queue)``: every event of the queue published before the call was delivered.
EventFlush = Callable[[str], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a leased task ended, written back by the worker (one script per outcome)."""

    kind: Literal["done", "complete", "retry", "archive", "requeue"]
    queue: str
    task_id: str
    retention_ms: int = 0
    retry_at_ms: int = 0
    error: str = ""  # why it failed; for "done", why it was revoked ("" = it succeeded)
    is_failure: bool = True
    result: bytes | None = None  # the handler's return value, encoded
    result_enc: str = "b"  # "b" bytes or "j" JSON: how `result` was encoded


class Backlog(NamedTuple):
    """What a queue holds for workers to run now or soon (``Broker.backlog``)."""

    pending: int
    due: int  # scheduled and retry tasks due by the horizon asked for
    groups: int  # groups holding tasks (aggregated into pending tasks later)
    paused: bool


class TaskRecord(NamedTuple):
    """A task hash as read by the inspector, before its message is decoded."""

    id: str
    msg: bytes
    payload: bytes
    state: str
    retried: int
    error: str
    failed_at_ms: int
    completed_at_ms: int
    result: bytes | None
    score: int | None  # zset score; lease expiry for active tasks; None when there is none
    result_enc: str = "b"  # how ``result`` was encoded: "b" bytes, "j" JSON


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

    async def queue_infos(self, queues: Sequence[str], now_ms: int) -> list[QueueInfo]:
        """``queue_info`` of many queues in one pipeline, in the order given."""
        ...

    async def daily_counts(self, queue: str, days: Sequence[str]) -> list[tuple[int, int]]:
        """``(processed, failed)`` for each UTC date (``YYYY-MM-DD``) of ``days``, in order."""
        ...

    async def groups(self, queue: str) -> list[tuple[str, int]]:
        """``(group, tasks waiting in it)`` for every group of ``queue``, sorted by name."""
        ...

    async def remove_queue(self, queue: str, mode: RemoveMode,
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

    async def archive_task(self, queue: str, task_id: str) -> int:
        """Archive a task: 1 done, 0 not found, -1 active, -2 already archived."""
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

    async def servers(self, now_ms: int) -> list[tuple[bytes, dict[bytes, bytes]]]:
        """``(state document, {task id: worker document})`` of every live server (JSON
        bytes); entries that expired by ``now_ms`` are pruned."""
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

    async def record_event(self, entry_id: str, event: bytes, at_ms: int, max_events: int,
                           ttl_ms: int) -> None:
        """Add ``event`` (JSON) to the entry's history at ``at_ms``, keeping the
        ``max_events`` newest; the history expires ``ttl_ms`` after its last event."""
        ...

    async def publish_entries(self, scheduler_id: str, documents: Sequence[bytes],
                              ttl_ms: int, now_ms: int) -> None:
        """Replace the scheduler's published entries (JSON documents) for ``ttl_ms``."""
        ...

    async def clear_entries(self, scheduler_id: str) -> None:
        """Remove the scheduler's published entries."""
        ...

    async def entry_documents(self) -> list[bytes]:
        """The entry documents (JSON) of every live scheduler, scheduler by scheduler;
        schedulers whose entries expired are pruned from the index."""
        ...

    async def event_documents(self, entry_id: str, start: int, stop: int) -> list[bytes]:
        """Events (JSON) of an entry's history from rank ``start`` to ``stop`` (inclusive),
        newest first; empty for an unknown entry."""
        ...


@runtime_checkable
class Broker(Protocol):
    """Atomic task-state transitions and the few plain reads/writes around them.

    Every method raises BrokerError when Redis fails (``.transient`` says whether trying
    again later can help); a method returning a list of ``... | Exception`` reports a failure
    of one item in its place instead."""

    @property
    def inspect(self) -> InspectOps:
        """What the Inspector reads and changes."""
        ...

    @property
    def schedules(self) -> ScheduleOps:
        """What schedulers write and tools read."""
        ...

    async def ping(self) -> None:
        """Check that Redis answers."""
        ...

    async def close(self) -> None:
        """Release the connections the broker owns (a client passed in stays open)."""
        ...

    # -- producing

    async def register_queues(self, queues: Sequence[str]) -> None:
        """Add queue names to the registry (``store``/``store_many`` do it themselves when a
        stored task finds its queue's registration marker missing)."""
        ...

    async def store(self, task: NewTask) -> EnqueueCode:
        """Store a new task (pending, scheduled or in its group): 1 stored, 0 a task with its
        id exists, -1 a unique duplicate holds the lock."""
        ...

    async def store_many(self, tasks: Sequence[NewTask]) -> list[EnqueueCode | Exception]:
        """Store many tasks in few round trips: one code per task, in order (a BrokerError in
        place of a task whose script failed)."""
        ...

    async def request_cancel(self, queue: str, task_id: str) -> bool:
        """Ask for the cancellation of ``task_id`` if it is active: a marker the worker sees at
        its next lease renewal, and a pub/sub message (the fast path). True if it was active."""
        ...

    async def publish_cancel(self, task_id: str) -> None:
        """Ask whichever worker runs ``task_id`` to cancel it (pub/sub, best effort)."""
        ...

    # -- running

    async def dequeue(
        self, queue: str, count: int, owner: str, lease_ms: int, waiter_ttl_ms: int,
        request_id: str = "",
    ) -> tuple[list[RawTask], int]:
        """Lease up to ``count`` pending tasks to ``owner`` for ``lease_ms``.

        Returns ``(tasks, dropped)``: the leased tasks, oldest first, and how many ids were
        dropped for want of a usable record. With nothing to lease, a waiters flag living
        ``waiter_ttl_ms`` asks producers to publish a wake-up. Re-sending a ``request_id``
        whose reply was lost returns what that request leased instead of leasing more."""
        ...

    async def finish(self, outcomes: Sequence[Outcome], owner: str) -> list[bool | Exception]:
        """Write outcomes of tasks leased to ``owner``: one entry per outcome, in order, True
        written, False the lease was lost (nothing written), a BrokerError if its script
        failed."""
        ...

    async def extend_leases(
        self, queue: str, task_ids: Sequence[str], owner: str, lease_ms: int
    ) -> list[int]:
        """Extend ``owner``'s leases by ``lease_ms`` from now: one flag per id, LEASE_LOST (0)
        where the lease was lost, LEASE_KEPT (1), or CANCEL_REQUESTED (2): kept, and a
        cancellation of the task was requested."""
        ...

    async def lock_holders(self, locks: Sequence[str]) -> list[str | None]:
        """The task id holding each uniqueness lock (None: the lock is gone)."""
        ...

    async def write_result(self, queue: str, task_id: str, data: bytes,
                           encoding: str = "b") -> int:
        """Store a running task's result (``encoding`` "b" bytes or "j" JSON): its length, -1
        when the task no longer exists."""
        ...

    def listen(
        self, channels: Sequence[str]
    ) -> AsyncIterator[tuple[str, str] | None]:
        """Subscribe to ``channels``: yields None once subscribed, then ``(channel,
        message)`` pairs, until the connection fails (BrokerError)."""
        ...

    def listen_events(
        self, queues: Sequence[str]
    ) -> AsyncIterator[tuple[str, bytes] | EventFlush]:
        """Listen to the task events of ``queues``: yields an ``EventFlush`` once subscribed,
        then ``(queue, event bytes)`` pairs (see ``asyncq._events.decode_event``), until the
        connection fails (BrokerError). ``await flush(queue)`` returns once every event of
        ``queue`` published before the call has been yielded. Events are only published while
        some listener keeps ``set_listening`` alive for the queue."""
        ...

    async def set_listening(self, queues: Sequence[str], ttl_ms: int) -> None:
        """Tell the transition scripts of ``queues`` to publish events for the next
        ``ttl_ms`` (a listener renews it well before it lapses)."""
        ...

    # -- maintenance

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

    async def read_tasks(self, queue: str,
                         task_ids: Sequence[str]) -> list[tuple[bytes, bytes] | None]:
        """``(message, payload)`` of each task as stored, None where there is no such task."""
        ...

    async def delete_expired_completed(self, queue: str, limit: int) -> int:
        """Delete up to ``limit`` completed tasks whose retention ended; returns how many."""
        ...

    async def write_server_state(self, server_id: str, info: bytes,
                                 workers: dict[str, bytes], ttl_ms: int) -> None:
        """Publish a server's state document and its running tasks (``{task id: JSON}``),
        for ``ttl_ms``."""
        ...

    async def clear_server_state(self, server_id: str) -> None:
        """Remove a server's published state."""
        ...

    async def backlog(self, queue: str, horizon_ms: int) -> Backlog:
        """What ``queue`` holds to run now or soon, read atomically: pending tasks, scheduled
        and retry tasks due by ``horizon_ms`` (Unix ms), groups, and whether it is paused."""
        ...

    async def list_groups(self, queue: str) -> list[str]:
        """Names of the groups of ``queue`` holding tasks, sorted."""
        ...

    async def aggregation_check(self, queue: str, group: str, set_id: str, grace_ms: int,
                                max_delay_ms: int, max_size: int,
                                set_deadline_ms: int) -> int:
        """Stage the group's tasks in the aggregation set ``set_id`` if the group is ready;
        returns how many tasks were staged (0: not ready, nothing changed)."""
        ...

    async def read_aggregation_set(self, queue: str, group: str,
                                   set_id: str) -> list[RawTask]:
        """The tasks staged in an aggregation set."""
        ...

    async def delete_aggregation_set(self, queue: str, group: str, set_id: str) -> int:
        """Delete an aggregation set and its tasks; returns how many tasks were deleted."""
        ...

    async def return_aggregation_set(self, queue: str, group: str, set_id: str) -> int:
        """Give a staged set's tasks back to ``group`` now (its aggregation failed); returns
        how many."""
        ...

    async def reclaim_stale_aggregation_sets(self, queue: str) -> int:
        """Return the tasks of aggregation sets whose deadline passed to their groups;
        returns how many sets were reclaimed."""
        ...

    async def pause(self, queue: str) -> bool:
        """Stop workers taking tasks of ``queue``; False if it was already paused."""
        ...

    async def unpause(self, queue: str) -> bool:
        """Let workers take tasks of ``queue`` again; False if it was not paused."""
        ...


def is_broker(obj: object) -> bool:
    """The one rule that tells a Broker from a Redis URL or client: it has the protocol's
    methods and operation groups (a RedisBroker, or any object standing in for one, e.g. a
    fault-injecting wrapper)."""
    return isinstance(obj, Broker)
