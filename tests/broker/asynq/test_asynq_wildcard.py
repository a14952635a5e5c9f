"""Wildcard queues over ``?wire=asynq``: a worker serving a pattern finds the matching queues
of ``asynq:queues`` — announced by an asyncq producer at once, registered by a Go producer
(which announces nothing) within queue_scan_interval."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from asyncq import Client, ServeMux, Task, Worker
from asyncq._broker._asynq import _keys as AK
from asyncq.testing import wait_until

pytestmark = pytest.mark.anyio


def recording_mux(started: list[tuple[str, str]]) -> ServeMux:
    mux = ServeMux()

    @mux.handler("t")
    async def t(task: Task) -> None:
        assert task.id is not None
        started.append((task.queue, task.id))

    return mux


async def test_an_asyncq_producer_announces_a_new_asynq_queue(
    asyncq_redis_url: str, asyncq_queue: str,
) -> None:
    url = asyncq_redis_url + "?wire=asynq"
    started: list[tuple[str, str]] = []
    queue = f"{asyncq_queue}:a"
    async with Client(url) as client, \
            Worker(url, recording_mux(started), queues={f"{asyncq_queue}:*": 1},
                   queue_scan_interval=60, idle_poll_interval=30) as worker:
        info = await client.enqueue("t", queue=queue)
        # (well before the next scan, 60 s, or idle poll, 30 s: the announcement did it)
        await wait_until(lambda: (queue, info.id) in started, timeout=20,
                         message="the new asynq queue served")
        assert worker.discovery is not None and worker.discovery.scans == 1  # at start only
        assert worker.served.names == [queue]


async def test_a_queue_a_go_producer_registered_is_found_by_the_scan(
    asyncq_redis_url: str, asyncq_queue: str, redis_client: Redis,
) -> None:
    url = asyncq_redis_url + "?wire=asynq"
    started: list[tuple[str, str]] = []
    queue = f"{asyncq_queue}:go"
    async with Client(url) as client, \
            Worker(url, recording_mux(started), queues={f"{asyncq_queue}:*": 1},
                   queue_scan_interval=0.5, idle_poll_interval=30):
        await redis_client.sadd(AK.QUEUES, queue)  # as Go's client does: no announcement
        info = await client.enqueue("t", queue=queue)  # (already registered: announces nothing)
        await wait_until(lambda: (queue, info.id) in started, timeout=20,
                         message="the queue Go registered served")
