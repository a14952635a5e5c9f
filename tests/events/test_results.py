"""Awaiting tasks: Client.wait / result / apply, pushed by task events, never polled."""

from __future__ import annotations

import asyncio
import time

import pytest
from redis.asyncio import Redis

from asyncq import (
    Client,
    ResultNotKeptError,
    Retry,
    ServeMux,
    Task,
    TaskFailedError,
    TaskInfo,
    TaskNotFoundError,
    TaskState,
)
from asyncq._broker import _keys as K
from asyncq.testing import WorkerFactory, wait_until
from tests.helpers.faults import FaultyBroker

pytestmark = pytest.mark.anyio


def results_mux(gate: asyncio.Event | None = None) -> ServeMux:
    mux = ServeMux()

    @mux.handler("echo")
    async def echo(task: Task) -> object:
        if gate is not None:
            await gate.wait()
        return task.json()

    @mux.handler("bytes")
    async def raw(task: Task) -> bytes:
        return b"\x00raw"

    @mux.handler("big")
    async def big(task: Task) -> str:
        return "x" * 70_000

    @mux.handler("fail")
    async def fail(task: Task) -> None:
        raise ValueError("it broke")

    @mux.handler("flaky")
    async def flaky(task: Task) -> str:
        if task.retried < 2:
            raise Retry(delay=0.05)
        return f"ok after {task.retried}"

    @mux.handler("block")
    async def block(task: Task) -> None:
        await asyncio.Event().wait()

    return mux


