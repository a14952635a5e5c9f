"""Listening to shard channels (SSUBSCRIBE), on one node or a whole cluster.

Task events are published with SPUBLISH from the transition scripts, on a channel in the
queue's slot: on a cluster only the master owning that slot carries them, and redis-py's
cluster pub/sub keeps one connection per master it needs. Each of those connections is read
by its own reader, so a quiet master never holds back the events of another.

On a single node whose client asyncq created, one connection of asyncq's own carries them
instead (``_push``: no redis-py PubSub in the pickup path).

On a cluster, those readers are tasks owned by the listening generator: each one's result is
read as soon as it is done (a failure ends the listening with it), and the generator's
``finally`` cancels and awaits whichever are left. (An anyio task group cannot own them: a
generator must not yield inside one.)
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from redis.asyncio import RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from .._errors import BrokerError
from ._lean_settings import LeanSettings
from ._push import subscribe
from ._redis_errors import broker_error
from ._replies import text
from ._resp import pack
from ._runner import ScriptRunner

#: Waits until every message published on a channel before the call has been yielded;
#: raises BrokerError when the connection fails or no answer comes in time.
Flush = Callable[[str], Awaitable[None]]


async def listen_shards(runner: ScriptRunner, channels: Sequence[str],
                        reply_timeout: float, idle: float | None
                        ) -> AsyncIterator[tuple[str, bytes] | Flush]:
    """SSUBSCRIBE to ``channels``: yield a Flush once every subscription is confirmed, then
    ``(channel, data)`` pairs until a connection fails (BrokerError). A connection quiet for
    ``idle`` seconds is pinged, and replaced when the ping is not answered within
    ``reply_timeout``."""
    settings = runner.lean_settings
    if settings is not None:
        try:
            async for item in _lean_shards(settings, channels, reply_timeout, idle):
                yield item
        except RedisError as exc:
            raise broker_error(f"event subscription failed: {exc}", exc) from exc
        return
    pubsub: Any = await runner.pubsub()
    readers: dict[asyncio.Task[dict[str, Any]], Any] = {}
    flushes: dict[str, asyncio.Future[None]] = {}
    tokens = itertools.count(1)
    try:
        try:
            await pubsub.ssubscribe(*channels)
            if isinstance(runner.redis, RedisCluster):
                by_channel = {}
                for ch in channels:
                    node = runner.redis.get_node_from_key(ch)
                    if node is None or node.name not in pubsub.node_pubsub_mapping:
                        raise BrokerError(f"no cluster node serves the channel {ch!r}")
                    by_channel[ch] = pubsub.node_pubsub_mapping[node.name]
                connections = list(pubsub.node_pubsub_mapping.values())
            else:
                by_channel = dict.fromkeys(channels, pubsub)
                connections = [pubsub]

            async def flush(channel: str) -> None:
                """A PING sent now on the channel's connection is answered after every
                message already published to it: its pong is the barrier."""
                connection = by_channel[channel].connection
                if connection is None or not connection.is_connected:
                    raise BrokerError("the event subscription's connection is closed",
                                      transient=True)
                token = f"asyncq-flush-{next(tokens)}"
                fut = flushes[token] = asyncio.get_running_loop().create_future()
                try:
                    # Sent on the connection itself: the PubSub's ping would reconnect a
                    # connection killed meanwhile, under its reader, and leak the new one.
                    await connection.send_command("PING", token, check_health=False)
                    await asyncio.wait_for(asyncio.shield(fut), reply_timeout)
                except (RedisError, TimeoutError) as exc:
                    raise broker_error(f"flushing the event subscription failed: {exc!r}",
                                       exc) from exc
                finally:
                    flushes.pop(token, None)

            if len(connections) == 1:
                async for item in _one_connection(connections[0], len(channels), flushes,
                                                  flush, idle, reply_timeout):
                    yield item
            for conn in connections:
                readers[asyncio.ensure_future(_next(conn, idle, reply_timeout))] = conn
            confirmed = 0
            subscribed = False
            while True:
                wait = None if subscribed else reply_timeout
                done, _ = await asyncio.wait(readers, timeout=wait,
                                             return_when=asyncio.FIRST_COMPLETED)
                if not done:
                    raise BrokerError("timed out waiting for the event subscription",
                                      transient=True)
                for task in done:
                    conn = readers.pop(task)
                    msg = task.result()
                    readers[asyncio.ensure_future(_next(conn, idle, reply_timeout))] = conn
                    if msg["type"] == "ssubscribe":
                        confirmed += 1
                    elif msg["type"] == "smessage":
                        yield text(msg["channel"]), msg["data"]
                    elif msg["type"] == "pong":
                        waiter = flushes.pop(text(msg["data"] or b""), None)
                        if waiter is not None and not waiter.done():
                            waiter.set_result(None)
                if not subscribed and confirmed >= len(channels):
                    subscribed = True
                    yield flush
        except RedisError as exc:
            if isinstance(exc, RedisConnectionError):
                runner.connection_broke()
            raise broker_error(f"event subscription failed: {exc}", exc) from exc
    finally:
        for task in readers:
            task.cancel()
        for task in readers:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        with contextlib.suppress(RedisError):
            await pubsub.aclose()


async def _lean_shards(settings: LeanSettings, channels: Sequence[str], reply_timeout: float,
                       idle: float | None) -> AsyncIterator[tuple[str, bytes] | Flush]:
    """``listen_shards`` on a push link of asyncq's own (see ``_push``); redis-py errors."""
    link = await subscribe(settings, "SSUBSCRIBE", channels, reply_timeout, idle)
    flushes: dict[bytes, asyncio.Future[None]] = {}
    tokens = itertools.count(1)

    async def flush(channel: str) -> None:
        """A PING sent now is answered after every message already published to the
        connection's channels: the reader takes its pong after them."""
        token = b"asyncq-flush-%d" % next(tokens)
        fut = flushes[token] = asyncio.get_running_loop().create_future()
        try:
            link.send(pack(("PING", token)))
            await asyncio.wait_for(asyncio.shield(fut), reply_timeout)
        except (RedisError, TimeoutError) as exc:
            raise broker_error(f"flushing the event subscription failed: {exc!r}",
                               exc) from exc
        finally:
            flushes.pop(token, None)

    try:
        yield flush
        while True:
            item = await link.get()
            if isinstance(item, Exception):  # an error reply (to a flush's PING)
                raise item
            kind = item[0]
            if kind == b"smessage":
                yield item[1].decode(), item[2]
            elif kind == b"pong":
                waiter = flushes.pop(item[1], None)
                if waiter is not None and not waiter.done():
                    waiter.set_result(None)
    finally:
        link.close()


