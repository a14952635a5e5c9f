"""The push links (``asyncq._broker._push``): the subscriptions of a broker asyncq made from a
URL, on a single node, read on asyncq's own connections rather than redis-py's PubSub. On a
real redis-server: messages in order, a killed connection or a restarted server followed by a
new subscription that loses no hand-off, AUTH and ACL users, silent connections, and closing.
TLS is in tests/deploy/test_push_deploy.py."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import pytest
from redis.asyncio import Redis

import asyncq
from asyncq import BrokerError, Client, ConnectionOptions
from asyncq._broker import QueueWake, RedisBroker
from asyncq._broker import _keys as K
from asyncq._broker._connection import make_broker
from asyncq._testing.redis_server import RedisServer
from asyncq.testing import WorkerFactory, wait_until
from tests.helpers.inprocess import gate_dequeues

pytestmark = pytest.mark.anyio


@pytest.fixture
def server() -> Iterator[RedisServer]:
    with RedisServer([]) as own:
        yield own


@pytest.fixture
async def admin(server: RedisServer) -> AsyncIterator[Redis]:
    client = Redis(port=server.port)
    yield client
    await client.aclose()


async def command(redis: Redis, *args: str) -> Any:
    return await redis.execute_command(*args)  # type: ignore[no-untyped-call]


async def push_clients(redis: Redis) -> list[dict[str, str]]:
    """The server's subscriber connections (CLIENT LIST TYPE pubsub)."""
    listed = await command(redis, "CLIENT", "LIST", "TYPE", "pubsub")
    text = listed.decode() if isinstance(listed, bytes) else str(listed)
    return [dict(field.split("=", 1) for field in line.split() if "=" in field)
            for line in text.splitlines() if line]


async def both_subscribed(redis: Redis) -> bool:
    """A connection subscribed to channels (wake-ups, cancel requests) and one to shard
    channels (hand-offs) are there."""
    clients = await push_clients(redis)
    return (any(c.get("sub", "0") != "0" for c in clients)
            and any(c.get("ssub", "0") != "0" for c in clients))


def recording_mux(started: list[str]) -> asyncq.ServeMux:
    mux = asyncq.ServeMux()

    @mux.handler("t")
    async def t(task: asyncq.Task) -> None:
        started.append(task.id or "")

    return mux


async def idle_on(redis: Redis, queue: str) -> None:
    idle = K.queue_keys(queue).idle

    async def registered() -> bool:
        return int(await redis.zcard(idle)) == 1

    await wait_until(registered, timeout=20, message="the worker registered as idle")


async def next_item(items: AsyncIterator[object], timeout: float = 10.0) -> object:
    with anyio.fail_after(timeout):
        return await anext(items)


# ------------------------------------------------------------------ which connection


async def test_the_subscriptions_take_no_connection_of_the_pool(
    server: RedisServer, admin: Redis,
) -> None:
    """``max_connections`` bounds the calls only: a worker whose pool holds one connection
    still hears its hand-offs (its subscriptions are push links of their own)."""
    queue = f"push-{uuid.uuid4().hex[:6]}"
    started: list[str] = []
    factory = WorkerFactory(server.url)
    try:
        async with Client(server.url) as client, factory(
                recording_mux(started), queues={queue: 1}, idle_poll_interval=30,
                connection=ConnectionOptions(max_connections=1)) as w:
            await idle_on(admin, queue)
            assert await both_subscribed(admin)
            gate = gate_dequeues(w.worker.broker)
            info = await client.enqueue("t", queue=queue)
            await wait_until(lambda: info.id in started, timeout=20,
                             message="handed off to the worker")
            gate.set()
    finally:
        await factory.aclose()


# ------------------------------------------------------------------ order


async def test_messages_come_in_the_order_they_were_published(
    server: RedisServer, admin: Redis,
) -> None:
    broker = make_broker(server.url)
    channels = [f"push-a-{uuid.uuid4().hex[:6]}", f"push-b-{uuid.uuid4().hex[:6]}"]
    stream = broker.listen(channels)
    try:
        assert await next_item(stream) is None
        sent = [(channels[i % 2], f"m{i}-" + "x" * (i % 700)) for i in range(2000)]
        for start in range(0, len(sent), 500):  # large writes: messages split across reads
            pipe = admin.pipeline(transaction=False)
            for channel, data in sent[start:start + 500]:
                pipe.publish(channel, data)
            await pipe.execute()
        heard = [await next_item(stream) for _ in sent]
        assert heard == sent
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
        await broker.close()


