"""``Limiter``: a limit taken by hand, ``async with limiter.acquire(key): ...``.

For code that must hold a limit around part of its work (inside a handler, or outside any
worker). Unlike a declared limit it cannot defer a task: it waits, sleeping until the next token
is due (rate) or trying again with a growing pause (concurrency, at most 0.5 s). A slot taken by
hand is held for ``hold`` seconds and renewed while the block runs, so a process that dies
frees it when the hold ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

from .._broker import LimitClaim, LimitHold, LimitOps, is_broker
from .._defaults import DEFAULT_QUEUE
from .._validate import to_seconds, validate_queue_name
from ._gate import key_text, spec_of
from ._spec import ConcurrencyLimit, Limit, RateLimit


def limit_ops_of(source: object) -> LimitOps:
    """The limit operations of a Client, Worker, Inspector or Broker."""
    broker = source if is_broker(source) else getattr(source, "broker", None)
    if not is_broker(broker):
        raise TypeError(f"limits need a Client, Worker, Inspector or Broker, got {source!r}")
    return broker.limits


class Limiter:
    """A named limit of ``queue``, shared with every worker and handler declaring the same
    name there: ``Limiter(client, asyncq.ConcurrencyLimit(5, name="stripe"))``."""

    def __init__(self, source: Any, limit: Limit, *, queue: str = DEFAULT_QUEUE,
                 hold: float = 30.0) -> None:
        if not isinstance(limit, ConcurrencyLimit | RateLimit):
            raise TypeError(f"limit must be an asyncq.ConcurrencyLimit or RateLimit, "
                            f"got {limit!r}")
        if limit.name is None:
            raise ValueError("a limit used by hand needs a name (name='stripe'): the name is "
                             "what it shares with the handlers declaring the same limit")
        if limit.key is not None:
            raise ValueError("a limit used by hand takes its key in acquire(key), not key=")
        self._ops = limit_ops_of(source)
        self.queue = validate_queue_name(queue)
        self.limit = limit
        self._spec = spec_of(limit)
        self._hold_ms = round(to_seconds(hold, "hold", allow_zero=False) * 1000)

    @contextlib.asynccontextmanager
    async def acquire(self, key: str | int = "", *,
                      timeout: float | None = None) -> AsyncIterator[None]:
        """Wait for a slot (or token) of ``key`` and hold it for the block; TimeoutError
        after ``timeout`` s without one."""
        key = key_text(key)
        limit_s = to_seconds(timeout, "timeout", allow_none=True)
        loop = asyncio.get_running_loop()
        deadline = None if limit_s is None else loop.time() + limit_s
        holder = "m:" + uuid.uuid4().hex
        hold = LimitHold(holder, self._spec, key)
        concurrency = self._spec.kind == "concurrency"
        pause = 0.005
        while True:
            now = self._ops.now_ms()
            claim = LimitClaim(holder, [(self._spec, key)], now + self._hold_ms)
            (due,) = await self._ops.acquire(self.queue, "", [claim])
            if due == 0:
                break
            wait = max((due - now) / 1000, 0.001)
            if concurrency:
                wait = min(wait, pause)
                pause = min(pause * 2, 0.5)
            if deadline is not None and loop.time() + wait > deadline:
                raise TimeoutError(f"no free {self._spec.kind} slot of limit "
                                   f"{self._spec.name!r} (key {key!r}) within {limit_s} s")
            await asyncio.sleep(wait)
        if not concurrency:
            yield
            return
        # The renewer is owned by this block: cancelled and awaited when it ends. (Not an
        # anyio task group: it would wrap an error of the block in an ExceptionGroup.)
        renewer = loop.create_task(self._renew(hold))
        try:
            yield
        finally:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewer
            await self._ops.release(self.queue, "", [hold])

    async def _renew(self, hold: LimitHold) -> None:
        while True:
            await asyncio.sleep(self._hold_ms / 3000)
            with contextlib.suppress(Exception):  # a failed renewal is tried again
                await self._ops.renew(self.queue, hold, self._ops.now_ms() + self._hold_ms)
