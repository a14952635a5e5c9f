"""The aggregator: grouped tasks become one task when a group is ready (items 37-39)."""

from __future__ import annotations

from typing import Any

import pytest
from component_helpers import (
    MakeWorker,
)
from redis.asyncio import Redis

from asyncq import BrokerError, Client, FakeClock, Inspector, ServeMux, Task
from asyncq._broker import _keys as K
from asyncq.testing import WorkerFactory, wait_until
from tests.helpers.dataplane import lmembers, task_hash, zmembers

pytestmark = pytest.mark.anyio


# ----------------------------------------------------------------- aggregator (37-39)


class Recorder:
    """A group aggregator that records its calls and combines payloads into one task."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[Any]]] = []

    def __call__(self, group: str, tasks: list[Task]) -> Task:
        payloads = [t.json() for t in tasks]
        self.calls.append((group, payloads))
        return Task("batch", {"group": group, "items": sorted(payloads)})


async def pending_tasks(redis: Redis, queue: str) -> list[dict[str, bytes]]:
    ids = await lmembers(redis, K.queue_keys(queue).pending)
    return [await task_hash(redis, queue, task_id) for task_id in ids]


async def test_aggregator_combines_a_group_after_the_grace_period(
    make_worker: MakeWorker, clock: FakeClock, asyncq_queue: str, redis_client: Redis,
) -> None:
    agg = Recorder()
    worker = make_worker(queues={asyncq_queue: 1}, group_aggregator=agg, group_grace_period=1)
    assert worker.aggregator is not None
    client = Client(worker.broker, clock=clock)
    ids = [(await client.enqueue("item", n, queue=asyncq_queue, group="g")).id for n in range(3)]
    assert await worker.aggregator.tick() == 0
    clock.advance(0.5)
    assert await worker.aggregator.tick() == 0
    clock.advance(0.5)
    assert await worker.aggregator.tick() == 1
    assert [(g, sorted(p)) for g, p in agg.calls] == [("g", [0, 1, 2])]
    [combined] = await pending_tasks(redis_client, asyncq_queue)
    assert combined["payload"] == b'{"group":"g","items":[0,1,2]}'
    qk = K.queue_keys(asyncq_queue)
    assert await redis_client.zcard(qk.group("g")) == 0
    assert await redis_client.smembers(qk.groups) == set()
    assert await redis_client.zcard(qk.aggregation_sets) == 0
    for task_id in ids:
        assert await task_hash(redis_client, asyncq_queue, task_id) == {}


async def test_aggregator_respects_the_max_delay(
    make_worker: MakeWorker, clock: FakeClock, asyncq_queue: str, redis_client: Redis,
) -> None:
    agg = Recorder()
    worker = make_worker(queues={asyncq_queue: 1}, group_aggregator=agg, group_grace_period=2,
                         group_max_delay=4)
    assert worker.aggregator is not None
    client = Client(worker.broker, clock=clock)
    made = []
    for n in range(6):  # a task every second: the grace period never passes
        made.append(await worker.aggregator.tick())
        await client.enqueue("item", n, queue=asyncq_queue, group="g")
        clock.advance(1)
    assert made == [0, 0, 0, 0, 1, 0]
    assert [sorted(p) for _, p in agg.calls] == [[0, 1, 2, 3]]
    assert await redis_client.zcard(K.queue_keys(asyncq_queue).group("g")) == 2


async def test_aggregator_respects_the_max_size(
    make_worker: MakeWorker, clock: FakeClock, asyncq_queue: str, redis_client: Redis,
) -> None:
    agg = Recorder()
    worker = make_worker(queues={asyncq_queue: 1}, group_aggregator=agg, group_grace_period=60,
                         group_max_size=3)
    assert worker.aggregator is not None
    client = Client(worker.broker, clock=clock)
    for n in range(5):
        await client.enqueue("item", n, queue=asyncq_queue, group="g")
    assert await worker.aggregator.tick() == 1  # no time passed: the size alone triggers it
    assert await worker.aggregator.tick() == 0  # two left, below the max size
    assert len(agg.calls[0][1]) == 3
    assert await redis_client.zcard(K.queue_keys(asyncq_queue).group("g")) == 2
    assert len(await pending_tasks(redis_client, asyncq_queue)) == 1


async def test_failed_aggregation_keeps_the_group_tasks(
    make_worker: MakeWorker, clock: FakeClock, asyncq_queue: str, redis_client: Redis,
) -> None:
    def broken(group: str, tasks: list[Task]) -> Task:
        raise RuntimeError("aggregator bug")

    worker = make_worker(queues={asyncq_queue: 1}, group_aggregator=broken,
                         group_grace_period=1)
    assert worker.aggregator is not None
    client = Client(worker.broker, clock=clock)
    ids = [(await client.enqueue("item", n, queue=asyncq_queue, group="g")).id for n in range(2)]
    clock.advance(2)
    assert await worker.aggregator.tick() == 0
    assert await lmembers(redis_client, K.queue_keys(asyncq_queue).pending) == []
    for task_id in ids:
        assert await task_hash(redis_client, asyncq_queue, task_id) != {}
    # After the set deadline the staged tasks return to their group.
    clock.advance(3 * 60)
    await worker.broker.aggregation.reclaim_stale_sets(asyncq_queue)
    assert set(await zmembers(redis_client, K.queue_keys(asyncq_queue).group("g"))) == set(ids)


async def test_a_failing_queue_does_not_stop_the_aggregator_for_the_others(
    make_worker: MakeWorker, clock: FakeClock, asyncq_queue: str, redis_client: Redis,
) -> None:
    broken, good = f"{asyncq_queue}-broken", f"{asyncq_queue}-good"
    agg = Recorder()
    worker = make_worker(queues={broken: 2, good: 1}, group_aggregator=agg,
                         group_grace_period=1)
    assert worker.aggregator is not None
    await redis_client.set(K.queue_keys(broken).groups, "not a set")  # every read fails
    client = Client(worker.broker, clock=clock)
    for n in range(2):
        await client.enqueue("item", n, queue=good, group="g")
    clock.advance(2)
    with pytest.raises(BrokerError):  # the broken queue's error, once every queue was tried
        await worker.aggregator.tick()
    assert [(g, sorted(p)) for g, p in agg.calls] == [("g", [0, 1])]
    assert len(await pending_tasks(redis_client, good)) == 1


async def test_running_worker_aggregates_groups(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    got: list[Any] = []
    mux = ServeMux()

    @mux.handler("batch")
    async def batch(task: Task) -> None:
        got.append(task.json())

    async with asyncq_worker(mux, queues={asyncq_queue: 1}, group_aggregator=Recorder(),
                             group_grace_period=1, group_max_size=2) as w:
        assert w.worker.aggregator is not None
        w.worker.aggregator.interval = 0.05
        for n in range(2):
            await asyncq_client.enqueue("item", n, queue=asyncq_queue, group="g")
        await wait_until(lambda: got, timeout=30)
        await w.wait_drained()
    assert got == [{"group": "g", "items": [0, 1]}]




async def test_a_failing_aggregator_leaves_the_group_listed_and_tries_again(
    make_worker: MakeWorker, clock: FakeClock, asyncq_queue: str,
) -> None:
    calls: list[str] = []

    def broken(group: str, tasks: list[Task]) -> Task:
        calls.append(group)
        if len(calls) == 1:
            raise RuntimeError("aggregator bug")
        return Task("batch", len(tasks))

    worker = make_worker(queues={asyncq_queue: 1}, group_aggregator=broken,
                         group_grace_period=1)
    assert worker.aggregator is not None
    client = Client(worker.broker, clock=clock)
    for n in range(3):
        await client.enqueue("item", n, queue=asyncq_queue, group="g")
    clock.advance(2)
    async with Inspector(worker.broker) as inspector:
        assert await worker.aggregator.tick() == 0  # the aggregator raised
        assert [(g.group, g.size) for g in await inspector.groups(asyncq_queue)] == [("g", 3)]
        assert await worker.aggregator.tick() == 0  # resting for the grace period
        clock.advance(1.5)
        assert await worker.aggregator.tick() == 1  # tried again, and it worked
        assert await inspector.groups(asyncq_queue) == []
    assert calls == ["g", "g"]
