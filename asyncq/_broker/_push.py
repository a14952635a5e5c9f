"""Push: a subscriber connection of asyncq's own for a single node, the pub/sub twin of the lean
connections (``_lean_link``): a socket on asyncio's Protocol, parsed with hiredis' reader.

It is the idle worker's pickup path (one-hop hand-offs, wake-ups, cancel requests) and the
task events' listener. Each message is parsed as its bytes arrive and queued; the one reader
takes them in order (``PushLink.get``): no per-read timeout, stream reader or dict per message
as in redis-py's PubSub. ``subscribe`` opens it with the client's own settings (address, TLS,
unix socket, AUTH/ACL, SELECT, Sentinel: ``LeanSettings``) and returns once every channel is
confirmed. A connection that heard nothing for ``idle`` seconds is pinged by a timer of its own
(one per connection, not one per message), and aborted when no answer came within
``reply_timeout``. A link is used once: when it breaks, the reader gets the messages that came
before, then the redis-py error; its caller subscribes again and catches up (see the callers).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence
from typing import Any

import hiredis
from redis._parsers.base import BaseParser
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import InvalidResponse, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ._lean_settings import LeanSettings
from ._resp import pack

_MORE = object()  # hiredis: no complete reply buffered yet
_PING = pack(("PING",))


class PushLink(asyncio.Protocol):
    """One subscriber socket (see the module docstring); ``idle`` None: never pinged."""

    def __init__(self, where: str, idle: float | None, reply_timeout: float) -> None:
        self._where = where
        self._idle = idle
        self._reply_timeout = reply_timeout
        self._reader = hiredis.Reader(replyError=BaseParser.parse_error, notEnoughData=_MORE)
        self._items: deque[Any] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._error: RedisError | None = None
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        self._timer: asyncio.TimerHandle | None = None
        self._pinged_at: float | None = None
        self.last_read = self._loop.time()

    # -- reading

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.last_read = self._loop.time()
        reader = self._reader
        reader.feed(data)
        items = self._items
        while True:
            try:
                item = reader.gets()
            except hiredis.ProtocolError as exc:
                self.abort(InvalidResponse(f"Protocol error from {self._where}: {exc}"))
                return
            if item is _MORE:
                break
            items.append(item)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def eof_received(self) -> bool:
        return False  # close the transport: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        self._fail(RedisConnectionError(
            "Connection closed by server." if exc is None
            else f"Error while reading from {self._where} : {exc}"))

    async def get(self, timeout: float | None = None) -> Any:
        """The next reply or push message (a list), in the order they came; an error reply
        as the redis-py exception, returned. Raises the link's error once it broke and every
        message read before was taken; RedisTimeoutError after ``timeout`` seconds."""
        items = self._items
        while not items:
            if self._error is not None:
                raise self._error
            waiter = self._waiter = self._loop.create_future()
            if timeout is None:
                await waiter
                continue
            try:
                async with asyncio.timeout(timeout):
                    await waiter
            except TimeoutError:
                raise RedisTimeoutError(f"Timeout reading from {self._where}") from None
        return items.popleft()

    def put_back(self, items: Sequence[Any]) -> None:
        """Queue ``items`` (taken with ``get``) again, ahead of the rest, in their order."""
        self._items.extendleft(reversed(items))

    # -- writing

    def send(self, data: bytes) -> None:
        """Write ``data`` (packed commands); raises the link's error once it broke."""
        if self._error is not None:
            raise self._error
        assert self._transport is not None
        self._transport.write(data)

    # -- keeping alive

    def start_pings(self) -> None:
        """From now on, ping the connection when it was quiet for ``idle`` seconds (pongs come
        back as messages ``[b"pong", b""]``: subscribe first)."""
        if self._idle is not None and self._error is None:
            self._timer = self._loop.call_at(self.last_read + self._idle, self._check)

    def _check(self) -> None:
        self._timer = None
        if self._error is not None or self._idle is None:
            return
        now = self._loop.time()
        pinged = self._pinged_at
        if pinged is not None and self.last_read < pinged:  # no answer yet
            if now >= pinged + self._reply_timeout:
                self.abort(RedisTimeoutError(
                    f"no answer to a ping on the pub/sub connection to {self._where} within "
                    f"{self._reply_timeout:g}s"))
                return
            self._timer = self._loop.call_at(pinged + self._reply_timeout, self._check)
            return
        self._pinged_at = None
        if now - self.last_read < self._idle:
            self._timer = self._loop.call_at(self.last_read + self._idle, self._check)
            return
        self.send(_PING)
        self._pinged_at = now
        self._timer = self._loop.call_at(now + self._reply_timeout, self._check)

    # -- ending

    def _fail(self, error: RedisError) -> None:
        if self._error is None:
            self._error = error
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def abort(self, error: RedisError) -> None:
        """Drop the socket now; the reader gets ``error`` after the messages already read."""
        self._fail(error)
        transport = self._transport
        self._transport = None
        if transport is not None:
            transport.abort()

    def close(self) -> None:
        """Close the connection (Redis drops its subscriptions with it)."""
        self.abort(RedisConnectionError("the subscription was closed"))


async def subscribe(settings: LeanSettings, command: str, channels: Sequence[str],
                    reply_timeout: float, idle: float | None) -> PushLink:
    """A new push link, through the handshake (AUTH, SETNAME, SELECT), subscribed with
    ``command`` (SUBSCRIBE or SSUBSCRIBE) to every channel of ``channels`` (confirmed). A
    message heard before the last confirmation is kept for the reader. Raises what redis-py
    would: ConnectionError, TimeoutError, AuthenticationError, ResponseError..."""
    made: list[PushLink] = []

    def factory() -> PushLink:
        made.append(PushLink(settings.where, idle, reply_timeout))
        return made[-1]

    await settings.open(factory)
    link = made[0]
    try:
        steps = await settings.handshake()
        link.send(b"".join(step for step, _ in steps) + pack((command, *channels)))
        for _, failed in steps:
            reply = await link.get(reply_timeout)
            if isinstance(reply, Exception):
                raise reply
            if reply != b"OK":
                raise RedisConnectionError(failed)
        confirmation = command.lower().encode()
        confirmed = 0
        early: list[Any] = []
        while confirmed < len(channels):
            item = await link.get(reply_timeout)
            if isinstance(item, Exception):
                raise item
            if item[0] == confirmation:
                confirmed += 1
            else:  # a message on a channel confirmed already
                early.append(item)
        link.put_back(early)
        link.start_pings()
    except BaseException:
        link.close()
        raise
    return link
