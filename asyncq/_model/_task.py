"""Task: what you enqueue and what a handler gets."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, Unpack

import orjson

from .._clock import MAX_TIME_MS, MIN_TIME_MS, ms_to_datetime
from .._defaults import DEFAULT_MAX_RETRY, DEFAULT_QUEUE
from .._validate import check_text, remember_good, short
from ._flow import Flow
from ._message import TaskMessage
from ._options import NO_OPTIONS, UNSET, ParsedOptions, TaskOptions, parse_options
from ._payload import Encoding, decode_json, encode_payload

ResultWriter = Callable[[bytes, str], Awaitable[int]]

#: Where a running task's progress reports go: ``sink(task, value, message, data)``, ``data``
#: already JSON-encoded (None: no data). Set by the worker; it returns at once (the worker
#: coalesces and writes in the background) and may be called from any thread.
ProgressSink = Callable[["Task", float, "str | None", "bytes | None"], None]

#: Longest progress message, in characters, and largest progress data, in bytes of JSON:
#: a report rides on every progress event and sits on the task's hash, so both are bounded.
PROGRESS_MESSAGE_MAX = 1000
PROGRESS_DATA_MAX = 4096


def check_progress(value: object, message: object,
                   data: object) -> tuple[float, str | None, bytes | None]:
    """A progress report as the worker takes it: ``value`` a fraction 0.0-1.0, ``message`` a
    short text or None, ``data`` any JSON value (encoded here) or None; ValueError/TypeError
    naming what is wrong."""
    if type(value) is float and 0.0 <= value <= 1.0 and message is None and data is None:
        return value, None, None  # (the common call, checked in a few hundred ns)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"progress must be a number from 0.0 to 1.0, got {value!r}")
    fraction = float(value)
    if not 0.0 <= fraction <= 1.0:  # (NaN fails this too)
        hint = (f" (a fraction: {fraction / 100:g} for {fraction:g}%)"
                if math.isfinite(fraction) and 1.0 < fraction <= 100.0 else "")
        raise ValueError(f"progress must be a fraction from 0.0 to 1.0, got {value!r}{hint}")
    if message is not None:
        if not isinstance(message, str):
            raise TypeError(f"progress message must be a str or None, got {message!r}")
        if len(message) > PROGRESS_MESSAGE_MAX:
            raise ValueError(f"progress message is {len(message)} characters long; at most "
                             f"{PROGRESS_MESSAGE_MAX} are kept")
        if not message.isascii():  # (stored as UTF-8: a lone surrogate cannot be)
            try:
                message.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError(f"progress message {short(repr(message))} is not valid text: "
                                 f"it holds a lone surrogate (left by undecodable bytes); "
                                 f"make it encodable, e.g. text.encode('utf-8', 'replace')"
                                 f".decode()") from None
    if data is None:
        return fraction, message, None
    try:
        raw = orjson.dumps(data)
    except TypeError as exc:
        if "surrogates not allowed" in str(exc):
            raise ValueError("progress data is not valid text: a str in it holds a lone "
                             "surrogate (left by undecodable bytes); make it encodable, e.g. "
                             "text.encode('utf-8', 'replace').decode()") from None
        raise TypeError(f"progress data must be JSON-serializable: {exc}") from exc
    if len(raw) > PROGRESS_DATA_MAX:
        raise ValueError(f"progress data is {len(raw)} bytes of JSON; at most "
                         f"{PROGRESS_DATA_MAX} ride along (store more with write_result)")
    return fraction, message, raw


def validate_type(task_type: object) -> str:
    """``task_type`` if it is a usable task type (else TypeError/ValueError); the types found
    good are remembered (a few hundred at most), as an app enqueues the same few again and
    again."""
    if type(task_type) is str and task_type in _GOOD_TYPES:
        return task_type
    return remember_good(_GOOD_TYPES, check_text(task_type, "task type", name_like=True))


_GOOD_TYPES: set[str] = set()


class Task(Flow[Any, Any]):
    """A unit of work: a type (which handler runs it), a payload and default enqueue options.

    ``Task("email:send", {"to": "a@b.c"}, max_retry=3)`` builds one to enqueue; handlers receive a
    Task too, with ``id``, ``queue``, ``retried`` and friends filled in from Redis.
    """

    __slots__ = ("_deadline_ms", "_enc", "_progress", "_state", "_writer", "headers", "id",
                 "max_retry", "options", "payload", "queue", "retried", "type")

    def __init__(self, type: str, payload: object = None, **options: Unpack[TaskOptions]) -> None:
        self.type = validate_type(type)
        self.payload, self._enc = encode_payload(payload)
        self.options: ParsedOptions = parse_options(options)
        opts = self.options
        self.id: str | None = None if opts.task_id is UNSET else opts.task_id
        self.queue: str = DEFAULT_QUEUE if opts.queue is UNSET else opts.queue
        self.max_retry: int = DEFAULT_MAX_RETRY if opts.max_retry is UNSET else opts.max_retry
        self.headers: dict[str, str] = {} if opts.headers is UNSET else dict(opts.headers)
        self.retried = 0
        self._deadline_ms = 0
        self._writer: ResultWriter | None = None
        self._progress: ProgressSink | None = None
        self._state: Any = None

    @property
    def deadline(self) -> datetime | None:
        """When the running handler is stopped (its timeout or the task's deadline, whichever
        comes first); None outside a worker and for a task without either."""
        return ms_to_datetime(self._deadline_ms) if self._deadline_ms else None

    @property
    def state(self) -> Any:
        """What the worker's ``lifespan`` yielded (a DB pool, an HTTP client...), shared by
        every task the worker runs; None without a lifespan and outside a worker."""
        return self._state

    @property
    def encoding(self) -> Encoding:
        """How the payload is stored: "b" raw bytes, "j" JSON, "n" no payload."""
        return self._enc

    def json(self) -> Any:
        """The payload decoded as JSON (None when the task has no payload)."""
        return decode_json(self.payload, self._enc)

    async def write_result(self, data: object) -> int:
        """Store ``data`` (bytes as-is, else JSON) as the task's result; returns its size."""
        if self._writer is None:
            raise RuntimeError("write_result is only available inside a running handler")
        raw, encoding = encode_payload(data)
        return await self._writer(raw, encoding)

    async def set_progress(self, value: float, message: str | None = None, *,
                           data: object = None) -> None:
        """Report how far the running handler is: ``value`` a fraction from 0.0 to 1.0 (not a
        percentage: 0.5 is half way), ``message`` a short text ("page 3 of 8"), ``data`` a
        small JSON value (at most 4 KiB encoded). Returns at once: the worker writes the
        latest report at most every 100 ms (the last one before the outcome), and publishes
        it as a task event. Raises ValueError/TypeError for a bad report, RuntimeError
        outside a running handler, LeaseExpiredError once the task is no longer leased to
        this worker."""
        self.set_progress_sync(value, message, data=data)

    def set_progress_sync(self, value: float, message: str | None = None, *,
                          data: object = None) -> None:
        """``set_progress`` for a sync handler (any thread); same rules, never blocks."""
        sink = self._progress
        if sink is None:
            raise RuntimeError("set_progress is only available inside a running handler")
        fraction, text, raw = check_progress(value, message, data)
        sink(self, fraction, text, raw)

    def __repr__(self) -> str:
        return f"Task(type={self.type!r}, id={self.id!r}, queue={self.queue!r})"


def task_for_handler(msg: TaskMessage, payload: bytes, retried: int, deadline_ms: int,
                     writer: ResultWriter | None, state: Any = None,
                     progress: ProgressSink | None = None) -> Task:
    """The Task a handler (or a hook) receives for a stored message; no validation: the
    message was validated when it was enqueued."""
    task = Task.__new__(Task)
    task.type = msg.type
    task.payload = payload
    task._enc = msg.enc
    task.options = NO_OPTIONS  # (frozen: shared, one object fewer per run)
    task.id = msg.id
    task.queue = msg.queue
    task.max_retry = DEFAULT_MAX_RETRY if msg.max_retry is None else msg.max_retry
    task.headers = msg.headers
    task.retried = retried
    if deadline_ms and not MIN_TIME_MS <= deadline_ms <= MAX_TIME_MS:
        ms_to_datetime(deadline_ms)  # raises, as a time no datetime can hold must
    task._deadline_ms = deadline_ms  # (the datetime is made only if the handler asks)
    task._writer = writer
    task._progress = progress
    task._state = state
    return task
