"""Logging set-up for a process (the CLI, or a script calling ``asyncq.configure_logging``),
with console logs that a task cannot forge: what handlers and tasks put in a log line (error
messages, types, ids) has its control characters escaped, so a message holding a newline
and a fake timestamp stays inside its own line."""

from __future__ import annotations

import logging
import sys
import traceback
from collections.abc import Mapping, MutableMapping
from typing import Any, TextIO

import structlog

from . import _tracing
from ._text import printable

#: Longest value written to a log line; longer ones are cut (a 10 KB queue name is not logged
#: whole).
MAX_VALUE = 2_000


def _safe(value: Any) -> Any:
    if isinstance(value, str):
        text = printable(value)
        return text if len(text) <= MAX_VALUE else text[:MAX_VALUE] + "…"
    return value


def escape_values(_logger: Any, _name: str,
                  event: MutableMapping[str, Any]) -> Mapping[str, Any]:
    """structlog processor: escape and bound every str value (the event text included); the
    traceback (``exc_info``) is left to ``escaped_exception``."""
    return {key: value if key == "exc_info" else _safe(value) for key, value in event.items()}


def escaped_exception(sio: TextIO, exc_info: Any) -> None:
    """ConsoleRenderer exception formatter: the usual traceback, with each exception's own
    message (``Type: message``) escaped onto one line."""
    text = "".join(traceback.format_exception(*exc_info))
    seen: set[int] = set()
    exc: BaseException | None = exc_info[1]
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        only = "".join(traceback.format_exception_only(type(exc), exc)).rstrip("\n")
        if only:
            text = text.replace(only, printable(only))
        exc = exc.__cause__ or exc.__context__
    sio.write("\n" + text)


def truncate_values(_logger: Any, _name: str,
                    event: MutableMapping[str, Any]) -> Mapping[str, Any]:
    """structlog processor for JSON logs: bound long str values (JSON escapes the rest)."""
    return {key: value[:MAX_VALUE] + "…" if isinstance(value, str) and len(value) > MAX_VALUE
            else value for key, value in event.items()}


LEVELS = ("debug", "info", "warning", "error")


def add_trace_ids(logger: Any, method: str,
                  event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """With tracing on, a line logged inside a traced run (a handler's own logging, the
    worker's lines about it) carries the run's trace_id and span_id."""
    tracer = _tracing.active
    if tracer is not None:
        event.update(tracer.log_context())
    return event


def configure_logging(level: str = "info", fmt: str | None = None) -> None:
    """Set up structlog for this process as ``asyncq worker`` does: ``fmt`` "console" or
    "json" (default: console on a terminal, JSON lines otherwise), at ``level``. asyncq never
    calls this on its own; a script running a Worker may, to log like the CLI."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}, got {level!r}")
    if fmt not in (None, "console", "json"):
        raise ValueError(f"fmt must be 'console', 'json' or None, got {fmt!r}")
    if fmt is None:
        fmt = "console" if sys.stderr.isatty() else "json"
    # Console lines escape what tasks put in them (a message with a newline cannot forge a
    # line); JSON lines are one line per event by construction.
    renderer: Any = (structlog.dev.ConsoleRenderer(exception_formatter=escaped_exception,
                                                   colors=sys.stderr.isatty())
                     if fmt == "console" else structlog.processors.JSONRenderer())
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            add_trace_ids,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info if fmt == "json"
            else structlog.processors.StackInfoRenderer(),
            escape_values if fmt == "console" else truncate_values,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            getattr(logging, level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
