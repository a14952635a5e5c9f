"""The processor keeps going when handlers misbehave."""

from __future__ import annotations

import asyncio
import time

import pytest
import structlog.testing
from processor_helpers import (
    never_soon,
)
from redis.asyncio import Redis

import asyncq
from asyncq import Client, ServeMux, Task, Worker
from asyncq._broker import _keys as K
from asyncq._model._message import TaskMessage
from asyncq._worker._outcomes import error_text
from asyncq.testing import WorkerFactory, queue_counts, wait_until
from tests.helpers.dataplane import task_hash

pytestmark = pytest.mark.anyio


# ----------------------------------------------------------------- robustness


async def test_unknown_task_type_follows_the_retry_path(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    mux = ServeMux()

    @mux.handler("known")
    async def known(task: Task) -> None:
        pass

    info = await asyncq_client.enqueue("unknown:type", queue=asyncq_queue)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, retry_delay=never_soon) as w:
        await w.wait_drained()
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    assert (fields["state"], fields["retried"]) == (b"retry", b"1")
    assert fields["error"] == (
        b"HandlerNotFoundError: no handler registered for task type 'unknown:type'")


async def test_paused_queue_is_skipped_and_unpausing_wakes_the_worker(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    paused, other = f"{asyncq_queue}-paused", f"{asyncq_queue}-other"
    seen: list[str] = []
    mux = ServeMux()

    @mux.handler("job")
    async def job(task: Task) -> None:
        seen.append(task.queue)

    async with asyncq_worker(mux, queues={paused: 5, other: 1}, idle_poll_interval=300) as w:
        await w.worker.broker.pause(paused)
        await asyncq_client.enqueue("job", queue=paused)
        await asyncq_client.enqueue("job", queue=other)
        await w.wait_drained(other)
        assert seen == [other]
        assert (await queue_counts(redis_client, paused))["pending"] == 1
        # The worker is idle now, its next poll minutes away; only the pub/sub wake can bring
        # it back within the (generous) deadline.
        assert await w.worker.broker.unpause(paused)
        await wait_until(lambda: paused in seen, timeout=30, message="woken by the unpause")
        await w.wait_drained()
    assert seen == [other, paused]


async def test_an_idle_worker_starts_a_new_task_at_once(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    started: list[float] = []
    mux = ServeMux()

    @mux.handler("ping")
    async def ping(task: Task) -> None:
        started.append(time.monotonic())

    # The idle poll minutes away: each start within the (generous) bound is the wake's doing.
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, idle_poll_interval=300) as w:
        latencies = []
        for n in range(20):
            sent = time.monotonic()
            await asyncq_client.enqueue("ping", queue=asyncq_queue)
            await wait_until(lambda n=n: len(started) > n, timeout=30)
            latencies.append(started[n] - sent)
        await w.wait_drained()
    assert max(latencies) < 20, latencies


async def test_undecodable_message_is_archived_and_the_worker_carries_on(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    qk = K.queue_keys(asyncq_queue)
    await redis_client.hset(qk.task("garbage"), mapping={"msg": b"\xff not json",
                                                         "state": "pending"})
    await redis_client.lpush(qk.pending, "garbage")
    seen: list[str] = []
    mux = ServeMux()

    @mux.handler("good")
    async def good(task: Task) -> None:
        seen.append(task.type)

    async with asyncq_worker(mux, queues={asyncq_queue: 1}) as w:
        await w.wait_drained()
        await asyncq_client.enqueue("good", queue=asyncq_queue)
        await w.wait_drained()
    fields = await task_hash(redis_client, asyncq_queue, "garbage")
    assert fields["state"] == b"archived"
    assert fields["error"].startswith(b"DecodeError: task message is not valid JSON")
    assert seen == ["good"]


async def test_message_naming_another_task_is_archived(
    asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    qk = K.queue_keys(asyncq_queue)
    msg = TaskMessage(id="other-id", type="t", queue=asyncq_queue).encode()
    await redis_client.hset(qk.task("real-id"), mapping={"msg": msg, "state": "pending"})
    await redis_client.lpush(qk.pending, "real-id")
    async with asyncq_worker(ServeMux(), queues={asyncq_queue: 1}) as w:
        await w.wait_drained()
    fields = await task_hash(redis_client, asyncq_queue, "real-id")
    assert fields["state"] == b"archived"
    assert fields["error"].startswith(b"DecodeError: message names task 'other-id'")


def test_worker_config_rejects_bad_priorities() -> None:
    with pytest.raises(ValueError, match="priority"):
        asyncq.WorkerConfig(queues={"q": 0})
    with pytest.raises(ValueError, match="non-empty"):
        asyncq.WorkerConfig(queues={})


async def test_a_cancel_arriving_after_the_handler_returned_does_not_fail_the_task(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    """The handler has returned but its completion is not processed yet when a cancellation
    (or the deadline timer) fires: the task succeeded and must be recorded as such."""
    mux = ServeMux()
    cancel_results: list[bool] = []
    holder: dict[str, Worker] = {}

    @mux.handler("racy")
    async def racy(task: Task) -> str:
        processor = holder["w"].processor

        def cancel() -> None:
            assert task.id is not None
            cancel_results.append(processor.cancel(task.id, "cancel"))

        asyncio.get_running_loop().call_soon(cancel)  # runs before the done callback
        return "finished"

    async with asyncq_worker(mux, queues={asyncq_queue: 1}) as w:
        holder["w"] = w.worker
        info = await asyncq_client.enqueue("racy", queue=asyncq_queue, retention=60)
        await w.wait_drained()
    assert cancel_results == [False]
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    assert (fields["state"], fields["result"]) == (b"completed", b'"finished"')


@pytest.mark.parametrize(
    ("exc", "text"),
    [(ValueError("bad value"), "ValueError: bad value"), (ValueError(), "ValueError"),
     (KeyError("k"), "KeyError: 'k'"),
     (asyncq.HandlerNotFoundError("x"), "HandlerNotFoundError: x")],
)
def test_stored_error_text_is_type_and_message(exc: BaseException, text: str) -> None:
    assert error_text(exc) == text


@pytest.mark.parametrize("policy", ["retry", "archive"])
async def test_an_unknown_type_is_logged_once_without_a_traceback(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
    policy: str,
) -> None:
    mux = ServeMux()

    @mux.handler("known")
    async def known(task: Task) -> None:
        pass

    ids = [(await asyncq_client.enqueue("typo:tpye", i, queue=asyncq_queue)).id
           for i in range(3)]
    with structlog.testing.capture_logs() as logs:
        async with asyncq_worker(mux, queues={asyncq_queue: 1}, retry_delay=never_soon,
                                 unknown_type=policy) as w:
            await w.wait_drained()
    unknown = [e for e in logs if "no handler" in e["event"] or e["event"].startswith("task ")]
    assert [e["event"] for e in unknown] == ["no handler for this task type"]
    assert "exc_info" not in unknown[0]
    states = {(await task_hash(redis_client, asyncq_queue, i))["state"] for i in ids}
    assert states == ({b"retry"} if policy == "retry" else {b"archived"})
