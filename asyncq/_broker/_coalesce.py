"""Coalescer: overlapping calls of one kind sent together, one pipeline per round trip.

A call made while nothing is in flight is sent at once, alone (a lone caller waits for no one).
Calls made while a round trip is in flight wait for it and then leave together in the next
pipeline, so 100 coroutines enqueueing at once cost a few round trips instead of 100. Each
caller gets its own reply or its own error; a caller cancelled before its batch leaves is
dropped from it.

A batch leaves in a task of its own (its callers wait on futures, any of whom may be
cancelled without cancelling the others' round trip). The Coalescer owns those tasks: each
one hands its reply or failure to its callers, and ``aclose`` (called by the broker's
``close``) cancels those still in flight and waits for them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from .._errors import BrokerError

_C = TypeVar("_C")  # a call
_R = TypeVar("_R")  # its reply

MAX_BATCH = 1000  # calls per pipeline; more wait for the next round trip


class Coalescer(Generic[_C, _R]):
    """Sends calls with ``send_one`` (nothing in flight) or ``send_many`` (calls that arrived
    during a round trip, together; it returns one reply or exception per call, in order).

    At most ``max_in_flight`` round trips are outstanding. When one ends, the next batch
    leaves on the following turn of the event loop, so the callers it just resumed (who
    usually enqueue again) join that batch instead of racing it alone.
    """

    def __init__(self, send_one: Callable[[_C], Awaitable[_R]],
                 send_many: Callable[[Sequence[_C]], Awaitable[Sequence[_R | BaseException]]],
                 *, max_in_flight: int = 1) -> None:
        self._send_one = send_one
        self._send_many = send_many
        self._max = max_in_flight
        self._in_flight = 0
        self._queue: list[tuple[_C, asyncio.Future[_R]]] = []
        self._flush_due = False
        self._tasks: dict[asyncio.Task[None], list[tuple[_C, asyncio.Future[_R]]]] = {}
        """The batches in flight, by the task sending each."""
        self._unstarted: set[asyncio.Task[None]] = set()
        self._closing = False

    def call(self, call: _C) -> Awaitable[_R]:
        """``call``'s reply, to await; raises what sending it raised (or its own error reply).
        A call that waits for the next batch is the future its batch resolves (no coroutine
        of its own: cancelling its awaiter cancels the future, and the batch skips it)."""
        if self._in_flight < self._max and not self._flush_due:
            return self._call_now(call)
        return self._wait_for_batch(call)

    def _wait_for_batch(self, call: _C) -> asyncio.Future[_R]:
        """``call`` queued for the next batch: the future of its reply."""
        fut: asyncio.Future[_R] = asyncio.get_running_loop().create_future()
        self._queue.append((call, fut))
        return fut

    async def _call_now(self, call: _C) -> _R:
        """Send ``call`` alone, unless round trips started meanwhile (the coroutine was not
        awaited at once): then it waits for the next batch, as it would have."""
        if self._in_flight >= self._max or self._flush_due:
            return await self._wait_for_batch(call)
        self._in_flight += 1
        try:
            return await self._send_one(call)
        finally:
            self._in_flight -= 1
            if self._queue:
                self._flush_soon()

    def _flush_soon(self) -> None:
        """Send what waits on the next loop turn (after the callers just resumed ran)."""
        if not self._flush_due:
            self._flush_due = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_due = False
        while self._queue and self._in_flight < self._max:
            batch = [(c, f) for c, f in self._queue[:MAX_BATCH] if not f.done()]
            del self._queue[:MAX_BATCH]
            if not batch:
                continue
            self._in_flight += 1
            task = asyncio.get_running_loop().create_task(self._send(batch))
            self._tasks[task] = batch
            self._unstarted.add(task)
            task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[None]) -> None:
        self._tasks.pop(task, None)

    async def _send(self, batch: list[tuple[_C, asyncio.Future[_R]]]) -> None:
        self._unstarted.discard(asyncio.current_task())
        try:
            replies = await self._send_many([c for c, _ in batch])
        except BaseException as exc:
            for _, fut in batch:
                if not fut.done():
                    if isinstance(exc, asyncio.CancelledError) and self._closing:
                        fut.set_exception(_closed())
                    elif isinstance(exc, asyncio.CancelledError):
                        fut.cancel()
                    else:
                        fut.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
        else:
            for (_, fut), reply in zip(batch, replies, strict=True):
                if fut.done():
                    continue
                if isinstance(reply, BaseException):
                    fut.set_exception(reply)
                else:
                    fut.set_result(reply)
        finally:
            self._in_flight -= 1
            # Callers of a batch usually call again as soon as they resume: let them join the
            # next batch. A batch of one is a lone caller: it goes back to sending directly.
            if self._queue or len(batch) > 1:
                self._flush_soon()

    async def aclose(self) -> None:
        """Cancel the batches in flight (their callers get a BrokerError) and wait for them."""
        self._closing = True
        try:
            batches = dict(self._tasks)
            for task in batches:
                task.cancel()
            if batches:
                await asyncio.wait(batches)
            for task, batch in batches.items():
                if task in self._unstarted:  # cancelled before it ran: its bookkeeping is ours
                    self._unstarted.discard(task)
                    self._in_flight -= 1
                    for _, fut in batch:
                        if not fut.done():
                            fut.set_exception(_closed())
        finally:
            self._closing = False


def _closed() -> BrokerError:
    return BrokerError("the broker was closed while the call was in flight")
