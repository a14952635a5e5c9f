"""Scheduler heartbeat: publishes the scheduler's entries with a TTL, so tools can list them."""

from __future__ import annotations

from collections.abc import Callable

import anyio
from structlog.typing import FilteringBoundLogger

from .._broker import SchedulerEntryRecord
from .._errors import AsyncqError
from ._backend import SchedulerBackend


class SchedulerHeartbeat:
    """Every ``interval`` seconds (first at start) writes ``entries()`` for 2 x interval."""

    def __init__(self, backend: SchedulerBackend, scheduler_id: str, interval: float,
                 entries: Callable[[], list[SchedulerEntryRecord]],
                 log: FilteringBoundLogger) -> None:
        self.backend = backend
        self.scheduler_id = scheduler_id
        self.interval = interval
        self._entries = entries
        self._log = log

    @property
    def ttl_ms(self) -> int:
        return round(2 * self.interval * 1000)

    async def beat(self) -> None:
        """Publish the entries once (raises BrokerError)."""
        await self.backend.write_entries(self.scheduler_id, self._entries(), self.ttl_ms)

    async def run(self) -> None:
        while True:
            try:
                await self.beat()
            except AsyncqError as exc:
                self._log.warning("heartbeat failed", error=str(exc))
            await anyio.sleep(self.interval)

    async def clear(self) -> None:
        """Remove the published entries (at shutdown); failures are logged, not raised."""
        try:
            await self.backend.clear_entries(self.scheduler_id)
        except AsyncqError as exc:
            self._log.warning("clearing scheduler entries failed", error=str(exc))
