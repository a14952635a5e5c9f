"""A result never races its waiter: ``enqueue`` then ``result``/``wait``/``after=`` gets the
outcome however fast the task finished, on a fresh client, with default options — a value
it returned is kept for the result retention, a task that returned nothing leaves a
completion mark; ``retention=0`` keeps nothing at all."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from asyncq import Client, ServeMux, Task, TaskNotFoundError, TaskState
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
                assert await waiter.result(value, timeout=5) == i
                assert await waiter.result(nothing, timeout=5) is None
                done = await waiter.wait(typed, timeout=5)
                assert done.state is TaskState.COMPLETED
                # after= on a task that returned nothing and ended already.
                follow = await waiter.enqueue("value", "next", queue=q, after=[nothing])
                assert await waiter.result(follow, timeout=5) == "next"
        assert await only_completion_mark(redis_client, q, nothing.id)
        # The mark does not hold its id: a new task may take it at once.
        async with Client(asyncq_redis_url) as client:
            reused = await client.enqueue("value", "again", queue=q, task_id=nothing.id)
            assert await client.result(reused, timeout=5) == "again"
            # retention=0 keeps nothing: only a waiter already listening learns the outcome.
            gone = await client.enqueue("nothing", queue=q, retention=0)
            await w.wait_drained()
            assert await task_hash(redis_client, q, gone.id) == {}
        async with Client(asyncq_redis_url) as late:
            with pytest.raises(TaskNotFoundError):
                await late.result(gone, timeout=5)
