"""From a Task and enqueue options to the message stored in Redis, and back to what the caller
is told: shared by the Client, the Scheduler and the group Aggregator, so all three store
exactly the same thing for the same request."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .._defaults import DEFAULT_QUEUE
from .._errors import AsyncqError, DuplicateTaskError, TaskIDConflictError
from ._info import TaskInfo, TaskState, just_stored_info
from ._message import TaskMessage
from ._options import NO_OPTIONS, ParsedOptions, parse_options, resolve
from ._payload import Encoding, encode_payload, identity_bytes
from ._stored import EnqueueCode, NewTask, UniqueLock
from ._task import Task, validate_type


def new_task_id() -> str:
    """A random (version 4) UUID as text, what ``str(uuid.uuid4())`` gives, made with less
    work: it is drawn for every task enqueued without an id of its own. The ids are made
    ``_ID_BATCH`` at a time (``_make_ids``) and handed out by ``list.pop``, atomic: clients
    of several threads never get the same one; a forked child makes its own."""
    try:
        return _ids.pop()
    except IndexError:
        _ids.extend(_make_ids())
        return new_task_id()


def _make_ids() -> list[str]:
    """``_ID_BATCH`` new ids from one ``os.urandom`` call: its hex digits laid into a template
    of the UUID text form, one digit position of every id at a time (C-level strided copies,
    not a format per id)."""
    digits = os.urandom(_ID_BATCH * 16).hex().encode()  # 32 per id
    out = bytearray(_ID_TEMPLATE)
    for to, of in _ID_DIGITS:
        out[to::37] = digits[of::32]
    # The RFC 4122 variant: the top two bits of the 17th digit are 10 (8, 9, a or b).
    out[19::37] = digits[16::32].translate(_VARIANT)
    return out[:-1].decode().split(",")


_ID_BATCH = 128  # ids made per os.urandom call
#: Each id's 36 characters and a comma: the hyphens, and the version (4) in the 13th digit.
_ID_TEMPLATE = b"00000000-0000-4000-0000-000000000000," * _ID_BATCH
#: (position in the text, hex digit drawn) of every character the random digits fill: digit
#: 12 gives way to the version, digit 16 becomes the variant.
_ID_DIGITS = [(to, of) for to, of in zip(
    [*range(0, 8), *range(9, 13), *range(15, 18), *range(20, 23), *range(24, 36)],
    [*range(0, 8), *range(8, 12), *range(13, 16), *range(17, 20), *range(20, 32)],
    strict=True)]
_VARIANT = bytes.maketrans(b"0123456789abcdef", b"89ab89ab89ab89ab")
_ids: list[str] = []


def _forget_ids() -> None:
    """In a forked child: never hand out the ids its parent may still hand out."""
    _ids.clear()


os.register_at_fork(after_in_child=_forget_ids)


def prepare_plain(task_type: object, payload: object, options: Mapping[str, Any],
                  now: int) -> NewTask:
    """``prepare(Task(task_type, payload), options, now)`` without building the Task: the
    stored form of ``enqueue("type", payload, **options)``, the most common call. Validates
    what Task and ``prepare`` do, in the same order (type, payload, options)."""
    task_type = validate_type(task_type)
    raw, enc = encode_payload(payload)
    return _stored_form(task_type, raw, enc, parse_options(options), now)


def prepare(task: Task, options: Mapping[str, Any], now: int) -> NewTask:
    """The stored form of ``task`` with ``options`` applied over its own ("last wins").

    Raises ValueError/TypeError for bad options, before anything is written.
    """
    opts = task.options.merged(parse_options(options)) if options else task.options
    return _stored_form(task.type, task.payload, task.encoding, opts, now)


def _stored_form(task_type: str, payload: bytes, encoding: Encoding, opts: ParsedOptions,
                 now: int) -> NewTask:
    """The stored form of a task of ``task_type`` with ``payload`` and options ``opts``."""
    if opts is NO_OPTIONS:  # (nothing set: every default, nothing to check)
        return NewTask(TaskMessage(new_task_id(), task_type, DEFAULT_QUEUE, None, 0, 0, None, "",
                                   "", {}, encoding, now, 0), payload, 0, None, 0)
    r = resolve(opts, now)
    unique = None
    unique_ttl = 0
    if r.unique_ms:
        identity = (None if encoding == "n" or r.unique_key is not None
                    else identity_bytes(payload, encoding))
        unique = UniqueLock(task_type, identity, r.unique_key)  # (the broker names its key)
        # The lock must outlive the wait for a scheduled task, as well as the TTL.
        unique_ttl = r.unique_ms + max(0, r.process_at_ms - now)
    msg = TaskMessage(r.task_id or new_task_id(), task_type, r.queue, r.max_retry, r.timeout_ms,
                      r.deadline_ms, r.retention_ms, "", r.group, r.headers,
                      encoding, now, r.expires_at_ms)
    return NewTask(msg, payload, r.process_at_ms, unique, unique_ttl)


def stored_info(new: NewTask, now: int) -> TaskInfo:
    """What the caller is told about a task that was just stored (what ``task_info`` gives
    for it, built with less work: ``just_stored_info``)."""
    if new.process_at_ms > now:
        state, next_at = TaskState.SCHEDULED, new.process_at_ms
    elif new.msg.group:
        state, next_at = TaskState.AGGREGATING, 0
    else:
        state, next_at = TaskState.PENDING, now
    return just_stored_info(new.msg, new.payload, state, next_at)


def store_error(code: EnqueueCode, new: NewTask,
                holder: str | None = None) -> AsyncqError | None:
    """The error a store reply code stands for (None when the task was stored); ``holder``:
    the id of the task holding the uniqueness lock, when known. The lock is named as the
    broker named it when it stored ``new`` (``new.msg.unique_key``)."""
    if code == 0:
        return TaskIDConflictError(
            f"task id {new.msg.id!r} already exists in queue {new.msg.queue!r}")
    if code == -1:
        held = f", held by task {holder}" if holder else ""
        return DuplicateTaskError(
            f"a unique {new.msg.type!r} task is already queued in {new.msg.queue!r} "
            f"(lock {new.msg.unique_key}{held})", task_id=holder)
    return None
