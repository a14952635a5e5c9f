"""The values exchanged with a Broker: tasks as read and as stored, outcomes, records, and
the codes its scripts return."""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, NamedTuple

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
