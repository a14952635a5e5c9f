"""The processor runs handlers and stores what a success leaves behind (items 1-3, 9)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from processor_helpers import (
    now_ms,
)
from redis.asyncio import Redis

from asyncq import Client, ServeMux, Task
from asyncq._broker import _keys as K
from asyncq._defaults import RESULT_RETENTION
from asyncq.testing import WorkerFactory, queue_counts
from tests.helpers.dataplane import task_hash

pytestmark = pytest.mark.anyio


# ----------------------------------------------------------------- running (items 1-3)


async def test_pending_and_newly_enqueued_tasks_are_all_processed(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    seen: list[int] = []
    mux = ServeMux()

    @mux.handler("count")
    async def count(task: Task) -> None:
        seen.append(task.json()["n"])

    for n in range(10):
        await asyncq_client.enqueue("count", {"n": n}, queue=asyncq_queue)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, concurrency=3) as w:
        for n in range(10, 20):
            await asyncq_client.enqueue("count", {"n": n}, queue=asyncq_queue)
        await w.wait_drained()
        assert w.worker.processor.processed == 20
    assert sorted(seen) == list(range(20))
    counts = await queue_counts(redis_client, asyncq_queue)
    assert counts["active"] == counts["pending"] == 0
    assert await redis_client.zcard(K.queue_keys(asyncq_queue).lease) == 0


async def test_tasks_of_every_configured_queue_are_processed(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    queues = {f"{asyncq_queue}-critical": 6, f"{asyncq_queue}-default": 3,
              f"{asyncq_queue}-low": 1}
    seen: Counter[str] = Counter()
    mux = ServeMux()

    @mux.handler("job")
    async def job(task: Task) -> None:
        seen[task.queue] += 1

    for queue in queues:
        for _ in range(4):
            await asyncq_client.enqueue("job", queue=queue)
    async with asyncq_worker(mux, queues=queues, concurrency=2) as w:
        await w.wait_drained()
    assert seen == {queue: 4 for queue in queues}
    for queue in queues:
        assert (await queue_counts(redis_client, queue))["active"] == 0


async def test_big_integers_in_a_json_payload_round_trip_exactly(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    payload = {"id": 9_007_199_254_740_993, "max": 2**63 - 1, "umax": 2**64 - 1, "neg": -(2**63)}
    got: list[Any] = []
    mux = ServeMux()

    @mux.handler("big")
    async def big(task: Task) -> None:
        got.append(task.json())

    await asyncq_client.enqueue("big", payload, queue=asyncq_queue)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}) as w:
        await w.wait_drained()
    assert got == [payload]
    assert all(type(v) is int for v in got[0].values())


async def test_handler_gets_task_metadata(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    got: list[Task] = []
    mux = ServeMux()

    @mux.handler("meta")
    async def meta(task: Task) -> None:
        got.append(task)

    info = await asyncq_client.enqueue("meta", b"\x00raw", queue=asyncq_queue, max_retry=7,
                                       timeout=60, headers={"trace": "abc"})
    before = now_ms()
    async with asyncq_worker(mux, queues={asyncq_queue: 1}) as w:
        await w.wait_drained()
    [task] = got
    assert (task.id, task.type, task.queue, task.payload) == (info.id, "meta", asyncq_queue,
                                                             b"\x00raw")
    assert (task.max_retry, task.retried, task.headers) == (7, 0, {"trace": "abc"})
    assert task.deadline is not None
    assert before + 59_000 <= task.deadline.timestamp() * 1000 <= now_ms() + 60_000


@pytest.mark.parametrize("kind", ["async function", "sync function"])
async def test_a_plain_function_works_as_the_handler(
    kind: str, asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    seen: list[str] = []

    async def async_handler(task: Task) -> None:
        seen.append(task.type)

    def sync_handler(task: Task) -> None:
        seen.append(task.type)

    handler: Any = async_handler if kind == "async function" else sync_handler
    await asyncq_client.enqueue("anything", queue=asyncq_queue)
    async with asyncq_worker(handler, queues={asyncq_queue: 1}) as w:
        await w.wait_drained()
    assert seen == ["anything"]


# ----------------------------------------------------------------- retention (item 9)


async def test_retention_keeps_completed_tasks_with_their_result(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    queues = [f"{asyncq_queue}-a", f"{asyncq_queue}-b"]
    mux = ServeMux()

    @mux.handler("returns")
    async def returns(task: Task) -> Any:
        return {"sum": 3}

    @mux.handler("writes")
    async def writes(task: Task) -> None:
        assert await task.write_result(b"partial") == 7

    @mux.handler("plain")
    async def plain(task: Task) -> str:
        return "not kept"

    @mux.handler("nothing")
    async def nothing(task: Task) -> None:
        return None

    kept: dict[str, tuple[str, str]] = {}
    dropped: list[tuple[str, str]] = []
    marked: list[tuple[str, str]] = []
    for queue in queues:
        kept[(await asyncq_client.enqueue("returns", queue=queue, retention=60)).id] = (
            queue, "returns")
        kept[(await asyncq_client.enqueue("writes", queue=queue, retention=3600)).id] = (
            queue, "writes")
        # A value returned without a retention is kept for the result retention.
        kept[(await asyncq_client.enqueue("plain", queue=queue)).id] = (queue, "plain")
        dropped.append((queue, (await asyncq_client.enqueue("plain", queue=queue,
                                                            retention=0)).id))
        marked.append((queue, (await asyncq_client.enqueue("nothing", queue=queue)).id))
    before = now_ms()
    async with asyncq_worker(mux, queues=dict.fromkeys(queues, 1)) as w:
        await w.wait_drained()
    after = now_ms()
    for task_id, (queue, kind) in kept.items():
        fields = await task_hash(redis_client, queue, task_id)
        assert fields["state"] == b"completed"
        completed_at = int(fields["completed_at"])
        assert before <= completed_at <= after
        retention = {"returns": 60_000, "writes": 3_600_000,
                     "plain": RESULT_RETENTION * 1000}[kind]
        score = await redis_client.zscore(K.queue_keys(queue).completed, task_id)
        assert score == completed_at + retention
        assert fields["result"] == {"returns": b'{"sum":3}', "writes": b"partial",
                                    "plain": b'"not kept"'}[kind]
    for queue, task_id in dropped:
        assert await task_hash(redis_client, queue, task_id) == {}
    # Returning nothing leaves only a completion mark: its id and when, in the queue's marks.
    for queue, task_id in marked:
        assert await task_hash(redis_client, queue, task_id) == {}
        completed_at = await redis_client.zscore(K.queue_keys(queue).marks, task_id)
        assert completed_at is not None and before <= completed_at <= after
    for queue in queues:
        assert (await queue_counts(redis_client, queue))["completed"] == 3


