"""Poison written straight into Redis — records a worker cannot decode, records missing
fields, a type no handler knows, task hashes in no list, list/zset entries without a hash, a
key of the wrong type — is logged and archived (with the reason) or repaired, never crashes a
worker, and never holds up the healthy tasks around it."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import chaosapp
import orjson
import pytest
from chaoslib import Ledger, LedgerReport, task_ids, wait_settled
from redis.asyncio import Redis

from asyncq import Client, Task
from asyncq._broker import _keys as K
from asyncq._testing.redis_server import RedisServer
from asyncq.testing import WorkerFactory, wait_until

pytestmark = [pytest.mark.anyio, pytest.mark.chaos]

HEALTHY = 60


def msg(task_id: str, queue: str, task_type: str = "chaos:work", **extra: Any) -> bytes:
    doc = {"id": task_id, "type": task_type, "queue": queue, "max_retry": 1, "enc": "j",
           "enqueued_at": int(time.time() * 1000), **extra}
    return orjson.dumps(doc)


async def test_poison_input_is_archived_or_repaired_never_a_crash(
    own_server: RedisServer, asyncq_queue: str, ledger: Ledger,
) -> None:
    # A server of its own: the janitor's orphan scan walks the whole keyspace.
    r = Redis.from_url(own_server.url)
    try:
        async with Client(own_server.url) as client:
            await _poison_case(r, client, WorkerFactory(own_server.url), asyncq_queue, ledger)
    finally:
        await r.aclose()


async def _poison_case(r: Redis, asyncq_client: Client, asyncq_worker: WorkerFactory, q: str,
                       ledger: Ledger) -> None:
    qk = K.queue_keys(q)
    now = int(time.time() * 1000)
    ids = task_ids("healthy", HEALTHY)
    half = HEALTHY // 2

    def work(i: int) -> bytes:
        return orjson.dumps(chaosapp.payload(ledger.key, i))

    # -- records a worker cannot run: archived with the reason
    archive_reasons = {
        "p-bad-json": "DecodeError",
        "p-no-type": "DecodeError",
        "p-wrong-id": "DecodeError",
        "p-unknown-type": "HandlerNotFoundError",
        "p-no-msg": "DecodeError",
    }
    await r.hset(qk.task("p-bad-json"), mapping={"msg": b"\xff\x00 not json", "payload": b"",
                                                  "state": "pending"})
    await r.hset(qk.task("p-no-type"), mapping={
        "msg": orjson.dumps({"id": "p-no-type", "queue": q}), "state": "pending"})
    await r.hset(qk.task("p-wrong-id"), mapping={"msg": msg("someone-else", q),
                                                 "payload": b"{}", "state": "pending"})
    await r.hset(qk.task("p-unknown-type"), mapping={"msg": msg("p-unknown-type", q, "nope"),
                                                     "payload": b"{}", "state": "pending"})
    await r.hset(qk.task("p-no-msg"), mapping={"payload": b"{}", "state": "pending"})
    # A `retried` field that is not a number: the task still runs (counted from 0).
    await r.hset(qk.task(ids[0]), mapping={"msg": msg(ids[0], q), "payload": work(0),
                                           "state": "pending", "retried": "many"})
    # A key of the wrong type where a task hash should be.
    await r.set(qk.task("p-wrong-type"), b"not a hash")
    await r.lpush(qk.pending, "p-bad-json", "p-no-type", "p-wrong-id", "p-unknown-type",
                  "p-no-msg", ids[0], "p-wrong-type")

    # -- entries without a task hash: dropped
    await r.lpush(qk.pending, "gone-pending")
    await r.zadd(qk.scheduled, {"gone-scheduled": now - 1000})
    await r.zadd(qk.retry, {"gone-retry": now - 1000})
    await r.lpush(qk.active, "gone-active")
    await r.zadd(qk.lease, {"gone-active": now - 60_000, "gone-lease-only": now - 60_000})

    # -- task hashes in no list ("orphans"): put back where they belong, then run
    await r.hset(qk.task(ids[1]), mapping={"msg": msg(ids[1], q), "payload": work(1),
                                           "state": "pending", "pending_since": now})
    await r.hset(qk.task(ids[2]), mapping={"msg": msg(ids[2], q), "payload": work(2),
                                           "state": "active", "owner": "ghost"})
    await r.hset(qk.task(ids[3]), mapping={"msg": msg(ids[3], q), "payload": work(3),
                                           "state": "retry", "retried": "1"})
    await r.hset(qk.task(ids[4]), mapping={"msg": msg(ids[4], q), "payload": work(4),
                                           "state": "scheduled"})

    # Healthy tasks around the poison.
    results = await asyncq_client.enqueue_many(
        Task("chaos:work", chaosapp.payload(ledger.key, i), task_id=ids[i], queue=q)
        for i in range(5, half))
    assert all(not isinstance(rr, Exception) for rr in results)

    async with asyncq_worker(chaosapp.mux, queues={q: 1}, concurrency=5, lease_duration=2,
                             heartbeat_interval=0.5, recover_interval=0.2, recover_grace=0.2,
                             janitor_interval=0.2, retry_delay=lambda n, e, t: 0,
                             forward_interval=0.2) as w:
        results = await asyncq_client.enqueue_many(
            Task("chaos:work", chaosapp.payload(ledger.key, i), task_id=ids[i], queue=q)
            for i in range(half, HEALTHY))
        assert all(not isinstance(rr, Exception) for rr in results)
        await wait_until(lambda: _finished(ledger), timeout=20, message="healthy tasks done")
        await wait_settled(r, [q], timeout=20)
        worker = w.worker
        repaired = worker.janitor.repaired
        assert worker.ready and worker._runner is not None and not worker._runner.done()
        assert worker.processor.failing_queues == []
        for part in (worker.recoverer, worker.forwarder, worker.janitor, worker.heartbeat,
                     worker.acker):
            assert part.outage.failures == 0, (part, part.outage.failures)

    starts, finishes = await ledger.counts(HEALTHY)
    assert starts == [1] * HEALTHY and finishes == [1] * HEALTHY
    for task_id, reason in archive_reasons.items():
        state, error = await r.hmget(qk.task(task_id), "state", "error")
        assert state == b"archived" and error.decode().startswith(reason + ":"), (task_id, error)
    assert await r.type(qk.task("p-wrong-type")) == b"string"  # left alone, but out of the lists
    for key in (qk.pending, qk.active):
        assert await r.llen(key) == 0
    for key in (qk.scheduled, qk.retry, qk.lease):
        assert await r.zcard(key) == 0
    archived = {m.decode() for m in await r.zrange(qk.archived, 0, -1)}
    assert archived == set(archive_reasons)
    report = LedgerReport("poison input", enqueued=HEALTHY + len(archive_reasons),
                          completed=sum(finishes), archived=len(archived),
                          archived_reasons=dict(Counter(archive_reasons.values())))
    report.extra = {"orphans_repaired": repaired, "dangling_entries_dropped": 7,
                    "wrong_type_key_left_alone": 1}
    report.publish()


async def _finished(ledger: Ledger) -> bool:
    return await ledger.finished(HEALTHY) == HEALTHY
