"""Forwarder: moves scheduled and retry tasks that are due to pending (or to their group).

It sleeps until the earliest known due time, at most ``forward_interval``; a retry written by
this worker (acker or recoverer) pokes it so a short retry delay is honoured without waiting for
the next round.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import anyio

from .._broker import Broker
from .._clock import Clock
from .._errors import BrokerError
from .._log import get_logger
from .._outage import Outage

_BATCH = 100
_SOURCES: tuple[Literal["scheduled", "retry"], ...] = ("scheduled", "retry")


class Forwarder:
    """``tick()`` forwards everything due now and returns the next due time (Unix ms) or None."""

    def __init__(self, broker: Broker, queues: list[str], interval: float, clock: Clock) -> None:
        self._broker = broker
        self._queues = queues
        self._interval = interval
        self._clock = clock
        self._log: Any = get_logger("forwarder")
        self.outage = Outage(self._log, "forward due tasks")
        self._poke = asyncio.Event()
        self._next_wake_ms = 0
        self._poked_due: int | None = None  # earliest due time poked since the last round
        self.forwarded = 0

    async def tick(self) -> int | None:
        """A queue that fails does not stop the others (the first error is raised once all
        were tried)."""
        next_due: int | None = None
        error: BrokerError | None = None
        for queue in self._queues:
            for source in _SOURCES:
                try:
                    while True:
                        moved, due = await self._broker.forward(queue, source, _BATCH)
                        self.forwarded += moved
                        if moved < _BATCH:
                            break
                except BrokerError as exc:
                    error = error or exc
                    continue
                if due >= 0 and (next_due is None or due < next_due):
                    next_due = due
        if error is not None:
            raise error
        return next_due

    def poke(self, due_ms: int) -> None:
        """A task was just written to a retry/scheduled set, due at ``due_ms``: wake earlier than
        planned if needed. Call it after the write, so the next round can see the task."""
        if self._poked_due is None or due_ms < self._poked_due:
            self._poked_due = due_ms
        if due_ms < self._next_wake_ms:
            self._poke.set()

    async def run(self) -> None:
        """Forward, then sleep until the next due time (at most ``forward_interval``); a failed
        round is retried after the interval."""
        while True:
            now = self._clock.now_ms()
            wait = self._interval
            # A poke that lands while this round runs may name a task the round did not see:
            # it is kept in _poked_due and bounds the wait below.
            self._poked_due = None
            self._next_wake_ms = now
            try:
                next_due = await self.tick()
                self.outage.succeeded()
                if self._poked_due is not None and (next_due is None
                                                    or self._poked_due < next_due):
                    next_due = self._poked_due
                if next_due is not None:
                    wait = min(wait, max(0.0, (next_due - now) / 1000))
            except BrokerError as exc:
                self.outage.failed(exc)
            except Exception as exc:
                self._log.exception("forwarder failed unexpectedly")
                self.outage.failed(exc)
            self._next_wake_ms = self._clock.now_ms() + int(wait * 1000)
            self._poke.clear()
            with anyio.move_on_after(wait):
                await self._poke.wait()
