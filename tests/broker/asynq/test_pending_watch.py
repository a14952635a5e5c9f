"""The broker's blocked wait on Go's pending list (``watch_pending``, what an idle worker uses
to start a Go-enqueued task at once): it wakes as soon as a task is pending, takes nothing and
leaves the list in its order, so a worker that dies between the wake-up and its dequeue loses
nothing; asyncq's own layout needs no such wait."""

from __future__ import annotations

import time
import uuid

import anyio
import pytest
import structlog
from redis.asyncio import Redis, RedisCluster

from asyncq import ServeMux, Task, Worker
from asyncq._broker._asynq import _codec
from asyncq._broker._asynq import _keys as K
from asyncq._broker._asynq._broker import AsynqBroker
from asyncq._broker._connection import make_broker
from asyncq._testing.redis_server import RedisServer
from asyncq._worker._pickup import MAX_WATCHED_QUEUES
from asyncq.testing import wait_until

pytestmark = pytest.mark.anyio


async def go_enqueue(redis: Redis | RedisCluster, queue: str) -> str:
    """What Go's Client.Enqueue writes: the hash (message, state, pending_since), the id
    LPUSHed on pending (no wake-up of any kind)."""
    task_id = str(uuid.uuid4())
    qk = K.queue_keys(queue)
    msg = _codec.encode(_codec.AsynqTask(type="t", payload=b"{}", id=task_id, queue=queue,
                                         timeout=1800))
    await redis.hset(qk.task(task_id), mapping={"msg": msg, "state": "pending",
                                                "pending_since": time.time_ns()})
    await redis.lpush(qk.pending, task_id)
    return task_id


async def blocked(redis: Redis) -> int:
    """How many connections are blocked in a BLMOVE."""
    lines = (await redis.execute_command("CLIENT", "LIST")).split(b"\n")
    return sum(b"cmd=blmove" in line for line in lines)


async def test_the_wait_wakes_when_go_pushes_and_takes_nothing(
        abroker: AsynqBroker, redis_client: Redis, asyncq_queue: str) -> None:
    q = asyncq_queue
    pending = K.queue_keys(q).pending
    waits = abroker.watch_pending(q)
    woke = anyio.Event()

    async def wait() -> None:
        await waits.__anext__()
        woke.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait)
        await wait_until(lambda: blocked(redis_client), timeout=10)
        assert not woke.is_set()
        ids = [await go_enqueue(redis_client, q) for _ in range(3)]
        with anyio.fail_after(10):
            await woke.wait()
    # The worker "dies" here, between its wake-up and its dequeue: nothing was taken, the
    # order is Go's (the oldest at the right, next to be dequeued).
    await waits.aclose()
    assert await redis_client.lrange(pending, 0, -1) == [i.encode() for i in reversed(ids)]
    raws, _ = await abroker.dequeue(q, 10, "w", 30_000, 1000)
    assert [r.id for r in raws] == ids


async def test_the_wait_wakes_at_once_when_tasks_are_pending(
        abroker: AsynqBroker, redis_client: Redis, asyncq_queue: str) -> None:
    q = asyncq_queue
    first = await go_enqueue(redis_client, q)
    waits = abroker.watch_pending(q)
    try:
        for _ in range(3):  # (each pull waits again: a caller pulls only while idle)
            with anyio.fail_after(10):
                await waits.__anext__()
    finally:
        await waits.aclose()
    assert await redis_client.lrange(K.queue_keys(q).pending, 0, -1) == [first.encode()]


async def test_closing_the_wait_closes_its_connection(
        abroker: AsynqBroker, redis_client: Redis, asyncq_queue: str) -> None:
    waits = abroker.watch_pending(asyncq_queue)
    async with anyio.create_task_group() as tg:
        tg.start_soon(waits.__anext__)
        await wait_until(lambda: blocked(redis_client), timeout=10)
        tg.cancel_scope.cancel()
    await waits.aclose()

    async def gone() -> bool:
        return not await blocked(redis_client)

    await wait_until(gone, timeout=10)


async def test_asyncqs_own_layout_needs_no_wait(asyncq_redis_url: str,
                                                anyio_backend: object) -> None:
    broker = make_broker(asyncq_redis_url)
    try:
        assert broker.watch_pending("q") is None
    finally:
        await broker.close()


