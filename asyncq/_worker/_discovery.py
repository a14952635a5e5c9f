"""Discovery: the queues a worker's patterns (``tenant:*``) match, kept current.

Two ways in, both cheap: the queue registry is read every ``queue_scan_interval`` (one
SMEMBERS; at once after the subscriber reconnected), and a queue announced as new (the
producer that registered it publishes its name, heard with ``Broker.listen_signals``) is
served at once, without a read. A queue dropped from the registry (``asyncq queue delete``)
is no longer served after the next read. Runs only in a worker that has a pattern.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from .._broker import Broker
from .._log import get_logger
from .._service._loops import run_periodically
from .._service._outage import Outage
from ._queues import ServedQueues


class QueueDiscovery:
    """``scan()`` reads the registry once; ``announced(names)`` takes queues heard as new.
    Either calls ``on_change(added, removed)`` when the served queues changed."""

    def __init__(self, broker: Broker, served: ServedQueues, interval: float,
                 on_change: Callable[[list[str], list[str]], None]) -> None:
        self._broker = broker
        self._served = served
        self._interval = interval
        self._on_change = on_change
        self._log = get_logger("discovery")
        self.outage = Outage(self._log, "read the queue registry")
        self._poke = asyncio.Event()
        self.scans = 0

    async def scan(self) -> None:
        """Serve the registered queues the patterns match, and no longer those that left the
        registry. Only queues served before the read can be dropped: one announced while it
        was under way stays."""
        before = self._served.matched_names()
        names = await self._broker.inspect.queue_names()
        self.scans += 1
        present = set(names)
        added = self._served.add(names)
        removed = self._served.remove(q for q in before if q not in present)
        if added or removed:
            self._on_change(added, removed)

    def announced(self, names: Sequence[str]) -> None:
        """Queues just registered (their announcement heard): serve those a pattern
        matches at once."""
        added = self._served.add(names)
        if added:
            self._on_change(added, [])

    def poke(self) -> None:
        """Read the registry now (announcements may have been missed: pub/sub reconnected)."""
        self._poke.set()

    def _next_wait(self) -> float:
        self._poke.clear()
        return self._interval

    async def run(self, *, wait_first: bool = False) -> None:
        """Read the registry every ``interval`` (and when poked); ``wait_first``: the worker
        read it as it started."""
        await run_periodically(self.scan, self._next_wait, self.outage, self._log,
                               wake=self._poke, wait_first=wait_first)
