"""The recoverer: tasks whose lease expired go back to pending or retry (items 25-28)."""

from __future__ import annotations

import pytest
from component_helpers import (
    DEAD_OWNER,
    MakeWorker,
    lease_to_dead_worker,
)
from redis.asyncio import Redis

from asyncq import Client, FakeClock, Task
from asyncq._broker import Outcome
from asyncq._broker import _keys as K
from asyncq.testing import queue_counts
from tests.helpers.dataplane import lmembers, task_hash, zmembers

pytestmark = pytest.mark.anyio


# ----------------------------------------------------------------- recoverer (25-28)


async def test_recoverer_retries_a_task_whose_lease_expired(
    make_worker: MakeWorker, clock: FakeClock, asyncq_queue: str, redis_client: Redis,
) -> None:
    worker = make_worker(queues={asyncq_queue: 1}, retry_delay=lambda n, e, t: 60,
                         recover_grace=30)
    client = Client(worker.broker, clock=clock)
    info = await client.enqueue("t", queue=asyncq_queue)
    [task_id] = await lease_to_dead_worker(worker, asyncq_queue)
    assert task_id == info.id
    clock.advance(60)  # the lease ended 59 s ago
    assert await worker.recoverer.tick() == 1
    qk = K.queue_keys(asyncq_queue)
    now = clock.now_ms()
    assert await zmembers(redis_client, qk.retry) == {task_id: now + 60_000}
    fields = await task_hash(redis_client, asyncq_queue, task_id)
    assert (fields["state"], fields["retried"]) == (b"retry", b"1")
    assert fields["error"] == b"LeaseExpiredError: task lease expired"
    assert int(fields["failed_at"]) == now
    assert "owner" not in fields
    assert await lmembers(redis_client, qk.active) == []
    assert await zmembers(redis_client, qk.lease) == {}


async def test_recoverer_archives_an_expired_task_without_retries_left(
    make_worker: MakeWorker, clock: FakeClock, asyncq_queue: str, redis_client: Redis,
) -> None:
    worker = make_worker(queues={asyncq_queue: 1}, recover_grace=30)
    info = await Client(worker.broker, clock=clock).enqueue("t", queue=asyncq_queue,
                                                                 max_retry=0)
    await lease_to_dead_worker(worker, asyncq_queue)
    clock.advance(60)
    assert await worker.recoverer.tick() == 1
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    assert fields["state"] == b"archived"
    assert fields["error"] == b"LeaseExpiredError: task lease expired"
    assert fields.get("retried", b"0") == b"0"
    counts = await queue_counts(redis_client, asyncq_queue)
    assert (counts["archived"], counts["retry"], counts["active"]) == (1, 0, 0)


async def test_recoverer_falls_back_to_the_default_delay_when_retry_delay_raises(
    make_worker: MakeWorker, clock: FakeClock, asyncq_queue: str, redis_client: Redis,
) -> None:
    def bug(retried: int, exc: BaseException, task: Task) -> float:
        raise RuntimeError("policy bug")

    worker = make_worker(queues={asyncq_queue: 1}, recover_grace=30, retry_delay=bug)
    await Client(worker.broker, clock=clock).enqueue("t", queue=asyncq_queue)
    [task_id] = await lease_to_dead_worker(worker, asyncq_queue)
    clock.advance(60)
    assert await worker.recoverer.tick() == 1
    delay = (await zmembers(redis_client, K.queue_keys(asyncq_queue).retry))[task_id]
    assert 15_000 <= delay - clock.now_ms() <= 44_000  # a first retry, default schedule


async def test_recoverer_takes_only_leases_older_than_the_grace(
    make_worker: MakeWorker, clock: FakeClock, asyncq_queue: str, redis_client: Redis,
) -> None:
    queues = [f"{asyncq_queue}-a", f"{asyncq_queue}-b"]
    worker = make_worker(queues=dict.fromkeys(queues, 1), recover_grace=30,
                         retry_delay=lambda n, e, t: 60)
    client = Client(worker.broker, clock=clock)
    now = clock.now_ms()
    expected: set[str] = set()
    kept: set[str] = set()
    for queue in queues:
        for _ in range(3):
            await client.enqueue("t", queue=queue)
        old, recent, future = await lease_to_dead_worker(worker, queue, 3)
        lease = K.queue_keys(queue).lease
        await redis_client.zadd(lease, {old: now - 40_000, recent: now - 20_000,
                                        future: now + 60_000})
        expected.add(old)
        kept.update((recent, future))
    assert await worker.recoverer.tick() == 2
    for queue in queues:
        retry = set(await zmembers(redis_client, K.queue_keys(queue).retry))
        active = set(await lmembers(redis_client, K.queue_keys(queue).active))
        assert retry <= expected and len(retry) == 1
        assert active <= kept and len(active) == 2
    assert await worker.recoverer.tick() == 0  # nothing else is due


async def test_recoverer_with_nothing_active_is_a_no_op(
    make_worker: MakeWorker, asyncq_queue: str,
) -> None:
    worker = make_worker(queues={asyncq_queue: 1})
    assert await worker.recoverer.tick() == 0


async def test_active_task_without_a_lease_gets_one_and_is_recovered_later(
    make_worker: MakeWorker, clock: FakeClock, asyncq_queue: str, redis_client: Redis,
) -> None:
    worker = make_worker(queues={asyncq_queue: 1}, recover_grace=5,
                         retry_delay=lambda n, e, t: 60)
    await Client(worker.broker, clock=clock).enqueue("t", queue=asyncq_queue)
    [task_id] = await lease_to_dead_worker(worker, asyncq_queue, lease_ms=3_600_000)
    qk = K.queue_keys(asyncq_queue)
    await redis_client.zrem(qk.lease, task_id)  # e.g. lost in a restore
    assert await worker.recoverer.tick() == 0
    assert await zmembers(redis_client, qk.lease) == {task_id: clock.now_ms()}
    clock.advance(6)
    assert await worker.recoverer.tick() == 1
    assert (await task_hash(redis_client, asyncq_queue, task_id))["state"] == b"retry"


async def test_recoverer_leaves_a_lease_renewed_meanwhile(
    make_worker: MakeWorker, clock: FakeClock, asyncq_queue: str, redis_client: Redis,
) -> None:
    """The owner check in the script: a lease renewed after listing is not recovered."""
    worker = make_worker(queues={asyncq_queue: 1}, recover_grace=0)
    await Client(worker.broker, clock=clock).enqueue("t", queue=asyncq_queue)
    [task_id] = await lease_to_dead_worker(worker, asyncq_queue)
    clock.advance(10)
    [raw] = await worker.broker.maintenance.list_lease_expired(asyncq_queue, clock.now_ms(), 10)
    await worker.broker.extend_leases(asyncq_queue, [task_id], DEAD_OWNER, 30_000)
    outcome = Outcome("retry", asyncq_queue, task_id, retry_at_ms=clock.now_ms(),
                      error="x")
    assert not await worker.broker.maintenance.recover(outcome, clock.now_ms())
    assert (await task_hash(redis_client, asyncq_queue, raw.id))["state"] == b"active"


