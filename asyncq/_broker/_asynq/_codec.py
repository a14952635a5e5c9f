"""asynq's TaskMessage (protobuf) <-> asyncq's task message and payload.

A task asyncq enqueues carries everything a Go server needs in ``msg``, Go's defaults written
out (25 retries; a 1800 s timeout when neither a timeout nor a deadline was set), and its own
message as JSON in the extra ``asyncq_msg`` field (what was left unset, times in ms, the
payload encoding): read back by asyncq as it was written. A task Go enqueued has only ``msg``;
its options are all explicit then (Go's client applied its defaults).
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from google.protobuf.message import DecodeError as PBDecodeError  # type: ignore[import-untyped,unused-ignore]

from ... import _defaults
from ..._clock import MAX_TIME_MS
from ..._errors import DecodeError
from ..._model._message import NO_TIMEOUT, TaskMessage, read_message
from .._values import RawTask
from ._schema import TaskMessagePB

DEFAULT_RETRY = _defaults.DEFAULT_MAX_RETRY  # asynq's defaultMaxRetry is 25 as well
DEFAULT_TIMEOUT_S = _defaults.DEFAULT_TIMEOUT_MS // 1000  # asynq's defaultTimeout: 30 min
#: What asyncq's "no time limit" is written as: a Go server gives timeout 0 with deadline 0 its
#: 30-minute default (processor.computeDeadline), so no limit is a century, well inside Go's
#: time.Duration (an int64 of ns: about 292 years).
UNLIMITED_TIMEOUT_S = 100 * 365 * 86_400
#: The longest retention asyncq keeps a completed task for (Go has no bound): 1000 years, so
#: completion time + retention stays a time Python's datetime holds.
RETENTION_MAX_S = 1000 * 365 * 86_400


class AsynqTask(NamedTuple):
    """The fields of an asynq TaskMessage (times in Unix s, durations in s, 0 = unset)."""

    type: str
    payload: bytes
    id: str
    queue: str
    retry: int = DEFAULT_RETRY
    retried: int = 0
    error_msg: str = ""
    last_failed_at: int = 0
    timeout: int = 0
    deadline: int = 0
    unique_key: str = ""
    group_key: str = ""
    retention: int = 0
    completed_at: int = 0
    headers: dict[str, str] = {}


_TYPE_PREFIX = re.compile(r"[A-Za-z_][\w.]*: ")


def go_error(error: str) -> str:
    """``error`` (asyncq's ``ExcType: message``) as a Go handler's error reads: the message
    alone (``"probe fail"``), so Go-side alerts matching ``last_err`` see Go's text; the type
    alone when the message is empty. asyncq keeps the whole text in its own field
    (``F_ERROR``)."""
    match = _TYPE_PREFIX.match(error)
    return error[match.end():] if match else error


def stored_error(go_text: str, full: bytes | None) -> str:
    """The error to show for a task: asyncq's whole text (``F_ERROR``) while it is the one
    ``error_msg`` holds (a Go server's later failure writes only ``error_msg``), else
    ``error_msg``."""
    if full:
        text = full.decode("utf-8", "replace")
        if go_error(text) == go_text or not go_text:
            return text
    return go_text


def _ceil_s(ms: int) -> int:
    return -(-ms // 1000)


def from_asyncq(msg: TaskMessage, payload: bytes, unique_key: str = "") -> AsynqTask:
    """The asynq fields of an asyncq message; ``unique_key``: the lock in asynq's naming.

    Durations and times are rounded up to whole seconds (a 500 ms timeout must not become 0,
    which a Go server reads as its 30-minute default); asyncq's no limit (NO_TIMEOUT) is
    UNLIMITED_TIMEOUT_S, which a Go server honours as well."""
    if msg.timeout_ms == NO_TIMEOUT:
        timeout = UNLIMITED_TIMEOUT_S
    elif msg.timeout_ms > 0:
        timeout = _ceil_s(msg.timeout_ms)
    else:
        timeout = 0 if msg.deadline_ms else DEFAULT_TIMEOUT_S
    return AsynqTask(
        type=msg.type, payload=payload, id=msg.id, queue=msg.queue,
        retry=DEFAULT_RETRY if msg.max_retry is None else msg.max_retry,
        timeout=timeout, deadline=_ceil_s(msg.deadline_ms) if msg.deadline_ms > 0 else 0,
        unique_key=unique_key, group_key=msg.group,
        retention=_ceil_s(msg.retention_ms) if msg.retention_ms else 0,
        headers=dict(msg.headers),
    )


def encode(task: AsynqTask) -> bytes:
    """The protobuf bytes of ``task`` (zero fields omitted, as Go writes them)."""
    pb: Any = TaskMessagePB(
        type=task.type, payload=task.payload, id=task.id, queue=task.queue, retry=task.retry,
        retried=task.retried, error_msg=task.error_msg, last_failed_at=task.last_failed_at,
        timeout=task.timeout, deadline=task.deadline, unique_key=task.unique_key,
        group_key=task.group_key, retention=task.retention, completed_at=task.completed_at)
    pb.headers.update(task.headers)
    data: bytes = pb.SerializeToString()
    return data


def _parse(data: bytes) -> Any:
    """The protobuf message of a stored ``msg``; DecodeError saying what is wrong."""
    if not data:
        raise DecodeError("task message is missing")
    try:
        return TaskMessagePB.FromString(data)
    except PBDecodeError as exc:
        raise DecodeError(f"task message is not a valid asynq TaskMessage: {exc}") from exc


def decode(data: bytes) -> AsynqTask:
    """Parse a stored ``msg``; DecodeError saying what is wrong."""
    pb = _parse(data)
    return AsynqTask(
        type=pb.type, payload=pb.payload, id=pb.id, queue=pb.queue, retry=pb.retry,
        retried=pb.retried, error_msg=pb.error_msg, last_failed_at=pb.last_failed_at,
        timeout=pb.timeout, deadline=pb.deadline, unique_key=pb.unique_key,
        group_key=pb.group_key, retention=pb.retention, completed_at=pb.completed_at,
        headers=dict(pb.headers))


def check(task: AsynqTask) -> None:
    """Raise DecodeError naming the field when a Go-written message holds a value asyncq
    cannot honour as Go would (a negative count or duration, a time no datetime holds, an
    empty type): the worker, forwarder and recoverer then archive that one task with the
    reason instead of running it with the value clamped, or failing beside it."""
    if not task.type:
        bad = "its task type is empty (Go's client refuses such a task)"
    elif task.retry < 0 or task.retried < 0:
        bad = f"its retry count is negative (retry {task.retry}, retried {task.retried})"
    elif task.timeout < 0:
        bad = f"its timeout is negative ({task.timeout} s)"
    elif not 0 <= task.deadline <= MAX_TIME_MS // 1000:
        bad = (f"its deadline {task.deadline} (Unix s) is not a time between 1970 and "
               f"9999")
    elif not 0 <= task.retention <= RETENTION_MAX_S:
        bad = f"its retention {task.retention} s is negative or over 1000 years"
    else:
        return
    raise DecodeError(f"task message cannot be run: {bad}")


def to_asyncq(task: AsynqTask) -> TaskMessage:
    """asyncq's message for a task Go enqueued: every option as Go stored it, run as a Go
    server runs it (timeout 0 and deadline 0 is Go's 30-minute default, UNLIMITED_TIMEOUT_S
    no limit; retention 0 deletes the task on success). DecodeError (``check``) for values
    that cannot be honoured."""
    check(task)
    if task.timeout <= 0 and task.deadline <= 0:
        timeout_ms = DEFAULT_TIMEOUT_S * 1000
    elif task.timeout >= UNLIMITED_TIMEOUT_S:
        timeout_ms = NO_TIMEOUT
    else:
        timeout_ms = max(task.timeout, 0) * 1000
    return TaskMessage(
        id=task.id, type=task.type, queue=task.queue, max_retry=max(task.retry, 0),
        timeout_ms=timeout_ms,
        deadline_ms=max(task.deadline, 0) * 1000, retention_ms=max(task.retention, 0) * 1000,
        unique_key=task.unique_key, group=task.group_key, headers=dict(task.headers), enc="b")


def raw_task(task_id: str, msg: bytes, amsg: bytes | None, pending_since_ns: Any) -> RawTask:
    """A dequeued task as the worker reads it: its message (asyncq's own, stored beside Go's
    when asyncq enqueued it, else Go's read as asyncq's), the payload, retries so far, and when
    it became pending (ms). An undecodable ``msg`` gives the DecodeError in place of the
    message, which the worker archives with the reason."""
    try:
        since = int(pending_since_ns or 0) // 1_000_000
    except ValueError:
        since = 0
    if amsg:  # asyncq enqueued it: its own message, with Go's payload and retry count
        try:
            pb = _parse(msg)
        except DecodeError as exc:
            return RawTask(task_id, exc, b"", 0, since)
        return RawTask(task_id, read_message(amsg), pb.payload, pb.retried, since)
    try:
        task = decode(msg)
        return RawTask(task_id, to_asyncq(task), task.payload, task.retried, since)
    except DecodeError as exc:
        return RawTask(task_id, exc, b"", 0, since)
