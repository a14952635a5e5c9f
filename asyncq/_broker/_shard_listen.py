"""Listening to shard channels (SSUBSCRIBE), on one node or a whole cluster.

Task events are published with SPUBLISH from the transition scripts, on a channel in the
queue's slot: on a cluster only the master owning that slot carries them, and redis-py's
cluster pub/sub keeps one connection per master it needs.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

from redis.asyncio import RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from .._errors import BrokerError
from ._replies import text
from ._runner import ScriptRunner


async def listen_shards(runner: ScriptRunner, channels: Sequence[str],
                        reply_timeout: float, idle: float | None
                        ) -> AsyncIterator[tuple[str, bytes] | None]:
    """SSUBSCRIBE to ``channels``: yield None once every subscription is confirmed, then
    ``(channel, data)`` pairs until the connection fails (BrokerError). On one node a
    connection quiet for ``idle`` seconds is pinged, and replaced when the ping is not answered
    within ``reply_timeout``."""
    cluster = isinstance(runner.redis, RedisCluster)
    pubsub: Any = await runner.pubsub()
    try:
        try:
            await pubsub.ssubscribe(*channels)
            confirmed = 0
            while confirmed < len(channels):
                msg = await _next(pubsub, cluster, reply_timeout)
                if msg is None:
                    raise BrokerError("timed out waiting for the event subscription")
                if msg["type"] == "ssubscribe":
                    confirmed += 1
            yield None
            while True:
                msg = await _next(pubsub, cluster, idle)
                if msg is None:
                    if idle is not None and not cluster:
                        await pubsub.ping()
                        if await _next(pubsub, cluster, reply_timeout) is None:
                            raise BrokerError("no answer to a ping on the event connection "
                                              f"within {reply_timeout:g}s")
                    continue
                if msg["type"] == "smessage":
                    yield text(msg["channel"]), msg["data"]
        except RedisError as exc:
            if isinstance(exc, RedisConnectionError):
                runner.connection_broke()
            raise BrokerError(f"event subscription failed: {exc}") from exc
    finally:
        with contextlib.suppress(RedisError):
            await pubsub.aclose()


async def _next(pubsub: Any, cluster: bool, timeout: float | None) -> dict[str, Any] | None:
    if cluster:
        msg: dict[str, Any] | None = await pubsub.get_sharded_message(timeout=timeout)
    else:
        msg = await pubsub.get_message(timeout=timeout)
    return msg
