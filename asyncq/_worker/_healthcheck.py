"""Health check: pings Redis periodically and reports the result to a user callback."""

from __future__ import annotations

import inspect

import anyio

from .._broker import Broker
from .._errors import BrokerError
from .._log import get_logger
from ._config import HealthCheck


class HealthChecker:
    """``tick()`` pings Redis and calls the callback with None (healthy) or the error."""

    def __init__(self, broker: Broker, callback: HealthCheck, interval: float) -> None:
        self._broker = broker
        self._callback = callback
        self._interval = interval
        self._log = get_logger("healthcheck")

    async def tick(self) -> None:
        error: BaseException | None = None
        try:
            await self._broker.ping()
        except BrokerError as exc:
            error = exc
        try:
            result = self._callback(error)
            if inspect.isawaitable(result):
                await result
        except Exception:
            self._log.exception("health check callback raised")

    async def run(self) -> None:
        while True:
            await anyio.sleep(self._interval)
            await self.tick()
