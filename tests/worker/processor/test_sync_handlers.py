"""Sync handlers: a plain ``def`` runs in a worker thread, the event loop stays free, leases are
renewed, and what a timeout or shutdown can (and cannot) do to a thread."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
import structlog
from processor_helpers import never_soon
from redis.asyncio import Redis

from asyncq import Client, Handler, ServeMux, Task, Worker
from asyncq._broker import _keys as K
from asyncq.testing import WorkerFactory, wait_until
from tests.helpers.dataplane import task_hash

pytestmark = pytest.mark.anyio


@pytest.fixture
def gate() -> Any:
    """A threading.Event released at the end of the test whatever happens, so no thread
    outlives it."""
    event = threading.Event()
    yield event
    event.set()


async def test_the_loop_stays_responsive_while_sync_handlers_block(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    gate: threading.Event,
) -> None:
    """Ten sync handlers block their threads; an async task enqueued meanwhile is picked up
    at once (on the loop, a blocking handler would hold it for the whole block)."""
    blocked: list[int] = []
    picked_up: list[float] = []
    mux = ServeMux()

    @mux.handler("block")
    def block(task: Task) -> None:
        blocked.append(threading.get_ident())
        gate.wait(timeout=60)  # as time.sleep(60), released early at the end of the test

    @mux.handler("ping")
    async def ping(task: Task) -> None:
        picked_up.append(time.monotonic())

    for _ in range(10):
        await asyncq_client.enqueue("block", queue=asyncq_queue)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, concurrency=11):
        await wait_until(lambda: len(blocked) == 10, message="10 sync handlers blocking")
        assert len(set(blocked)) == 10  # each in its own thread
        sent = time.monotonic()
        await asyncq_client.enqueue("ping", queue=asyncq_queue)
        await wait_until(lambda: picked_up, timeout=30, message="async task picked up")
        assert picked_up[0] - sent < 30  # while the sync handlers block (60 s)
        assert not gate.is_set()  # every sync handler was still blocking meanwhile
        gate.set()


async def test_a_sync_handler_result_middleware_state_and_error_are_those_of_async_ones(
    asyncq_client: Client, asyncq_redis_url: str, asyncq_queue: str, redis_client: Redis,
) -> None:
    calls: list[str] = []

    def middleware(next_handler: Handler) -> Handler:
        async def wrapped(task: Task) -> Any:
            calls.append(f"middleware {task.type}")
            return await next_handler(task)

        return wrapped

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[dict[str, int]]:
        yield {"rate": 3}

    mux = ServeMux()
    mux.use(middleware)

    @mux.handler("double")
    def double(task: Task) -> dict[str, int]:
        return {"n": task.json()["n"] * task.state["rate"]}

    @mux.handler("fail")
    def fail(task: Task) -> None:
        raise ValueError("bad input")

    ok = await asyncq_client.enqueue("double", {"n": 7}, queue=asyncq_queue, retention=60)
    bad = await asyncq_client.enqueue("fail", queue=asyncq_queue)
    async with Worker(asyncq_redis_url, mux, queues={asyncq_queue: 1}, lifespan=lifespan,
                      retry_delay=never_soon):
        assert await asyncq_client.result(ok.id, queue=asyncq_queue, timeout=30) == {"n": 21}
        await wait_until(lambda: _state(redis_client, asyncq_queue, bad.id, "retry"),
                         message="failed sync task retried")
    fields = await task_hash(redis_client, asyncq_queue, bad.id)
    assert b"ValueError: bad input" in fields["error"]
    assert sorted(calls) == ["middleware double", "middleware fail"]


async def _state(redis: Redis, queue: str, task_id: str, expected: str) -> bool:
    fields = await task_hash(redis, queue, task_id)
    return fields.get("state") == expected.encode()


async def test_the_lease_is_renewed_while_a_sync_handler_runs(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis, gate: threading.Event,
) -> None:
    runs: list[str] = []

    def long_job(task: Task) -> str:
        runs.append(task.type)
        gate.wait(timeout=60)
        return "done"

    info = await asyncq_client.enqueue("long", queue=asyncq_queue, retention=60)
    lease_key = K.queue_keys(asyncq_queue).lease
    async with asyncq_worker(long_job, queues={asyncq_queue: 1}, lease_duration=1.5,
                             recover_interval=0.2, recover_grace=0):
        await wait_until(lambda: runs, message="handler started")
        first = await redis_client.zscore(lease_key, info.id)
        assert first is not None

        async def renewed_past_first_expiry() -> bool:
            score = await redis_client.zscore(lease_key, info.id)
            return score is not None and score > first + 1500 and time.time() * 1000 > first

        # Past the first lease's expiry (1.5 s), the lease was renewed and not recovered.
        await wait_until(renewed_past_first_expiry, timeout=30, message="lease renewed")
        gate.set()
        await wait_until(lambda: _state(redis_client, asyncq_queue, info.id, "completed"),
                         message="completed")
    assert runs == ["long"]


async def test_a_timed_out_sync_handler_fails_at_once_and_its_thread_keeps_its_slot(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis, gate: threading.Event,
) -> None:
    """A thread cannot be killed: the timed-out task is retried at once while its thread runs
    on; the thread's result is discarded, and it keeps its slot of ``sync_threads`` until it
    returns, so the next sync task waits for it."""
    events: list[str] = []

    def slow(task: Task) -> str:
        events.append("slow started")
        gate.wait(timeout=10)
        events.append("slow returned")
        return "too late"

    def quick(task: Task) -> str:
        events.append("quick ran")
        return "quick"

    mux = ServeMux()
    mux.handle("slow", slow)
    mux.handle("quick", quick)
    timed = await asyncq_client.enqueue("slow", queue=asyncq_queue, timeout=0.3)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, concurrency=2, sync_threads=1,
                             retry_delay=never_soon) as w:
        threads = w.worker.processor.threads
        await wait_until(lambda: _state(redis_client, asyncq_queue, timed.id, "retry"),
                         message="timed-out task retried")
        fields = await task_hash(redis_client, asyncq_queue, timed.id)
        assert b"timeout" in fields["error"]
        assert events == ["slow started"]  # outcome written while the thread still runs
        assert (threads.busy, threads.left_behind) == (1, 1)
        nxt = await asyncq_client.enqueue("quick", queue=asyncq_queue, retention=60)
        await wait_until(lambda: nxt.id in w.worker.processor.running,
                         message="quick task leased")
        # Its handler is queued on the thread limiter (not run): the slot is still held.
        await wait_until(lambda: threads.limiter.statistics().tasks_waiting == 1,
                         message="quick task waiting for the thread slot")
        assert events == ["slow started"]
        gate.set()
        assert await asyncq_client.result(nxt.id, queue=asyncq_queue, timeout=30) == "quick"
        assert events == ["slow started", "slow returned", "quick ran"]
        await wait_until(lambda: threads.busy == 0, message="slot released")
        assert threads.left_behind == 0
    fields = await task_hash(redis_client, asyncq_queue, timed.id)
    assert fields["state"] == b"retry" and "result" not in fields  # the late result dropped


async def test_shutdown_requeues_a_blocked_sync_handler_and_logs_its_thread(
    asyncq_client: Client, asyncq_redis_url: str, asyncq_queue: str, redis_client: Redis,
    gate: threading.Event,
) -> None:
    started = asyncio.Event()
    loop = asyncio.get_running_loop()

    def stuck(task: Task) -> None:
        loop.call_soon_threadsafe(started.set)
        gate.wait(timeout=10)

    info = await asyncq_client.enqueue("stuck", queue=asyncq_queue)
    with structlog.testing.capture_logs() as logs:
        with anyio.fail_after(30):
            async with Worker(asyncq_redis_url, stuck, queues={asyncq_queue: 1},
                              shutdown_timeout=0.2):
                await started.wait()
    assert await _state(redis_client, asyncq_queue, info.id, "pending")
    left = [e for e in logs if e["event"].startswith("sync handler threads still running")]
    assert len(left) == 1 and left[0]["count"] == 1
