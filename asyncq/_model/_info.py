"""What a task's state is (TaskState) and a snapshot of a stored task (TaskInfo), and the error
that carries one (TaskFailedError)."""

from __future__ import annotations

import enum
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NamedTuple

import orjson

from .._clock import stored_datetime
from .._defaults import DEFAULT_MAX_RETRY, DEFAULT_TIMEOUT_MS
from .._errors import TaskError
from ._build import slot_builder
from ._message import NO_TIMEOUT, TaskMessage
from ._payload import Encoding, decode_json
from ._rules import RESULT_RETENTION_MS, HandlerRules, effective, expiry_of


class TaskState(enum.Enum):
    """Where a task is in its life; values are the names stored in Redis."""

    PENDING = "pending"
    ACTIVE = "active"
    SCHEDULED = "scheduled"
    RETRY = "retry"
    ARCHIVED = "archived"
    COMPLETED = "completed"
    AGGREGATING = "aggregating"
    #: A workflow step waiting for the steps before it: in no list until its workflow releases
    #: it (then pending, with the input they produced).
    WAITING = "waiting"
    #: Never stored: what task events and ``Client.wait`` report once a task no longer exists
    #: (deleted, revoked by its handler, merged by aggregation, or its retention ran out).
    DELETED = "deleted"


#: The states of the tasks a queue lists (every state but DELETED, and WAITING: a waiting
#: workflow step is in no list of its queue; its workflow lists it).
STORED_STATES = tuple(s for s in TaskState if s not in (TaskState.DELETED, TaskState.WAITING))


class Progress(NamedTuple):
    """A progress report as stored on the task (the ``progress`` hash field, a JSON object
    ``{"v": value, "m": message, "d": data, "at": Unix ms}``) and carried by its event."""

    value: float
    message: str | None = None
    data: Any = None
    at_ms: int = 0


def decode_progress(raw: bytes | str | None) -> Progress | None:
    """The report stored or published by a worker's ``set_progress``; None when there is none
    or it is not one (a report never makes a read fail)."""
    if not raw:
        return None
    try:
        doc = orjson.loads(raw)
        value = float(doc["v"])
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
    message = doc.get("m")
    at = doc.get("at")
    return Progress(value, message if isinstance(message, str) else None, doc.get("d"),
                    at if isinstance(at, int) else 0)


@dataclass(frozen=True, slots=True)
class TaskInfo:
    """A snapshot of a stored task, as returned by the client and the inspector.

    ``max_retry``, ``timeout`` (None: no limit but the ``deadline``, if any) and ``retention``
    are the values that apply to it: its producer's, else its handler's registration (which
    the Inspector learns from the live workers), else the defaults — a task without a
    retention keeps a value it returns for RESULT_RETENTION (10 min)."""

    id: str
    queue: str
    type: str
    payload: bytes
    state: TaskState
    max_retry: int
    retried: int = 0
    headers: Mapping[str, str] = field(default_factory=dict)
    last_error: str | None = None
    last_failed_at: datetime | None = None
    #: The traceback of the failure that stored ``last_error`` (its last TASK_TRACEBACK_MAX
    #: bytes), when a worker caught one; read by ``Inspector.task_info`` only (None in lists).
    last_traceback: str | None = None
    timeout: timedelta | None = None
    deadline: datetime | None = None
    #: When it expires: not started by then, it is archived unrun (its producer's
    #: ``expires_in``/``expires_at``, else its handler's ``expires_in``); None: never.
    expires_at: datetime | None = None
    group: str | None = None
    next_process_at: datetime | None = None
    is_orphaned: bool = False
    retention: timedelta = timedelta(0)
    #: When it was enqueued (by the producer's clock); None when the message does not say.
    enqueued_at: datetime | None = None
    #: When its latest run started (it was leased to a worker); None when it never ran.
    started_at: datetime | None = None
    completed_at: datetime | None = None
    result: bytes | None = None
    encoding: Encoding = "b"
    result_encoding: Encoding = "b"
    #: How far its latest run got, as its handler last reported (``Task.set_progress``): a
    #: fraction from 0.0 to 1.0, kept as it was when the run ended (frozen, not cleared);
    #: None when that run reported nothing (a new run hides the previous run's report).
    progress: float | None = None
    #: The message of that report, and its JSON data (None without).
    progress_message: str | None = None
    progress_data: Any = None
    #: When that report was written (the worker's clock; at most 100 ms after the handler
    #: made it).
    progress_at: datetime | None = None
    #: The limits a scheduled task waits for, by name ("queue concurrency limit", "concurrency
    #: limit NAME", "rate limit NAME"): a worker took it, a limit was full, and it was put
    #: back. Empty for any other task.
    limited_by: tuple[str, ...] = ()
    #: Held back by a full concurrency limit (the queue's or its handler's, in
    #: ``limited_by``): it starts as soon as a slot frees; ``next_process_at`` is only the
    #: latest it is looked at again (when a slot holder's lease would end).
    waiting_for_slot: bool = False

    def json(self) -> Any:
        """The payload decoded as JSON."""
        return decode_json(self.payload, self.encoding)

    def result_json(self) -> Any:
        """The handler's result as it returned it (a JSON value), None when there is none;
        a result stored as bytes is parsed as JSON text."""
        if self.result is None:
            return None
        return decode_json(self.result, self.result_encoding)