async def test_task_events_come_in_order_after_the_flush(server: RedisServer) -> None:
    queue = f"push-ev-{uuid.uuid4().hex[:6]}"
    async with Client(server.url) as client:
        broker = client.broker
        assert isinstance(broker, RedisBroker)
        events = broker.listen_events([queue])
        try:
            flush = await next_item(events)
            assert callable(flush)
            await broker.set_listening([queue], 30_000)
            ids = [(await client.enqueue("t", queue=queue)).id for _ in range(200)]
            heard: list[str] = []

            async def read() -> None:
                async for event in events:
                    heard.append(event.id)  # type: ignore[union-attr]

            async with anyio.create_task_group() as tg:
                tg.start_soon(read)
                with anyio.fail_after(10):
                    await flush(queue)
                # Every event published before the flush was heard, in order.
                assert heard == ids
                tg.cancel_scope.cancel()
        finally:
            await events.aclose()  # type: ignore[attr-defined]


# ------------------------------------------------------------------ broken connections


async def test_a_killed_subscription_ends_the_listening_with_a_transient_broker_error(
    server: RedisServer, admin: Redis,
) -> None:
    broker = make_broker(server.url)
    stream = broker.listen_signals([f"push-{uuid.uuid4().hex[:6]}"])
    try:
        assert await next_item(stream) is None
        await command(admin, "CLIENT", "KILL", "TYPE", "pubsub")
        with pytest.raises(BrokerError, match="subscription failed") as info:
            await next_item(stream)
        assert info.value.transient
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
        await broker.close()


async def test_after_client_kill_the_worker_subscribes_again_and_loses_no_hand_off(
    server: RedisServer, admin: Redis,
) -> None:
    queue = f"push-{uuid.uuid4().hex[:6]}"
    started: list[str] = []
    factory = WorkerFactory(server.url)
    try:
        async with Client(server.url) as client, factory(
                recording_mux(started), queues={queue: 1}, idle_poll_interval=30) as w:
            await idle_on(admin, queue)
            await command(admin, "CLIENT", "KILL", "TYPE", "pubsub")
            # Enqueued while the worker subscribes again: the hand-off finds nobody
            # listening, and the dequeue after the new subscription takes the task.
            first = await client.enqueue("t", queue=queue)
            await wait_until(lambda: first.id in started, timeout=20,
                             message="the task enqueued during the reconnect ran")
            await wait_until(lambda: both_subscribed(admin), timeout=20,
                             message="subscribed again")
            await idle_on(admin, queue)
            # Handed off on the new subscription: no dequeue can bring it.
            gate = gate_dequeues(w.worker.broker)
            second = await client.enqueue("t", queue=queue)
            await wait_until(lambda: second.id in started, timeout=20,
                             message="handed off on the new subscription")
            gate.set()
            assert started == [first.id, second.id]
    finally:
        await factory.aclose()


async def test_after_a_server_restart_the_worker_subscribes_again(
    server: RedisServer,
) -> None:
    queue = f"push-{uuid.uuid4().hex[:6]}"
    started: list[str] = []
    factory = WorkerFactory(server.url)
    try:
        async with factory(recording_mux(started), queues={queue: 1}, idle_poll_interval=30):
            admin = Redis(port=server.port)
            try:
                await idle_on(admin, queue)
            finally:
                await admin.aclose()
            server.restart()
            admin = Redis(port=server.port)
            try:
                await wait_until(lambda: both_subscribed(admin), timeout=30,
                                 message="subscribed again")
                await idle_on(admin, queue)
                async with Client(server.url) as client:
                    info = await client.enqueue("t", queue=queue)
                await wait_until(lambda: info.id in started, timeout=20,
                                 message="handed off after the restart")
            finally:
                await admin.aclose()
    finally:
        await factory.aclose()


