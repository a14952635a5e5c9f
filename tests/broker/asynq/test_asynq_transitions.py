"""Leasing and ending tasks with wire=asynq, each step as Go's (rdb.go Dequeue, Done,
MarkAsComplete, Retry, Archive, Requeue, ExtendLease, forward): the records Go reads after it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from redis.asyncio import Redis

from asyncq import Client, FakeClock
from asyncq._broker import Outcome
from asyncq._broker._asynq import _codec
from asyncq._broker._asynq import _keys as K
from asyncq._broker._asynq._broker import AsynqBroker

OWNER = "srv-a"
LEASE_MS = 30_000


async def lease(abroker: AsynqBroker, aclient: Client, queue: str, n: int = 1,
                **opts: object) -> list[str]:
    ids = [(await aclient.enqueue("t", f"p{i}".encode(), queue=queue, **opts)).id
           for i in range(n)]
    raws, dropped = await abroker.dequeue(queue, n, OWNER, LEASE_MS, 1000)
    assert ([r.id for r in raws], dropped) == (ids, 0)
    return ids


async def hash_of(redis: Redis, queue: str, task_id: str) -> dict[str, bytes]:
    raw = await redis.hgetall(K.queue_keys(queue).task(task_id))
    return {k.decode(): v for k, v in raw.items()}


async def test_dequeue_leases_as_go_does(abroker: AsynqBroker, aclient: Client,
                                         redis_client: Redis, clock: FakeClock,
                                         asyncq_queue: str) -> None:
    info = await aclient.enqueue("t", b"body", queue=asyncq_queue, max_retry=4)
    clock.advance(2)
    [raw], dropped = await abroker.dequeue(asyncq_queue, 5, OWNER, LEASE_MS, 1000)
    assert (raw.id, raw.payload, raw.retried, dropped) == (info.id, b"body", 0, 0)
    assert raw.pending_since == clock.now_ms() - 2000
    assert raw.msg.max_retry == 4
    qk = K.queue_keys(asyncq_queue)
    h = await hash_of(redis_client, asyncq_queue, info.id)
    assert h["state"] == b"active" and "pending_since" not in h
    assert await redis_client.lrange(qk.active, 0, -1) == [info.id.encode()]
    assert await redis_client.zscore(qk.lease, info.id) == (clock.now_ms() + LEASE_MS) // 1000


async def test_pausing_writes_gos_paused_key(abroker: AsynqBroker, redis_client: Redis,
                                             asyncq_queue: str) -> None:
    """Go's paused key (pausing as every broker does: conformance/test_conf_transitions.py)."""
    await abroker.pause(asyncq_queue)
    assert await redis_client.exists(K.queue_keys(asyncq_queue).paused)


async def test_a_go_enqueued_task_is_leased(abroker: AsynqBroker, redis_client: Redis,
                                            clock: FakeClock, asyncq_queue: str) -> None:
    """A hash written the way Go's enqueue script writes it (msg, state, pending_since)."""
    qk = K.queue_keys(asyncq_queue)
    go = _codec.AsynqTask(type="go:task", payload=b"\x01\x02", id="go-1", queue=asyncq_queue,
                          retry=3, timeout=60)
    await redis_client.hset(qk.task("go-1"), mapping={
        "msg": _codec.encode(go), "state": "pending", "pending_since": 5 * 10**18})
    await redis_client.lpush(qk.pending, "go-1")
    [raw], _ = await abroker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, 1000)
    m = raw.msg
    assert (m.type, m.max_retry, m.timeout_ms, raw.payload) == ("go:task", 3, 60_000, b"\x01\x02")


async def test_done_deletes_and_counts(abroker: AsynqBroker, aclient: Client,
                                       redis_client: Redis, clock: FakeClock,
                                       asyncq_queue: str) -> None:
    [tid] = await lease(abroker, aclient, asyncq_queue, unique=timedelta(hours=1))
    lock = (await hash_of(redis_client, asyncq_queue, tid))["unique_key"]
    await abroker.finish([Outcome("done", asyncq_queue, tid)], OWNER)  # (conformance/)
    qk = K.queue_keys(asyncq_queue)
    assert not await redis_client.exists(qk.task(tid), lock)
    assert await redis_client.llen(qk.active) == 0 and await redis_client.zcard(qk.lease) == 0
    day = qk.processed_day(K.day_string(clock.now_ms()))
    assert await redis_client.get(day) == b"1" and await redis_client.get(qk.processed) == b"1"
    assert await redis_client.ttl(day) > 89 * 86_400
    assert not await redis_client.exists(qk.failed)