@functools.lru_cache(maxsize=256)
def _duration(ms: int) -> timedelta:
    """A stored duration as a timedelta (immutable: the few distinct values are shared)."""
    return timedelta(milliseconds=ms)


def task_info(
    msg: TaskMessage, payload: bytes, state: TaskState, *, retried: int = 0,
    last_error: str | None = None, last_failed_at_ms: int = 0, next_process_at_ms: int = 0,
    is_orphaned: bool = False, completed_at_ms: int = 0, result: bytes | None = None,
    result_encoding: str = "b", started_at_ms: int = 0,
    rules: HandlerRules | None = None, last_traceback: str = "",
    progress: Progress | None = None, limited_by: tuple[str, ...] = (),
) -> TaskInfo:
    """Build a TaskInfo from a decoded message and the task hash's mutable fields; its
    ``max_retry``, ``timeout`` and ``retention`` are those that apply (``rules``: the
    registration of its handler, when known)."""
    max_retry, timeout, retention = effective(msg, rules)
    if retention is None:
        retention = RESULT_RETENTION_MS
    return TaskInfo(
        id=msg.id, queue=msg.queue, type=msg.type, payload=payload, state=state,
        max_retry=max_retry, retried=retried, headers=msg.headers,
        last_error=last_error or None,
        last_traceback=last_traceback or None,
        last_failed_at=stored_datetime(last_failed_at_ms),
        timeout=_duration(timeout) if timeout > 0 and timeout != NO_TIMEOUT else None,
        deadline=stored_datetime(msg.deadline_ms),
        expires_at=stored_datetime(expiry_of(msg, rules)),
        group=msg.group or None,
        next_process_at=stored_datetime(next_process_at_ms),
        is_orphaned=is_orphaned,
        retention=_duration(retention),
        enqueued_at=stored_datetime(msg.enqueued_at_ms),
        started_at=stored_datetime(started_at_ms),
        completed_at=stored_datetime(completed_at_ms),
        result=result, encoding=msg.enc,
        result_encoding="j" if result_encoding == "j" else "b",
        **({} if progress is None else _progress_fields(progress)),
        limited_by=limited_by,
        waiting_for_slot=any(not n.startswith("rate limit") for n in limited_by),
    )