async def test_result_of_a_task_that_finishes_while_waited_for(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    gate = asyncio.Event()
    async with asyncq_worker(results_mux(gate), queues={asyncq_queue: 1}):
        info = await asyncq_client.enqueue("echo", {"a": [1, 2]}, queue=asyncq_queue)
        waiting = asyncio.create_task(asyncq_client.result(info, timeout=30))
        listening = K.queue_keys(asyncq_queue).listening
        await wait_until(lambda: redis_client.exists(listening), timeout=30)
        assert not waiting.done()
        gate.set()
        assert await waiting == {"a": [1, 2]}
        # No retention: the result travelled with the completion event only.
        by_id = await asyncq_client.wait(info.id, queue=asyncq_queue, timeout=30)
        assert by_id.state is TaskState.COMPLETED and by_id.result_json() == {"a": [1, 2]}


async def test_a_wait_that_starts_after_the_end_is_answered_at_once(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    async with asyncq_worker(results_mux(), queues={asyncq_queue: 1}) as w:
        kept = await asyncq_client.enqueue("echo", [1], queue=asyncq_queue, retention=60)
        raw = await asyncq_client.enqueue("bytes", queue=asyncq_queue, retention=60)
        await w.wait_drained(asyncq_queue)
    # Nothing listened while they ran; their retention keeps the results.
    async with Client(asyncq_client.broker) as fresh:
        info = await fresh.wait(kept, timeout=30)
        assert info.state is TaskState.COMPLETED and info.result_json() == [1]
        assert await fresh.result(kept, timeout=30) == [1]
        assert await fresh.result(raw, timeout=30) == b"\x00raw"  # bytes stay bytes


async def test_an_unknown_task_and_a_timeout(
    asyncq_client: Client, asyncq_queue: str,
) -> None:
    with pytest.raises(TaskNotFoundError, match="retention"):
        await asyncq_client.result("no-such-task", queue=asyncq_queue, timeout=5)
    info = await asyncq_client.enqueue("echo", queue=asyncq_queue)  # no worker runs it
    began = time.monotonic()
    with pytest.raises(TimeoutError):
        await asyncq_client.result(info, timeout=0.3)
    assert time.monotonic() - began < 30  # no worker runs it: only the timeout ends the wait


async def test_a_failed_task_raises_with_its_error(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    async with asyncq_worker(results_mux(), queues={asyncq_queue: 1}):
        info = await asyncq_client.enqueue("fail", queue=asyncq_queue, max_retry=0)
        with pytest.raises(TaskFailedError, match="it broke") as caught:
            await asyncq_client.result(info, timeout=5)
    assert caught.value.info.state is TaskState.ARCHIVED
    assert caught.value.last_error == "ValueError: it broke"


async def test_a_retried_then_successful_task_gives_its_final_result(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    async with asyncq_worker(results_mux(), queues={asyncq_queue: 1}, forward_interval=0.05):
        info = await asyncq_client.enqueue("flaky", queue=asyncq_queue)
        final = await asyncq_client.wait(info, timeout=30)
    assert final.state is TaskState.COMPLETED and final.retried == 2
    assert final.result_json() == "ok after 2"


async def test_a_cancelled_task_ends_the_wait_as_archived(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    async with asyncq_worker(results_mux(), queues={asyncq_queue: 1}) as w:
        info = await asyncq_client.enqueue("block", queue=asyncq_queue)
        await wait_until(lambda: info.id in w.worker.processor.running, timeout=30)
        waiting = asyncio.create_task(asyncq_client.wait(info, timeout=30))
        await asyncq_client.cancel(info.id)
        final = await waiting
    assert final.state is TaskState.ARCHIVED
    assert final.last_error is not None and "TaskCancelledError" in final.last_error


async def test_apply_enqueues_and_awaits_without_retention(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    async with asyncq_worker(results_mux(), queues={asyncq_queue: 1}, concurrency=20):
        results = await asyncio.gather(*[
            asyncq_client.apply("echo", i, queue=asyncq_queue, timeout=30) for i in range(50)])
    assert results == list(range(50))


async def test_large_results_are_kept_unless_retention_0(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    async with asyncq_worker(results_mux(), queues={asyncq_queue: 1}):
        kept = await asyncq_client.apply("big", queue=asyncq_queue, timeout=30)
        assert kept == "x" * 70_000  # over 64 KiB: read from the task, not the event
        with pytest.raises(ResultNotKeptError, match="retention"):
            await asyncq_client.apply("big", queue=asyncq_queue, retention=0, timeout=5)


async def test_ten_thousand_waiters_share_one_subscription(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis,
) -> None:
    n = 10_000
    infos = await asyncq_client.enqueue_many(
        [Task("echo", i, queue=asyncq_queue) for i in range(n)])
    assert all(isinstance(i, TaskInfo) for i in infos)
    waits = [asyncio.create_task(asyncq_client.result(i, timeout=120)) for i in infos]  # type: ignore[arg-type]

    async def all_watching() -> bool:
        return len(asyncq_client._waits.hub._waiters) == n  # every wait registered

    await wait_until(all_watching, timeout=30)
    clients = await redis_client.client_list()
    assert sum(1 for c in clients if c.get("ssub") not in (None, "0")) == 1
    async with asyncq_worker(results_mux(), queues={asyncq_queue: 1}, concurrency=200):
        results = await asyncio.gather(*waits)
    assert results == list(range(n))


async def test_a_wait_survives_a_broken_event_connection(
    asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    """The task ends while the client cannot listen: once it can again, the wait reads the
    task and returns, without having heard the event."""
    broker = FaultyBroker(redis_client)
    cannot_listen = broker.fault("set_listening", active=False)
    gate = asyncio.Event()
    async with Client(broker=broker) as client, \
            asyncq_worker(results_mux(gate), queues={asyncq_queue: 1}):
        info = await client.enqueue("echo", "late", queue=asyncq_queue, retention=60)
        waiting = asyncio.create_task(client.result(info, timeout=30))
        listening = K.queue_keys(asyncq_queue).listening
        await wait_until(lambda: redis_client.exists(listening), timeout=30)
        cannot_listen.active = True
        assert await redis_client.client_kill_filter(_type="pubsub") >= 1
        await wait_until(lambda: cannot_listen.fired >= 1, timeout=30)  # resubscribing fails
        gate.set()

        async def completed() -> bool:
            fields = await redis_client.hget(K.queue_keys(asyncq_queue).task(info.id), "state")
            return fields == b"completed"

        await wait_until(completed, timeout=30)
        assert not waiting.done()
        cannot_listen.active = False
        assert await waiting == "late"
