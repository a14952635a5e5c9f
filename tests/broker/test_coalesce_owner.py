"""The Coalescer owns the tasks its batches leave in: closing the broker cancels those still
in flight and waits for them, and their callers get a BrokerError, not a stray cancellation."""

from __future__ import annotations

import asyncio

import pytest

from asyncq import BrokerError
from asyncq._broker._coalesce import Coalescer
from asyncq.testing import wait_until

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("started", [True, False], ids=["sending", "not yet sending"])
async def test_closing_ends_coalesced_calls_in_flight_with_a_broker_error(started: bool) -> None:
    sent = asyncio.Event()
    sending = asyncio.Event()

    async def send_one(call: int) -> int:
        sent.set()
        await asyncio.Event().wait()
        return call

    async def send_many(calls: object) -> list[int]:
        sending.set()
        await asyncio.Event().wait()
        return []

    coalescer: Coalescer[int, int] = Coalescer(send_one, send_many)
    first = asyncio.ensure_future(coalescer.call(1))
    await sent.wait()
    batched = [asyncio.ensure_future(coalescer.call(i)) for i in (2, 3)]
    try:
        await wait_until(lambda: len(coalescer._queue) == 2, timeout=30, message="calls queued")
        first.cancel()  # the lone call ends: the two waiting leave together, in a task
        with pytest.raises(asyncio.CancelledError):
            await first
        await wait_until(lambda: coalescer._tasks, timeout=30, message="the batch in flight")
        if started:
            await asyncio.wait_for(sending.wait(), 2)
        await coalescer.aclose()
        assert not coalescer._tasks and coalescer._in_flight == 0
        for call in batched:
            with pytest.raises(BrokerError, match="closed while the call was in flight"):
                await call
    finally:
        for call in [first, *batched]:
            call.cancel()
