"""A fault-injecting broker for tests: a real RedisBroker whose calls fail while ``down``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from redis.asyncio import Redis

from asyncq import BrokerError
from asyncq._broker import RedisBroker


class OutageBroker(RedisBroker):
    """While ``down`` is set, every call the worker makes to lease, renew, finish, forward or
    publish state fails with ``error()`` (a simulated Redis outage)."""

    down = False

    def __init__(self, redis: Redis,
                 error: Callable[[], Exception] = lambda: BrokerError("injected outage")) -> None:
        super().__init__(redis)
        self._error = error

    def _check(self) -> None:
        if self.down:
            raise self._error()

    async def finish(self, *args: Any) -> Any:
        self._check()
        return await super().finish(*args)

    async def extend_leases(self, *args: Any) -> Any:
        self._check()
        return await super().extend_leases(*args)

    async def dequeue(self, *args: Any) -> Any:
        self._check()
        return await super().dequeue(*args)

    async def write_server_state(self, *args: Any) -> Any:
        self._check()
        return await super().write_server_state(*args)

    async def forward(self, *args: Any) -> Any:
        self._check()
        return await super().forward(*args)