def just_stored_info(msg: TaskMessage, payload: bytes, state: TaskState,
                     next_process_at_ms: int) -> TaskInfo:
    """``task_info(msg, payload, state, next_process_at_ms=...)`` of a task just stored (never
    run, no rules known), built for the hot path of every enqueue: its fields set directly
    (a frozen dataclass's ``__init__`` costs twice as much) and the datetime of the last
    time converted reused (a pending task's enqueue time is its due time too)."""
    timeout: timedelta | None
    if (msg.max_retry is None and not msg.timeout_ms and not msg.deadline_ms
            and msg.retention_ms is None):  # (nothing set: the defaults, converted once)
        max_retry, timeout, retention = _DEFAULT_LIMITS
        deadline = None
    else:
        max_retry, timeout_ms, retention_ms = effective(msg, None)
        timeout = (_duration(timeout_ms) if timeout_ms > 0 and timeout_ms != NO_TIMEOUT
                   else None)
        retention = _duration(RESULT_RETENTION_MS if retention_ms is None else retention_ms)
        deadline = _time(msg.deadline_ms) if msg.deadline_ms else None
    return _build_stored(msg.id, msg.queue, msg.type, payload, state, max_retry, msg.headers,
                         timeout, deadline,
                         _time(msg.expires_at_ms) if msg.expires_at_ms else None,
                         msg.group or None,
                         _time(next_process_at_ms) if next_process_at_ms else None,
                         retention, _time(msg.enqueued_at_ms) if msg.enqueued_at_ms else None,
                         msg.enc)


#: What a task whose producer set no max_retry, timeout, deadline or retention is shown with
#: (``effective`` without rules), as TaskInfo holds them.
_DEFAULT_LIMITS = (DEFAULT_MAX_RETRY, _duration(DEFAULT_TIMEOUT_MS),
                   _duration(RESULT_RETENTION_MS))


#: Builds a TaskInfo from the fields ``just_stored_info`` passes, in this order.
_build_stored = slot_builder(TaskInfo, (
    "id", "queue", "type", "payload", "state", "max_retry", "headers", "timeout", "deadline",
    "expires_at", "group", "next_process_at", "retention", "enqueued_at", "encoding"))
_last_time: tuple[int, datetime | None] = (0, None)


def _time(ms: int) -> datetime | None:
    """``stored_datetime(ms)``, the last one made kept for the next call (datetimes are
    immutable; enqueues made in the same millisecond share it)."""
    global _last_time
    last = _last_time
    if last[0] == ms:
        return last[1]
    when = stored_datetime(ms)
    _last_time = (ms, when)
    return when


def _progress_fields(report: Progress) -> dict[str, Any]:
    return {"progress": report.value, "progress_message": report.message,
            "progress_data": report.data, "progress_at": stored_datetime(report.at_ms)}


def run_time(info: TaskInfo, now: datetime) -> tuple[timedelta, bool] | None:
    """How long the task's latest run took (started -> completed or failed), or, with True,
    how long it has been running at ``now``; None when no run is under way or known to have
    ended. Start and end may come from two hosts' clocks: a negative difference reads as 0."""
    start = info.started_at
    if start is None:
        return None
    if info.state is TaskState.ACTIVE:
        return max(now - start, timedelta(0)), True
    if info.state is TaskState.COMPLETED and info.completed_at is not None:
        return max(info.completed_at - start, timedelta(0)), False
    if info.last_failed_at is not None and info.last_failed_at >= start:
        return info.last_failed_at - start, False
    return None


class TaskFailedError(TaskError):
    """``Client.result``: the task did not succeed — archived (its retries ran out,
    ``SkipRetry``, cancelled), revoked by its handler, or deleted. ``info`` is its final
    TaskInfo and ``last_error`` the error it ended with."""

    def __init__(self, info: TaskInfo) -> None:
        self.info = info
        self.last_error = info.last_error
        how = {"archived": "was archived", "deleted": "was deleted"}.get(
            info.state.value, f"ended {info.state.value}")
        detail = f": {info.last_error}" if info.last_error else ""
        super().__init__(f"task {info.id!r} in queue {info.queue!r} {how}{detail}")
