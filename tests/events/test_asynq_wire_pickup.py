"""How soon an idle asyncq worker on ``?wire=asynq`` starts a new task. One an asyncq client
enqueued arrives in one hop (leased and published to the idle worker by the enqueue script);
one a Go client enqueued (Go's enqueue publishes nothing) ends the idle worker's blocked wait
on the queue's pending list, and the worker dequeues it at once. With a poll of minutes, no
poll can explain a start within ``SLACK``. Several workers and queues each run a task once; a
paused queue with tasks costs no busy loop; a killed wait connection comes back."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable

import anyio
import pytest
from redis.asyncio import Redis

from asyncq import Client, Inspector, ServeMux, Task, Worker
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


async def test_a_task_a_go_client_enqueued_starts_at_once(
        asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str) -> None:
    q = asyncq_queue
    url = asyncq_redis_url + "?wire=asynq"
    started: dict[str, float] = {}
    async with Worker(url, started_mux(started), queues={q: 1}, idle_poll_interval=300):
        for i in range(SAMPLES):
            await wait_until(idle(redis_client, q), timeout=10)
            began = time.monotonic()
            task_id = await go_enqueue(redis_client, q, b"go %d" % i)
            await wait_until(lambda i=task_id: i in started, timeout=30)
            assert started[task_id] - began < SLACK
        assert await redis_client.llen(K.queue_keys(q).pending) == 0


async def test_two_workers_on_several_queues_run_each_go_task_once(
        asyncq_redis_url: str, redis_client: Redis) -> None:
    url = asyncq_redis_url + "?wire=asynq"
    queues = [f"pk-{uuid.uuid4().hex[:8]}" for _ in range(3)]
    runs: Counter[str] = Counter()
    mux = ServeMux()

    @mux.handler("t")
    async def handle(task: Task) -> None:
        runs[task.id] += 1

    async def all_idle() -> bool:
        return all([await redis_client.zcard(K.extra_keys(q).idle) == 2 for q in queues])

    ids: list[str] = []
    async with Worker(url, mux, queues=dict.fromkeys(queues, 1), idle_poll_interval=300), \
            Worker(url, mux, queues=dict.fromkeys(queues, 1), idle_poll_interval=300):
        for r in range(3):
            await wait_until(all_idle, timeout=10)
            ids += [await go_enqueue(redis_client, q, b"%d" % r) for q in queues]
            await wait_until(lambda ids=ids: all(i in runs for i in ids), timeout=30)
    assert sorted(runs) == sorted(ids)
    assert set(runs.values()) == {1}


async def test_a_paused_queue_with_go_tasks_does_not_spin(
        asyncq_redis_url: str, redis_client: Redis) -> None:
    url = asyncq_redis_url + "?wire=asynq"
    paused, live = (f"pk-{uuid.uuid4().hex[:8]}" for _ in range(2))
    started: dict[str, float] = {}
    async with Inspector(url) as inspector:
        held = [await go_enqueue(redis_client, paused, b"held") for _ in range(2)]
        await inspector.pause(paused)
        async with Worker(url, started_mux(started), queues={paused: 2, live: 1},
                          idle_poll_interval=300):
            await wait_until(idle(redis_client, live), timeout=10)
            task_id = await go_enqueue(redis_client, live, b"live")
            await wait_until(lambda: task_id in started, timeout=30)
            before = await redis_client.info("commandstats")
            await anyio.sleep(2)  # (a window: what the idle worker sends in it)
            after = await redis_client.info("commandstats")
            sent = {c: after.get(c, {}).get("calls", 0) - before.get(c, {}).get("calls", 0)
                    for c in ("cmdstat_blmove", "cmdstat_evalsha")}
            # A wait answered at once by the paused queue's tasks, again and again, would send
            # thousands; the queue backs off one poll (300 s) after two empty wake-ups.
            assert sent["cmdstat_blmove"] <= 4, sent
            # (the scripts: heartbeat, forwarder and recoverer rounds, at most a few a second)
            assert sent["cmdstat_evalsha"] <= 40, sent
            assert not set(held) & set(started)
            await inspector.unpause(paused)  # (asyncq's unpause wakes the worker)
            await wait_until(lambda: set(held) <= set(started), timeout=30)


async def test_a_killed_wait_connection_comes_back(
        asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str) -> None:
    q = asyncq_queue
    url = asyncq_redis_url + "?wire=asynq"
    started: dict[str, float] = {}

    async def waiting_ids() -> list[bytes]:
        lines = (await redis_client.execute_command("CLIENT", "LIST")).split(b"\n")
        return [line.split(b" ")[0].split(b"=")[1] for line in lines if b"cmd=blmove" in line]

    async with Worker(url, started_mux(started), queues={q: 1}, idle_poll_interval=300):
        await wait_until(idle(redis_client, q), timeout=10)
        await wait_until(waiting_ids, timeout=10)
        for client_id in await waiting_ids():
            await redis_client.execute_command("CLIENT", "KILL", "ID", client_id)
        await wait_until(waiting_ids, timeout=30)  # (waiting again, on a new connection)
        task_id = await go_enqueue(redis_client, q, b"after")
        await wait_until(lambda: task_id in started, timeout=30)


async def test_a_go_task_over_the_queues_concurrency_limit_costs_no_busy_loop(
        asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str) -> None:
    q = asyncq_queue
    url = asyncq_redis_url + "?wire=asynq"
    release = anyio.Event()
    ran: list[str] = []
    mux = ServeMux()

    @mux.handler("t")
    async def handle(task: Task) -> None:
        ran.append(task.id)
        await release.wait()

    async with Inspector(url) as inspector:
        await inspector.set_queue_concurrency(q, 1)
        async with Worker(url, mux, queues={q: 1}, idle_poll_interval=300):
            # (a limited queue registers no idle worker: its waiters flag says it was fetched)
            await wait_until(lambda: redis_client.exists(K.extra_keys(q).waiters), timeout=30)
            ids = [await go_enqueue(redis_client, q, b"%d" % i) for i in range(3)]
            await wait_until(lambda: ran, timeout=30)  # one runs, two wait for its slot
            before = await redis_client.info("commandstats")
            await anyio.sleep(2)  # (a window: what the worker sends in it)
            after = await redis_client.info("commandstats")
            sent = {c: after.get(c, {}).get("calls", 0) - before.get(c, {}).get("calls", 0)
                    for c in ("cmdstat_blmove", "cmdstat_evalsha")}
            assert sent["cmdstat_blmove"] <= 4, sent
            assert sent["cmdstat_evalsha"] <= 40, sent
            assert len(ran) == 1
            release.set()
            await wait_until(lambda: sorted(ran) == sorted(ids), timeout=30)
