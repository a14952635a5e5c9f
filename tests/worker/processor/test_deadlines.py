"""A running task's deadline: its timeout and its deadline, whichever comes first (item 17)."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import anyio
import anyio.lowlevel
import pytest
from processor_helpers import (
    never_soon,
    now_ms,
)
from redis.asyncio import Redis

from asyncq import Client, ServeMux, Task
from asyncq._broker import _keys as K
from asyncq._model._message import TaskMessage
from asyncq._worker._running import NEAR_S, compute_deadline
from asyncq.testing import WorkerFactory, wait_until
from tests.helpers.dataplane import task_hash

pytestmark = pytest.mark.anyio


# ----------------------------------------------------------------- deadlines (item 17)


def _msg(timeout_ms: int = 0, deadline_ms: int = 0) -> TaskMessage:
    return TaskMessage(id="i", type="t", queue="q", timeout_ms=timeout_ms,
                       deadline_ms=deadline_ms)


@pytest.mark.parametrize(
    ("timeout_ms", "deadline_ms", "expected"),
    [
        (5_000, 0, 1_005_000),           # timeout only: now + timeout
        (0, 2_000_000, 2_000_000),       # deadline only: the deadline
        (5_000, 1_003_000, 1_003_000),   # both: the deadline comes first
        (5_000, 9_000_000, 1_005_000),   # both: now + timeout comes first
        (5_000, 1_005_000, 1_005_000),   # both, equal
        (0, 0, 1_000_000 + 30 * 60_000),  # neither (written by hand): 30 minutes
        (-1, 0, 0),                      # timeout=0 without a deadline: no limit
        (-1, 2_000_000, 2_000_000),      # timeout=0 with a deadline: the deadline
    ],
)
def test_compute_deadline(timeout_ms: int, deadline_ms: int, expected: int) -> None:
    assert compute_deadline(1_000_000, _msg(timeout_ms, deadline_ms)) == expected


async def test_timeout_cancels_the_handler_and_retries(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    saw_cancel = asyncio.Event()
    mux = ServeMux()

    @mux.handler("slow")
    async def slow(task: Task) -> None:
        try:
            await anyio.Event().wait()  # runs until cancelled
        except asyncio.CancelledError:
            saw_cancel.set()
            raise

    info = await asyncq_client.enqueue("slow", queue=asyncq_queue, timeout=0.3)
    started = time.monotonic()
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, retry_delay=never_soon) as w:
        await w.wait_drained(timeout=30)
    assert saw_cancel.is_set()
    assert time.monotonic() - started < 30  # the handler alone would run forever
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    assert (fields["state"], fields["retried"]) == (b"retry", b"1")
    # The error says which limit was hit.
    assert fields["error"] == (b"TimeoutError: task timeout exceeded (it ran longer than "
                               b"its timeout)")


async def test_a_timeout_longer_than_the_timer_sweep_still_stops_the_handler_on_time(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    # Far deadlines get their timer from a periodic sweep, not at start (most runs end
    # first): one that lives that long is still stopped at its timeout, not a sweep later.
    timeout = NEAR_S + 0.6
    stopped_after: list[float] = []
    mux = ServeMux()

    @mux.handler("slow")
    async def slow(task: Task) -> None:
        started = time.monotonic()
        try:
            await anyio.Event().wait()
        except asyncio.CancelledError:
            stopped_after.append(time.monotonic() - started)
            raise

    info = await asyncq_client.enqueue("slow", queue=asyncq_queue, timeout=timeout)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, retry_delay=never_soon) as w:
        await w.wait_drained(timeout=10)
    assert len(stopped_after) == 1
    assert timeout - 0.05 <= stopped_after[0] <= timeout + 0.5, stopped_after
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    assert (fields["state"], fields["retried"]) == (b"retry", b"1")


async def test_a_deadline_already_passed_fails_without_running_the_handler(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    from datetime import UTC, datetime, timedelta

    ran: list[str] = []
    mux = ServeMux()

    @mux.handler("late")
    async def late(task: Task) -> None:
        ran.append(task.type)

    info = await asyncq_client.enqueue(
        "late", queue=asyncq_queue, deadline=datetime.now(UTC) + timedelta(milliseconds=50))
    qk = K.queue_keys(asyncq_queue)
    assert info.deadline is not None
    deadline_ms = info.deadline.timestamp() * 1000
    await wait_until(lambda: now_ms() > deadline_ms + 10, timeout=30)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, retry_delay=never_soon) as w:
        await w.wait_drained()
    assert ran == []
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    assert fields["error"] == (b"TimeoutError: task deadline passed (the deadline it was "
                               b"enqueued with)")
    assert await redis_client.zscore(qk.retry, info.id) is not None




@pytest.mark.parametrize("zero", [0, timedelta(0)], ids=["0", "timedelta(0)"])
async def test_timeout_zero_means_no_limit(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, zero: object,
) -> None:
    seen: list[Task] = []
    mux = ServeMux()

    @mux.handler("long")
    async def long(task: Task) -> None:
        seen.append(task)

    info = await asyncq_client.enqueue("long", queue=asyncq_queue, timeout=zero)
    assert info.timeout is None and info.deadline is None  # not the 30-minute default
    async with asyncq_worker(mux, queues={asyncq_queue: 1}) as w:
        await w.wait_drained()
    assert [t.deadline for t in seen] == [None]  # the handler runs without a deadline
    default = await asyncq_client.enqueue("long", queue=asyncq_queue)
    assert default.timeout == timedelta(minutes=30)
