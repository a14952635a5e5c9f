"""Cancel as Celery's revoke: a task waiting to run (pending, scheduled, retry, aggregating) is
removed and never runs, whoever waits for it learns it, its uniqueness lock is released; a
task that ended is left alone. The same on asyncq's layout and on Go asynq's (``?wire=asynq``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from redis.asyncio import Redis

from asyncq import (
    CancelOutcome,
    Client,
    Inspector,
    ServeMux,
    Task,
    TaskFailedError,
    TaskNotFoundError,
    TaskState,
    WorkflowState,
    chain,
)
from asyncq._broker import _keys as K
from asyncq._broker._asynq import _keys as AK
from asyncq._testing.harness import WorkerFactory
from asyncq.testing import wait_until

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncq", "asynq"])
def layout(request: pytest.FixtureRequest) -> Iterator[str]:
    yield request.param


def listening_key(layout: str, queue: str) -> str:
    """The flag a listening Client keeps alive, so the scripts publish task events."""
    return AK.extra_keys(queue).listening if layout == "asynq" else K.queue_keys(queue).listening


async def state_of(inspector: Inspector, queue: str, task_id: str) -> TaskState | None:
    try:
        return (await inspector.task_info(queue, task_id)).state
    except TaskNotFoundError:
        return None


async def test_a_cancelled_task_waiting_to_run_is_removed_and_never_runs(
    layout: str, asyncq_redis_url: str, asyncq_queue: str, redis_client: Redis,
) -> None:
    q = asyncq_queue
    url = asyncq_redis_url + ("?wire=asynq" if layout == "asynq" else "")
    ran: list[Any] = []
    mux = ServeMux()

    @mux.handler("t")
    async def t(task: Task) -> None:
        ran.append(task.json())

    @mux.handler("fail")
    async def fail(task: Task) -> None:
        raise RuntimeError("try again in an hour")

    workers = WorkerFactory(url)
    async with Client(url) as client, Inspector(url) as inspector:
        try:
            done = await client.enqueue("t", "done", queue=q, retention=600)
            retrying = await client.enqueue("fail", queue=q, max_retry=3)
            async with workers(mux, queues={q: 1}, retry_delay=lambda n, e, task: 3600) as w:
                await w.wait_drained(q)
            assert await state_of(inspector, q, retrying.id) is TaskState.RETRY
            waiting = {
                "pending": await client.enqueue("t", "pending", queue=q),
                "scheduled": await client.enqueue("t", "scheduled", queue=q, process_in=3600),
                "aggregating": await client.enqueue("t", "grouped", queue=q, group="g"),
                "unique": await client.enqueue("t", "unique", queue=q, unique=3600),
                "retry": retrying,
            }
            for name, info in waiting.items():
                expected = TaskState.PENDING if name == "unique" else TaskState(name)
                assert await state_of(inspector, q, info.id) is expected

            told: list[str] = []

            async def wait_for_pending() -> None:
                with pytest.raises(TaskFailedError) as failed:
                    await client.result(waiting["pending"].id, queue=q, timeout=30)
                told.append(str(failed.value))

            async with anyio.create_task_group() as tg:
                tg.start_soon(wait_for_pending)
                await wait_until(lambda: redis_client.exists(listening_key(layout, q)),
                                 timeout=10)
                for info in waiting.values():
                    assert await client.cancel(info.id, queue=q) is CancelOutcome.REMOVED
            assert len(told) == 1 and "cancelled before it ran" in told[0]
            for info in waiting.values():
                assert await state_of(inspector, q, info.id) is None
                assert await client.cancel(info.id, queue=q) is CancelOutcome.NOT_FOUND
            assert await client.cancel(done.id, queue=q) is CancelOutcome.ENDED
            assert not await client.cancel(done.id)  # (false: nothing was done)
            again = await client.enqueue("t", "unique again", queue=q, unique=3600)
            async with workers(mux, queues={q: 1}) as w:
                await w.wait_drained(q)
            assert await state_of(inspector, q, again.id) is not TaskState.PENDING
            assert ran == ["done", "unique again"]
        finally:
            await workers.aclose()


async def test_cancelling_a_workflow_step_waiting_to_run_cancels_its_workflow(
    asyncq_client: Client, asyncq_inspector: Inspector, asyncq_queue: str,
    asyncq_worker: WorkerFactory,
) -> None:
    """The first step of a chain is removed before any worker ran it: the workflow ends
    cancelled, and its second step never runs."""
    ran: list[Any] = []
    mux = ServeMux()

    @mux.handler("t")
    async def t(task: Task) -> None:
        ran.append(task.json())

    handle = await asyncq_client.enqueue_workflow(
        chain(Task("t", "first", queue=asyncq_queue), Task("t", "second", queue=asyncq_queue)))
    assert await asyncq_client.cancel(f"{handle.id}.0", queue=asyncq_queue) == "removed"
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, workflow_interval=0.2):
        with pytest.raises(TaskFailedError, match="cancelled"):
            await asyncq_client.result(handle.id, timeout=30)
    assert (await asyncq_inspector.workflow(handle.id)).state is WorkflowState.CANCELLED
    assert ran == []
