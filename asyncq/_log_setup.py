"""Logging set-up for a process (the CLI, or a script calling ``asyncq.configure_logging``),
with console logs that a task cannot forge: what handlers and tasks put in a log line (error
messages, types, ids) has its control characters escaped, so a message holding a newline
and a fake timestamp stays inside its own line."""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import traceback
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any, TextIO

import structlog

from . import _tracing
from ._log import reconfigured
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


class _Lines:
    """Where every log line of the process goes (structlog's and stdlib ``logging``'s alike):
    one write per line under one lock, so lines written from several threads never mix, to
    the ``sys.stderr`` of the moment (a test capturing stderr, a replaced stream)."""

    _lock = threading.Lock()

    def __init__(self, *_names: Any) -> None:  # (structlog passes the logger's name)
        pass

    def msg(self, message: str) -> None:
        with self._lock:
            out = sys.stderr
            out.write(message + "\n")
            out.flush()

    # structlog calls the method named after the level.
    debug = info = warning = warn = error = exception = critical = fatal = log = failure = msg


class _StdlibBridge(logging.Handler):
    """The root logger's handler: a stdlib ``logging`` line (a handler's own, a library's)
    goes through the same processors as structlog's — task context, trace ids, level,
    timestamp, escaping — and out as the same kind of line."""

    def __init__(self, formatter: logging.Formatter) -> None:
        super().__init__()
        self.setFormatter(formatter)
        self._out = _Lines()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._out.msg(self.format(record))
        except RecursionError:  # (as logging.StreamHandler does)
            raise
        except Exception:
            self.handleError(record)


def _logger_name(_logger: Any, _name: str,
                 event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """A stdlib line names its logger (``logger``), as asyncq's name their ``component``."""
    record = event.get("_record")
    if record is not None:
        event["logger"] = record.name
    return event


def configure_logging(level: str = "info", fmt: str | None = None) -> None:
    """Set up logging for this process as ``asyncq worker`` does: ``fmt`` "console" or
    "json" (default: console on a terminal, JSON lines otherwise), at ``level``, for
    structlog and the stdlib ``logging`` root logger alike (its previous handlers are
    replaced; Python warnings are logged). asyncq never calls this on its own; a script
    running a Worker may, to log like the CLI."""
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
    # A handler's task context (task_id, queue, type, retried: bound by the worker around
    # each run) and its trace ids, then level and time; every line, whoever logged it.
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        add_trace_ids,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info if fmt == "json"
        else structlog.processors.StackInfoRenderer(),
        escape_values if fmt == "console" else truncate_values,
    ]
    numeric = getattr(logging, level.upper())
    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=_Lines,
        cache_logger_on_first_use=True,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[_logger_name, *shared],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
    )
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(_StdlibBridge(formatter))
    root.setLevel(numeric)
    logging.captureWarnings(True)
    reconfigured()


@contextlib.contextmanager
def logging_restored() -> Iterator[None]:
    """Around an in-process CLI run: structlog's configuration and the root logger's handlers
    and level are put back as they were afterwards (what ``configure_logging`` replaced)."""
    previous = structlog.get_config()
    root = logging.getLogger()
    handlers, root_level = list(root.handlers), root.level
    try:
        yield
    finally:
        structlog.configure(**previous)
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(root_level)
        logging.captureWarnings(False)
        reconfigured()
