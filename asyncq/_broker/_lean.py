"""The lean path to one Redis node: a few pipelined connections of asyncq's own for the hot
script calls (store, dequeue, finish), past redis-py's per-command machinery.

A ``LeanConnection`` keeps one ``Link`` (a socket) at a time, opens it when a call needs it and
opens a new one after it broke. A call made while nothing is in flight on the connection is
written at once (a lone caller waits for no one, not even for the end of the loop turn); calls
made while replies are due are held and written together when the turn ends (``call_soon``), so
100 concurrent producers cost a write or two per round trip, not 100. A call that was
held and never written when its link broke is written on the next link; a call written on a
link that broke gets the redis-py error (it may have run: the caller decides).

A connection idle for longer than the health-check interval is pinged before the next calls
are written (held meanwhile), so they go to a fresh link rather than to a socket that died
quietly. ``LeanPool`` spreads calls over at most ``size`` such connections, opening the next
only while the others have calls in flight.
"""

from __future__ import annotations

import asyncio
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from ._lean_link import Link, Waiter, fail
from ._lean_settings import LeanSettings

#: Lean connections per client: pipelining makes one enough for throughput (Redis runs one
#: command at a time); a second keeps calls moving while one waits on a large reply.
LEAN_CONNECTIONS = 2

_PING = b"*1\r\n$4\r\nPING\r\n"


class LeanConnection:
    """One pipelined connection, re-opened on demand (see the module docstring)."""

    def __init__(self, settings: LeanSettings) -> None:
        self._settings = settings
        self._link: Link | None = None
        self._held: list[Waiter] = []
        self._opening: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def load(self) -> int:
        """Callers whose replies are due (written or held)."""
        link = self._link
        return len(self._held) + (link.in_flight if link is not None else 0)

    def submit(self, data: bytes, count: int) -> asyncio.Future[Any]:
        """Send ``count`` packed commands; the future gets the reply (``count`` 1) or the
        list of replies, error replies as redis-py exceptions in place."""
        loop = asyncio.get_running_loop()
        waiter = Waiter(loop.create_future(), data, count)
        link = self._link
        if self._held or self._opening is not None:
            self._held.append(waiter)  # a write or a connect is already due
        elif link is not None and link.in_flight:
            self._held.append(waiter)  # joins the other calls of this turn
            loop.call_soon(self._end_turn)
        elif self._closed:
            fail((waiter,), RedisConnectionError("the connection was closed"))
        elif link is None or self._check_due(link, loop):
            self._held.append(waiter)
            self._opening = loop.create_task(self._prepare(link))
        else:
            link.write([waiter])  # a lone caller waits for no one
        return waiter.future

    def _check_due(self, link: Link, loop: asyncio.AbstractEventLoop) -> bool:
        interval = self._settings.health_check_interval
        return bool(interval) and not link.in_flight and loop.time() - link.last_read > interval

    @property
    def holding(self) -> bool:
        """Whether calls wait to be written at the end of this turn (or once connected)."""
        return bool(self._held)

    def _end_turn(self) -> None:
        if not self._held or self._opening is not None:
            return
        link = self._link
        if link is not None and link.usable:
            held, self._held = self._held, []
            link.write(held)
        elif not self._closed:
            self._opening = asyncio.get_running_loop().create_task(self._prepare(None))

    def _lost(self, link: Link) -> None:
        """A link stopped: calls held since are written on a new one."""
        if link is not self._link:
            return
        self._link = None
        if self._held and self._opening is None and not self._closed:
            self._opening = asyncio.get_running_loop().create_task(self._prepare(None))

    async def _prepare(self, check: Link | None) -> None:
        """Ping ``check`` (idle too long) or open a link, then write the held calls; when that
        fails, the held calls (none of them written) get the error."""
        try:
            if check is not None and check.usable and not await self._answers(check):
                check.abort(RedisConnectionError(f"no answer to a health check from "
                                                 f"{self._settings.where}"))
            if self._link is None or not self._link.usable:
                self._link = None
                self._link = await self._connect()
        except Exception as exc:
            self._opening = None
            error = exc if isinstance(exc, RedisError) else RedisConnectionError(
                f"Error connecting to {self._settings.where}: {exc!r}")
            held, self._held = self._held, []
            fail(held, error)
            return
        except BaseException:
            self._opening = None
            raise
        self._opening = None
        held, self._held = self._held, []
        if held:
            self._link.write(held)

    async def _answers(self, link: Link) -> bool:
        waiter = Waiter(asyncio.get_running_loop().create_future(), _PING, 1)
        link.write([waiter])
        try:
            await waiter.future
        except RedisError:
            return False
        return True

    async def _connect(self) -> Link:
        """A new link, through the handshake (AUTH, SETNAME, SELECT)."""
        settings = self._settings
        made: list[Link] = []

        def factory() -> Link:
            made.append(Link(settings.where, settings.socket_timeout,
                             settings.sentinel is not None, self._lost))
            return made[-1]

        await settings.open(factory)
        link = made[0]
        try:
            steps = await settings.handshake()
            if steps:
                waiter = Waiter(asyncio.get_running_loop().create_future(),
                                b"".join(command for command, _ in steps), len(steps))
                link.write([waiter])
                replies = await waiter.future
                for reply, (_, failed) in zip(replies if len(steps) > 1 else [replies], steps,
                                              strict=True):
                    if isinstance(reply, Exception):
                        raise reply
                    if reply != b"OK":
                        raise RedisConnectionError(failed)
        except BaseException:
            link.abort(RedisConnectionError(f"connecting to {settings.where} failed"))
            raise
        return link

    def drop_if_idle(self) -> None:
        """Close the link if nothing is in flight on it: the next call opens a new one."""
        link = self._link
        if link is not None and not link.in_flight and not self._held:
            link.abort(RedisConnectionError("dropped after another connection broke"))

    async def aclose(self) -> None:
        """Close the link; callers still waiting get a ConnectionError."""
        self._closed = True
        error = RedisConnectionError("the connection was closed")
        opening = self._opening
        if opening is not None:
            opening.cancel()
            await asyncio.gather(opening, return_exceptions=True)
            self._opening = None
        held, self._held = self._held, []
        fail(held, error)
        if self._link is not None:
            self._link.abort(error)
            self._link = None


class LeanPool:
    """At most ``size`` lean connections to one node (see the module docstring)."""

    def __init__(self, settings: LeanSettings, size: int = LEAN_CONNECTIONS) -> None:
        self.settings = settings
        self._size = max(1, min(size, settings.max_connections))
        self._conns: list[LeanConnection] = []

    def submit(self, data: bytes, count: int = 1) -> asyncio.Future[Any]:
        """``LeanConnection.submit`` on the connection of this loop turn's writes, else on
        the least busy one (a new one when all are busy and the pool is not full)."""
        best: LeanConnection | None = None
        for conn in self._conns:
            if conn.holding:
                return conn.submit(data, count)
            if best is None or conn.load < best.load:
                best = conn
        if best is None or (best.load and len(self._conns) < self._size):
            best = LeanConnection(self.settings)
            self._conns.append(best)
        return best.submit(data, count)

    def drop_idle(self) -> None:
        """Close the idle connections' links (after a connection broke: they likely did)."""
        for conn in self._conns:
            conn.drop_if_idle()

    async def aclose(self) -> None:
        conns, self._conns = self._conns, []
        for conn in conns:
            await conn.aclose()
