"""How values are shown on the pages: payloads and results, sizes, durations, times, and the
geometry of the server-drawn SVG charts (no chart library, no JavaScript)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import orjson

from .._broker import DailyStats, MinuteStats
from .._model._info import TaskInfo, TaskState, run_time
from .._text import scaled_bytes

#: Longest payload or result shown on a page; the rest is cut with a note.
MAX_SHOWN = 64 * 1024


@dataclass(frozen=True, slots=True)
class Shown:
    """A payload or result as the page shows it: ``kind`` is json, text, hex or none."""

    kind: str
    text: str
    size: int
    cut: bool = False


def show_data(data: bytes | None, encoding: str) -> Shown:
    """JSON pretty-printed; bytes as text when they are UTF-8, else as hex."""
    if data is None or encoding == "n":
        return Shown("none", "", 0)
    size = len(data)
    if encoding == "j":
        try:
            text = orjson.dumps(orjson.loads(data), option=orjson.OPT_INDENT_2).decode()
            return _cut("json", text, size)
        except orjson.JSONDecodeError:
            pass
    try:
        return _cut("text", data.decode("utf-8"), size)
    except UnicodeDecodeError:
        shown = data[:MAX_SHOWN // 3]
        lines = (shown[i:i + 16].hex(" ") for i in range(0, len(shown), 16))
        return Shown("hex", "\n".join(lines), size, len(shown) < size)


def _cut(kind: str, text: str, size: int) -> Shown:
    if len(text) <= MAX_SHOWN:
        return Shown(kind, text, size)
    return Shown(kind, text[:MAX_SHOWN], size, True)


def human_bytes(n: int) -> str:
    return scaled_bytes(n, ("B", "KiB", "MiB", "GiB"), " ")


def human_duration(value: timedelta | None) -> str:
    if value is None:
        return ""
    seconds = value.total_seconds()
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172_800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86_400:.1f} d"


def when(value: datetime | None) -> str:
    """A time as UTC ISO text to the second (the tooltip of a relative time)."""
    if value is None:
        return ""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def ago(value: datetime | None, now: datetime | None = None) -> str:
    """``3 min ago`` / ``in 2.0 h``."""
    if value is None:
        return ""
    delta = value - (now or datetime.now(UTC))
    text = human_duration(abs(delta))
    return f"in {text}" if delta.total_seconds() > 0 else f"{text} ago"


def run_length(task: TaskInfo, now: datetime | None = None) -> str:
    """How long the task's latest run took, or has been running; ``""`` when none is known."""
    took = run_time(task, now or datetime.now(UTC))
    return "" if took is None else human_duration(took[0])


def run_summary(task: TaskInfo, now: datetime | None = None) -> str:
    """The latest run for the task page: ``running for 3.2 s``, ``2.5 s, completed``,
    ``0.3 s, failed``; ``""`` when none is known."""
    took = run_time(task, now or datetime.now(UTC))
    if took is None:
        return ""
    length, running = took
    if running:
        return f"running for {human_duration(length)}"
    ended = "completed" if task.state is TaskState.COMPLETED else "failed"
    return f"{human_duration(length)}, {ended}"


def time_limit(task: TaskInfo) -> str:
    """The time limits of a run of the task: its timeout and deadline; ``""`` when none."""
    parts = []
    if task.timeout is not None:
        parts.append(human_duration(task.timeout))
    if task.deadline is not None:
        parts.append(f"deadline {when(task.deadline)}")
    return " · ".join(parts)


def error_rate(processed: int, failed: int) -> str:
    return f"{100 * failed / processed:.1f} %" if processed else "-"


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    y: float
    height: float
    kind: str  # "processed" or "failed"
    value: int
    label: str


@dataclass(frozen=True, slots=True)
class Chart:
    width: int
    height: int
    bars: tuple[Bar, ...]
    labels: tuple[tuple[float, str], ...]  # (x, text) under each day
    top: int  # the value of the full height
    bar_width: float


