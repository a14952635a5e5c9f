"""Enqueue options: spelt for type checkers (the ``EnqueueOptions`` TypedDicts), validated once
(``parse_options``), merged with "last wins" semantics (task defaults, then call)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any, TypedDict

from .._clock import MAX_TIME_MS, datetime_to_ms, ms_to_datetime
from .._defaults import DEFAULT_QUEUE
from .._validate import check_text, to_ms, validate_queue_name
from ._build import slot_builder
from ._info import TaskInfo
from ._message import NO_TIMEOUT

MIN_UNIQUE_MS = 1000
MAX_RETRY_LIMIT = 2**63 - 1


class _OptionsButTimeout(TypedDict, total=False):
    # Every option but ``timeout``, which ``Client.apply`` takes for its wait instead.
    queue: str | None
    max_retry: int | None
    deadline: datetime | None
    process_at: datetime | None
    process_in: float | timedelta | None
    expires_in: float | timedelta | None
    expires_at: datetime | None
    unique: float | timedelta | None
    unique_key: str | None
    task_id: str | None
    retention: float | timedelta | None
    group: str | None
    headers: Mapping[str, str] | None


class TaskOptions(_OptionsButTimeout, total=False):
    """The options a Task carries (``Task(type, payload, **options)``, a typed task's
    ``options()``): every enqueue option but ``after``."""

    timeout: float | timedelta | None


class _After(TypedDict, total=False):
    after: Sequence[TaskInfo | tuple[str, str] | str]


class EnqueueOptions(TaskOptions, _After, total=False):
    """The keyword options of ``Client.enqueue``, so a type checker catches a misspelt name or
    a wrong type (``max_rety=3``, ``queue=3``); a call checked only at run time raises
    TypeError/ValueError for the same mistakes. None for an option (but ``after``) means
    "not given".

    ``queue`` (default "default"); ``max_retry`` (default: the handler's, else 25);
    ``timeout`` (seconds or timedelta; default: the handler's, else 30 min unless a
    ``deadline`` is given; 0 = no limit) and ``deadline`` (aware datetime); ``process_at``
    (aware datetime) or ``process_in`` (delay); ``expires_in`` (seconds or timedelta from
    now, > 0) or ``expires_at`` (aware datetime): a task not started by then never runs, it
    is archived as expired (default: the handler's ``expires_in``, else never); ``unique``
    (TTL of the uniqueness lock, at least 1 s) with an optional ``unique_key`` (default: type
    and payload); ``task_id`` (default a new UUID); ``retention`` (how long it is kept once
    completed; default: the handler's, else 10 min when it returned a value, a
    1-min completion mark when it returned nothing; 0 = nothing kept); ``group`` (aggregated
    with the other tasks of the group); ``headers`` (str -> str, given to middleware);
    ``after`` (TaskInfo, ``(queue, id)`` or an id in the same queue: tasks that must succeed
    first).
    """


class ApplyOptions(_OptionsButTimeout, _After, total=False):
    """The options of ``Client.apply``: those of ``enqueue`` but ``timeout``, which bounds
    the wait for the result there."""


class _Unset:
    __slots__ = ()

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


def _aware(value: object, name: str) -> datetime:
    if not isinstance(value, datetime):
        raise TypeError(f"{name} must be a datetime, got {value!r}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware (e.g. datetime.now(UTC)), got {value!r}")
    return value


def _nonblank(value: object, name: str) -> str:
    # A unique key may hold anything printable or not (it is hashed into a key name); ids
    # and groups are names people read in listings.
    return check_text(value, name, name_like=name != "unique_key")


def _expires_in_ms(value: object) -> int:
    if isinstance(value, int | float | timedelta) and not isinstance(value, bool):
        seconds = value.total_seconds() if isinstance(value, timedelta) else value
        if seconds <= 0:
            raise ValueError(f"expires_in must be more than 0 seconds (how long the task may "
                             f"wait to start), got {value!r}; leave it out for no expiry")
    ms = to_ms(value, "expires_in")
    return max(ms, 1)


@dataclass(frozen=True, slots=True)
class ParsedOptions:
    """Options a caller set explicitly; UNSET fields fall back to earlier options or defaults."""

    queue: str = UNSET
    max_retry: int = UNSET
    timeout_ms: int = UNSET  # 0 = no timeout
    deadline_ms: int = UNSET  # 0 = no deadline
    process_at_ms: int = UNSET
    process_in_ms: int = UNSET
    expires_at_ms: int = UNSET
    expires_in_ms: int = UNSET
    unique_ms: int = UNSET
    unique_key: str = UNSET
    task_id: str = UNSET
    retention_ms: int = UNSET
    group: str = UNSET
    headers: Mapping[str, str] = UNSET

    def merged(self, later: ParsedOptions) -> ParsedOptions:
        """Options of ``self`` overridden by every option set in ``later`` (headers merge)."""
        if self is NO_OPTIONS:  # (a Task without options of its own: the call's, as given)
            return later
        if later is NO_OPTIONS:
            return self
        values = [getattr(self, name) for name in _PARSED_FIELDS]
        for i, name in enumerate(_PARSED_FIELDS):
            value = getattr(later, name)
            if value is UNSET:
                continue
            if i == _HEADERS and self.headers is not UNSET:
                value = {**self.headers, **value}
            values[i] = value
        # A time set later replaces the other way of giving it (at vs in).
        if later.process_at_ms is not UNSET:
            values[_PROCESS_IN] = UNSET
        if later.process_in_ms is not UNSET:
            values[_PROCESS_AT] = UNSET
        if later.expires_at_ms is not UNSET:
            values[_EXPIRES_IN] = UNSET
        if later.expires_in_ms is not UNSET:
            values[_EXPIRES_AT] = UNSET
        return _new_parsed(*values)


_PARSED_FIELDS = tuple(f.name for f in fields(ParsedOptions))
#: ``ParsedOptions(...)`` without the frozen ``__init__`` (every field optional: UNSET).
_new_parsed = slot_builder(ParsedOptions, _PARSED_FIELDS, dict.fromkeys(_PARSED_FIELDS, UNSET))
_HEADERS, _PROCESS_AT, _PROCESS_IN, _EXPIRES_AT, _EXPIRES_IN = (
    _PARSED_FIELDS.index(name) for name in ("headers", "process_at_ms", "process_in_ms",
                                            "expires_at_ms", "expires_in_ms"))
NO_OPTIONS = ParsedOptions()  # (frozen: one shared instance for "no options given")

OPTION_NAMES = TaskOptions.__optional_keys__  # the names parse_options accepts


def parse_options(options: Mapping[str, Any]) -> ParsedOptions:
    """Validate keyword options; a misspelt name or a bad value raises TypeError/ValueError."""
    if not options:
        return NO_OPTIONS
    if not OPTION_NAMES.issuperset(options):
        unknown = set(options) - OPTION_NAMES
        raise TypeError(
            f"unknown enqueue option(s): {', '.join(sorted(unknown))}; "
            f"valid options are {', '.join(sorted(OPTION_NAMES))}"
        )
    kw: dict[str, Any] = {}
    if "process_at" in options and "process_in" in options:
        raise ValueError("give either process_at or process_in, not both")
    if options.get("expires_at") is not None and options.get("expires_in") is not None:
        raise ValueError("give either expires_at (a time) or expires_in (seconds from now), "
                         "not both")
    for name, value in options.items():
        if value is None:
            continue  # None means "not given", so callers can forward optional values
        if name == "queue":
            kw["queue"] = validate_queue_name(value)
        elif name == "max_retry":
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"max_retry must be an int, got {value!r}")
            if value > MAX_RETRY_LIMIT:
                raise ValueError(f"max_retry must be at most {MAX_RETRY_LIMIT}, got {value!r}")
            kw["max_retry"] = max(0, value)
        elif name == "timeout":
            kw["timeout_ms"] = to_ms(value, "timeout")
        elif name == "deadline":
            kw["deadline_ms"] = datetime_to_ms(_aware(value, "deadline"))
        elif name == "process_at":
            kw["process_at_ms"] = datetime_to_ms(_aware(value, "process_at"))
        elif name == "process_in":
            kw["process_in_ms"] = to_ms(value, "process_in")
        elif name == "expires_at":
            kw["expires_at_ms"] = datetime_to_ms(_aware(value, "expires_at"))
        elif name == "expires_in":
            kw["expires_in_ms"] = _expires_in_ms(value)
        elif name == "unique":
            ms = to_ms(value, "unique")
            if ms < MIN_UNIQUE_MS:
                raise ValueError(f"unique TTL must be at least 1 second, got {value!r}")
            kw["unique_ms"] = ms
        elif name == "unique_key":
            kw["unique_key"] = _nonblank(value, "unique_key")
        elif name == "task_id":
            kw["task_id"] = _nonblank(value, "task_id")
        elif name == "retention":
            kw["retention_ms"] = to_ms(value, "retention")
        elif name == "group":
            kw["group"] = _nonblank(value, "group")
        elif name == "headers":
            if not isinstance(value, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items()
            ):
                raise TypeError(f"headers must be a mapping of str to str, got {value!r}")
            for k, v in value.items():
                check_text(k, "header name", blank=True)
                check_text(v, f"header {k!r}", blank=True)
            kw["headers"] = dict(value)
    return _new_parsed(**kw)


@dataclass(frozen=True, slots=True)
class ResolvedOptions:
    """Options as the client writes them: the producer's, with the routing defaults applied
    (queue, id...). ``max_retry``, ``timeout_ms`` and ``retention_ms`` stay unset (None, 0)
    when not given: the worker applies the handler's registration or the default."""

    queue: str
    max_retry: int | None
    timeout_ms: int  # 0 = not given; NO_TIMEOUT = no limit
    deadline_ms: int
    process_at_ms: int  # 0 = now
    unique_ms: int  # 0 = not unique
    unique_key: str | None
    task_id: str | None
    retention_ms: int | None
    group: str
    headers: dict[str, str]
    expires_at_ms: int = 0  # 0 = never (unless the handler's registration says otherwise)


#: ``ResolvedOptions(...)`` (every field, in order) without the frozen ``__init__``.
_new_resolved = slot_builder(ResolvedOptions, [f.name for f in fields(ResolvedOptions)])


def resolve(opts: ParsedOptions, now_ms: int) -> ResolvedOptions:
    """Apply the routing defaults (the default queue, a new id, now) and check the times."""
    if opts is NO_OPTIONS:
        return _new_resolved(DEFAULT_QUEUE, None, 0, 0, 0, 0, None, None, None, "", {}, 0)
    timeout = opts.timeout_ms
    if timeout is UNSET:
        timeout = 0
    elif timeout == 0:
        timeout = NO_TIMEOUT  # an explicit timeout=0: no limit at all
    deadline = 0 if opts.deadline_ms is UNSET else opts.deadline_ms
    if opts.process_at_ms is not UNSET:
        process_at = opts.process_at_ms
    elif opts.process_in_ms is not UNSET:
        process_at = now_ms + opts.process_in_ms
    else:
        process_at = 0
    if process_at > MAX_TIME_MS:
        raise _after_9999("process_at/process_in")
    if now_ms + max(timeout, 0) > MAX_TIME_MS:
        raise _after_9999("now + timeout")
    if deadline > MAX_TIME_MS:
        raise _after_9999("deadline")
    expires = (0 if opts.expires_at_ms is UNSET and opts.expires_in_ms is UNSET
               else _expires_at(opts, now_ms, process_at))
    unique_ms = 0 if opts.unique_ms is UNSET else opts.unique_ms
    unique_key = None if opts.unique_key is UNSET else opts.unique_key
    if unique_key is not None and not unique_ms:
        raise ValueError("unique_key needs a unique TTL (unique=seconds)")
    return _new_resolved(
        DEFAULT_QUEUE if opts.queue is UNSET else opts.queue,
        None if opts.max_retry is UNSET else opts.max_retry,
        timeout, deadline, process_at, unique_ms, unique_key,
        None if opts.task_id is UNSET else opts.task_id,
        None if opts.retention_ms is UNSET else opts.retention_ms,
        "" if opts.group is UNSET else opts.group,
        {} if opts.headers is UNSET else dict(opts.headers),
        expires,
    )


def _after_9999(name: str) -> ValueError:
    return ValueError(f"{name} lies after the year 9999, the latest time a datetime can "
                      f"hold: use a shorter delay or timeout")


def _expires_at(opts: ParsedOptions, now_ms: int, process_at: int) -> int:
    """The task's expiry (Unix ms, 0 none) from ``expires_at``/``expires_in`` (counted from
    ``now_ms``, the enqueue time); one that is already past, or that comes before the task is
    due, would only archive it: a ValueError saying what to do."""
    if opts.expires_at_ms is not UNSET:
        expires = opts.expires_at_ms
        if expires <= now_ms:
            raise ValueError(f"expires_at ({ms_to_datetime(expires).isoformat()}) is not in "
                             f"the future: the task would never run; give a later time, or "
                             f"expires_in=seconds from now")
    elif opts.expires_in_ms is not UNSET:
        expires = now_ms + opts.expires_in_ms
    else:
        return 0
    if expires > MAX_TIME_MS:
        raise ValueError("the expiry lies after the year 9999, the latest time a datetime can "
                         "hold: use a shorter expires_in, or none")
    if process_at > now_ms and process_at >= expires:
        raise ValueError(f"the task would expire ({ms_to_datetime(expires).isoformat()}) "
                         f"before it is due ({ms_to_datetime(process_at).isoformat()}): give "
                         f"an expiry after process_at/process_in (expires_in counts from now)")
    return expires
