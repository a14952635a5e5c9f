"""A registered periodic entry, its deterministic id, and the JSON form of its options.

The entry id is a hash of everything that defines the entry (spec, time zone, task type, payload
and options, the latter in a canonical order-insensitive form), so every scheduler process that
registers the same entry gets the same id, and the same per-tick claims in Redis.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime, timedelta, tzinfo
from typing import Any

import orjson

from .._clock import ms_to_datetime
from .._model._options import UNSET, ParsedOptions, parse_options, resolve
from .._model._task import Task
from ._spec import Schedule, parse_spec, timezone_name

# ParsedOptions field -> (option name, kind) for the JSON form of options: every field
# (tests/test_defaults.py checks it), so every enqueue option can be given to a scheduler.
_JSON_FORM: dict[str, tuple[str, str]] = {
    "queue": ("queue", "str"),
    "max_retry": ("max_retry", "int"),
    "timeout_ms": ("timeout", "seconds"),
    "deadline_ms": ("deadline", "time"),
    "process_at_ms": ("process_at", "time"),
    "process_in_ms": ("process_in", "seconds"),
    "expires_at_ms": ("expires_at", "time"),
    "expires_in_ms": ("expires_in", "seconds"),
    "unique_ms": ("unique", "seconds"),
    "unique_key": ("unique_key", "str"),
    "task_id": ("task_id", "str"),
    "retention_ms": ("retention", "seconds"),
    "group": ("group", "str"),
    "headers": ("headers", "headers"),
}
_FORBIDDEN_ID_CHARS = frozenset("{}")


def options_to_json(opts: ParsedOptions) -> dict[str, Any]:
    """The options that were set, as JSON values: durations in seconds, times in ISO 8601."""
    out: dict[str, Any] = {}
    for f in fields(opts):
        value = getattr(opts, f.name)
        if value is UNSET:
            continue
        name, kind = _JSON_FORM[f.name]
        if kind == "seconds":
            out[name] = value / 1000
        elif kind == "time":
            out[name] = ms_to_datetime(value).isoformat()
        elif kind == "headers":
            out[name] = dict(sorted(value.items()))
        else:
            out[name] = value
    return out


def options_from_json(doc: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword options for ``Client.enqueue`` from their JSON form (inverse of options_to_json).

    Durations come back as ``timedelta`` and times as aware ``datetime``; unknown names are kept
    as they are, so ``Client.enqueue`` reports them.
    """
    kinds = dict(_JSON_FORM.values())
    out: dict[str, Any] = {}
    for name, value in doc.items():
        kind = kinds.get(name)
        if kind == "seconds" and isinstance(value, int | float):
            out[name] = timedelta(seconds=value)
        elif kind == "time" and isinstance(value, str):
            out[name] = datetime.fromisoformat(value)
        elif kind == "headers" and isinstance(value, Mapping):
            out[name] = dict(value)
        else:
            out[name] = value
    return out


def validate_entry_id(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"entry_id must be a str, got {value!r}")
    if not value or any(c.isspace() or c in _FORBIDDEN_ID_CHARS for c in value):
        raise ValueError(f"entry_id {value!r} must be non-empty, without whitespace, '{{' or '}}'")
    return value


def compute_entry_id(spec: str, tz: tzinfo, task: Task, options_json: Mapping[str, Any]) -> str:
    """Deterministic id: SHA-256 of spec, zone, type, payload and options (keys sorted).

    A JSON payload is compared with its keys sorted too, so ``{"a": 1, "b": 2}`` and
    ``{"b": 2, "a": 1}`` give the same id.
    """
    payload = task.payload
    if task.encoding == "j":
        payload = orjson.dumps(orjson.loads(payload), option=orjson.OPT_SORT_KEYS)
    doc = {
        "spec": spec,
        "tz": timezone_name(tz),
        "type": task.type,
        "enc": task.encoding,
        "payload": base64.b64encode(payload).decode(),
        "options": options_json,
    }
    return hashlib.sha256(orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)).hexdigest()[:24]


@dataclass(slots=True, eq=False)
class Entry:
    """One registered periodic task, with the scheduler's bookkeeping of its ticks."""

    id: str
    spec: str
    tz: tzinfo
    schedule: Schedule
    task: Task
    options: dict[str, Any]  # enqueue keyword options as given (pre_enqueue receives a copy)
    options_json: dict[str, Any]  # task and call options merged, in JSON form
    queue: str
    next_ms: int = 0
    prev_ms: int | None = None


def build_entry(spec: object, type_or_task: Task | str, payload: object,
                options: Mapping[str, Any], tz: tzinfo, entry_id: str | None,
                now_ms: int) -> Entry:
    """Validate everything about a registration, so that a bad one fails at ``register``."""
    norm, schedule = parse_spec(spec, tz)
    if isinstance(type_or_task, Task):
        if payload is not None:
            raise TypeError("pass the payload in the Task, not to register(), when given a Task")
        task = type_or_task
    elif isinstance(type_or_task, str):
        task = Task(type_or_task, payload)
    else:
        raise TypeError(f"expected a Task or a task type string, got {type_or_task!r}")
    merged = task.options.merged(parse_options(options)) if options else task.options
    resolved = resolve(merged, now_ms)  # raises for inconsistent options (unique_key, ...)
    options_json = options_to_json(merged)
    eid = (validate_entry_id(entry_id) if entry_id is not None
           else compute_entry_id(norm, tz, task, options_json))
    return Entry(id=eid, spec=norm, tz=tz, schedule=schedule, task=task, options=dict(options),
                 options_json=options_json, queue=resolved.queue,
                 next_ms=schedule.next_after(now_ms))