async def _one_connection(conn: Any, channels: int, flushes: dict[str, asyncio.Future[None]],
                          flush: Flush, idle: float | None, reply_timeout: float
                          ) -> AsyncIterator[tuple[str, bytes] | Flush]:
    """``listen_shards`` on a single connection (one node, or a cluster's queues all on one
    master): read it directly, without a reader task per message (lower pickup latency)."""
    confirmed = 0
    while confirmed < channels:
        try:
            msg = await asyncio.wait_for(_next(conn, idle, reply_timeout), reply_timeout)
        except TimeoutError:
            raise BrokerError("timed out waiting for the event subscription",
                              transient=True) from None
        if msg["type"] == "ssubscribe":
            confirmed += 1
    yield flush
    while True:
        msg = await _next(conn, idle, reply_timeout)
        kind = msg["type"]
        if kind == "smessage":
            yield text(msg["channel"]), msg["data"]
        elif kind == "pong":
            waiter = flushes.pop(text(msg["data"] or b""), None)
            if waiter is not None and not waiter.done():
                waiter.set_result(None)


async def _next(conn: Any, idle: float | None, reply_timeout: float) -> dict[str, Any]:
    """The next message of one connection (a pong included); pings it when quiet."""
    while True:
        msg: dict[str, Any] | None = await conn.get_message(timeout=idle)
        if msg is not None:
            return msg
        if idle is None:
            continue
        await conn.ping()
        msg = await conn.get_message(timeout=reply_timeout)
        if msg is None:
            raise BrokerError("no answer to a ping on the event connection "
                              f"within {reply_timeout:g}s", transient=True)
        return msg
