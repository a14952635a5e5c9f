"""A result never races its waiter: ``enqueue`` then ``result``/``wait``/``after=`` gets the
outcome however fast the task finished, on a fresh client, with default options — a value
it returned is kept for the result retention, a task that returned nothing leaves a
completion mark; ``retention=0`` keeps nothing at all."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from asyncq import Client, ServeMux, Task, TaskNotFoundError, TaskState
from asyncq._broker import _keys as K
from asyncq._defaults import COMPLETION_MARK
from asyncq.testing import WorkerFactory
from tests.helpers.dataplane import only_completion_mark, task_hash

pytestmark = pytest.mark.anyio
TRIES = 20


def fast_mux() -> ServeMux:
    mux = ServeMux()

    @mux.handler("value")
    async def value(task: Task) -> object:
        return task.json()

    @mux.handler("nothing")
    async def nothing(task: Task) -> None:
        return None

    @mux.task("typed:nothing")
    async def typed_nothing() -> None:
        return None

    return mux


async def test_enqueue_then_result_on_a_fresh_client_never_misses_a_fast_task(
    asyncq_redis_url: str, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis,
) -> None:
    q = asyncq_queue
    async with asyncq_worker(fast_mux(), queues={q: 1}, concurrency=20) as w:
        for i in range(TRIES):
            # The task is done before the wait starts: a fresh client subscribes only then.
            async with Client(asyncq_redis_url) as producer:
                value = await producer.enqueue("value", i, queue=q)
                nothing = await producer.enqueue("nothing", queue=q)
                typed = await producer.enqueue("typed:nothing", {}, queue=q)
            await w.wait_drained()
            async with Client(asyncq_redis_url) as waiter:
                assert await waiter.result(value, timeout=30) == i
                assert await waiter.result(nothing, timeout=30) is None
                done = await waiter.wait(typed, timeout=30)
                assert done.state is TaskState.COMPLETED
                # after= on a task that returned nothing and ended already.
                follow = await waiter.enqueue("value", "next", queue=q, after=[nothing])
                assert await waiter.result(follow, timeout=30) == "next"
        assert await only_completion_mark(redis_client, q, nothing.id)
        # The mark does not hold its id: a new task may take it at once.
        async with Client(asyncq_redis_url) as client:
            reused = await client.enqueue("value", "again", queue=q, task_id=nothing.id)
            assert await client.result(reused, timeout=30) == "again"
            # retention=0 keeps nothing: only a waiter already listening learns the outcome.
            gone = await client.enqueue("nothing", queue=q, retention=0)
            await w.wait_drained()
            assert await task_hash(redis_client, q, gone.id) == {}
        async with Client(asyncq_redis_url) as late:
            with pytest.raises(TaskNotFoundError):
                await late.result(gone, timeout=5)


async def test_the_janitor_drops_completion_marks_after_a_minute(
    asyncq_client: Client, asyncq_queue: str, redis_client: Redis,
) -> None:
    broker = asyncq_client.broker
    marks = K.queue_keys(asyncq_queue).marks
    now = broker.workflows.clock.now_ms()
    await redis_client.zadd(marks, {"old": now - COMPLETION_MARK * 1000 - 1, "new": now})
    await broker.maintenance.delete_expired_completed(asyncq_queue, 100)
    assert await redis_client.zrange(marks, 0, -1) == [b"new"]
    # A mark read back is a completed task (of unknown type: only its id and time are kept).
    info = await asyncq_client.wait("new", queue=asyncq_queue, timeout=30)
    assert info.state is TaskState.COMPLETED and info.completed_at is not None
    with pytest.raises(TaskNotFoundError):
        await asyncq_client.wait("old", queue=asyncq_queue, timeout=5)
