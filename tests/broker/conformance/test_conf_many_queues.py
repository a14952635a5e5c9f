"""Reads and samples of many queues at once (the dashboard's overview of a fleet): the last
hour's samples written for every queue given, once a minute whoever asks, and the daily
counters and minute samples of many queues read in pipelines give what reading each queue
alone gives, on every layout and on a cluster (each read goes to its queue's node)."""

from __future__ import annotations

import pytest

from asyncq import Client, FakeClock, Inspector, Task
from asyncq._broker import Broker

pytestmark = pytest.mark.anyio

ON_CLUSTER = True


async def test_many_queues_are_sampled_and_read_as_each_alone(
        broker: Broker, client: Client, clock: FakeClock, asyncq_queue: str) -> None:
    names = [f"{asyncq_queue}-{i}" for i in range(12)]
    await client.enqueue_many([Task("t", None, queue=q) for i, q in enumerate(names)
                               for _ in range(i % 3 + 1)])
    async with Inspector(broker, clock=clock) as inspector:
        assert await inspector.record_minutes(names) == len(names)
        assert await inspector.record_minutes(names) == 0  # once a minute, whoever asks
        clock.advance(60)
        await client.enqueue_many([Task("t", None, queue=q) for q in names[:5]])
        assert await inspector.record_minutes(names) == 12
        histories = await inspector.history_of(names, 3)
        minutes = await inspector.minute_stats_of(names)
        for q in names[:8]:
            assert histories[q] == await inspector.history(q, 3)
            assert minutes[q] == await inspector.minute_stats(q)
        for q in names:  # (other tests list the queues)
            await inspector.delete_queue(q, force=True)
    assert [m.backlog for m in minutes[names[0]]] == [2]  # 1 then 1 more
    assert [m.backlog for m in minutes[names[7]]] == [2]  # 7 % 3 + 1, none added


async def test_a_queue_deleted_after_it_was_listed_gets_no_sample(
        broker: Broker, client: Client, clock: FakeClock, asyncq_queue: str) -> None:
    """A sampler lists the queues, then samples them a while later (a worker's janitor goes
    round them in windows): one deleted meanwhile is not given its minutes key back."""
    await client.enqueue("t", None, queue=asyncq_queue)
    async with Inspector(broker, clock=clock) as inspector:
        listed = await inspector.queues()
        await inspector.delete_queue(asyncq_queue, force=True)
        assert await inspector.record_minutes(listed) >= 0
        assert await inspector.minute_stats_of([asyncq_queue]) == {asyncq_queue: []}
        assert not (await broker.inspect.minute_samples_of([asyncq_queue]))[0]
