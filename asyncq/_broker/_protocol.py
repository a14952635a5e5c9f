"""The Broker protocol: every Redis interaction of asyncq goes through one of these methods.

Client, Worker, Inspector and Scheduler depend on these protocols, never on redis-py or on
``RedisBroker``, so a cluster-aware or fault-injecting broker can stand in for it. A Broker
carries groups of operations as attributes: ``inspect`` (``InspectOps``: what the Inspector
reads and changes), ``schedules`` (``ScheduleOps``: what schedulers write and tools read),
``workflows``, ``limits`` (``LimitOps``: rate and concurrency limit state), ``maintenance``
(``MaintenanceOps``: the worker's background work), ``aggregation`` (``AggregationOps``) and
``workers`` (``WorkerOps``: a worker's published state). The per-task calls (store, dequeue,
finish, lease renewal, listening) stay methods of the Broker itself: no attribute hop on the
hot path. What it hears (``listen_*``) comes typed and decoded (``_values``), and its errors
are BrokerErrors.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Collection, Sequence
from typing import Protocol, TypeGuard, runtime_checkable

from .._errors import DecodeError
from .._model._events import TaskEvent
from .._model._message import TaskMessage
from ._ops import AggregationOps, InspectOps, LimitOps, MaintenanceOps, ScheduleOps, WorkerOps
from ._values import (
    CANCEL_ENDED,
    CANCEL_MISSING,
    CANCEL_REMOVED,
    CANCEL_REQUESTED,
    CANCEL_RUNNING,
    LEASE_KEPT,
    LEASE_LOST,
    Backlog,
    BulkOp,
    Capability,
    DeleteMode,
    EnqueueCode,
    EventFlush,
    FireCode,
    Handoff,
    NewTask,
    Outcome,
    RawTask,
    RunningTaskRecord,
    SchedulerEntryRecord,
    SchedulerEventRecord,
    TaskRecord,
    UniqueLock,
    WorkerRecord,
    WorkerSignal,
)
from ._wf_ops import WorkflowOps

__all__ = [
    "CANCEL_ENDED",
    "CANCEL_MISSING",
    "CANCEL_REMOVED",
    "CANCEL_REQUESTED",
    "CANCEL_RUNNING",
    "LEASE_KEPT",
    "LEASE_LOST",
    "AggregationOps",
    "Backlog",
    "Broker",
    "BulkOp",
    "Capability",
    "DeleteMode",
    "EnqueueCode",
    "EventFlush",
    "FireCode",
    "InspectOps",
    "LimitOps",
    "MaintenanceOps",
    "NewTask",
    "Outcome",
    "RawTask",
    "RunningTaskRecord",
    "ScheduleOps",
    "SchedulerEntryRecord",
    "SchedulerEventRecord",
    "TaskRecord",
    "UniqueLock",
    "WorkerOps",
    "WorkerRecord",
    "is_broker",
]


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

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What this broker offers beyond the transitions every broker has; a caller checks
        before using ``workflows`` or ``set_progress``."""
        ...

    @property
    def workflows(self) -> WorkflowOps:
        """What workflows read and write (their state, steps and outboxes); only with
        ``Capability.WORKFLOWS`` (else it raises BrokerError, refused, saying why)."""
        ...

    @property
    def limits(self) -> LimitOps:
        """Rate and concurrency limit state (what the worker's limit gate and ``Limiter``
        take and give back)."""
        ...

    @property
    def maintenance(self) -> MaintenanceOps:
        """What the worker's background components call: forwarding, recovery, repair,
        cleanup, samples and the backlog."""
        ...

    @property
    def aggregation(self) -> AggregationOps:
        """Groups waiting to be aggregated and their staged sets (the worker's aggregator)."""
        ...

    @property
    def workers(self) -> WorkerOps:
        """A worker's published state (its heartbeat)."""
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

    async def request_cancel(self, queue: str, task_id: str) -> int:
        """Cancel ``task_id`` in one script: an active one gets a cancellation request (a
        marker the worker sees at its next lease renewal, and a pub/sub message: the fast
        path), one waiting to run is removed. Returns CANCEL_RUNNING, CANCEL_REMOVED,
        CANCEL_MISSING or CANCEL_ENDED."""
        ...

    async def publish_cancel(self, task_id: str) -> None:
        """Ask whichever worker runs ``task_id`` to cancel it (pub/sub, best effort)."""
        ...

    # -- running

    async def dequeue(
        self, queue: str, count: int, owner: str, lease_ms: int, waiter_ttl_ms: int,
        request_id: str = "", one_hop: bool = False,
    ) -> tuple[list[RawTask], int]:
        """Lease up to ``count`` pending tasks to ``owner`` for ``lease_ms``.

        Returns ``(tasks, dropped)``: the leased tasks, oldest first, and how many ids were
        dropped for want of a usable record. With nothing to lease, a waiters flag living
        ``waiter_ttl_ms`` asks producers to publish a wake-up. Re-sending a ``request_id``
        whose reply was lost returns what that request leased instead of leasing more.
        With ``one_hop``, the tasks handed off to ``owner`` and still leased to it come first
        (some may be held already), and an owner left with free slots registers as idle, so
        the next task to become pending is handed to it (see ``listen_handoffs``). When the
        queue has a concurrency cap (read in the same step), every task returned is marked
        ``capped`` (the worker claims a slot for it before it starts), and nothing of that
        queue is handed off nor registers as idle: a task handed off would skip the claim."""
        ...

    def listen_handoffs(self, queues: Sequence[str],
                        owner: str) -> AsyncIterator[Handoff | None]:
        """Listen for tasks handed off to ``owner`` in one hop: yield None once subscribed,
        then each Handoff until a connection fails (BrokerError)."""
        ...

    async def leave_idle(self, queues: Sequence[str], owner: str, lease_ms: int) -> None:
        """Withdraw ``owner``'s idle registrations (it stops fetching)."""
        ...

    def watch_pending(self, queue: str) -> AsyncGenerator[None] | None:
        """For a layout where tasks may become pending without a wake-up (Go's enqueue in
        asynq's layout): yield each time ``queue`` holds a pending task (at once if it holds one
        now), taking nothing, on a connection of its own while iterated; the caller pulls the
        next item only while idle. It ends when Redis cannot wait so (then the idle poll is all
        there is), and raises BrokerError when its connection fails. None where every way a
        task becomes pending already wakes idle workers (asyncq's own layout)."""
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
        """The task id holding each uniqueness lock (None: the lock is gone); a lock as named
        in the message of a task this broker stored (``NewTask.msg.unique_key``)."""
        ...

    async def write_result(self, queue: str, task_id: str, data: bytes,
                           encoding: str = "b") -> int:
        """Store a running task's result (``encoding`` "b" bytes or "j" JSON): its length, -1
        when the task no longer exists."""
        ...

    async def set_progress(self, queue: str, task_id: str, owner: str, report: bytes) -> bool:
        """Store a running task's progress report (the JSON object ``Progress`` decodes) and
        publish it as a task event (only with ``Capability.PROGRESS``); False when the task is
        not active under ``owner`` (its lease was lost: nothing is written)."""
        ...

    def listen_signals(self, queues: Collection[str], *,
                       new_queues: bool = False) -> AsyncIterator[WorkerSignal | None]:
        """What a worker of ``queues`` hears besides hand-offs: yields None once subscribed,
        then cancel requests (of any task) and wake-ups of ``queues`` (with ``new_queues``,
        also the announcements of queues just registered, ``QueuesAdded``), until the
        connection fails (BrokerError). A set given is read at each message: a worker
        serving a pattern adds the queues it finds to it while listening."""
        ...

    def listen_events(
        self, queues: Sequence[str]
    ) -> AsyncIterator[TaskEvent | EventFlush]:
        """Listen to the task events of ``queues``: yields an ``EventFlush`` once subscribed,
        then each TaskEvent, until the connection fails (BrokerError). ``await flush(queue)``
        returns once every event of ``queue`` published before the call has been yielded
        (BrokerError if the connection fails or it takes too long). Events are only published
        while some listener keeps ``set_listening`` alive for the queue."""
        ...

    async def set_listening(self, queues: Sequence[str], ttl_ms: int) -> None:
        """Tell the transition scripts of ``queues`` to publish events for the next
        ``ttl_ms`` (a listener renews it well before it lapses)."""
        ...

    # -- reads and queue control

    async def read_tasks(self, queue: str,
                         task_ids: Sequence[str]
                         ) -> list[tuple[TaskMessage | DecodeError, bytes] | None]:
        """``(message, payload)`` of each task as stored (its message decoded, or the
        DecodeError saying why it cannot be), None where there is no such task."""
        ...

    async def pause(self, queue: str) -> bool:
        """Stop workers taking tasks of ``queue``; False if it was already paused."""
        ...

    async def unpause(self, queue: str) -> bool:
        """Let workers take tasks of ``queue`` again; False if it was not paused."""
        ...


def is_broker(obj: object) -> TypeGuard[Broker]:
    """The one rule that tells a Broker from a Redis URL or client: it declares its
    capabilities and stores tasks (a RedisBroker, or any object standing in for one, e.g. a
    fault-injecting wrapper). Read without touching the operation groups, which a broker may
    refuse (``workflows`` without ``Capability.WORKFLOWS``)."""
    return isinstance(getattr(obj, "capabilities", None), frozenset) and callable(
        getattr(obj, "store", None))
