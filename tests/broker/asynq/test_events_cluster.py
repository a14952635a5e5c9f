"""asyncq's additions to asynq's layout on a 3-master Redis Cluster: the scripts derive their
extra keys (listening flag, marks, idle workers, hand-off records) from the queue's base, so
they stay in the queue's slot; events come from that slot's master. A Client waits for results
and streams events, and an idle Worker picks tasks up without polling (one hop, else a
wake-up), across queues of every master."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from redis.crc import key_slot
from topology.cluster import three_masters

from asyncq import Client, ServeMux, Task, TaskState, Worker
from asyncq._broker._asynq import _keys as K

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def cluster_url() -> Iterator[str]:
    with three_masters() as cluster:
        yield cluster.url


def test_the_extra_keys_share_their_queues_slot() -> None:
    for q in ("a", "b", "critical"):
        xk = K.extra_keys(q)
        slot = key_slot(K.queue_keys(q).pending.encode())
        for key in (xk.listening, xk.events, xk.waiters, xk.idle, xk.marks, xk.handoff("o"),
                    xk.handoff_channel("o")):
            assert key_slot(key.encode()) == slot, key


async def test_results_events_and_one_hop_pickup_on_a_cluster(cluster_url: str) -> None:
    url = cluster_url + "?wire=asynq"
    queues = [f"c{i}-{uuid.uuid4().hex[:6]}" for i in range(6)]  # (spread over the masters)
    mux = ServeMux()

    @mux.handler("double")
    async def double(task: Task) -> int:
        return int(task.json()) * 2

    @mux.handler("nothing")
    async def nothing(task: Task) -> None:
        return None

    async with Worker(url, mux, queues=dict.fromkeys(queues, 1), idle_poll_interval=30), \
            Client(url) as client:
        async with client.events(queues) as events:
            infos = [await client.enqueue("double", i, queue=q) for i, q in enumerate(queues)]
            assert [await client.result(info, timeout=30) for info in infos] == [
                2 * i for i in range(len(queues))]
            finals = set()
            while len(finals) < len(infos):
                event = await events.__anext__()
                if event.state is TaskState.COMPLETED:
                    finals.add(event.id)
            assert finals == {info.id for info in infos}
        marked = await client.enqueue("nothing", queue=queues[0])
        assert await client.result(marked, timeout=30) is None
    async with Client(url) as late:  # (a fresh client reads the completion mark)
        assert (await late.wait(marked, timeout=30)).state is TaskState.COMPLETED
