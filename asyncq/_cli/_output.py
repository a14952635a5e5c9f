"""What the operations commands share: running against an Inspector, tables, JSON, formats.

The Inspector and the task model are imported by the functions that use them, so a parser
that takes these helpers stays cheap to build."""

from __future__ import annotations

import argparse
import base64
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from .._text import printable, scaled_bytes
from ._common import add_redis_args, check_redis

if TYPE_CHECKING:
    from .._broker import QueueInfo, ServerInfo
    from .._inspector._inspector import Inspector
    from .._model._info import TaskInfo

PAYLOAD_WIDTH = 40


def add_common_args(parser: argparse.ArgumentParser, *, json: bool = True) -> None:
    """``--redis-url`` and, for commands that read, ``--json``."""
    add_redis_args(parser)
    if json:
        parser.add_argument("--json", action="store_true",
                            help="print machine-readable JSON instead of a table")


def run_inspector(args: argparse.Namespace,
                  body: Callable[[Inspector], Awaitable[int]]) -> int:
    """Check that Redis answers, then run ``body`` with an Inspector; returns the exit code."""
    import asyncio

    from .._inspector._inspector import Inspector

    async def main() -> int:
        await check_redis(args.redis_url)
        async with Inspector(args.redis_url) as inspector:
            return await body(inspector)

    return asyncio.run(main())


# -- JSON


def _default(value: Any) -> Any:
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def print_json(value: Any) -> None:
    """Print ``value`` as an indented JSON document (``--json``)."""
    import orjson  # (here and below: on first use, the parser needs none)

    sys.stdout.write(orjson.dumps(
        value, default=_default,
        option=orjson.OPT_INDENT_2 | orjson.OPT_UTC_Z | orjson.OPT_NAIVE_UTC,
    ).decode() + "\n")


def bytes_doc(data: bytes | None, encoding: str = "b") -> tuple[Any, str]:
    """Bytes as a JSON-friendly value and how they were rendered: json, text, base64, none."""
    import orjson

    if data is None or encoding == "n":
        return None, "none"
    if encoding == "j":
        try:
            return orjson.loads(data), "json"
        except orjson.JSONDecodeError:
            pass
    try:
        return data.decode("utf-8"), "text"
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), "base64"


#: Bytes fields of the Python objects and the field saying how they are encoded.
_ENCODED = {"payload": "encoding", "result": "result_encoding"}


def encoded_doc(data: bytes | None, encoding: str) -> tuple[Any, str]:
    """Stored bytes for a JSON document and the encoding they are given in, as the Python
    objects name it: ``j`` the JSON value itself, ``b`` base64 of the bytes, null for none."""
    import orjson

    if data is None or encoding == "n":
        return None, encoding
    if encoding == "j":
        try:
            return orjson.loads(data), "j"
        except orjson.JSONDecodeError:
            pass  # not the JSON it claims to be: shown exactly, as bytes
    return base64.b64encode(data).decode("ascii"), "b"


def object_doc(obj: Any) -> dict[str, Any]:
    """A dataclass (TaskInfo, QueueInfo, ...) as the ``--json`` of every command gives it: its
    fields by their Python names; payload/result by their encoding field (``encoded_doc``);
    durations in seconds, times RFC 3339 UTC, enums by value (``print_json``)."""
    import dataclasses

    doc = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    for name, encoding in _ENCODED.items():
        if name in doc and encoding in doc:
            doc[name], doc[encoding] = encoded_doc(doc[name], doc[encoding])
    return doc


def task_doc(t: TaskInfo) -> dict[str, Any]:
    return object_doc(t)


def queue_doc(info: QueueInfo) -> dict[str, Any]:
    return object_doc(info)


def server_doc(s: ServerInfo) -> dict[str, Any]:
    return object_doc(s)


def compact_json(value: Any) -> str:
    """``value`` as one line of JSON, for a table cell or a field."""
    import orjson

    return orjson.dumps(value).decode()


# -- human output

def say(text: object = "") -> None:
    """Print one line of human output, escaped with ``printable``."""
    print(printable(text))


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """An aligned table: a header row, a rule, then the rows (cells are escaped and
    str()-ed)."""
    cells = [[printable(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()

    print(line(headers))
    print(line(["-" * w for w in widths]))
    for row in cells:
        print(line(row))


def print_fields(pairs: Sequence[tuple[str, object]]) -> None:
    """``name: value`` lines with the values aligned."""
    width = max((len(k) for k, _ in pairs), default=0) + 1
    for key, value in pairs:
        print(f"{(key + ':').ljust(width)} {printable(value)}")


def fmt_time(when: datetime | None) -> str:
    if when is None:
        return "-"
    return when.strftime("%Y-%m-%d %H:%M:%S") + "Z"


def fmt_duration(d: timedelta | float | None) -> str:
    """``1h2m3s``-style; sub-second values as ``0.25s``."""
    if d is None:
        return "-"
    seconds = d.total_seconds() if isinstance(d, timedelta) else float(d)
    if seconds < 60:
        return f"{seconds:.3g}s" if seconds < 10 else f"{seconds:.0f}s"
    total = int(seconds)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")]
    return "".join(f"{v}{u}" for v, u in parts if v) or "0s"


def fmt_run_time(t: TaskInfo, now: datetime | None = None) -> str:
    """The latest run's length and how it ended: ``2.5s (completed)``, ``0.3s (failed)``,
    ``running for 12s``; ``-`` when no run is known."""
    from .._model._info import TaskState, run_time

    took = run_time(t, now or datetime.now(UTC))
    if took is None:
        return "-"
    length, running = took
    if running:
        return f"running for {fmt_duration(length)}"
    ended = "completed" if t.state is TaskState.COMPLETED else "failed"
    return f"{fmt_duration(length)} ({ended})"


def fmt_run_length(t: TaskInfo, now: datetime | None = None) -> str:
    """Only the length of the latest run (a list's state says how it ended), ``-`` when no run
    is known."""
    from .._model._info import run_time

    took = run_time(t, now or datetime.now(UTC))
    return "-" if took is None else fmt_duration(took[0])


def fmt_limit(t: TaskInfo) -> str:
    """The time limits a run of the task has: its timeout and its deadline, ``-`` when none."""
    parts = []
    if t.timeout is not None:
        parts.append(fmt_duration(t.timeout))
    if t.deadline is not None:
        parts.append(f"deadline {fmt_time(t.deadline)}")
    return ", ".join(parts) or "-"


def fmt_bytes(n: int) -> str:
    return scaled_bytes(n, ("B", "KB", "MB", "GB"))


def fmt_payload(t: TaskInfo, width: int = PAYLOAD_WIDTH) -> str:
    value, kind = bytes_doc(t.payload, t.encoding)
    if kind == "none":
        text = "-"
    elif kind == "json":
        text = compact_json(value)
    elif kind == "base64":
        text = f"<{len(t.payload)} bytes>"
    else:
        text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."

