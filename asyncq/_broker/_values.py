"""The values exchanged with a Broker: tasks as read and as stored, outcomes, records, and
the codes its scripts return."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, NamedTuple

from .._model._message import TaskMessage
from ._keys import queue_keys

LEASE_LOST = 0
LEASE_KEPT = 1
CANCEL_REQUESTED = 2  # lease kept, and a cancellation of the task was requested

# What request_cancel did (its script's code)
CANCEL_RUNNING = 1  # the task is active: its worker was asked to stop it
CANCEL_REMOVED = 2  # it was waiting to run (pending, scheduled, retry...): removed
CANCEL_MISSING = 0  # no such task
CANCEL_ENDED = -1  # it had ended (completed or archived): nothing done


class RawTask(NamedTuple):
    """A task as read from Redis, before its message is decoded."""

    id: str
    msg: bytes
    payload: bytes
    retried: int
    #: when it last became pending (Unix ms; 0 when unknown): a dequeue's queue wait starts here
    pending_since: int = 0
    #: its queue had a concurrency cap when it was leased: it claims a slot before it starts
    capped: bool = False


class NewTask(NamedTuple):
    """Everything needed to store a new task."""

    msg: TaskMessage
    payload: bytes
    process_at_ms: int  # 0 or <= now: ready now
    unique_key: str | None  # lock key name, None when not unique
    unique_ttl_ms: int


def unique_lock(queue: str, task_type: str, identity: bytes | None, key: str | None) -> str:
    """The name of a unique task's lock: from its explicit ``key``, else from its type and
    payload ``identity``. The broker owns the naming; a producer carries the name in the
    message and gives it back to ``Broker.lock_holders``."""
    return queue_keys(queue).unique(task_type, identity, key)


EnqueueCode = Literal[1, 0, -1]  # 1 stored, 0 id conflict, -1 unique duplicate
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
    started_at_ms: int = 0  # when its latest run started (leased to a worker); 0 never/unknown
    queue: str = ""  # the queue it was read from ("" when the reader did not say)
    traceback: str = ""  # the last failure's traceback (read with one task only)
    progress: bytes = b""  # its latest run's progress report, JSON (b"": none)


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
    return (RawTask(head[0].decode(), rest[:n], rest[n:], int(head[1]), int(head[2])),
            int(head[3]))
