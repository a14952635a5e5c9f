"""What ``asyncq dash`` shows, as plain lines of text (no curses here, so it is easy to test)."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from .._broker import QueueInfo, ServerInfo
from .._errors import QueueNotFoundError
from .._inspector._inspector import Inspector
from .._text import printable
from ._output import fmt_duration

MIN_WIDTH = 60
MIN_HEIGHT = 10
_PASSWORD = re.compile(r"//[^@/]*@")


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything one refresh reads, and when (monotonic seconds)."""

    taken: float
    queues: Sequence[QueueInfo]
    servers: Sequence[ServerInfo]


async def take_snapshot(inspector: Inspector, only: Sequence[str] = ()) -> Snapshot:
    """Read every queue (or the queues in ``only`` that exist) and the live workers."""
    names = await inspector.queues()
    if only:
        names = [q for q in names if q in set(only)]
    infos = []
    for q in names:
        try:
            infos.append(await inspector.queue_info(q))
        except QueueNotFoundError:
            continue  # deleted since it was listed
    return Snapshot(time.monotonic(), infos, await inspector.workers())


@dataclass(slots=True)
class Rates:
    """Processed/failed per second of each queue between the last two snapshots."""

    previous: Snapshot | None = None
    per_queue: dict[str, tuple[float, float]] = field(default_factory=dict)

    def update(self, snap: Snapshot) -> None:
        self.per_queue = {}
        prev = self.previous
        if prev is not None and snap.taken > prev.taken:
            before = {q.queue: q for q in prev.queues}
            elapsed = snap.taken - prev.taken
            for q in snap.queues:
                old = before.get(q.queue)
                if old is not None:
                    self.per_queue[q.queue] = (
                        max(0, q.processed_total - old.processed_total) / elapsed,
                        max(0, q.failed_total - old.failed_total) / elapsed)
        self.previous = snap


def safe_url(url: str) -> str:
    """The Redis URL without its password."""
    return _PASSWORD.sub("//***@", url)


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    rows = [[printable(cell) for cell in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()

    return [line(headers), *(line(r) for r in rows)]


def _rate(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


def _clip(name: str, width: int = 24) -> str:
    name = printable(name)
    return name if len(name) <= width else name[: width - 1] + "~"


def render(snap: Snapshot | None, rates: Rates, *, width: int, height: int, url: str,
           refresh: float, error: str | None = None) -> list[str]:
    """The screen as lines, each at most ``width`` characters, at most ``height`` lines."""
    if width < MIN_WIDTH or height < MIN_HEIGHT:
        lines = ["terminal too small", f"need {MIN_WIDTH}x{MIN_HEIGHT}, have {width}x{height}",
                 "q: quit"]
        return [ln[:width] for ln in lines[:height]]
    now = datetime.now(UTC).strftime("%H:%M:%S")
    lines = [f"asyncq dash  {safe_url(url)}  every {refresh:g}s  at {now} UTC  q: quit", ""]
    if error:
        lines += [f"error: {error}", ""]
    if snap is None:
        lines.append("loading...")
    else:
        lines.append(f"Queues ({len(snap.queues)})")
        rows = []
        for q in snap.queues:
            proc, fail = rates.per_queue.get(q.queue, (None, None))
            rows.append([_clip(q.queue), "paused" if q.paused else "run", str(q.size),
                         str(q.pending), str(q.active), str(q.scheduled), str(q.retry),
                         str(q.archived), str(q.completed), str(q.aggregating), _rate(proc),
                         _rate(fail), fmt_duration(q.latency)])
        qlines = _table(["QUEUE", "STATE", "SIZE", "PEND", "ACT", "SCHED", "RETRY", "ARCH",
                         "DONE", "AGGR", "PROC/s", "FAIL/s", "LATENCY"], rows)
        server_rows = [[_clip(f"{s.host}:{s.pid}", 30), s.status,
                        f"{len(s.active_workers)}/{s.concurrency}",
                        _clip(", ".join(f"{k}={v}" for k, v in sorted(s.queues.items())), 40),
                        fmt_duration(datetime.now(UTC) - s.started)] for s in snap.servers]
        slines = _table(["WORKER", "STATUS", "ACTIVE", "QUEUES", "UPTIME"], server_rows)
        servers_part = ["", f"Workers ({len(snap.servers)})",
                        *(slines if snap.servers else ["no live workers"])]
        # The queues get the room left after (the start of) the workers section.
        room = max(2, height - len(lines) - min(len(servers_part), 4))
        if len(qlines) > room:
            qlines = [*qlines[: room - 1], f"... {len(qlines) - room + 1} more queue(s)"]
        lines += qlines + servers_part
    return [ln[:width] for ln in lines[:height]]
