"""End to end over ``?wire=asynq``: an asyncq Client enqueues, an asyncq Worker runs the handler,
and the task ends where Go asynq would put it (completed with its retention, or gone)."""

from __future__ import annotations

from datetime import timedelta

from redis.asyncio import Redis

from asyncq import Client, Retry, ServeMux, Task, Worker
from asyncq._broker._asynq import _codec
from asyncq._broker._asynq import _keys as K
from asyncq.testing import wait_until


async def test_client_and_worker_over_asynqs_layout(asyncq_redis_url: str, redis_client: Redis,
                                                    asyncq_queue: str) -> None:
    url = asyncq_redis_url + "?wire=asynq"
    ran: list[tuple[str, bytes]] = []
    failed_once: set[str] = set()
    mux = ServeMux()

    @mux.handler("echo")
    async def echo(task: Task) -> None:
        ran.append((task.id, task.payload))

    @mux.handler("flaky")
    async def flaky(task: Task) -> None:
        if task.id not in failed_once:
            failed_once.add(task.id)
            raise Retry(0, "first run fails")
        ran.append((task.id, task.payload))

    qk = K.queue_keys(asyncq_queue)
    async with Client(url) as client:
        gone = await client.enqueue("echo", b"\x00\x01", queue=asyncq_queue)
        kept = await client.enqueue("echo", b"kept", queue=asyncq_queue,
                                    retention=timedelta(hours=1))
        retried = await client.enqueue("flaky", b"again", queue=asyncq_queue)
        async with Worker(url, mux, queues={asyncq_queue: 1}, idle_poll_interval=0.05,
                          forward_interval=0.1, heartbeat_interval=1.0):
            await wait_until(lambda: len(ran) == 3, timeout=20)

            async def settled() -> bool:
                return (await redis_client.llen(qk.active) == 0
                        and not await redis_client.exists(qk.task(gone.id))
                        and await redis_client.hget(qk.task(retried.id), "state") is None)
            await wait_until(settled, timeout=10)
    assert sorted(ran) == sorted([(gone.id, b"\x00\x01"), (kept.id, b"kept"),
                                  (retried.id, b"again")])
    assert await redis_client.zscore(qk.completed, kept.id) is not None
    h = await redis_client.hgetall(qk.task(kept.id))
    assert h[b"state"] == b"completed"
    assert _codec.decode(h[b"msg"]).completed_at > 0
    assert await redis_client.get(qk.processed) == b"4"
    assert await redis_client.get(qk.failed) == b"1"
    assert await redis_client.llen(qk.pending) == 0
