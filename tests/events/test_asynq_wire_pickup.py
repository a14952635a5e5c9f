"""How soon an idle asyncq worker on ``?wire=asynq`` starts a new task. One an asyncq client
enqueued arrives in one hop (leased and published to the idle worker by the enqueue script), so
no poll is involved; one a Go client enqueued wakes nobody (Go's enqueue publishes nothing) and
is taken by the worker's next poll: within ``idle_poll_interval`` (2 s by default) plus one
dequeue."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest
from redis.asyncio import Redis

from asyncq import Client, ServeMux, Task, Worker
from asyncq._broker._asynq import _codec
from asyncq._broker._asynq import _keys as K
from asyncq.testing import wait_until

pytestmark = pytest.mark.anyio
SAMPLES = 5
SLACK = 10.0  # seconds allowed beyond the bound, for a loaded test machine


def started_mux(started: dict[str, float]) -> ServeMux:
    mux = ServeMux()

    @mux.handler("t")
    async def handle(task: Task) -> None:
        started[task.id] = time.monotonic()

    return mux


async def go_enqueue(redis: Redis, queue: str, payload: bytes) -> str:
    """What Go's Client.Enqueue writes (rdb.go Enqueue): the queue registered, the hash with
    only the protobuf message, state and pending_since, the id pushed on pending."""
    task_id = str(uuid.uuid4())
    qk = K.queue_keys(queue)
    msg = _codec.encode(_codec.AsynqTask(type="t", payload=payload, id=task_id, queue=queue,
                                         timeout=1800))
    await redis.sadd(K.QUEUES, queue)
    await redis.hset(qk.task(task_id), mapping={"msg": msg, "state": "pending",
                                                "pending_since": time.time_ns()})
    await redis.lpush(qk.pending, task_id)
    return task_id


def idle(redis: Redis, queue: str) -> Callable[[], object]:
    """True once the worker's last dequeue found nothing (it registered as idle)."""
    async def check() -> bool:
        return bool(await redis.zcard(K.extra_keys(queue).idle))
    return check


async def test_a_task_an_asyncq_client_enqueued_arrives_in_one_hop(
        asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str) -> None:
    q = asyncq_queue
    url = asyncq_redis_url + "?wire=asynq"
    started: dict[str, float] = {}
    # A poll every 5 minutes: only the hand-off can explain a start within SLACK.
    async with Worker(url, started_mux(started), queues={q: 1}, idle_poll_interval=300) as w, \
            Client(url) as client:
        handed = K.extra_keys(q).handoff(w.config.server_id)
        for _ in range(SAMPLES):
            await wait_until(idle(redis_client, q), timeout=10)
            began = time.monotonic()
            info = await client.enqueue("t", queue=q)
            await wait_until(lambda i=info.id: i in started, timeout=30)
            assert started[info.id] - began < SLACK
            # (handed off, not woken: the hand-off is on record for a second)
            assert await redis_client.hexists(handed, info.id)


async def test_a_task_a_go_client_enqueued_is_taken_by_the_next_poll(
        asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str) -> None:
    q = asyncq_queue
    url = asyncq_redis_url + "?wire=asynq"
    interval = 0.3
    started: dict[str, float] = {}
    async with Worker(url, started_mux(started), queues={q: 1}, idle_poll_interval=interval):
        for i in range(SAMPLES):
            await wait_until(idle(redis_client, q), timeout=10)
            began = time.monotonic()
            task_id = await go_enqueue(redis_client, q, b"go %d" % i)
            await wait_until(lambda i=task_id: i in started, timeout=30)
            assert started[task_id] - began < interval + SLACK
        assert await redis_client.llen(K.queue_keys(q).pending) == 0
