"""How a Client connects: URLs, shared clients and brokers, connection options."""

from __future__ import annotations

from typing import Any

import pytest
from client_helpers import (
    ok_info,
)
from redis.asyncio import Redis

from asyncq import (
    Client,
    ConnectionOptions,
    FakeClock,
    Task,
    TaskState,
)
from asyncq._broker import RedisBroker
from asyncq._broker import _keys as K
from asyncq._broker._connection import make_broker
from tests.helpers.dataplane import (
    dt,
    eventually,
    lmembers,
    ms,
    msg_doc,
    next_event,
    task_hash,
)

pytestmark = pytest.mark.anyio


# ------------------------------------------------------------------ connections


async def test_client_on_callers_redis_leaves_it_open(
    redis_client: Redis, asyncq_queue: str
) -> None:
    conn_id = await redis_client.client_id()
    client = Client(redis_client)
    await client.enqueue("t", queue=asyncq_queue)
    await client.close()
    # Same connection still open: had the client closed it, a new one (new id) would be made.
    assert await redis_client.client_id() == conn_id
    assert await redis_client.llen(K.queue_keys(asyncq_queue).pending) == 1


async def test_client_on_callers_broker_leaves_it_open(
    asyncq_redis_url: str, asyncq_queue: str
) -> None:
    broker = make_broker(asyncq_redis_url)
    try:
        conn_id = await broker.redis.client_id()
        async with Client(broker) as client:
            await client.enqueue("t", queue=asyncq_queue)
        assert await broker.redis.client_id() == conn_id
    finally:
        await broker.close()


async def test_client_takes_a_broker_as_its_own_keyword(
    asyncq_redis_url: str, asyncq_queue: str
) -> None:
    broker = make_broker(asyncq_redis_url)
    try:
        async with Client(broker=broker) as client:
            assert client.broker is broker
            await client.enqueue("t", queue=asyncq_queue)
        await broker.ping()  # left open: it is the caller's
        with pytest.raises(TypeError, match="not both"):
            Client(asyncq_redis_url, broker=broker)
        with pytest.raises(TypeError, match="Broker"):
            Client(broker=asyncq_redis_url)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="connection options"):
            Client(broker=broker, connection=ConnectionOptions())
    finally:
        await broker.close()


class TickClock:
    """A clock that moves 1 ms each time it is read: time passes between any two reads."""

    def __init__(self) -> None:
        self.ms = FakeClock().now_ms()

    def now_ms(self) -> int:
        self.ms += 1
        return self.ms


@pytest.mark.parametrize("ahead_ms", [1, 2, 3, 50])
async def test_reported_state_is_the_stored_state_when_time_passes(
    asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str, ahead_ms: int
) -> None:
    clock = TickClock()
    async with Client(asyncq_redis_url, clock=clock) as client:
        await client.enqueue("warm-up", queue=asyncq_queue)  # registers the queue
        infos = [await client.enqueue("t", queue=asyncq_queue,
                                      process_at=dt(clock.ms + ahead_ms))]
        batch = await client.enqueue_many([Task("t", queue=asyncq_queue,
                                                process_at=dt(clock.ms + ahead_ms))])
        infos.append(ok_info(batch[0]))
    qk = K.queue_keys(asyncq_queue)
    for info in infos:
        fields = await task_hash(redis_client, asyncq_queue, info.id)
        assert fields["state"].decode() == info.state.value
        if info.state is TaskState.SCHEDULED:
            assert await redis_client.zscore(qk.scheduled, info.id) == ms(
                info.next_process_at)  # type: ignore[arg-type]
        else:
            assert info.id in await lmembers(redis_client, qk.pending)


async def test_client_from_url_closes_its_connection(
    asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str
) -> None:
    client = Client(asyncq_redis_url)
    await client.enqueue("t", queue=asyncq_queue)
    broker = client.broker
    assert isinstance(broker, RedisBroker)
    conn_id = await broker.redis.client_id()
    await client.close()

    async def connection_gone() -> bool:
        return all(int(c["id"]) != conn_id for c in await redis_client.client_list())

    await eventually(connection_gone)  # the server notices the close asynchronously


async def test_client_rejects_bad_connections() -> None:
    with pytest.raises(ValueError, match="unsupported Redis URL"):
        Client("http://localhost:6379")
    decoded = Redis(decode_responses=True)
    try:
        with pytest.raises(ValueError, match="decode_responses"):
            Client(decoded)
    finally:
        await decoded.aclose()
    with pytest.raises(TypeError):
        Client(42)  # type: ignore[arg-type]


async def test_payload_encodings_are_stored_raw(
    client: Client, redis_client: Redis, asyncq_queue: str
) -> None:
    cases: list[tuple[Any, bytes, str]] = [
        (b"\x00\xff raw", b"\x00\xff raw", "b"),
        (bytearray(b"ba"), b"ba", "b"),
        (None, b"", "n"),
        ({"a": [1, 2.5, None, True]}, b'{"a":[1,2.5,null,true]}', "j"),
        ("text", b'"text"', "j"),
        (9007199254740993, b"9007199254740993", "j"),  # > 2**53: exact, not a float
    ]
    for payload, stored, enc in cases:
        info = await client.enqueue("t", payload, queue=asyncq_queue)
        fields = await task_hash(redis_client, asyncq_queue, info.id)
        assert fields["payload"] == stored
        assert msg_doc(fields)["enc"] == enc
        assert info.payload == stored
        assert info.encoding == enc


async def test_cancel_publishes_the_task_id(client: Client) -> None:
    broker = client.broker
    assert isinstance(broker, RedisBroker)
    events = broker.listen([K.CANCEL_CHANNEL])
    try:
        assert await next_event(events) is None  # subscribed
        await client.cancel("task-123")
        assert await next_event(events) == (K.CANCEL_CHANNEL, "task-123")
    finally:
        await events.aclose()
