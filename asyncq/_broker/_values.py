"""The values exchanged with a Broker, in one leaf module (it imports only the model they
carry), public beside ``asyncq.Broker`` so a broker can be written from public names: tasks
as stored and as read (``NewTask``, ``UniqueLock``, ``RawTask``, ``TaskRecord``), outcomes,
the records of workers and schedulers (``WorkerRecord``, ``RunningTaskRecord``,
``SchedulerEntryRecord``, ``SchedulerEventRecord``), what listeners yield (``Handoff``,
``WorkerSignal``), the values of limits (``LimitSpec``, ``LimitClaim``, ``LimitHold``,
``LimitUse``), what a broker offers (``Capability``) and the codes its operations return."""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from .._errors import DecodeError
from .._model._message import TaskMessage as TaskMessage
from .._model._message import read_message

# The stored forms the model builds and reads, re-exported here beside the broker's own values.
from .._model._stored import EnqueueCode as EnqueueCode
from .._model._stored import NewTask as NewTask
from .._model._stored import TaskRecord as TaskRecord
from .._model._stored import UniqueLock as UniqueLock


class Capability(enum.Enum):
    """What a broker offers beyond the transitions every broker has (store, lease, finish,
    inspect, limits, schedules): callers check ``Capability.X in broker.capabilities`` before
    using it, so a broker never fakes what it lacks."""

    WORKFLOWS = "workflows"
    """``broker.workflows``: workflow state, steps and outboxes."""
    PROGRESS = "progress"
    """``broker.set_progress``: a running task's progress stored and published."""
    EXPIRY = "expiry"
    """Tasks stored with an expiry (``expires_in``/``expires_at``), archived unrun once it
    passes; without it, such an enqueue is refused with a ValueError saying so."""


#: What asyncq's own layout offers: everything.
ALL_CAPABILITIES: frozenset[Capability] = frozenset(Capability)


LEASE_LOST = 0
LEASE_KEPT = 1
CANCEL_REQUESTED = 2  # lease kept, and a cancellation of the task was requested

# What request_cancel did (its script's code)
CANCEL_RUNNING = 1  # the task is active: its worker was asked to stop it
CANCEL_REMOVED = 2  # it was waiting to run (pending, scheduled, retry...): removed
CANCEL_MISSING = 0  # no such task
CANCEL_ENDED = -1  # it had ended (completed or archived): nothing done


class RawTask(NamedTuple):
    """A task as read from Redis: its message decoded by the broker (from whichever layout),
    or the DecodeError saying why it cannot be (the worker archives that task alone)."""

    id: str
    msg: TaskMessage | DecodeError
    payload: bytes
    retried: int
    #: when it last became pending (Unix ms; 0 when unknown): a dequeue's queue wait starts here
    pending_since: int = 0
    #: its queue had a concurrency cap when it was leased: it claims a slot before it starts
    capped: bool = False




