"""What every Redis broker layout shares about its Redis client: the ScriptRunner over it, a
ping, loading the scripts, reading lock holders, and closing what the broker owns (its own
client, then the Sentinel connections asyncq made for it). A layout adds its own state and
closes it in ``_close_own``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from redis.asyncio import Redis, RedisCluster

from ._replies import text
from ._runner import ScriptRunner


class ConnectedBroker:
    """The Redis side both layouts' brokers are built on (see ``RedisBroker``/``AsynqBroker``)."""

    def __init__(self, redis: Redis | RedisCluster, *, owns_client: bool,
                 also_close: Callable[[], Awaitable[None]] | None) -> None:
        self.redis = redis
        self._owns_client = owns_client
        self._also_close = also_close
        self.runner = ScriptRunner(redis, lean=owns_client)

    async def ping(self) -> None:
        await self.runner.command("ping", "PING")

    async def load_scripts(self) -> None:
        """Load every script into Redis so pipelines never meet NOSCRIPT on a fresh server."""
        await self.runner.load_scripts()

    async def lock_holders(self, locks: Sequence[str]) -> list[str | None]:
        """Who holds each uniqueness lock (the holding task's id), None where it is free."""
        replies = await self.runner.commands("reading uniqueness locks",
                                             [("GET", lock) for lock in locks])
        return [None if r is None else text(r) for r in replies]

    async def _close_own(self) -> None:
        """Close what the layout holds beside the client (nothing here)."""

    async def close(self) -> None:
        await self._close_own()
        try:
            await self.runner.aclose()
            if self._owns_client:
                await self.redis.aclose()
        finally:
            if self._also_close is not None:
                await self._also_close()