async def test_a_silent_push_link_is_pinged_and_given_up(server: RedisServer) -> None:
    broker = make_broker(server.url, connection=ConnectionOptions(
        health_check_interval=0.2, socket_timeout=0.3))
    stream = broker.listen_signals(["q"])
    assert server.pid is not None
    try:
        assert await next_item(stream) is None
        os.kill(server.pid, signal.SIGSTOP)  # silent until the wait ends: only the ping can
        try:
            with pytest.raises(BrokerError, match="no answer to a ping") as info:
                await next_item(stream, timeout=30)
            assert info.value.transient
        finally:
            os.kill(server.pid, signal.SIGCONT)
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
        await broker.close()


async def test_a_quiet_push_link_that_answers_its_pings_stays(
    server: RedisServer, admin: Redis,
) -> None:
    broker = make_broker(server.url, connection=ConnectionOptions(
        health_check_interval=0.05, socket_timeout=1))
    queue = f"push-{uuid.uuid4().hex[:6]}"
    stream = broker.listen_signals([queue])
    try:
        assert await next_item(stream) is None
        [subscriber] = await push_clients(admin)

        async def pinged() -> bool:
            [now] = await push_clients(admin)
            return now["id"] == subscriber["id"] and now["cmd"] == "ping"

        await wait_until(pinged, timeout=10, message="a ping on the quiet connection")
        await admin.publish(K.WAKE_CHANNEL, queue)
        assert await next_item(stream) == QueueWake(queue)
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
        await broker.close()


# ------------------------------------------------------------------ credentials


async def test_password_and_acl_user_authenticate_the_push_links() -> None:
    with RedisServer(["--requirepass", "pw0"]) as server:
        admin = Redis(port=server.port, password="pw0")
        try:
            await admin.acl_setuser("pusher", enabled=True, passwords=["+pw1"],
                                    keys=["asyncq:*"], channels=["asyncq:*"],
                                    commands=["+@all"])
            for url in (f"redis://:pw0@127.0.0.1:{server.port}/0",
                        f"redis://pusher:pw1@127.0.0.1:{server.port}/0"):
                broker = make_broker(url)
                stream = broker.listen_signals(["q"])
                try:
                    assert await next_item(stream) is None
                    [subscriber] = await push_clients(admin)
                    assert subscriber["user"] == ("default" if ":pw0@" in url else "pusher")
                    await admin.publish(K.WAKE_CHANNEL, "q")
                    assert await next_item(stream) == QueueWake("q")
                finally:
                    await stream.aclose()  # type: ignore[attr-defined]
                    await broker.close()
            broker = make_broker(f"redis://pusher:wrong@127.0.0.1:{server.port}/0")
            stream = broker.listen_signals(["q"])
            try:
                with pytest.raises(BrokerError, match="password"):
                    await next_item(stream)
            finally:
                await stream.aclose()  # type: ignore[attr-defined]
                await broker.close()
        finally:
            await admin.aclose()


async def test_a_channel_the_acl_user_may_not_hear_is_refused() -> None:
    with RedisServer(["--requirepass", "pw0"]) as server:
        admin = Redis(port=server.port, password="pw0")
        try:
            await admin.acl_setuser("narrow", enabled=True, passwords=["+pw1"],
                                    keys=["asyncq:*"], channels=["other:*"],
                                    commands=["+@all"])
            broker = make_broker(f"redis://narrow:pw1@127.0.0.1:{server.port}/0")
            stream = broker.listen_signals(["q"])
            try:
                with pytest.raises(BrokerError, match=r"(?i)noperm|permission"):
                    await next_item(stream)
            finally:
                await stream.aclose()  # type: ignore[attr-defined]
                await broker.close()
        finally:
            await admin.aclose()


# ------------------------------------------------------------------ closing


async def test_closing_the_listening_unsubscribes(server: RedisServer, admin: Redis) -> None:
    broker = make_broker(server.url)
    queue = f"push-{uuid.uuid4().hex[:6]}"
    channel = K.queue_keys(queue).handoff_channel("owner-1")
    stream = broker.listen_handoffs([queue], "owner-1")
    try:
        assert await next_item(stream) is None
        assert await command(admin, "PUBSUB", "SHARDNUMSUB", channel) == [
            channel.encode(), 1]
    finally:
        await stream.aclose()  # type: ignore[attr-defined]

    async def gone() -> bool:
        reply = await command(admin, "PUBSUB", "SHARDNUMSUB", channel)
        return bool(reply[1] == 0) and not await push_clients(admin)

    await wait_until(gone, timeout=10, message="unsubscribed and disconnected")
    await broker.close()
