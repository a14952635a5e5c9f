"""Forwarder: moves scheduled and retry tasks that are due to pending (or to their group).

It sleeps until the earliest known due time, at most ``forward_interval``; a retry scheduled by
this worker pokes it so a short retry delay is honoured without waiting for the next round.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import anyio

from .._broker import Broker
from .._clock import Clock
from .._errors import BrokerError
from .._log import get_logger

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
        self._poke = asyncio.Event()
        self._next_wake_ms = 0
        self.forwarded = 0

    async def tick(self) -> int | None:
        next_due: int | None = None
        for queue in self._queues:
            for source in _SOURCES:
                while True:
                    moved, due = await self._broker.forward(queue, source, _BATCH)
                    self.forwarded += moved
                    if moved < _BATCH:
                        break
                if due >= 0 and (next_due is None or due < next_due):
                    next_due = due
        return next_due

    def poke(self, due_ms: int) -> None:
        """A task becomes due at ``due_ms``: wake earlier than planned if needed."""
        if due_ms < self._next_wake_ms:
            self._poke.set()

    async def run(self) -> None:
        failing = False
        while True:
            now = self._clock.now_ms()
            wait = self._interval
            try:
                next_due = await self.tick()
                if failing:
                    self._log.info("forwarder recovered")
                failing = False
                if next_due is not None:
                    wait = min(wait, max(0.0, (next_due - now) / 1000))
            except BrokerError as exc:
                if not failing:
                    self._log.warning("forwarding failed; retrying", error=str(exc))
                failing = True
            except Exception:
                self._log.exception("forwarder failed unexpectedly")
            self._next_wake_ms = self._clock.now_ms() + int(wait * 1000)
            self._poke.clear()
            with anyio.move_on_after(wait):
                await self._poke.wait()
