"""Choosing the layout (``?wire=asynq`` or ``wire=``) and the loud mismatches: a broker of one
layout refuses a queue only the other layout knows, and writes nothing (issue 29, item 7)."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from redis.asyncio import Redis

from asyncq import Client, Worker
from asyncq._broker._asynq._broker import AsynqBroker
from asyncq._broker._asynq._guarded import GuardedRedisBroker
from asyncq._broker._connection import make_broker
from asyncq._broker._redis_url import parse_url
from asyncq._errors import BrokerError


def test_url_option_selects_the_layout() -> None:
    assert parse_url("redis://h:1/0?wire=asynq").wire == "asynq"
    assert parse_url("redis+cluster://h:1,h:2?wire=asyncq").wire == "asyncq"
    assert parse_url("redis://h:1/0").wire is None
    with pytest.raises(ValueError, match="wire must be one of asyncq, asynq"):
        parse_url("redis://h:1?wire=celery")


async def test_keyword_and_url_agree(asyncq_redis_url: str, redis_client: Redis,
                                     anyio_backend: object) -> None:
    for broker in (make_broker(asyncq_redis_url, wire="asynq"),
                   make_broker(asyncq_redis_url + "?wire=asynq", wire="asynq"),
                   make_broker(redis_client, wire="asynq")):
        assert isinstance(broker, AsynqBroker)
        await broker.close()
    default = make_broker(asyncq_redis_url)
    assert isinstance(default, GuardedRedisBroker)
    await default.close()
    with pytest.raises(ValueError, match="disagrees"):
        make_broker(asyncq_redis_url + "?wire=asynq", wire="asyncq")
    with pytest.raises(ValueError, match="wire must be one of"):
        make_broker(asyncq_redis_url, wire="nope")  # type: ignore[arg-type]


def test_missing_protobuf_names_the_extra() -> None:
    """In a fresh interpreter where protobuf cannot be imported (it fails before connecting)."""
    code = ("import sys; sys.modules['google.protobuf'] = None\n"
            "from asyncq._broker._connection import make_broker\n"
            "make_broker('redis://127.0.0.1:1/0?wire=asynq')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 1
    assert "ImportError: wire=asynq needs the protobuf package: pip install 'asyncq[asynq]'" in (
        done.stderr)


async def test_asynq_broker_refuses_an_asyncq_queue(asyncq_redis_url: str, redis_client: Redis,
                                                    asyncq_queue: str) -> None:
    async with Client(asyncq_redis_url) as own:
        await own.enqueue("t", queue=asyncq_queue)
    keys_before = sorted(await redis_client.keys(f"*{asyncq_queue}*"))
    async with Client(asyncq_redis_url + "?wire=asynq") as go_layout:
        with pytest.raises(BrokerError, match=r"asyncq's own layout.*drop \?wire=asynq") as e:
            await go_layout.enqueue("t", queue=asyncq_queue)
        assert e.value.refused and "nothing was written" in str(e.value)
    broker = make_broker(asyncq_redis_url + "?wire=asynq")
    try:
        with pytest.raises(BrokerError, match="asyncq's own layout"):
            await broker.dequeue(asyncq_queue, 1, "w", 30_000, 1000)
        with pytest.raises(BrokerError, match="asyncq's own layout"):
            await broker.register_queues([asyncq_queue])
    finally:
        await broker.close()
    assert sorted(await redis_client.keys(f"*{asyncq_queue}*")) == keys_before
    assert not await redis_client.sismember("asynq:queues", asyncq_queue)


async def test_asyncq_broker_refuses_an_asynq_queue(asyncq_redis_url: str, redis_client: Redis,
                                                    asyncq_queue: str) -> None:
    async with Client(asyncq_redis_url + "?wire=asynq") as go_layout:
        await go_layout.enqueue("t", queue=asyncq_queue)
    keys_before = sorted(await redis_client.keys(f"*{asyncq_queue}*"))
    async with Client(asyncq_redis_url) as own:
        with pytest.raises(BrokerError, match=r"Go asynq's layout.*add \?wire=asynq"):
            await own.enqueue("t", queue=asyncq_queue)
    broker = make_broker(asyncq_redis_url)
    try:
        with pytest.raises(BrokerError, match="Go asynq's layout"):
            await broker.dequeue(asyncq_queue, 1, "w", 30_000, 1000)
    finally:
        await broker.close()
    worker = Worker(asyncq_redis_url, lambda task: None, queues={asyncq_queue: 1})
    with pytest.raises(BrokerError, match="Go asynq's layout"):
        await worker.broker.register_queues([asyncq_queue])
    await worker.broker.close()
    assert sorted(await redis_client.keys(f"*{asyncq_queue}*")) == keys_before
    assert not await redis_client.sismember("asyncq:queues", asyncq_queue)


async def test_a_queue_in_neither_or_both_is_fine(asyncq_redis_url: str, redis_client: Redis,
                                                  asyncq_queue: str) -> None:
    await redis_client.sadd("asyncq:queues", asyncq_queue)
    await redis_client.sadd("asynq:queues", asyncq_queue)
    async with Client(asyncq_redis_url + "?wire=asynq") as c:
        await c.enqueue("t", queue=asyncq_queue)
    async with Client(asyncq_redis_url) as c:
        await c.enqueue("t", queue=asyncq_queue + "-new")


async def _sismember_calls(redis_client: Redis) -> int:
    stats = await redis_client.info("commandstats")
    return int(stats.get("cmdstat_sismember", {}).get("calls", 0))


async def test_a_burst_into_a_new_queue_checks_its_layout_once(
    asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str,
) -> None:
    async with Client(asyncq_redis_url) as client:
        before = await _sismember_calls(redis_client)
        await asyncio.gather(*[client.enqueue("t", i, queue=asyncq_queue) for i in range(500)])
        # one check: a SISMEMBER in each layout's registry, whatever the burst's size
        assert await _sismember_calls(redis_client) - before == 2


async def test_a_burst_into_the_other_layouts_queue_is_refused_for_every_caller(
    asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str,
) -> None:
    await redis_client.sadd("asynq:queues", asyncq_queue)
    async with Client(asyncq_redis_url) as client:
        results = await asyncio.gather(
            *[client.enqueue("t", i, queue=asyncq_queue) for i in range(50)],
            return_exceptions=True)
    assert all(isinstance(r, BrokerError) and "Go asynq's layout" in str(r) for r in results)
    assert await redis_client.keys(f"asyncq:*{asyncq_queue}*") == []
