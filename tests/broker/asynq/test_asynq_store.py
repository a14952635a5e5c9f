"""Storing with wire=asynq: the records are exactly Go asynq's (asynq-model.md §1, §3; rdb.go's
enqueue, schedule, addToGroup and their unique variants), plus asyncq's own message in the
one field Go ignores."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from redis.asyncio import Redis

from asyncq import Client, DuplicateTaskError, FakeClock, Task
from asyncq._broker._asynq import _codec
from asyncq._broker._asynq._broker import AsynqBroker
from asyncq._model._message import decode_message


async def fields(redis: Redis, queue: str, task_id: str) -> dict[str, bytes]:
    raw = await redis.hgetall(f"asynq:{{{queue}}}:t:{task_id}")
    return {k.decode(): v for k, v in raw.items()}


async def test_enqueue_writes_asynqs_pending_task(aclient: Client, redis_client: Redis,
                                                  clock: FakeClock, asyncq_queue: str) -> None:
    info = await aclient.enqueue("email:send", b"\x00payload", queue=asyncq_queue,
                                 headers={"k": "v"})
    h = await fields(redis_client, asyncq_queue, info.id)
    assert set(h) == {"msg", "state", "pending_since", "asyncq_msg"}
    assert h["state"] == b"pending"
    assert int(h["pending_since"]) == clock.now_ms() * 1_000_000  # Unix nanoseconds
    task = _codec.decode(h["msg"])
    assert task == _codec.AsynqTask(
        type="email:send", payload=b"\x00payload", id=info.id, queue=asyncq_queue, retry=25,
        timeout=1800, headers={"k": "v"})
    assert decode_message(h["asyncq_msg"]).id == info.id
    assert await redis_client.lrange(f"asynq:{{{asyncq_queue}}}:pending", 0, -1) == [
        info.id.encode()]
    assert await redis_client.sismember("asynq:queues", asyncq_queue)
    assert not await redis_client.sismember("asyncq:queues", asyncq_queue)  # (a shared server)


async def test_new_tasks_go_to_the_head_of_pending(aclient: Client, redis_client: Redis,
                                                   asyncq_queue: str) -> None:
    a = await aclient.enqueue("t", queue=asyncq_queue)
    b = await aclient.enqueue("t", queue=asyncq_queue)
    assert await redis_client.lrange(f"asynq:{{{asyncq_queue}}}:pending", 0, -1) == [
        b.id.encode(), a.id.encode()]  # LPUSH: workers pop the oldest from the tail


async def test_schedule_scores_in_unix_seconds(aclient: Client, redis_client: Redis,
                                              clock: FakeClock, asyncq_queue: str) -> None:
    info = await aclient.enqueue("t", b"x", queue=asyncq_queue, process_in=timedelta(seconds=90))
    h = await fields(redis_client, asyncq_queue, info.id)
    assert set(h) == {"msg", "state", "asyncq_msg"}
    assert h["state"] == b"scheduled"
    score = await redis_client.zscore(f"asynq:{{{asyncq_queue}}}:scheduled", info.id)
    assert score == -(-(clock.now_ms() + 90_000) // 1000)


async def test_group_add(aclient: Client, redis_client: Redis, clock: FakeClock,
                         asyncq_queue: str) -> None:
    info = await aclient.enqueue("t", queue=asyncq_queue, group="g1")
    h = await fields(redis_client, asyncq_queue, info.id)
    assert (h["state"], h["group"]) == (b"aggregating", b"g1")
    assert _codec.decode(h["msg"]).group_key == "g1"
    assert await redis_client.zscore(f"asynq:{{{asyncq_queue}}}:g:g1", info.id) == (
        clock.now_ms() // 1000)
    assert await redis_client.smembers(f"asynq:{{{asyncq_queue}}}:groups") == {b"g1"}


async def test_unique_lock_is_asynqs_md5_key_with_its_ttl(
        aclient: Client, redis_client: Redis, asyncq_queue: str) -> None:
    info = await aclient.enqueue("t", b"same", queue=asyncq_queue, unique=timedelta(minutes=5))
    lock = f"asynq:{{{asyncq_queue}}}:unique:t:{hashlib.md5(b'same').hexdigest()}"
    assert await redis_client.get(lock) == info.id.encode()
    assert 299_000 <= await redis_client.pttl(lock) <= 300_000
    h = await fields(redis_client, asyncq_queue, info.id)
    assert h["unique_key"] == lock.encode()
    assert _codec.decode(h["msg"]).unique_key == lock
    with pytest.raises(DuplicateTaskError) as caught:  # (its holder: conformance/)
        await aclient.enqueue("t", b"same", queue=asyncq_queue, unique=timedelta(minutes=5))
    assert f"(lock {lock}, held by task {info.id})" in str(caught.value)  # the real key


async def test_enqueue_many_mixes_shapes(aclient: Client, abroker: AsynqBroker,
                                         redis_client: Redis, asyncq_queue: str) -> None:
    infos = await aclient.enqueue_many([
        Task("t", b"1", queue=asyncq_queue), Task("t", b"2", queue=asyncq_queue),
        Task("t", b"3", queue=asyncq_queue, process_in=timedelta(hours=1)),
        Task("t", b"4", queue=asyncq_queue, group="g")])
    states = [(await fields(redis_client, asyncq_queue, i.id))["state"] for i in infos]
    assert states == [b"pending", b"pending", b"scheduled", b"aggregating"]