async def test_a_flushs_done_outcomes_are_written_together_as_go_counts_them(
        abroker: AsynqBroker, aclient: Client, redis_client: Redis, clock: FakeClock,
        asyncq_queue: str) -> None:
    """Several "done" outcomes of one queue (one script call): each as a lone done, a task no
    longer held by this owner left alone, the counters bumped by the number done."""
    a, b, c = await lease(abroker, aclient, asyncq_queue, 3, unique=timedelta(hours=1))
    qk = K.queue_keys(asyncq_queue)
    await redis_client.hset(qk.task(c), "owner", "another-server")  # (c's run is not ours)
    await redis_client.set(qk.processed, 9223372036854775807)  # Go's wrap: back to the count
    assert await abroker.finish([Outcome("done", asyncq_queue, a),
                                 Outcome("done", asyncq_queue, b, retention_ms=60_000)],
                                OWNER) == [True, True]
    assert await abroker.finish([Outcome("done", asyncq_queue, a),
                                 Outcome("done", asyncq_queue, c)], OWNER) == [False, False]
    assert not await redis_client.exists(qk.task(a), qk.task(b))
    assert await redis_client.keys(f"asynq:{{{asyncq_queue}}}:unique:*") == [
        (await hash_of(redis_client, asyncq_queue, c))["unique_key"]]
    assert await redis_client.lrange(qk.active, 0, -1) == [c.encode()]
    assert [m for m, _ in await redis_client.zrange(K.extra_keys(asyncq_queue).marks, 0, -1,
                                                    withscores=True)] == [b.encode()]
    day = qk.processed_day(K.day_string(clock.now_ms()))
    assert await redis_client.get(day) == b"2" and await redis_client.get(qk.processed) == b"2"
    assert await redis_client.ttl(day) > 89 * 86_400


async def test_complete_keeps_the_task_with_its_result(
        abroker: AsynqBroker, aclient: Client, redis_client: Redis, clock: FakeClock,
        asyncq_queue: str) -> None:
    [tid] = await lease(abroker, aclient, asyncq_queue)
    out = await abroker.finish([Outcome("complete", asyncq_queue, tid, retention_ms=60_000,
                                        result=b"42", result_enc="j")], OWNER)
    assert out == [True]
    now_s = clock.now_ms() // 1000
    qk = K.queue_keys(asyncq_queue)
    assert await redis_client.zscore(qk.completed, tid) == now_s + 60
    h = await hash_of(redis_client, asyncq_queue, tid)
    assert (h["state"], h["result"], h["result_enc"]) == (b"completed", b"42", b"j")
    task = _codec.decode(h["msg"])
    assert (task.completed_at, task.payload, task.timeout) == (now_s, b"p0", 1800)