async def test_the_wait_goes_to_the_master_of_the_queues_slot(cbroker: AsynqBroker,
                                                              cluster_url: str) -> None:
    queues = [f"c{i}-{uuid.uuid4().hex[:6]}" for i in range(6)]  # (spread over the masters)
    # (a wait sent to another master would be refused: MOVED)
    redis = RedisCluster.from_url("redis://" + cluster_url.split("://")[1].split(",")[0])
    try:
        for q in queues:
            waits = cbroker.watch_pending(q)
            try:
                async with anyio.create_task_group() as tg:
                    woke = anyio.Event()

                    async def wait(w: object = waits, e: anyio.Event = woke) -> None:
                        await w.__anext__()  # type: ignore[attr-defined]
                        e.set()

                    tg.start_soon(wait)
                    await anyio.sleep(0.05)
                    task_id = await go_enqueue(redis, q)
                    with anyio.fail_after(10):
                        await woke.wait()
            finally:
                await waits.aclose()
            assert await redis.lrange(K.queue_keys(q).pending, 0, -1) == [task_id.encode()]
    finally:
        await redis.aclose()


async def test_an_idle_worker_on_a_cluster_starts_go_tasks_at_once(cluster_url: str) -> None:
    queues = [f"w{i}-{uuid.uuid4().hex[:6]}" for i in range(6)]  # (spread over the masters)
    started: set[str] = set()
    mux = ServeMux()

    @mux.handler("t")
    async def handle(task: Task) -> None:
        started.add(task.id)

    redis = RedisCluster.from_url("redis://" + cluster_url.split("://")[1].split(",")[0])

    async def all_idle() -> bool:
        return all([await redis.zcard(K.extra_keys(q).idle) for q in queues])

    try:
        # A poll every 5 minutes: only the waits can start the tasks within the timeout.
        async with Worker(cluster_url + "?wire=asynq", mux, queues=dict.fromkeys(queues, 1),
                          idle_poll_interval=300):
            for q in queues:
                await wait_until(all_idle, timeout=30)
                task_id = await go_enqueue(redis, q)
                await wait_until(lambda t=task_id: t in started, timeout=30)
    finally:
        await redis.aclose()


async def test_without_blmove_the_worker_says_so_once_and_polls(anyio_backend: object) -> None:
    """Redis < 6.2 has no BLMOVE (here: renamed away): one warning, and Go's tasks are taken
    at the idle poll as before."""
    queues = [f"o{i}-{uuid.uuid4().hex[:6]}" for i in range(3)]
    started: set[str] = set()
    mux = ServeMux()

    @mux.handler("t")
    async def handle(task: Task) -> None:
        started.add(task.id)

    with RedisServer(["--rename-command", "BLMOVE", ""]) as server:
        redis = Redis.from_url(server.url)
        try:
            with structlog.testing.capture_logs() as logs:
                async with Worker(server.url + "?wire=asynq", mux,
                                  queues=dict.fromkeys(queues, 1), idle_poll_interval=0.2):
                    ids = [await go_enqueue(redis, q) for q in queues]
                    await wait_until(lambda: set(ids) <= started, timeout=30)
        finally:
            await redis.aclose()
    said = [e for e in logs if "no BLMOVE" in e["event"]]
    assert len(said) == 1 and said[0]["log_level"] == "warning"


async def test_a_worker_waits_on_at_most_max_watched_queues(
        asyncq_redis_url: str, redis_client: Redis) -> None:
    queues = [f"m{i}-{uuid.uuid4().hex[:6]}" for i in range(MAX_WATCHED_QUEUES + 2)]
    with structlog.testing.capture_logs() as logs:
        async with Worker(asyncq_redis_url + "?wire=asynq", ServeMux(),
                          queues=dict.fromkeys(queues, 1), idle_poll_interval=300):
            async def all_idle() -> bool:  # (every wait is sent before the first dequeue)
                return all([await redis_client.zcard(K.extra_keys(q).idle) for q in queues])

            await wait_until(all_idle, timeout=30)
            await wait_until(lambda: _blocked_is(redis_client, MAX_WATCHED_QUEUES), timeout=30)
            assert await blocked(redis_client) == MAX_WATCHED_QUEUES
    said = [e for e in logs if e["event"].startswith("too many queues")]
    assert said and said[0]["watched"] == MAX_WATCHED_QUEUES and said[0]["polled"] == 2


async def _blocked_is(redis: Redis, n: int) -> bool:
    return await blocked(redis) == n
