"""The stored forms of tasks that cross the broker seam: a new task as the model builds it
(``NewTask``, its uniqueness as an identity: ``UniqueLock``), the store's reply code, and a
task record as a broker reads it back (``TaskRecord``). Each broker turns them into its own
layout (key names, encodings); ``asyncq._broker`` re-exports them beside ``Broker``."""

from __future__ import annotations

from typing import Literal, NamedTuple

from ._message import TaskMessage


class UniqueLock(NamedTuple):
    """What a unique task's lock is made of; each broker names the key in its own schema
    (asyncq's, or Go asynq's ``unique:<type>:<md5 of the payload>``)."""

    task_type: str
    identity: bytes | None  # the payload's identity bytes (None: no payload, or ``key`` given)
    key: str | None  # the ``unique_key`` the producer chose (None: derived from type + identity)


class NewTask(NamedTuple):
    """Everything needed to store a new task."""

    msg: TaskMessage  # (its ``unique_key`` is the broker's to fill in, from ``unique``)
    payload: bytes
    process_at_ms: int  # 0 or <= now: ready now
    unique: UniqueLock | None  # None when not unique
    unique_ttl_ms: int


EnqueueCode = Literal[1, 0, -1]  # 1 stored, 0 id conflict, -1 unique duplicate


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
    #: The limits a scheduled task waits for, by name ("queue concurrency limit", "concurrency
    #: limit NAME", "rate limit NAME"): a limit deferred it (empty: none)
    limited_by: tuple[str, ...] = ()
