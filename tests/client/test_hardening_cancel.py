"""Issue 12 item 3: a cancellation survives a pub/sub reconnect. ``cancel`` records a marker
in Redis that the worker reads at its next lease renewal and right after reconnecting; the
pub/sub message stays the fast path. ``cancel`` says whether the task was running."""

from __future__ import annotations

import anyio
import pytest
from redis.asyncio import Redis

from asyncq import Client, Inspector, ServeMux, Task, Worker
from asyncq._broker import CANCEL_REQUESTED, CANCEL_RUNNING, LEASE_KEPT, Outcome
from asyncq._broker import _keys as K
from asyncq._broker._connection import make_broker
from asyncq._testing.redis_server import RedisServer
from asyncq.testing import WorkerFactory, wait_until

pytestmark = pytest.mark.anyio

OWNER = "srv-cancel"


def long_mux(started: anyio.Event, finished: list[str]) -> ServeMux:
    mux = ServeMux()

    @mux.handler("long")
    async def long(task: Task) -> None:
        started.set()
        await anyio.sleep(20)
        finished.append(task.id)

    return mux


async def test_cancel_says_what_it_did(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    asyncq_redis_url: str, redis_client: Redis,
) -> None:
    q = asyncq_queue
    started, finished = anyio.Event(), []
    scheduled = await asyncq_client.enqueue("long", queue=q, process_in=3600)
    assert await asyncq_client.cancel(scheduled.id, queue=q) == "removed"  # (it never runs)
    assert await asyncq_client.cancel(scheduled.id, queue=q) == "not_found"
    assert await asyncq_client.cancel("no-such-task") == "not_found"
    assert not await redis_client.exists(K.queue_keys(q).cancel(scheduled.id))
    info = await asyncq_client.enqueue("long", queue=q)
    async with asyncq_worker(long_mux(started, finished), queues={q: 1}) as w:
        await started.wait()
        async with Inspector(asyncq_redis_url) as inspector:
            assert await inspector.cancel(info.id) == "requested"  # found in its queue
        await w.wait_drained(q)
    state, error = await redis_client.hmget(K.queue_keys(q).task(info.id), "state", "error")
    assert (state, error) == (b"archived", b"TaskCancelledError: task cancelled on request")
    assert finished == []
    assert await asyncq_client.cancel(info.id) == "ended"
    with pytest.raises(TypeError):
        await asyncq_client.cancel(b"id")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        await asyncq_client.cancel("id", queue=" ")


async def test_lease_renewal_reports_a_requested_cancellation(
    asyncq_client: Client, asyncq_redis_url: str, asyncq_queue: str,
) -> None:
    q = asyncq_queue
    broker = make_broker(asyncq_redis_url)
    try:
        info = await asyncq_client.enqueue("t", queue=q)
        (raw,), _ = await broker.dequeue(q, 1, OWNER, 30_000, 1000)
        assert await broker.extend_leases(q, [raw.id], OWNER, 30_000) == [LEASE_KEPT]
        assert await broker.request_cancel(q, info.id) == CANCEL_RUNNING
        assert await broker.extend_leases(q, [raw.id], OWNER, 30_000) == [CANCEL_REQUESTED]
        # The run ends and the task runs again: the old request does not cancel the new run.
        assert await broker.finish([Outcome("requeue", q, info.id)], OWNER) == [True]
        (again,), _ = await broker.dequeue(q, 1, OWNER, 30_000, 1000)
        assert await broker.extend_leases(q, [again.id], OWNER, 30_000) == [LEASE_KEPT]
    finally:
        await broker.close()


async def _archived(redis: Redis, queue: str, task_id: str) -> bool:
    return bool(await redis.hget(K.queue_keys(queue).task(task_id), "state") == b"archived")


@pytest.mark.parametrize("delay", [0.0, 0.02, 0.05])
async def test_cancel_sent_while_pubsub_reconnects_is_honoured(
    delay: float, own_server: RedisServer, asyncq_queue: str,
) -> None:
    q = asyncq_queue
    started, finished = anyio.Event(), []
    killer = Redis.from_url(own_server.url)
    # The heartbeat is slow (2 s): a prompt cancellation comes from the reconnect check.
    worker = Worker(own_server.url, long_mux(started, finished), queues={q: 1},
                    lease_duration=6, heartbeat_interval=2)
    try:
        async with Client(own_server.url) as client, worker:
            info = await client.enqueue("long", queue=q)
            with anyio.fail_after(10):
                await started.wait()
            assert await killer.execute_command("CLIENT", "KILL", "TYPE", "pubsub") >= 1
            await anyio.sleep(delay)
            assert await client.cancel(info.id, queue=q) == "requested"
            # The handler would otherwise run for 20 s.
            await wait_until(lambda: _archived(killer, q, info.id), timeout=15,
                             message="cancelled task archived")
    finally:
        await killer.aclose()
    assert finished == []
