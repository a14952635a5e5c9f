"""Janitor: deletes completed tasks whose retention has ended."""

from __future__ import annotations

from typing import Any

import anyio

from .._broker import Broker
from .._errors import BrokerError
from .._log import get_logger


class Janitor:
    """``tick()`` deletes every expired completed task of the worker's queues."""

    def __init__(self, broker: Broker, queues: list[str], interval: float, batch: int) -> None:
        self._broker = broker
        self._queues = queues
        self._interval = interval
        self._batch = batch
        self._log: Any = get_logger("janitor")

    async def tick(self) -> int:
        total = 0
        for queue in self._queues:
            while True:
                deleted = await self._broker.delete_expired_completed(queue, self._batch)
                total += deleted
                if deleted < self._batch:
                    break
        return total

    async def run(self) -> None:
        while True:
            await anyio.sleep(self._interval)
            try:
                await self.tick()
            except BrokerError as exc:
                self._log.warning("cleanup failed; will retry", error=str(exc))
            except Exception:
                self._log.exception("janitor failed unexpectedly")
