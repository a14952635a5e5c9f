"""The forwarder: due scheduled and retry tasks become pending (items 29, 30)."""

from __future__ import annotations

import time

import pytest
from component_helpers import (
    MakeWorker,
)
from redis.asyncio import Redis

from asyncq import Client, FakeClock, ServeMux, Task
from asyncq._broker import Outcome
from asyncq._broker import _keys as K
from asyncq.testing import WorkerFactory, wait_until
from tests.helpers.dataplane import lmembers, task_hash, zmembers

pytestmark = pytest.mark.anyio


# ----------------------------------------------------------------- forwarder (29-30)


async def test_forwarder_moves_due_scheduled_and_retry_tasks_to_pending(
    make_worker: MakeWorker, clock: FakeClock, asyncq_queue: str, redis_client: Redis,
) -> None:
    worker = make_worker(queues={asyncq_queue: 1})
    client = Client(worker.broker, clock=clock)
    qk = K.queue_keys(asyncq_queue)
    start = clock.now_ms()
    already = (await client.enqueue("t", queue=asyncq_queue)).id
    due = (await client.enqueue("t", queue=asyncq_queue, process_in=10)).id
    future = (await client.enqueue("t", queue=asyncq_queue, process_in=100)).id
    retry_id = (await client.enqueue("t", queue=asyncq_queue, process_in=1)).id
    clock.advance(1)
    assert await worker.forwarder.tick() == start + 10_000  # the next due time
    assert await lmembers(redis_client, qk.pending) == [retry_id, already]
    # retry_id runs, fails, and is due for retry in 9 s, together with `due`.
    raws, _ = await worker.broker.dequeue(asyncq_queue, 2, "w", 30_000, 1000)
    assert {r.id for r in raws} == {already, retry_id}
    await worker.broker.finish([
        Outcome("retry", asyncq_queue, retry_id, retry_at_ms=clock.now_ms() + 9000,
                error="E: x"),
        Outcome("done", asyncq_queue, already)], "w")
    clock.advance(9)  # exactly the due time of both: a score equal to now is forwarded
    assert await worker.forwarder.tick() == start + 100_000
    assert set(await lmembers(redis_client, qk.pending)) == {due, retry_id}
    for task_id in (due, retry_id):
        fields = await task_hash(redis_client, asyncq_queue, task_id)
        assert (fields["state"], int(fields["pending_since"])) == (b"pending",
                                                                     clock.now_ms())
    assert set(await zmembers(redis_client, qk.scheduled)) == {future}
    assert await zmembers(redis_client, qk.retry) == {}
    assert worker.forwarder.forwarded == 3


async def test_forwarder_sends_a_due_grouped_task_to_its_group(
    make_worker: MakeWorker, clock: FakeClock, asyncq_queue: str, redis_client: Redis,
) -> None:
    worker = make_worker(queues={asyncq_queue: 1})
    info = await Client(worker.broker, clock=clock).enqueue(
        "t", queue=asyncq_queue, process_in=5, group="batch")
    clock.advance(5)
    assert await worker.forwarder.tick() is None
    qk = K.queue_keys(asyncq_queue)
    assert await zmembers(redis_client, qk.group("batch")) == {info.id: clock.now_ms()}
    assert await redis_client.smembers(qk.groups) == {b"batch"}
    assert (await task_hash(redis_client, asyncq_queue, info.id))["state"] == b"aggregating"
    assert await lmembers(redis_client, qk.pending) == []


async def test_worker_runs_a_scheduled_task_when_due(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    ran_at: list[float] = []
    mux = ServeMux()

    @mux.handler("later")
    async def later(task: Task) -> None:
        ran_at.append(time.monotonic())

    async with asyncq_worker(mux, queues={asyncq_queue: 1}) as w:
        enqueued = time.monotonic()
        await asyncq_client.enqueue("later", queue=asyncq_queue, process_in=0.3)
        await wait_until(lambda: ran_at, timeout=30)
        await w.wait_drained(include_scheduled=True)
    delay = ran_at[0] - enqueued
    # Not before it is due; after it, within a forward round and a loaded machine's slack.
    assert 0.29 <= delay < 0.3 + w.worker.config.forward_interval + 10, delay


async def test_a_short_retry_delay_is_honoured_promptly(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    runs: list[float] = []
    mux = ServeMux()

    @mux.handler("flaky")
    async def flaky(task: Task) -> None:
        runs.append(time.monotonic())
        if len(runs) == 1:
            raise RuntimeError("first try fails")

    async with asyncq_worker(mux, queues={asyncq_queue: 1}, forward_interval=30,
                             retry_delay=lambda n, e, t: 0.2) as w:
        await asyncq_client.enqueue("flaky", queue=asyncq_queue)
        await wait_until(lambda: len(runs) == 2, timeout=30)
        await w.wait_drained(include_scheduled=True)
    assert 0.19 <= runs[1] - runs[0] < 20  # not at the forwarder's round, 30 s away


