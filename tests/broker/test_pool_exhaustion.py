"""More concurrent calls than connections: callers wait for a free connection, none fails."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from asyncq import Client, ConnectionOptions, Inspector, ServeMux, Task, Worker
from asyncq.testing import wait_drained

pytestmark = pytest.mark.anyio


async def test_three_thousand_concurrent_enqueues_share_ten_connections(
    asyncq_redis_url: str, asyncq_queue: str,
) -> None:
    small = ConnectionOptions(max_connections=10)
    async with Client(asyncq_redis_url, connection=small) as client, \
            Inspector(asyncq_redis_url, connection=small) as inspector:
        results = await asyncio.gather(
            *[client.enqueue("t", i, queue=asyncq_queue) for i in range(3000)],
            return_exceptions=True)
        assert [r for r in results if isinstance(r, BaseException)] == []
        infos = await asyncio.gather(*[inspector.queue_info(asyncq_queue) for _ in range(500)],
                                     return_exceptions=True)
        assert [i for i in infos if isinstance(i, BaseException)] == []
        assert {i.pending for i in infos} == {3000}  # type: ignore[union-attr]


async def test_a_worker_with_more_handlers_than_connections_writes_every_result(
    asyncq_redis_url: str, asyncq_client: Client, asyncq_queue: str, redis_client: Redis,
) -> None:
    mux = ServeMux()
    failures: list[BaseException] = []

    @mux.handler("t")
    async def write(task: Task) -> None:
        await asyncio.sleep(0.05)  # all 200 run at once, then all write at once
        await task.write_result(b"r" * 100)

    await asyncq_client.enqueue_many([Task("t", i, queue=asyncq_queue, retention=60)
                                      for i in range(400)])
    worker = Worker(asyncq_redis_url, mux, queues={asyncq_queue: 1}, concurrency=200,
                    connection=ConnectionOptions(max_connections=8),
                    error_handler=lambda t, e: failures.append(e))
    async with worker:
        await wait_drained(redis_client, [asyncq_queue], worker=worker, timeout=60)
    assert failures == [] and worker.processor.failed == 0
