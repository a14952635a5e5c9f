"""The values exchanged with a Broker: tasks as read and as stored, outcomes, records, and
the codes its scripts return."""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from .._errors import DecodeError
from .._model._message import TaskMessage, read_message

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
RemoveMode = Literal["check", "remove", "force"]
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
class ServerRecord:
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
