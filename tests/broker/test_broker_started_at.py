"""When a task's latest run started: written by the script that leases it, in every path that
starts a run (a dequeue, a one-hop hand-off, the run after a retry), and read back by the
inspector's reads."""

from __future__ import annotations

import asyncio
import time

import pytest
from broker_helpers import LEASE_MS, OWNER, WAITER_TTL_MS, enqueue, finish1
from redis.asyncio import Redis

from asyncq import Client, ConcurrencyLimit, FakeClock, Inspector, ServeMux, Task
from asyncq._broker import Outcome, RedisBroker
from asyncq._broker import _keys as K
from asyncq._clock import ms_to_datetime
from asyncq.testing import WorkerFactory, wait_until
from tests.helpers.dataplane import task_hash

pytestmark = pytest.mark.anyio


async def started_at(redis: Redis, queue: str, task_id: str) -> int | None:
    value = (await task_hash(redis, queue, task_id)).get("started_at")
    return None if value is None else int(value)


async def test_a_dequeue_stamps_each_run_with_the_workers_clock(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str,
) -> None:
    task_id = await enqueue(client, asyncq_queue)
    assert await started_at(redis_client, asyncq_queue, task_id) is None  # never ran
    clock.advance(5)
    first = clock.now_ms()
    await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, WAITER_TTL_MS)
    assert await started_at(redis_client, asyncq_queue, task_id) == first
    # (what the inspector reads of each run: conformance/test_conf_started_at.py)
    clock.advance(2)
    await finish1(broker, Outcome("retry", asyncq_queue, task_id,
                                  retry_at_ms=clock.now_ms() + 1000, error="x"))
    clock.advance(1)
    await broker.maintenance.forward(asyncq_queue, "retry", 10)
    second = clock.now_ms()
    await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, WAITER_TTL_MS)
    assert await started_at(redis_client, asyncq_queue, task_id) == second > first
    clock.advance(3)
    await finish1(broker, Outcome("complete", asyncq_queue, task_id, retention_ms=60_000))
    async with Inspector(broker) as inspector:
        done = await inspector.task_info(asyncq_queue, task_id)
    assert done.completed_at is not None and done.completed_at - done.started_at == \
        ms_to_datetime(clock.now_ms()) - ms_to_datetime(second)


async def test_a_resent_dequeue_keeps_the_start_of_the_run_it_began(
    broker: RedisBroker, client: Client, clock: FakeClock, redis_client: Redis,
    asyncq_queue: str,
) -> None:
    task_id = await enqueue(client, asyncq_queue)
    start = clock.now_ms()
    await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, WAITER_TTL_MS, request_id="r1")
    clock.advance(1)
    raws, _ = await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, WAITER_TTL_MS,
                                   request_id="r1")  # its reply was lost: the same run
    assert [r.id for r in raws] == [task_id]
    assert await started_at(redis_client, asyncq_queue, task_id) == start


async def test_a_one_hop_hand_off_stamps_the_run_it_starts(
    broker: RedisBroker, client: Client, redis_client: Redis, asyncq_queue: str,
) -> None:
    qk = K.queue_keys(asyncq_queue)
    async with redis_client.pubsub() as pubsub:
        await pubsub.ssubscribe(qk.handoff_channel(OWNER))  # the worker listening
        # An empty dequeue registers the worker as idle: the next enqueue hands to it.
        await broker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, WAITER_TTL_MS, one_hop=True)
        before = time.time_ns() // 1_000_000
        task_id = await enqueue(client, asyncq_queue)
        after = time.time_ns() // 1_000_000

        async def handed() -> bool:
            return await pubsub.get_message(ignore_subscribe_messages=True) is not None

        await wait_until(handed, timeout=30, message="hand-off published")
    fields = await task_hash(redis_client, asyncq_queue, task_id)
    assert fields["state"] == b"active" and fields["owner"] == OWNER.encode()
    # Stamped by the enqueueing script, on the Redis server's clock (a local server here).
    stamp = await started_at(redis_client, asyncq_queue, task_id)
    assert stamp is not None and before - 5 <= stamp <= after + 5


async def test_a_task_a_limit_defers_has_not_started(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    release = asyncio.Event()
    started: list[str] = []
    mux = ServeMux()

    @mux.handler("t", limits=[ConcurrencyLimit(1, name="one")])
    async def t(task: Task) -> None:
        assert task.id is not None
        started.append(task.id)
        await release.wait()

    a, b = [await asyncq_client.enqueue("t", queue=asyncq_queue, retention=60)
            for _ in range(2)]
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, concurrency=2) as w:
        inspector = Inspector(asyncq_client.broker)

        async def deferred() -> bool:
            infos = [await inspector.task_info(asyncq_queue, i.id) for i in (a, b)]
            return len(started) == 1 and sorted(i.state.value for i in infos) == [
                "active", "scheduled"]

        await wait_until(deferred, timeout=30, message="one task running, one deferred")
        [waiting] = [i for i in (a, b) if i.id not in started]
        # Leased, then sent back by its limit before its handler ran: no run started.
        assert (await inspector.task_info(asyncq_queue, waiting.id)).started_at is None
        [running] = started
        assert (await inspector.task_info(asyncq_queue, running)).started_at is not None
        release.set()
        await w.wait_drained(include_scheduled=True, timeout=10)
    done = await inspector.task_info(asyncq_queue, waiting.id)
    assert done.state.value == "completed" and done.started_at is not None
