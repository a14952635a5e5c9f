"""Task events and awaited results on every deployment (Cluster, Sentinel, TLS, ACL user),
and on a cluster for queues spread over every master."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from topology.cluster import LocalCluster

from asyncq import Client, EventsLost, ServeMux, Task, TaskEvent, TaskFailedError, TaskState, Worker

from .conftest import Deployment
from .test_cluster import queues_on_each_master

pytestmark = pytest.mark.anyio


def mux() -> ServeMux:
    m = ServeMux()

    @m.handler("double")
    async def double(task: Task) -> int:
        return int(task.json()) * 2

    @m.handler("fail")
    async def fail(task: Task) -> None:
        raise ValueError("no")

    return m


async def test_results_and_events_on_every_deployment(deployment: Deployment) -> None:
    q = f"ev-{uuid.uuid4().hex[:8]}"
    async with Client(deployment.url) as client, \
            Worker(deployment.url, mux(), queues={q: 1}, concurrency=5):
        async with client.events(q) as events:
            assert await client.apply("double", 21, queue=q, timeout=20) == 42
            states = []
            async with asyncio.timeout(20):
                async for event in events:
                    assert isinstance(event, TaskEvent)
                    states.append(event.state)
                    if event.final:
                        break
        assert states == [TaskState.PENDING, TaskState.ACTIVE, TaskState.COMPLETED]
        with pytest.raises(TaskFailedError, match="ValueError: no"):
            await client.apply("fail", queue=q, max_retry=0, timeout=20)


async def test_waits_on_queues_of_every_master_share_one_client(cluster: LocalCluster) -> None:
    by_master = queues_on_each_master(cluster)
    queues = list(by_master.values())
    async with Client(cluster.url) as client, \
            Worker(cluster.url, mux(), queues=dict.fromkeys(queues, 1), concurrency=10):
        infos = [await client.enqueue("double", i, queue=q)
                 for i, q in enumerate(queues * 5)]
        async with client.events(queues) as events:
            results = await asyncio.gather(*[
                client.apply("double", i, queue=q, timeout=20)
                for i, q in enumerate(queues * 5)])
            seen: set[str] = set()
            async with asyncio.timeout(30):
                async for event in events:
                    if isinstance(event, EventsLost):
                        # A shard's subscription was replaced under load and says so; the
                        # events that follow still come from every master.
                        continue
                    seen.add(event.queue)
                    if seen == set(queues):
                        break
        assert results == [2 * i for i in range(len(queues) * 5)]
        assert len(infos) == 15


async def test_a_quiet_master_does_not_hold_back_the_events_of_another(
    cluster: LocalCluster,
) -> None:
    """One event stream over a queue on each master: whichever master speaks, its event
    arrives promptly, even while the others stay silent."""
    queues = list(queues_on_each_master(cluster).values())
    async with Client(cluster.url) as client, client.events(queues) as events:
        for q in [*queues, *reversed(queues), *queues]:
            info = await client.enqueue("double", 1, queue=q)
            async with asyncio.timeout(5):
                event = await anext(events)
            assert isinstance(event, TaskEvent)
            assert (event.queue, event.id, event.state) == (q, info.id, TaskState.PENDING)


async def test_many_waits_for_tasks_that_end_at_once_all_get_their_result(
    cluster: LocalCluster,
) -> None:
    """A wait that reads a task already gone must first hear the event still on its way
    (the read and the subscription use different connections), not say 'not found'."""
    queues = list(queues_on_each_master(cluster).values())
    async with Client(cluster.url) as client, \
            Worker(cluster.url, mux(), queues=dict.fromkeys(queues, 1), concurrency=50):
        for _ in range(3):
            results = await asyncio.gather(*[
                client.apply("double", i, queue=queues[i % 3], timeout=20)
                for i in range(300)])
            assert results == [2 * i for i in range(300)]
