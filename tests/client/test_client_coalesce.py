"""Overlapping Client.enqueue calls (a web app's concurrent requests) share round trips: they
are all stored, each caller gets its own TaskInfo or its own error, few connections are used,
and a lone call still goes out on its own."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence

import pytest
from redis.asyncio import Redis

from asyncq import (
    BrokerError,
    Client,
    DuplicateTaskError,
    Task,
    TaskIDConflictError,
    TaskInfo,
    TaskState,
)
from asyncq._broker import _keys as K
from asyncq._broker._coalesce import Coalescer

pytestmark = pytest.mark.anyio


async def connections_received(redis: Redis) -> int:
    return int((await redis.info("stats"))["total_connections_received"])


async def test_100_concurrent_enqueues_are_all_stored_over_few_connections(
        asyncq_redis_url: str, redis_client: Redis) -> None:
    queue = f"co-{uuid.uuid4().hex[:8]}"
    async with Client(asyncq_redis_url) as client:
        warm = await client.enqueue("warm", queue=queue)
        before = await connections_received(redis_client)
        infos = await asyncio.gather(*[client.enqueue("t", {"i": i}, queue=queue)
                                       for i in range(100)])
        opened = await connections_received(redis_client) - before
    assert [info.payload for info in infos] == [b'{"i":%d}' % i for i in range(100)]
    assert all(info.state is TaskState.PENDING and info.queue == queue for info in infos)
    assert len({info.id for info in infos}) == 100
    pending = {p.decode() for p in await redis_client.lrange(K.queue_keys(queue).pending, 0, -1)}
    assert pending - {info.id for info in infos} == {warm.id}
    assert len(pending) == 101
    # One call went out alone, the 99 others waited for it and left together: not one
    # connection per caller.
    assert opened <= 3, opened


async def test_each_overlapping_caller_gets_its_own_error(asyncq_redis_url: str) -> None:
    queue = f"co-{uuid.uuid4().hex[:8]}"
    async with Client(asyncq_redis_url) as client:
        taken = await client.enqueue("t", task_id="taken", queue=queue)
        await client.enqueue("u", {"k": 1}, unique=60, queue=queue)
        results = await asyncio.gather(
            *[client.enqueue("t", {"i": i}, queue=queue) for i in range(20)],
            client.enqueue("t", task_id="taken", queue=queue),
            client.enqueue("u", {"k": 1}, unique=60, queue=queue),
            *[client.enqueue("t", {"i": i}, queue=queue) for i in range(20, 40)],
            return_exceptions=True)
    assert isinstance(results[20], TaskIDConflictError)
    assert isinstance(results[21], DuplicateTaskError)
    ok = results[:20] + results[22:]
    assert all(isinstance(r, TaskInfo) for r in ok), ok
    assert [r.payload for r in ok if isinstance(r, TaskInfo)] == [
        b'{"i":%d}' % i for i in range(40)]
    assert taken.id == "taken"


async def test_a_redis_error_reply_reaches_only_its_caller(asyncq_redis_url: str,
                                                           redis_client: Redis) -> None:
    good, bad = f"co-{uuid.uuid4().hex[:8]}", f"co-{uuid.uuid4().hex[:8]}"
    await redis_client.set(K.queue_keys(bad).pending, "not a list")
    async with Client(asyncq_redis_url) as client:
        results = await asyncio.gather(
            *[client.enqueue("t", {"i": i}, queue=bad if i % 4 == 1 else good)
              for i in range(40)], return_exceptions=True)
    for i, r in enumerate(results):
        if i % 4 == 1:
            assert isinstance(r, BrokerError) and "WRONGTYPE" in str(r), r
            assert not r.transient
        else:
            assert isinstance(r, TaskInfo) and r.queue == good, r
    assert await redis_client.llen(K.queue_keys(good).pending) == 30


async def test_overlapping_enqueues_to_many_queues(asyncq_redis_url: str,
                                                   redis_client: Redis) -> None:
    queues = [f"co-{uuid.uuid4().hex[:8]}" for _ in range(5)]
    async with Client(asyncq_redis_url) as client:
        infos = await asyncio.gather(*[client.enqueue(Task("t", {"i": i}, queue=queues[i % 5]))
                                       for i in range(50)])
    for q in queues:
        stored = await redis_client.lrange(K.queue_keys(q).pending, 0, -1)
        assert sorted(s.decode() for s in stored) == sorted(i.id for i in infos if i.queue == q)
    assert set(queues) <= {m.decode() for m in await redis_client.smembers(K.QUEUES)}


async def test_a_cancelled_waiting_caller_leaves_the_others_unharmed(
        asyncq_redis_url: str, redis_client: Redis) -> None:
    queue = f"co-{uuid.uuid4().hex[:8]}"
    async with Client(asyncq_redis_url) as client:
        first = asyncio.ensure_future(client.enqueue("t", {"i": 0}, queue=queue))
        await asyncio.sleep(0)  # the first call is in flight: the next ones wait for it
        waiting = [asyncio.ensure_future(client.enqueue("t", {"i": i}, queue=queue))
                   for i in range(1, 10)]
        await asyncio.sleep(0)
        waiting[3].cancel()
        infos = await asyncio.gather(first, *waiting, return_exceptions=True)
        assert isinstance(infos[4], asyncio.CancelledError)
        stored = [i for i in infos if isinstance(i, TaskInfo)]
        assert len(stored) == 9
        pending = await redis_client.lrange(K.queue_keys(queue).pending, 0, -1)
        assert sorted(p.decode() for p in pending) == sorted(i.id for i in stored)
        # and the client goes on working
        assert (await client.enqueue("t", queue=queue)).state is TaskState.PENDING


# -- the Coalescer itself (no Redis: what it sends is recorded)

class Recorder:
    def __init__(self) -> None:
        self.sent: list[list[int]] = []
        self.gate = asyncio.Event()
        self.gate.set()

    async def one(self, call: int) -> int:
        self.sent.append([call])
        await self.gate.wait()
        if call < 0:
            raise ValueError(f"bad {call}")
        return call * 10

    async def many(self, calls: Sequence[int]) -> list[int | BaseException]:
        self.sent.append(list(calls))
        await self.gate.wait()
        return [ValueError(f"bad {c}") if c < 0 else c * 10 for c in calls]


async def test_a_lone_call_is_sent_at_once_and_alone() -> None:
    rec = Recorder()
    co: Coalescer[int, int] = Coalescer(rec.one, rec.many)
    assert [await co.call(i) for i in range(3)] == [0, 10, 20]
    assert rec.sent == [[0], [1], [2]]


async def test_calls_during_a_round_trip_leave_together_in_order() -> None:
    rec = Recorder()
    rec.gate.clear()
    co: Coalescer[int, int] = Coalescer(rec.one, rec.many)
    futs = [asyncio.ensure_future(co.call(i)) for i in range(6)]
    await asyncio.sleep(0)
    assert rec.sent == [[0]]
    rec.gate.set()
    assert await asyncio.gather(*futs) == [0, 10, 20, 30, 40, 50]
    assert rec.sent == [[0], [1, 2, 3, 4, 5]]


async def test_errors_reach_their_own_callers() -> None:
    rec = Recorder()
    rec.gate.clear()
    co: Coalescer[int, int] = Coalescer(rec.one, rec.many)
    futs = [asyncio.ensure_future(co.call(i)) for i in (1, 2, -3, 4)]
    await asyncio.sleep(0)
    rec.gate.set()
    out = await asyncio.gather(*futs, return_exceptions=True)
    assert out[:2] == [10, 20] and out[3] == 40
    assert isinstance(out[2], ValueError) and str(out[2]) == "bad -3"


async def test_a_failed_round_trip_fails_every_caller_of_its_batch_only() -> None:
    rec = Recorder()
    rec.gate.clear()
    fail = True

    async def many(calls: Sequence[int]) -> list[int | BaseException]:
        rec.sent.append(list(calls))
        await rec.gate.wait()
        if fail:
            raise ConnectionError("lost")
        return [c * 10 for c in calls]

    co: Coalescer[int, int] = Coalescer(rec.one, many)
    futs = [asyncio.ensure_future(co.call(i)) for i in range(4)]
    await asyncio.sleep(0)
    rec.gate.set()
    out = await asyncio.gather(*futs, return_exceptions=True)
    assert out[0] == 0
    assert all(isinstance(o, ConnectionError) for o in out[1:])
    fail = False
    assert await asyncio.gather(*[co.call(i) for i in range(3)]) == [0, 10, 20]