async def test_retry_rewrites_the_message_as_go(abroker: AsynqBroker, aclient: Client,
                                                redis_client: Redis, clock: FakeClock,
                                                asyncq_queue: str) -> None:
    [tid] = await lease(abroker, aclient, asyncq_queue, headers={"h": "v"})
    before = _codec.decode((await hash_of(redis_client, asyncq_queue, tid))["msg"])
    at = clock.now_ms() + 15_500
    out = await abroker.finish([Outcome("retry", asyncq_queue, tid, retry_at_ms=at,
                                        error="boom \u00e9", traceback="tb")], OWNER)
    assert out == [True]
    qk = K.queue_keys(asyncq_queue)
    assert await redis_client.zscore(qk.retry, tid) == -(-at // 1000)
    h = await hash_of(redis_client, asyncq_queue, tid)
    after = _codec.decode(h["msg"])
    assert after == before._replace(retried=1, error_msg="boom \u00e9",
                                    last_failed_at=clock.now_ms() // 1000)
    assert (h["state"], h["traceback"]) == (b"retry", b"tb")
    assert await redis_client.get(qk.failed) == b"1"
    # the retry comes back with its count (conformance/test_conf_transitions.py)
    clock.advance(17)  # (the score is rounded up to the next second)
    await abroker.maintenance.forward(asyncq_queue, "retry", 100)
    await abroker.dequeue(asyncq_queue, 1, OWNER, LEASE_MS, 1000)
    # not a failure: no count, retried unchanged
    await abroker.finish([Outcome("retry", asyncq_queue, tid, retry_at_ms=at,
                                  is_failure=False)], OWNER)
    assert _codec.decode((await hash_of(redis_client, asyncq_queue, tid))["msg"]).retried == 1
    assert await redis_client.get(qk.failed) == b"1"


async def test_archive_and_its_caps(abroker: AsynqBroker, aclient: Client,
                                    redis_client: Redis, clock: FakeClock,
                                    asyncq_queue: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from asyncq._broker._asynq import _broker as B
    monkeypatch.setattr(B, "ARCHIVE_MAX_SIZE", 3)
    ids = await lease(abroker, aclient, asyncq_queue, 4)
    for tid in ids:
        clock.advance(1)
        assert await abroker.finish([Outcome("archive", asyncq_queue, tid, error="dead")],
                                    OWNER) == [True]
    qk = K.queue_keys(asyncq_queue)
    # as Go: at most max size - 1 are kept, the oldest deleted with their hashes
    assert [m.decode() for m in await redis_client.zrange(qk.archived, 0, -1)] == ids[2:]
    assert not await redis_client.exists(qk.task(ids[0]), qk.task(ids[1]))
    h = await hash_of(redis_client, asyncq_queue, ids[3])
    task = _codec.decode(h["msg"])
    assert (h["state"], task.error_msg, task.retried) == (b"archived", "dead", 0)
    assert task.last_failed_at == clock.now_ms() // 1000
    assert await redis_client.get(qk.failed) == b"4"


async def test_requeue_puts_it_next_in_line(abroker: AsynqBroker, aclient: Client,
                                            redis_client: Redis, asyncq_queue: str) -> None:
    [a] = await lease(abroker, aclient, asyncq_queue)
    b = (await aclient.enqueue("t", queue=asyncq_queue)).id
    await abroker.finish([Outcome("requeue", asyncq_queue, a)], OWNER)  # (conformance/)
    qk = K.queue_keys(asyncq_queue)
    assert await redis_client.lrange(qk.pending, 0, -1) == [b.encode(), a.encode()]
    assert (await hash_of(redis_client, asyncq_queue, a))["state"] == b"pending"


async def test_leases_extend_and_are_lost_to_a_go_rerun(
        abroker: AsynqBroker, aclient: Client, redis_client: Redis, clock: FakeClock,
        asyncq_queue: str) -> None:
    ids = await lease(abroker, aclient, asyncq_queue, 2)
    qk = K.queue_keys(asyncq_queue)
    clock.advance(10)
    assert await abroker.extend_leases(asyncq_queue, ids, OWNER, LEASE_MS) == [1, 1]
    assert await redis_client.zscore(qk.lease, ids[0]) == (clock.now_ms() + LEASE_MS) // 1000
    assert await abroker.extend_leases(asyncq_queue, ids, "other", LEASE_MS) == [0, 0]
    # a Go server recovered ids[1] and leased it again: its lease entry is Go's now
    await redis_client.zadd(qk.lease, {ids[1]: 9_999_999_999})
    assert await abroker.extend_leases(asyncq_queue, ids, OWNER, LEASE_MS) == [1, 0]
    out = await abroker.finish([Outcome("done", asyncq_queue, ids[0]),
                                Outcome("done", asyncq_queue, ids[1])], OWNER)
    assert out == [True, False]
    assert await redis_client.exists(qk.task(ids[1]))


async def test_forward_moves_due_tasks(abroker: AsynqBroker, aclient: Client,
                                       redis_client: Redis, clock: FakeClock,
                                       asyncq_queue: str) -> None:
    a = await aclient.enqueue("t", queue=asyncq_queue, process_in=timedelta(seconds=10))
    g = await aclient.enqueue("t", queue=asyncq_queue, process_in=timedelta(seconds=10),
                              group="g")
    c = await aclient.enqueue("t", queue=asyncq_queue, process_in=timedelta(seconds=100))
    assert await abroker.maintenance.forward(asyncq_queue, "scheduled", 100) == (
        0, -(-(clock.now_ms() + 10_000) // 1000) * 1000)
    clock.advance(11)
    moved, due = await abroker.maintenance.forward(asyncq_queue, "scheduled", 100)
    assert (moved, due) == (2, -(-(clock.now_ms() + 89_000) // 1000) * 1000)
    qk = K.queue_keys(asyncq_queue)
    h = await hash_of(redis_client, asyncq_queue, a.id)
    assert h["state"] == b"pending"
    assert int(h["pending_since"]) == clock.now_ms() * 1_000_000
    assert await redis_client.lrange(qk.pending, 0, -1) == [a.id.encode()]
    assert (await hash_of(redis_client, asyncq_queue, g.id))["state"] == b"aggregating"
    assert await redis_client.zscore(qk.group("g"), g.id) == clock.now_ms() // 1000
    assert await redis_client.smembers(qk.groups) == {b"g"}
    assert await redis_client.zscore(qk.scheduled, c.id) is not None


async def test_write_result(abroker: AsynqBroker, aclient: Client, redis_client: Redis,
                            asyncq_queue: str) -> None:
    [tid] = await lease(abroker, aclient, asyncq_queue)
    await abroker.write_result(asyncq_queue, tid, b"partial")  # (its codes: conformance/)
    assert (await hash_of(redis_client, asyncq_queue, tid))["result"] == b"partial"
    await abroker.write_result(asyncq_queue, "gone", b"x")
    assert not await redis_client.exists(K.queue_keys(asyncq_queue).task("gone"))


