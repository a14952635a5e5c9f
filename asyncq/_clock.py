"""Where "now" comes from: the system clock in production, a fake clock in tests."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    """Source of the current time, in Unix milliseconds."""

    def now_ms(self) -> int: ...


class SystemClock:
    """The real wall clock."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class FakeClock:
    """A clock that only moves when told to, so time-based behaviour is tested without sleeping."""

    def __init__(self, start: datetime | float | None = None) -> None:
        if start is None:
            self._ms = time.time_ns() // 1_000_000
        elif isinstance(start, datetime):
            if start.tzinfo is None:
                raise ValueError("FakeClock start must be timezone-aware")
            self._ms = datetime_to_ms(start)
        else:
            self._ms = int(start * 1000)

    def now_ms(self) -> int:
        return self._ms

    def advance(self, seconds: float) -> None:
        """Move the clock forward by ``seconds``."""
        self._ms += int(seconds * 1000)

    def set(self, when: datetime) -> None:
        """Jump to an aware datetime."""
        self._ms = datetime_to_ms(when)


#: The last millisecond a datetime can hold (9999-12-31T23:59:59.999Z): every time asyncq
#: stores is validated to stay at or before it.
MAX_TIME_MS = 253_402_300_799_999
MIN_TIME_MS = -62_135_596_800_000  # 0001-01-01T00:00:00Z, the first a datetime can hold


def ms_to_datetime(ms: int) -> datetime:
    """Convert Unix milliseconds to an aware UTC datetime."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def stored_datetime(ms: int) -> datetime | None:
    """A stored time as a datetime; None when it is 0 (unset) or beyond what a datetime can
    hold (written by an older version or by hand): one such value must never break a
    listing."""
    if not ms or not MIN_TIME_MS <= ms <= MAX_TIME_MS:
        return None
    try:
        return ms_to_datetime(ms)
    except (OverflowError, OSError, ValueError):
        return None


def datetime_to_ms(when: datetime) -> int:
    """Convert an aware datetime to Unix milliseconds, rounded to the nearest: truncating the
    float product loses a millisecond for some exact-millisecond times."""
    return round(when.timestamp() * 1000)


SYSTEM_CLOCK: Clock = SystemClock()
