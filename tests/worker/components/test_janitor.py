"""The janitor: expired completed tasks are removed (item 36)."""

from __future__ import annotations

import pytest
from component_helpers import (
    MakeWorker,
)
from redis.asyncio import Redis

from asyncq import Client, FakeClock
from asyncq._broker import Outcome
from asyncq._broker import _keys as K
from tests.helpers.dataplane import task_hash, zmembers

pytestmark = pytest.mark.anyio


# ----------------------------------------------------------------- janitor (36)


async def test_janitor_deletes_completed_tasks_past_their_retention(
    make_worker: MakeWorker, clock: FakeClock, asyncq_queue: str, redis_client: Redis,
) -> None:
    queues = [f"{asyncq_queue}-a", f"{asyncq_queue}-b"]
    worker = make_worker(queues=dict.fromkeys(queues, 1), janitor_batch=1)
    client = Client(worker.broker, clock=clock)
    expiring: list[tuple[str, str]] = []
    staying: list[tuple[str, str]] = []
    for queue in queues:
        for retention, bucket in ((10, expiring), (10, expiring), (100, staying)):
            info = await client.enqueue("t", queue=queue, retention=retention)
            raws, _ = await worker.broker.dequeue(queue, 1, "w", 30_000, 1000)
            assert [r.id for r in raws] == [info.id]
            await worker.broker.finish([Outcome("complete", queue, info.id,
                                                retention_ms=retention * 1000)], "w")
            bucket.append((queue, info.id))
    assert await worker.janitor.tick() == 0
    clock.advance(10)  # expiry == now: deleted
    assert await worker.janitor.tick() == 4
    for queue, task_id in expiring:
        assert await task_hash(redis_client, queue, task_id) == {}
    for queue, task_id in staying:
        assert (await task_hash(redis_client, queue, task_id))["state"] == b"completed"
        assert set(await zmembers(redis_client, K.queue_keys(queue).completed)) == {task_id}


