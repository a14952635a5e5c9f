"""One-hop pickup: a task that becomes pending while a worker is idle is leased and published to
that worker by the enqueueing script itself, without the worker asking for it."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator

import pytest
import redis.asyncio

import asyncq
from asyncq._broker import _keys as K
from asyncq.testing import WorkerFactory, wait_until
from tests.helpers.inprocess import gate_dequeues

pytestmark = pytest.mark.anyio


@pytest.fixture
async def r(asyncq_redis_url: str) -> AsyncIterator[redis.asyncio.Redis]:
    client = redis.asyncio.Redis.from_url(asyncq_redis_url)
    yield client
    await client.aclose()


def recording_mux(started: list[tuple[str, str]], label: str = "") -> asyncq.ServeMux:
    """Handlers of type "t" record (label, task id) as they start."""
    mux = asyncq.ServeMux()

    @mux.handler("t")
    async def t(task: asyncq.Task) -> None:
        started.append((label, task.id))

    return mux


async def idle_on(r: redis.asyncio.Redis, queue: str, count: int = 1) -> None:
    """Wait until ``count`` workers are registered as idle on ``queue``."""
    idle = K.queue_keys(queue).idle

    async def registered() -> bool:
        return int(await r.zcard(idle)) == count

    await wait_until(registered, timeout=20, message=f"{count} idle worker(s) registered")


async def test_an_idle_worker_gets_a_new_task_without_dequeueing(
    asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    r: redis.asyncio.Redis,
) -> None:
    started: list[tuple[str, str]] = []
    async with asyncq_worker(recording_mux(started, "one"), queues={asyncq_queue: 1},
                             idle_poll_interval=30) as w:
        await idle_on(r, asyncq_queue)
        # From here on a dequeue of this worker never reaches Redis until the task started:
        # only the hand-off can bring it.
        gate = gate_dequeues(w.worker.broker)
        info = await asyncq_client.enqueue("t", queue=asyncq_queue)
        await wait_until(lambda: started, timeout=20, message="handed-off task started")
        assert started == [("one", info.id)]
        gate.set()
        await w.wait_drained(asyncq_queue)
        assert w.worker.processor.processed == 1


async def test_a_lost_hand_off_is_picked_up_by_the_next_dequeue(
    asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    r: redis.asyncio.Redis,
) -> None:
    started: list[tuple[str, str]] = []
    async with asyncq_worker(recording_mux(started), queues={asyncq_queue: 1},
                             idle_poll_interval=0.3, lease_duration=30) as w:
        await idle_on(r, asyncq_queue)
        lost: list[str] = []
        real = w.worker.processor.handoffs.receive
        w.worker.processor.handoffs.receive = lambda handoff: lost.append(handoff.queue)  # type: ignore[method-assign]
        info = await asyncq_client.enqueue("t", queue=asyncq_queue)
        await wait_until(lambda: lost, timeout=20, message="hand-off published")
        w.worker.processor.handoffs.receive = real  # type: ignore[method-assign]
        # Leased to the worker, whose next idle poll (not the 30 s lease) recovers it.
        await wait_until(lambda: started, timeout=20, message="lost hand-off recovered")
        assert started == [("", info.id)]
        await w.wait_drained(asyncq_queue)
    assert not await r.exists(K.queue_keys(asyncq_queue).handoff(w.worker.config.server_id))


async def test_a_paused_queue_hands_nothing_off(
    asyncq_client: asyncq.Client, asyncq_inspector: asyncq.Inspector,
    asyncq_worker: WorkerFactory, asyncq_queue: str, r: redis.asyncio.Redis,
) -> None:
    started: list[tuple[str, str]] = []
    async with asyncq_worker(recording_mux(started), queues={asyncq_queue: 1},
                             idle_poll_interval=30) as w:
        await idle_on(r, asyncq_queue)
        await asyncq_inspector.pause(asyncq_queue)
        info = await asyncq_client.enqueue("t", queue=asyncq_queue)
        task = await asyncq_inspector.task_info(asyncq_queue, info.id)
        assert task.state.value == "pending"  # the enqueue script decided: not handed off
        assert await r.zcard(K.queue_keys(asyncq_queue).idle) == 1
        assert not started
        await asyncq_inspector.unpause(asyncq_queue)
        await wait_until(lambda: started, timeout=20, message="task ran after unpause")
        await w.wait_drained(asyncq_queue)


async def test_idle_workers_take_turns(
    asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    r: redis.asyncio.Redis,
) -> None:
    started: list[tuple[str, str]] = []
    async with asyncq_worker(recording_mux(started, "a"), queues={asyncq_queue: 1},
                             idle_poll_interval=30), \
            asyncq_worker(recording_mux(started, "b"), queues={asyncq_queue: 1},
                          idle_poll_interval=30):
        for n in range(8):
            await idle_on(r, asyncq_queue, 2)
            await asyncq_client.enqueue("t", queue=asyncq_queue)
            await wait_until(lambda n=n: len(started) == n + 1, timeout=20,
                             message="task started")
    owners = [label for label, _ in started]
    # The longest-idle worker is served first: they alternate.
    assert owners.count(owners[0]) == 4, owners
    assert all(x != y for x, y in itertools.pairwise(owners)), owners


async def test_a_registration_nobody_listens_to_gets_nothing(
    asyncq_client: asyncq.Client, asyncq_inspector: asyncq.Inspector,
    asyncq_worker: WorkerFactory, asyncq_queue: str, r: redis.asyncio.Redis,
) -> None:
    qk = K.queue_keys(asyncq_queue)
    # A worker that died while registered: its registration is dropped, the task stays pending.
    await r.zadd(qk.idle, {"30000:dead-worker": 2**50})
    info = await asyncq_client.enqueue("t", queue=asyncq_queue)
    assert (await asyncq_inspector.task_info(asyncq_queue, info.id)).state.value == "pending"
    assert await r.zcard(qk.idle) == 0
    # Behind a live one, the dead registration (longer idle) is skipped.
    started: list[tuple[str, str]] = []
    async with asyncq_worker(recording_mux(started), queues={asyncq_queue: 1},
                             idle_poll_interval=30) as w:
        await w.wait_drained(asyncq_queue)
        await idle_on(r, asyncq_queue)
        await r.zadd(qk.idle, {"30000:dead-worker": 1})  # lapsed long ago
        await r.zadd(qk.idle, {"30000:dead-worker-2": 2**40})
        await asyncq_client.enqueue("t", queue=asyncq_queue)
        await wait_until(lambda: len(started) == 2, timeout=20, message="both tasks ran")
        members = await r.zrange(qk.idle, 0, -1)
        assert b"30000:dead-worker-2" not in members and b"30000:dead-worker" not in members


async def test_a_full_worker_gives_a_hand_off_back_to_an_idle_one(
    asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    r: redis.asyncio.Redis,
) -> None:
    started: list[tuple[str, str]] = []
    release = asyncio.Event()
    busy = asyncq.ServeMux()

    @busy.handler("t")
    async def t(task: asyncq.Task) -> None:
        started.append(("busy", task.id))
        await release.wait()

    async with asyncq_worker(busy, queues={asyncq_queue: 1}, concurrency=1,
                             idle_poll_interval=30) as w:
        await idle_on(r, asyncq_queue)
        await asyncq_client.enqueue("t", queue=asyncq_queue)
        await wait_until(lambda: started, timeout=20, message="first task started")
        # Full now, yet registered again by a stale registration: simulate it, then hand off.
        await r.zadd(K.queue_keys(asyncq_queue).idle,
                     {f"{w.worker.config.lease_ms}:{w.worker.config.server_id}": 2**50})
        second = await asyncq_client.enqueue("t", queue=asyncq_queue)
        async with asyncq_worker(recording_mux(started, "idle"), queues={asyncq_queue: 1},
                                 idle_poll_interval=30):
            await wait_until(lambda: ("idle", second.id) in started, timeout=20,
                             message="given back and run by the idle worker")
            release.set()
            await w.wait_drained(asyncq_queue)
    assert [s for s in started if s[1] == second.id] == [("idle", second.id)]