FireCode = Literal[2, 1, 0, -1]  # 2 the tick was claimed elsewhere, else as EnqueueCode
BulkOp = Literal["delete", "run", "archive"]
#: How ``InspectOps.remove_queue`` drops a queue's keys: "check" (change nothing, only tell),
#: "remove", or "force" (also the tasks staged in aggregation sets).
DeleteMode = Literal["check", "remove", "force"]
#: ``await flush(queue)``: every event of the queue published before the call was delivered.
EventFlush = Callable[[str], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a leased task ended, written back by the worker (one script per outcome)."""

    #: "expire": archived unrun, the worker found it expired as it was about to start it.
    kind: Literal["done", "complete", "retry", "archive", "requeue", "expire"]
    queue: str
    task_id: str
    retention_ms: int = 0  # "complete": how long it is kept; "done": >0 leaves a completion mark
    retry_at_ms: int = 0
    error: str = ""  # why it failed; for "done", why it was revoked ("" = it succeeded)
    traceback: str = ""  # retry/archive: the failure's traceback, bounded ("" = none)
    is_failure: bool = True
    result: bytes | None = None  # the handler's return value, encoded
    result_enc: str = "b"  # "b" bytes or "j" JSON: how `result` was encoded
    expires_at_ms: int = 0  # retry: the task's expiry as the worker applies it (0: its own)


@dataclass(frozen=True, slots=True)
class RunningTaskRecord:
    """A task a worker runs, as its heartbeat publishes it (``Broker.servers``); the Inspector
    shows it as a ``WorkerInfo``."""

    task_id: str
    task_type: str
    queue: str
    started_ms: int  # when this run started (Unix ms)
    deadline_ms: int = 0  # when its time limit ends it (Unix ms; 0: no time limit)
    payload_size: int = 0


@dataclass(frozen=True, slots=True)
class WorkerRecord:
    """A worker process's state, as its heartbeat publishes it (``Broker.servers``) and
    ``InspectOps.servers`` reads it back; the Inspector shows it as a ``ServerInfo``. Each
    broker stores it in its own encoding (asyncq's JSON, or Go's protobuf ServerInfo)."""

    server_id: str
    host: str
    pid: int
    concurrency: int
    queues: Mapping[str, int]  # queue name (or pattern) -> priority
    strict_priority: bool
    status: str  # "active", "stopped" (takes no new tasks) or "stopping" (shutting down)
    started_ms: int  # when the worker started (Unix ms)
    processed: int = 0
    failed: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)  # the user's labels (JSON values)
    #: with patterns among ``queues``: the queues each one serves now
    matched: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: the task options its handlers were registered with, by pattern (``max_retry``,
    #: ``timeout_ms``, ``retention_ms`` as set there)
    task_options: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    running: tuple[RunningTaskRecord, ...] = ()  # the tasks it runs now


@dataclass(frozen=True, slots=True)
class SchedulerEntryRecord:
    """A periodic entry a scheduler publishes (``ScheduleOps.publish_entries``) and tools read
    back (``ScheduleOps.entries``); shown as a ``SchedulerEntry``."""

    id: str
    spec: str
    timezone: str  # the zone cron specs are read in ("" unknown)
    task_type: str
    encoding: Literal["b", "j", "n"]  # how the payload is stored: bytes, JSON, none
    payload: bytes
    options: Mapping[str, Any]  # enqueue options, JSON form (seconds, ISO 8601 times)
    next_ms: int  # its next tick (Unix ms)
    prev_ms: int | None  # the last tick enqueued (by any replica); None: none yet
    scheduler_id: str = ""  # who published it (filled in when read back)


@dataclass(frozen=True, slots=True)
class SchedulerEventRecord:
    """One task a periodic entry enqueued (``ScheduleOps.record_event`` / ``events``); shown
    as a ``SchedulerEvent``."""

    entry_id: str
    task_id: str
    queue: str
    enqueued_at_ms: int
    tick_ms: int  # the schedule time it was enqueued for


class Backlog(NamedTuple):
    """What a queue holds for workers to run now or soon (``Broker.backlog``)."""

    pending: int
    due: int  # scheduled and retry tasks due by the horizon asked for
    groups: int  # groups holding tasks (aggregated into pending tasks later)
    paused: bool




# -- what listeners yield (``listen_signals``, ``listen_handoffs``)


class CancelRequest(NamedTuple):
    """Cancel ``task_id`` if this worker runs it."""

    task_id: str


class QueueWake(NamedTuple):
    """Work may be ready in ``queue``: now (``due_ms`` None), or at ``due_ms`` (Unix ms),
    a task scheduled for later having become the queue's earliest."""

    queue: str
    due_ms: int | None = None


class QueuesAdded(NamedTuple):
    """``queues`` were just added to the queue registry (the first task of a new queue was
    stored, or a worker registered the queues it serves): what a worker serving a pattern
    (``tenant:*``) hears to serve a matching new queue at once."""

    queues: tuple[str, ...]


#: What ``Broker.listen_signals`` yields once subscribed.
WorkerSignal = CancelRequest | QueueWake | QueuesAdded


class Handoff(NamedTuple):
    """A task handed off in one hop: already leased to the worker hearing it, until
    ``lease_until_ms`` (Unix ms of the server's clock)."""

    queue: str
    task: RawTask
    lease_until_ms: int


# -- rate and concurrency limits (``LimitOps``)


QUEUE_CAP = "queue"
"""The kind of a queue's concurrency cap: a concurrency limit on every task of the queue
whose size is set at run time (``Inspector.set_queue_concurrency``), never declared."""


class LimitSpec(NamedTuple):
    """One limit as the broker sees it: kind "concurrency", "rate" or "queue" (a queue's cap,
    name ''), its name, its size and (rate) its period and how many may start at once."""

    kind: str
    name: str
    n: int
    period_ms: int = 0
    burst: int = 0


class LimitClaim(NamedTuple):
    """What one holder asks for: a slot or token of each (limit, key value).

    The holder is a task id (its slots live as long as its lease), or ``m:<id>`` with
    ``hold_until_ms`` set (a manual hold, see ``asyncq.Limiter``)."""

    holder: str
    limits: Sequence[tuple[LimitSpec, str]]
    hold_until_ms: int = 0


class LimitHold(NamedTuple):
    """A concurrency slot of ``spec`` for key value ``key``, held by ``holder``."""

    holder: str
    spec: LimitSpec
    key: str


class LimitUse(NamedTuple):
    """How much of one limit key is in use now."""

    queue: str
    kind: str
    name: str
    key: str
    limit: int
    period_ms: int
    in_use: int
    """Slots held by live holders (concurrency), or starts in the current window (rate)."""
    waiting: int
    """Tasks deferred until a slot or token of this key is free."""
    runtime: bool = False
    """True when the limit in force was set at run time (``Inspector.set_limit``, ``asyncq
    limit set``, the dashboard) and replaces the declared one; a queue's cap always is."""
    declared: int | None = None
    """The size the handlers declare (the last one a worker claimed with), when known: what
    applies again once a run-time value is cleared."""
    declared_period_ms: int | None = None
    """The declared period of a rate (with ``declared``)."""


def decode_handoff(data: bytes) -> tuple[RawTask, int]:
    """A task handed off in one hop (see asyncq_handoff in lua/_lib.lua) and the end of its
    lease (Unix ms of the server's clock). Raises ValueError on a malformed message."""
    head = data.split(b"\n", 4)
    if len(head) != 5:
        raise ValueError("hand-off message without its five header fields")
    size, _, rest = head[4].partition(b"\n")
    n = int(size)
    if len(rest) < n:
        raise ValueError("hand-off message shorter than its task message")
    return (RawTask(head[0].decode(), read_message(rest[:n]), rest[n:], int(head[1]),
                    int(head[2])),
            int(head[3]))