def daily_chart(days: Sequence[DailyStats], *, width: int = 560, height: int = 160) -> Chart:
    """Processed and failed bars per day, oldest on the left (``days`` as the Inspector gives
    them: newest first, possibly of several queues, summed per date)."""
    totals: dict[date, list[int]] = {}
    for d in days:
        t = totals.setdefault(d.date, [0, 0])
        t[0] += d.processed
        t[1] += d.failed
    dates = sorted(totals)
    top = max([1, *(v[0] for v in totals.values()), *(v[1] for v in totals.values())])
    plot = height - 20
    slot = width / max(1, len(dates))
    bar_width = max(2.0, slot * 0.35)
    bars: list[Bar] = []
    labels: list[tuple[float, str]] = []
    for i, day in enumerate(dates):
        processed, failed = totals[day]
        x = i * slot + slot * 0.12
        for j, (kind, value) in enumerate((("processed", processed), ("failed", failed))):
            h = plot * value / top
            bars.append(Bar(round(x + j * bar_width, 1), round(plot - h, 1), round(h, 1), kind,
                            value, f"{day}: {value} {kind}"))
        labels.append((round(i * slot + slot / 2, 1), str(day)[5:]))
    return Chart(width, height, tuple(bars), tuple(labels), top, round(bar_width, 1))


@dataclass(frozen=True, slots=True)
class HourChart:
    """The last hour of every queue: processed and failed per minute (bars, ``top`` the full
    height) and the backlog (a line, ``backlog_top`` its full height)."""

    width: int
    height: int
    bars: tuple[Bar, ...]
    bar_width: float
    top: int
    backlog: str  # SVG polyline points, "" when no sample
    backlog_top: int
    labels: tuple[tuple[float, str], ...]
    minutes: int  # minutes with data
    last_rate: float | None  # tasks processed a second in the latest minute with data


def hour_chart(stats: Sequence[MinuteStats], now: datetime, *, width: int = 560,
               height: int = 160) -> HourChart:
    """Per minute of the hour before ``now``, summed over queues (``stats`` of several queues
    in any order); a stretch longer than a minute (no worker recorded in between) shows its
    average per minute at the minute that closed it."""
    end = now.replace(second=0, microsecond=0)
    start = end - timedelta(minutes=60)
    per: dict[datetime, list[float]] = {}
    for s in stats:
        if not start < s.at <= end:
            continue
        minutes = max(1.0, s.span.total_seconds() / 60)
        t = per.setdefault(s.at, [0.0, 0.0, 0.0])
        t[0] += s.processed / minutes
        t[1] += s.failed / minutes
        t[2] += s.backlog
    plot = height - 20
    slot = width / 60
    bar_width = max(1.0, slot * 0.42)
    top = max([1, *(round(v[0]) for v in per.values()), *(round(v[1]) for v in per.values())])
    backlog_top = max([1, *(int(v[2]) for v in per.values())])
    bars: list[Bar] = []
    points: list[str] = []
    for at in sorted(per):
        i = (at - start).total_seconds() / 60 - 1  # slot 0: the minute ending at start + 1
        processed, failed, backlog = per[at]
        x = i * slot + slot * 0.08
        for j, (kind, value) in enumerate((("processed", processed), ("failed", failed))):
            h = plot * value / top
            bars.append(Bar(round(x + j * bar_width, 1), round(plot - h, 1), round(h, 1), kind,
                            round(value), f"{at:%H:%M} UTC: {value:.0f} {kind}"))
        points.append(f"{round(i * slot + slot / 2, 1)},"
                      f"{round(plot - plot * backlog / backlog_top, 1)}")
    labels = tuple((min(max(24.0, round(k * width / 4, 1)), width - 12.0),
                    f"-{60 - k * 15} min" if k < 4 else "now") for k in range(5))
    latest = max(per) if per else None
    return HourChart(width, height, tuple(bars), round(bar_width, 1), top, " ".join(points),
                     backlog_top, labels, len(per),
                     None if latest is None else per[latest][0] / 60)
