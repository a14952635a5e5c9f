"""Schedule specs: 5-field cron, ``@descriptors`` and ``@every <duration>``, in a time zone.

A schedule answers one question: the first tick strictly after a given instant (Unix ms).
Ticks depend only on the spec and the time zone, never on when a scheduler started, so every
replica computes the same tick times (that is what makes the per-tick claim work).

Time-zone rules (cron specs are read as wall-clock times of the scheduler's zone):

* A wall time skipped by a spring-forward jump fires once, at the first instant after the gap
  (``30 2 * * *`` in Europe/Berlin fires at 03:00 CEST on the last Sunday of March).
* A wall time repeated by a fall-back jump fires once, on its first occurrence, when the hour
  field is fixed (``30 2 * * *`` fires at 02:30 CEST, not again at 02:30 CET). When the hour field
  starts with ``*`` (``0 * * * *``, ``*/15 * * * *``, ``0 */2 * * *``) the schedule keeps its
  elapsed-time cadence and fires in both passes of the repeated hour.
* ``@every <duration>`` is elapsed time: ticks are the multiples of the interval since the Unix
  epoch (``@every 1h`` fires on the hour, UTC; ``@every 30s`` at :00 and :30), whatever the zone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
MIN_EVERY_MS = 1000
_UNITS_MS = {"h": 3_600_000, "m": 60_000, "s": 1000, "ms": 1}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|h|m|s)")
_TZ_PREFIX = re.compile(r"^(?:CRON_TZ|TZ)=(\S+)\s+(.*)$")


class Schedule(Protocol):
    """When an entry fires."""

    def next_after(self, ms: int) -> int:
        """The first tick strictly after ``ms`` (Unix ms)."""
        ...


def parse_timezone(value: object) -> tzinfo:
    """A tzinfo from an IANA name (``"Europe/Berlin"``) or a tzinfo; ValueError if unknown."""
    if isinstance(value, tzinfo):
        return value
    if not isinstance(value, str):
        raise TypeError(f"timezone must be an IANA zone name or a tzinfo, got {value!r}")
    try:
        return ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {value!r} (expected an IANA name such as "
                         f"'Europe/Berlin' or 'UTC')") from exc


def timezone_name(tz: tzinfo) -> str:
    """The name a time zone is shown and hashed with (its IANA key when it has one)."""
    key = getattr(tz, "key", None)
    return key if isinstance(key, str) else str(tz)


def parse_duration(text: str) -> int:
    """A Go-style duration (``30s``, ``1h30m``, ``1.5h``, ``1500ms``) in milliseconds."""
    compact = text.strip()
    if not compact:
        raise ValueError("@every needs a duration, e.g. '@every 30s' or '@every 1h30m'")
    pos = 0
    total = 0.0
    while pos < len(compact):
        m = _DURATION_PART.match(compact, pos)
        if m is None:
            raise ValueError(f"invalid duration {compact!r}: expected numbers with units h, m, s "
                             f"or ms, e.g. '30s', '1h30m', '1500ms'")
        total += float(m.group(1)) * _UNITS_MS[m.group(2)]
        pos = m.end()
    ms = round(total)
    if ms < MIN_EVERY_MS:
        raise ValueError(f"@every interval must be at least 1s, got {compact!r}")
    return ms


@dataclass(frozen=True, slots=True)
class EverySchedule:
    """``@every <duration>``: the multiples of ``interval_ms`` since the Unix epoch."""

    interval_ms: int

    def next_after(self, ms: int) -> int:
        return (ms // self.interval_ms + 1) * self.interval_ms


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """A 5-field cron expression read as wall-clock times of ``tz`` (DST rules: module doc)."""

    expr: str
    tz: tzinfo
    fixed_hour: bool  # the hour field does not start with '*': repeated wall times fire once

    def next_after(self, ms: int) -> int:
        start = datetime.fromtimestamp(ms / 1000, tz=self.tz)
        it = croniter(self.expr, start)
        for _ in range(1000):
            candidate: datetime = it.get_next(datetime)
            cms = round(candidate.timestamp() * 1000)
            if cms <= ms or (self.fixed_hour and self._second_pass(candidate, cms)):
                continue
            return cms
        raise RuntimeError(f"cron spec {self.expr!r} found no tick after {ms}")  # pragma: no cover

    def _second_pass(self, candidate: datetime, cms: int) -> bool:
        """Is ``candidate`` the repeat of a wall time that a fall-back transition shows twice?"""
        wall = candidate.replace(tzinfo=None)
        first = wall.replace(tzinfo=self.tz, fold=0)
        second = wall.replace(tzinfo=self.tz, fold=1)
        if first.utcoffset() == second.utcoffset():
            return False
        return cms == round(second.timestamp() * 1000) != round(first.timestamp() * 1000)


def parse_spec(spec: object, tz: tzinfo) -> tuple[str, Schedule]:
    """Validate ``spec``; return it normalised (single spaces) and its schedule.

    Raises ValueError saying what is wrong. A ``CRON_TZ=<zone> `` prefix overrides ``tz``.
    """
    if not isinstance(spec, str):
        raise TypeError(f"schedule spec must be a str, got {spec!r}")
    norm = " ".join(spec.split())
    if not norm:
        raise ValueError("schedule spec must not be blank")
    m = _TZ_PREFIX.match(norm)
    body = norm
    if m is not None:
        tz = parse_timezone(m.group(1))
        body = m.group(2)
    lowered = body.lower()
    if lowered.startswith("@every"):
        rest = body[len("@every"):]
        if rest and not rest[0].isspace():
            raise ValueError(f"invalid spec {spec!r}: write '@every <duration>', e.g. '@every 30s'")
        return norm, EverySchedule(parse_duration(rest))
    if body.startswith("@"):
        expr = DESCRIPTORS.get(lowered)
        if expr is None:
            raise ValueError(f"unknown descriptor {body!r} in spec {spec!r}; use one of "
                             f"{', '.join(DESCRIPTORS)} or '@every <duration>'")
    else:
        expr = body
    fields = expr.split()
    if len(fields) != 5:
        raise ValueError(f"invalid cron spec {spec!r}: expected 5 fields (minute hour "
                         f"day-of-month month day-of-week), got {len(fields)}")
    try:
        croniter(expr)
    except (CroniterError, ValueError, KeyError) as exc:
        raise ValueError(f"invalid cron spec {spec!r}: {exc}") from exc
    return norm, CronSchedule(expr, tz, fixed_hour=not fields[1].startswith("*"))
