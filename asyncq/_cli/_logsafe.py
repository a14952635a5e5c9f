"""Console logs that a task cannot forge: what handlers and tasks put in a log line (error
messages, types, ids) has its control characters escaped, so a message holding a newline
and a fake timestamp stays inside its own line."""

from __future__ import annotations

import traceback
from collections.abc import Mapping, MutableMapping
from typing import Any, TextIO

from .._text import printable

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
