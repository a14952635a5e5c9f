"""What a limit is: ``ConcurrencyLimit`` and ``RateLimit``, checked when they are created.

A limit has a name (what its Redis state is stored under, so every worker declaring the same
name shares one budget), a size and, for a rate, a period. ``key`` (a function of the task)
splits it into independent budgets, one per key value. A limit declared without a name takes
the pattern it is registered for, so ``mux.handle("api:call", h, limits=[RateLimit("9/s")])``
counts "api:call" starts.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .._model._task import Task

KeyFunc = Callable[[Task], Any]

_UNITS = {"s": 1_000, "sec": 1_000, "second": 1_000, "m": 60_000, "min": 60_000,
          "minute": 60_000, "h": 3_600_000, "hour": 3_600_000, "d": 86_400_000,
          "day": 86_400_000}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*\.?\d*)\s*([a-z]+)\s*$")
MAX_LIMIT = 1_000_000
"""Largest size of a limit: a rate keeps one entry per start of its window in Redis."""


def check_size(n: object, what: str) -> int:
    """``n`` as a limit's size: a whole number from 1 to MAX_LIMIT."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"{what} must be a whole number of tasks, got {n!r}")
    if not 1 <= n <= MAX_LIMIT:
        raise ValueError(f"{what} must be between 1 and {MAX_LIMIT}, got {n}")
    return n


def _check_name(name: object) -> str | None:
    if name is None:
        return None
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise ValueError(f"a limit's name must be a non-blank string of at most 200 "
                         f"characters, got {name!r}")
    return name


def _check_key(key: object) -> KeyFunc | None:
    if key is not None and not callable(key):
        raise TypeError(f"a limit's key must be a function of the task returning the key "
                        f"(key=lambda t: t.json()['tenant']), or None, got {key!r}")
    return key


def parse_rate(rate: object) -> tuple[int, int]:
    """``"100/s"``, ``"5000/h"``, ``"10/5m"`` or ``(n, seconds)`` -> (n, period in ms)."""
    if isinstance(rate, str):
        m = _RATE.match(rate.lower())
        unit = _UNITS.get(m.group(3)) if m else None
        if m is None or unit is None:
            raise ValueError(f"rate {rate!r} must look like '100/s', '600/m', '5000/h', "
                             f"'10000/d' (or '10/5m'), or be a (count, seconds) pair")
        mult = float(m.group(2)) if m.group(2) else 1.0
        return check_size(int(m.group(1)), "a rate's count"), _period_ms(mult * unit / 1000)
    if isinstance(rate, tuple) and len(rate) == 2:
        n, seconds = rate
        if isinstance(seconds, bool) or not isinstance(seconds, int | float):
            raise TypeError(f"a rate's period must be seconds (int or float), got {seconds!r}")
        return check_size(n, "a rate's count"), _period_ms(float(seconds))
    raise TypeError(f"rate must be a string such as '100/s' or a (count, seconds) pair, "
                    f"got {rate!r}")


def _period_ms(seconds: float) -> int:
    if not 0.001 <= seconds <= 366 * 86_400:
        raise ValueError(f"a rate's period must be between 1 ms and 366 days, got {seconds} s")
    return round(seconds * 1000)


@dataclass(frozen=True, slots=True)
class ConcurrencyLimit:
    """At most ``n`` tasks running at once across every worker (per key value, with ``key``).

    A slot is held by the running task and tied to its lease: a worker that dies frees its
    slots when their leases expire."""

    n: int
    key: KeyFunc | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        check_size(self.n, "a concurrency limit")
        _check_key(self.key)
        _check_name(self.name)

    kind = "concurrency"

    def describe(self) -> str:
        return f"at most {self.n} at once"


@dataclass(frozen=True, slots=True, init=False)
class RateLimit:
    """At most ``n`` task starts in any window of ``period_ms`` across every worker (per key
    value, with ``key``): ``RateLimit("100/s")``, ``RateLimit((5, 2.5))`` (5 per 2.5 s).

    Starts are paced, one every ``period / n`` on average, with at most ``burst`` at once
    after a quiet spell, or as many as 50 ms of pace if that is more (default: a tenth of
    ``n``, at least 1; ``burst=n`` lets a whole window's worth start at once). Paced starts
    reach the API they guard as evenly as they were admitted; a burst of ``n`` would reach it
    spread by however long the workers take to start ``n`` handlers, and could then overlap
    the next window's burst."""

    n: int
    period_ms: int
    burst: int
    key: KeyFunc | None
    name: str | None

    def __init__(self, rate: str | tuple[int, float], key: KeyFunc | None = None,
                 name: str | None = None, burst: int | None = None) -> None:
        n, period = parse_rate(rate)
        if burst is None:
            burst = max(1, n // 10)
        elif check_size(burst, "a rate's burst") > n:
            raise ValueError(f"a rate's burst ({burst}) must be at most its count ({n})")
        object.__setattr__(self, "n", n)
        object.__setattr__(self, "period_ms", period)
        object.__setattr__(self, "burst", burst)
        object.__setattr__(self, "key", _check_key(key))
        object.__setattr__(self, "name", _check_name(name))

    kind = "rate"

    def describe(self) -> str:
        return f"at most {self.n} starts per {self.period_ms / 1000:g} s"


Limit = ConcurrencyLimit | RateLimit


def check_limits(limits: Iterable[Limit] | None, pattern: str) -> tuple[Limit, ...]:
    """The limits of a handler registered for ``pattern``, each named (its own name, else the
    pattern): a TypeError for anything that is not a limit, a ValueError for two limits of
    the same kind and name (they would share, and fight over, one budget)."""
    if limits is None:
        return ()
    if isinstance(limits, ConcurrencyLimit | RateLimit):
        limits = [limits]
    out: list[Limit] = []
    seen: set[tuple[str, str]] = set()
    for limit in limits:
        if not isinstance(limit, ConcurrencyLimit | RateLimit):
            raise TypeError(f"limits must be asyncq.ConcurrencyLimit or asyncq.RateLimit "
                            f"objects, got {limit!r}")
        named = limit if limit.name is not None else _named(limit, pattern)
        assert named.name is not None
        ident = (named.kind, named.name)
        if ident in seen:
            raise ValueError(f"two {named.kind} limits named {named.name!r} on {pattern!r}: "
                             f"give them different name= values")
        seen.add(ident)
        out.append(named)
    return tuple(out)


def _named(limit: Limit, name: str) -> Limit:
    if isinstance(limit, RateLimit):
        copy = object.__new__(RateLimit)
        for f in ("n", "period_ms", "burst", "key"):
            object.__setattr__(copy, f, getattr(limit, f))
        object.__setattr__(copy, "name", name)
        return copy
    return dataclasses.replace(limit, name=name)
