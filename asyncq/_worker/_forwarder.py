"""Forwarder: moves scheduled and retry tasks that are due to pending (or to their group).

It sleeps until the earliest known due time, at most ``forward_interval``; a retry written by
this worker (acker or recoverer) pokes it so a short retry delay is honoured without waiting for
the next round.
"""

from __future__ import annotations

import asyncio
from typing import Literal

from .._broker import Broker
from .._clock import Clock
from .._log import get_logger
from .._service._loops import for_each, run_periodically
from .._service._outage import Outage

_BATCH = 100
_SOURCES: tuple[Literal["scheduled", "retry"], ...] = ("scheduled", "retry")


class Forwarder:
    """``tick()`` forwards everything due now and returns the next due time (Unix ms) or None."""

    def __init__(self, broker: Broker, queues: list[str], interval: float, clock: Clock) -> None:
        self._broker = broker
        self._queues = queues
        self._interval = interval
        self._clock = clock
        self._log = get_logger("forwarder")
        self.outage = Outage(self._log, "forward due tasks")
        self._poke = asyncio.Event()
        self._next_wake_ms = 0
        self._poked_due: int | None = None  # earliest due time poked since the last round
        self._wait = interval  # before the next round
        self.forwarded = 0

    async def tick(self) -> int | None:
        """A queue that fails does not stop the others (the first error is raised once all
        were tried)."""
        sources = [(queue, source) for queue in self._queues for source in _SOURCES]
        dues = [due for due in await for_each(sources, self._forward) if due >= 0]
        return min(dues, default=None)

    async def _forward(self, where: tuple[str, Literal["scheduled", "retry"]]) -> int:
        """Forward every due task of one source; the next due time there (-1: none)."""
        queue, source = where
        while True:
            moved, due = await self._broker.maintenance.forward(queue, source, _BATCH)
            self.forwarded += moved
            if moved < _BATCH:
                return due

    def poke(self, due_ms: int) -> None:
        """A task was just written to a retry/scheduled set, due at ``due_ms``: wake earlier than
        planned if needed. Call it after the write, so the next round can see the task."""
        if self._poked_due is None or due_ms < self._poked_due:
            self._poked_due = due_ms
        if due_ms < self._next_wake_ms:
            self._poke.set()

    async def _round(self) -> None:
        """Forward, then plan the wait until the next due time (at most ``forward_interval``;
        a failed round is retried after the interval)."""
        now = self._clock.now_ms()
        self._wait = self._interval
        # A poke that lands while this round runs may name a task the round did not see:
        # it is kept in _poked_due and bounds the wait below.
        self._poked_due = None
        self._next_wake_ms = now
        next_due = await self.tick()
        if self._poked_due is not None and (next_due is None or self._poked_due < next_due):
            next_due = self._poked_due
        if next_due is not None:
            self._wait = min(self._wait, max(0.0, (next_due - now) / 1000))

    def _next_wait(self) -> float:
        self._next_wake_ms = self._clock.now_ms() + int(self._wait * 1000)
        self._poke.clear()
        return self._wait

    async def run(self) -> None:
        """Forward, then sleep until the next due time or a poke."""
        await run_periodically(self._round, self._next_wait, self.outage, self._log,
                               wake=self._poke)
