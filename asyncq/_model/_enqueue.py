"""From a Task and enqueue options to the message stored in Redis, and back to what the caller
is told: shared by the Client, the Scheduler and the group Aggregator, so all three store
exactly the same thing for the same request."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .._broker import EnqueueCode, NewTask
from .._broker._values import unique_lock
from .._errors import AsyncqError, DuplicateTaskError, TaskIDConflictError
from ._info import TaskInfo, TaskState, task_info
from ._message import TaskMessage
from ._options import parse_options, resolve
from ._payload import identity_bytes
from ._task import Task


def new_task_id() -> str:
    """A random (version 4) UUID as text, what ``str(uuid.uuid4())`` gives, made with less
    work: it is drawn for every task enqueued without an id of its own."""
    n = int.from_bytes(os.urandom(16)) & _UUID_CLEAR | _UUID_SET
    h = f"{n:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


_UUID_CLEAR = ~((0xF000 << 64) | (0xC000 << 48))  # the version and variant bits
_UUID_SET = (0x4000 << 64) | (0x8000 << 48)  # version 4, RFC 4122 variant


def prepare(task: Task, options: Mapping[str, Any], now: int) -> NewTask:
    """The stored form of ``task`` with ``options`` applied over its own ("last wins").

    Raises ValueError/TypeError for bad options, before anything is written.
    """
    opts = task.options.merged(parse_options(options)) if options else task.options
    r = resolve(opts, now)
    msg = TaskMessage(
        id=r.task_id or new_task_id(), type=task.type, queue=r.queue,
        max_retry=r.max_retry, timeout_ms=r.timeout_ms, deadline_ms=r.deadline_ms,
        retention_ms=r.retention_ms, group=r.group, headers=r.headers, enc=task.encoding,
        enqueued_at_ms=now, expires_at_ms=r.expires_at_ms,
    )
    unique_key = None
    unique_ttl = 0
    if r.unique_ms:
        identity = (None if task.encoding == "n" or r.unique_key is not None
                    else identity_bytes(task.payload, task.encoding))
        unique_key = unique_lock(r.queue, task.type, identity, r.unique_key)
        # The lock must outlive the wait for a scheduled task, as well as the TTL.
        unique_ttl = r.unique_ms + max(0, r.process_at_ms - now)
    msg.unique_key = unique_key or ""
    return NewTask(msg, task.payload, r.process_at_ms, unique_key, unique_ttl)


def stored_info(new: NewTask, now: int) -> TaskInfo:
    """What the caller is told about a task that was just stored."""
    if new.process_at_ms > now:
        state, next_at = TaskState.SCHEDULED, new.process_at_ms
    elif new.msg.group:
        state, next_at = TaskState.AGGREGATING, 0
    else:
        state, next_at = TaskState.PENDING, now
    return task_info(new.msg, new.payload, state, next_process_at_ms=next_at)


def store_error(code: EnqueueCode, new: NewTask,
                holder: str | None = None) -> AsyncqError | None:
    """The error a store reply code stands for (None when the task was stored); ``holder``:
    the id of the task holding the uniqueness lock, when known."""
    if code == 0:
        return TaskIDConflictError(
            f"task id {new.msg.id!r} already exists in queue {new.msg.queue!r}")
    if code == -1:
        held = f", held by task {holder}" if holder else ""
        return DuplicateTaskError(
            f"a unique {new.msg.type!r} task is already queued in {new.msg.queue!r} "
            f"(lock {new.unique_key}{held})", task_id=holder)
    return None
