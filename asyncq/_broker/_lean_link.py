"""Link: one socket to Redis on asyncio's Protocol, parsing with hiredis' reader.

A link writes packed commands and hands each caller its replies in the order they arrive
(Redis answers a connection's commands in the order it read them): a FIFO of waiters, one per
caller, each awaiting one reply or a fixed number (a pipeline). Error replies come back as the
redis-py exceptions of ``BaseParser.parse_error`` (NOSCRIPT as NoScriptError...), in place of
the reply. A link is used once: when its socket breaks, times out or is closed, every caller
whose commands were written gets the redis-py error saying so (the commands may have run), and
``LeanConnection`` opens a new link for the next calls.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any

import hiredis
from redis._parsers.base import BaseParser
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import InvalidResponse, ReadOnlyError, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

_MORE = object()  # hiredis: no complete reply buffered yet
_ONE: list[Any] = []  # the replies list of a one-command waiter: never appended to


class Waiter:
    """A caller's commands (``data``, ``count`` of them) and the future of their replies: the
    reply itself when ``count`` is 1, else the list of them."""

    __slots__ = ("count", "data", "future", "replies", "sent_at")

    def __init__(self, future: asyncio.Future[Any], data: bytes, count: int) -> None:
        self.future = future
        self.data = data
        self.count = count
        self.replies: list[Any] = [] if count > 1 else _ONE
        self.sent_at = 0.0


def fail(waiters: Any, error: BaseException) -> None:
    """Give ``error`` to every waiter still awaited."""
    for waiter in waiters:
        if not waiter.future.done():
            waiter.future.set_exception(error)


class Link(asyncio.Protocol):
    """One connection's socket (see the module docstring).

    ``timeout``: a reply not complete this many seconds after its command was written aborts
    the link (None: wait forever). ``sentinel``: a READONLY reply means the master was
    demoted, so the link breaks (the next one asks the Sentinels again), as in redis-py.
    ``on_lost`` is called once when the link stops being usable.
    """

    def __init__(self, where: str, timeout: float | None, sentinel: bool,
                 on_lost: Callable[[Link], None]) -> None:
        self._where = where
        self._timeout = timeout
        self._sentinel = sentinel
        self._on_lost = on_lost
        self._transport: asyncio.Transport | None = None
        self._reader = hiredis.Reader(replyError=BaseParser.parse_error, notEnoughData=_MORE)
        self._sent: deque[Waiter] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._loop = asyncio.get_running_loop()
        self.last_read = self._loop.time()
        self.usable = True

    @property
    def in_flight(self) -> int:
        """Callers whose replies are still due."""
        return len(self._sent)

    # -- writing

    def write(self, waiters: list[Waiter]) -> None:
        """Write the commands of ``waiters`` in one buffer; a cancelled caller's commands are
        left out (never sent)."""
        transport = self._transport
        if transport is None or not self.usable:
            fail(waiters, RedisConnectionError(f"Connection to {self._where} is closed."))
            return
        now = self._loop.time()
        chunks = []
        sent = self._sent
        for waiter in waiters:
            if not waiter.future.done():
                waiter.sent_at = now
                sent.append(waiter)
                chunks.append(waiter.data)
        if chunks:
            transport.write(chunks[0] if len(chunks) == 1 else b"".join(chunks))
            if self._timer is None and self._timeout is not None:
                self._timer = self._loop.call_at(now + self._timeout, self._check_timeout)

    # -- reading

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.last_read = self._loop.time()
        reader = self._reader
        reader.feed(data)
        sent = self._sent
        while True:
            try:
                reply = reader.gets()
            except hiredis.ProtocolError as exc:
                self.abort(InvalidResponse(f"Protocol error from {self._where}: {exc}"))
                return
            if reply is _MORE:
                return
            if not sent:
                self.abort(InvalidResponse(f"Reply from {self._where} to no command: "
                                           f"{reply!r}"))
                return
            if self._sentinel and isinstance(reply, ReadOnlyError):
                self.abort(RedisConnectionError("The previous master is now a slave"))
                return
            waiter = sent[0]
            if waiter.count == 1:
                sent.popleft()
                if not waiter.future.done():
                    waiter.future.set_result(reply)
                continue
            waiter.replies.append(reply)
            if len(waiter.replies) == waiter.count:
                sent.popleft()
                if not waiter.future.done():
                    waiter.future.set_result(waiter.replies)

    def eof_received(self) -> bool:
        return False  # close the transport: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        if exc is None:
            error = RedisConnectionError("Connection closed by server.")
        else:
            error = RedisConnectionError(f"Error while reading from {self._where} : {exc}")
        self._stop(error)

    # -- ending

    def _check_timeout(self) -> None:
        self._timer = None
        if not self._sent or self._timeout is None:
            return
        due = self._sent[0].sent_at + self._timeout
        if self._loop.time() >= due:
            self.abort(RedisTimeoutError(f"Timeout reading from {self._where}"))
        else:
            self._timer = self._loop.call_at(due, self._check_timeout)

    def abort(self, error: RedisError) -> None:
        """Drop the socket now; every caller still awaiting a reply gets ``error``."""
        transport = self._transport
        self._transport = None
        self._stop(error)
        if transport is not None:
            transport.abort()

    def _stop(self, error: RedisError) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        sent, self._sent = self._sent, deque()
        fail(sent, error)
        if self.usable:
            self.usable = False
            self._on_lost(self)
