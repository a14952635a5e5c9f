"""The lean connections of the single-node script calls (``asyncq._broker._lean``), on a real
redis-server: replies in order under load, broken and killed connections, reconnects, AUTH,
SELECT, NOSCRIPT and timeouts. TLS and Sentinel are in tests/deploy/test_lean_deploy.py."""

from __future__ import annotations

import asyncio
import hashlib
import random
import socket
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from asyncq import BrokerError, Client, ConnectionOptions, Task
from asyncq._broker import RedisBroker
from asyncq._broker import _keys as K
from asyncq._broker._connection import make_broker
from asyncq._broker._lean import LeanPool
from asyncq._broker._lean_settings import lean_settings
from asyncq._broker._resp import pack
from asyncq._broker._scripts import Script
from asyncq._testing.redis_server import RedisServer
from asyncq.testing import wait_until
from tests.helpers.ports import free_port

pytestmark = pytest.mark.anyio

#: Spins for ARGV[1] ms of server time, then answers ARGV[2]: a call that stays in flight.
SPIN_SOURCE = ("local t = redis.call('TIME') local start = t[1] * 1000000 + t[2] "
               "repeat local n = redis.call('TIME') "
               "until n[1] * 1000000 + n[2] - start > tonumber(ARGV[1]) * 1000 "
               "return ARGV[2]")
SPIN = Script("spin", SPIN_SOURCE, hashlib.sha1(SPIN_SOURCE.encode()).hexdigest())


def with_spin(broker: RedisBroker) -> RedisBroker:
    broker.runner.scripts = {**broker.runner.scripts, "spin": SPIN}
    return broker


@pytest.fixture
async def pool(asyncq_redis_url: str, anyio_backend: object) -> AsyncIterator[LeanPool]:
    redis = Redis.from_url(asyncq_redis_url)
    settings = lean_settings(redis)
    assert settings is not None
    lean = LeanPool(settings)
    try:
        yield lean
    finally:
        await lean.aclose()
        await redis.aclose()


@pytest.fixture
def server() -> Iterator[RedisServer]:
    with RedisServer([]) as own:
        yield own


def lean_of(client: Client) -> LeanPool | None:
    broker = client.broker
    assert isinstance(broker, RedisBroker)
    return broker.runner._lean


async def lean_client_id(broker: RedisBroker) -> int:
    lean = broker.runner._lean
    assert lean is not None, "a broker made from a URL uses lean connections"
    return int(await lean.submit(pack(("CLIENT", "ID"))))


# ------------------------------------------------------------------ order


async def test_a_thousand_concurrent_mixed_calls_each_get_their_own_reply(
    pool: LeanPool, redis_client: Redis,
) -> None:
    key = f"asyncq:lean:{uuid.uuid4().hex}"
    await redis_client.set(key + ":str", b"a string")
    script = "return {ARGV[1], KEYS[1]}"
    sha = (await redis_client.script_load(script))

    async def one(i: int) -> None:
        await asyncio.sleep(random.random() / 100)  # spread over many loop turns
        kind = i % 4
        if kind == 0:
            assert await pool.submit(pack(("ECHO", f"e{i}"))) == f"e{i}".encode()
        elif kind == 1:  # an error reply in the middle of the others
            reply = await pool.submit(pack(("LPUSH", key + ":str", i)))
            assert isinstance(reply, ResponseError) and "WRONGTYPE" in str(reply)
        elif kind == 2:
            assert await pool.submit(pack(("EVALSHA", sha, 1, f"k{i}", i))) == [
                str(i).encode(), f"k{i}".encode()]
        else:  # a pipeline of three, an error among them
            replies = await pool.submit(b"".join([
                pack(("ECHO", f"a{i}")), pack(("INCR", key + ":str")),
                pack(("ECHO", f"b{i}"))]), 3)
            assert replies[0] == f"a{i}".encode() and replies[2] == f"b{i}".encode()
            assert isinstance(replies[1], ResponseError)

    await asyncio.gather(*(one(i) for i in range(1000)))


async def test_a_cancelled_caller_leaves_the_others_replies_in_place(pool: LeanPool) -> None:
    first = pool.submit(pack(("ECHO", "first")))
    dropped = pool.submit(pack(("ECHO", "dropped")))
    last = pool.submit(pack(("ECHO", "last")))
    dropped.cancel()
    assert await first == b"first"
    assert await last == b"last"
    assert await pool.submit(pack(("ECHO", "after"))) == b"after"


# ------------------------------------------------------------------ broken connections


async def test_a_killed_connection_fails_its_calls_and_the_next_call_reconnects(
    pool: LeanPool, redis_client: Redis,
) -> None:
    conn_id = int(await pool.submit(pack(("CLIENT", "ID"))))
    key = f"asyncq:lean:{uuid.uuid4().hex}"
    blocked = pool.submit(pack(("BLPOP", key, 10)))  # in flight until killed
    await wait_until(lambda: _blocked(redis_client, conn_id), timeout=30, message="BLPOP")
    assert await redis_client.client_kill_filter(_id=conn_id) == 1
    with pytest.raises(RedisConnectionError):
        await blocked
    assert await pool.submit(pack(("ECHO", "again"))) == b"again"
    assert int(await pool.submit(pack(("CLIENT", "ID")))) != conn_id


async def _blocked(redis: Redis, conn_id: int) -> bool:
    clients = await redis.client_list()
    return any(int(c["id"]) == conn_id and c.get("cmd") == "blpop" for c in clients)


async def test_a_script_call_on_a_killed_connection_is_a_transient_broker_error(
    server: RedisServer, asyncq_queue: str,
) -> None:
    broker = with_spin(make_broker(server.url))
    try:
        assert await broker.runner.run("spin", [], [1, "warm"]) == b"warm"
        call = asyncio.ensure_future(broker.runner.run("spin", [], [2000, "never"]))
        await asyncio.sleep(0.3)  # written, Redis spinning
        server.kill()
        with pytest.raises(BrokerError) as info:
            await call
        assert info.value.transient and not info.value.refused
        server.restart()  # no persistence: the scripts are gone too (NOSCRIPT, reloaded)
        assert await broker.runner.run("spin", [], [1, "back"]) == b"back"
        async with Client(broker) as client:
            assert (await client.enqueue("t", queue=asyncq_queue)).id
    finally:
        await broker.close()


async def test_a_connection_killed_while_idle_is_replaced_before_the_next_call(
    asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str,
) -> None:
    async with Client(asyncq_redis_url) as client:
        await client.enqueue("t", queue=asyncq_queue)
        broker = client.broker
        assert isinstance(broker, RedisBroker)
        conn_id = await lean_client_id(broker)
        await redis_client.client_kill_filter(_id=conn_id)
        await asyncio.sleep(0.05)  # the close reaches the client
        assert (await client.enqueue("t", queue=asyncq_queue)).id  # no error: reconnected
        assert await lean_client_id(broker) != conn_id


async def test_an_unreachable_redis_is_a_transient_broker_error_naming_it() -> None:
    port = free_port()
    async with Client(f"redis://127.0.0.1:{port}/0") as client:
        for _ in range(2):  # the second call tries again, and fails the same way
            with pytest.raises(BrokerError, match=f"cannot reach Redis at 127.0.0.1:{port}") \
                    as info:
                await client.enqueue("t", queue="q")
            assert info.value.transient


async def test_a_broker_over_a_callers_client_opens_no_connection_of_its_own(
    redis_client: Redis,
) -> None:
    broker = make_broker(redis_client)
    try:
        assert broker.runner._lean is None
    finally:
        await broker.close()


# ------------------------------------------------------------------ settings


async def test_password_and_acl_user_authenticate_the_lean_connections(
    asyncq_queue: str,
) -> None:
    with RedisServer(["--requirepass", "pw0"]) as server:
        admin = Redis(port=server.port, password="pw0")
        try:
            await admin.acl_setuser("lean", enabled=True, passwords=["+pw1"],
                                    keys=["asyncq:*"], channels=["asyncq:*"],
                                    commands=["+@all"])
            for url in (f"redis://:pw0@127.0.0.1:{server.port}/0",
                        f"redis://lean:pw1@127.0.0.1:{server.port}/0"):
                async with Client(url) as client:
                    info = await client.enqueue("t", queue=asyncq_queue)
                    broker = client.broker
                    assert isinstance(broker, RedisBroker)
                    me = await broker.runner._lean.submit(  # type: ignore[union-attr]
                        pack(("ACL", "WHOAMI")))
                    assert me == (b"default" if ":pw0@" in url else b"lean")
                    assert await admin.exists(K.queue_keys(asyncq_queue).task(info.id))
            async with Client(f"redis://lean:wrong@127.0.0.1:{server.port}/0") as client:
                with pytest.raises(BrokerError, match="refused the credentials"):
                    await client.enqueue("t", queue=asyncq_queue)
        finally:
            await admin.aclose()


async def test_a_non_zero_db_is_selected(asyncq_redis_url: str, asyncq_queue: str) -> None:
    url = asyncq_redis_url.rsplit("/", 1)[0] + "/5"
    db5 = Redis.from_url(url)
    db0 = Redis.from_url(asyncq_redis_url.rsplit("/", 1)[0] + "/0")
    try:
        async with Client(url) as client:
            info = await client.enqueue("t", queue=asyncq_queue)
            many = await client.enqueue_many([Task("t", queue=asyncq_queue) for _ in range(3)])
        key = K.queue_keys(asyncq_queue).task(info.id)
        assert await db5.exists(key) and not await db0.exists(key)
        assert await db5.llen(K.queue_keys(asyncq_queue).pending) == 1 + len(many)
    finally:
        await db5.delete(*[k async for k in db5.scan_iter(f"asyncq:{{{asyncq_queue}}}*")])
        await db5.aclose()
        await db0.aclose()


async def test_noscript_after_script_flush_is_recovered(
    asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str,
) -> None:
    async with Client(asyncq_redis_url) as client:
        await client.enqueue("t", queue=asyncq_queue)
        await redis_client.script_flush()
        assert (await client.enqueue("t", queue=asyncq_queue)).id
        await redis_client.script_flush()
        results = await asyncio.gather(*(client.enqueue("t", queue=asyncq_queue)
                                         for _ in range(50)))
        assert len({r.id for r in results}) == 50
        await redis_client.script_flush()
        batch = await client.enqueue_many([Task("t", queue=asyncq_queue) for _ in range(10)])
        assert all(not isinstance(r, Exception) for r in batch)
    assert await redis_client.llen(K.queue_keys(asyncq_queue).pending) == 62


async def test_a_reply_later_than_socket_timeout_is_a_transient_error(
    server: RedisServer,
) -> None:
    broker = with_spin(make_broker(server.url, connection=ConnectionOptions(
        socket_timeout=0.2)))
    try:
        with pytest.raises(BrokerError, match="Timeout reading from") as info:
            await broker.runner.run("spin", [], [600, "late"])
        assert info.value.transient
        async with Redis.from_url(server.url) as other:
            await other.ping()  # answered once the script has ended (Redis runs one at a time)
        assert await broker.runner.run("spin", [], [1, "in time"]) == b"in time"
    finally:
        await broker.close()


async def test_a_server_that_never_answers_times_out(anyio_backend: object) -> None:
    """A socket that accepts and stays silent: the TLS handshake meets the connect timeout,
    and a password's AUTH meets the socket timeout."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        opts = "socket_connect_timeout=0.3&socket_timeout=0.3"
        async with Client(f"rediss://127.0.0.1:{port}/0?ssl_cert_reqs=none&{opts}") as client:
            with pytest.raises(BrokerError, match="Timeout connecting") as info:
                await client.enqueue("t", queue="q")
            assert info.value.transient
        broker = make_broker(f"redis://:pw@127.0.0.1:{port}/0?{opts}")
        try:
            with pytest.raises(BrokerError, match="Timeout reading") as info:
                await broker.runner.run("enqueue", ["a", "b", "c", "d", "e"], [])
            assert info.value.transient
        finally:
            await broker.close()


async def test_an_idle_connection_is_checked_before_it_is_used_again(
    server: RedisServer, asyncq_queue: str,
) -> None:
    async with Client(server.url, connection=ConnectionOptions(
            health_check_interval=0.1)) as client:
        await client.enqueue("t", queue=asyncq_queue)
        broker = client.broker
        assert isinstance(broker, RedisBroker)
        before = await lean_client_id(broker)
        await asyncio.sleep(0.2)
        assert (await client.enqueue("t", queue=asyncq_queue)).id  # after a PING
        assert await lean_client_id(broker) == before  # it answered: kept


async def test_a_unix_socket_carries_the_lean_connection(
    tmp_path: Path, asyncq_queue: str,
) -> None:
    path = tmp_path / "redis.sock"
    with RedisServer(["--unixsocket", str(path), "--unixsocketperm", "700"]):
        async with Client(f"unix://{path}?db=2") as client:
            assert lean_of(client) is not None
            info = await client.enqueue("t", queue=asyncq_queue)
            raws, _ = await client.broker.dequeue(  # type: ignore[attr-defined]
                asyncq_queue, 1, "owner", 30_000, 30_000)
            assert [r.id for r in raws] == [info.id]


async def test_a_server_still_loading_is_a_transient_broker_error(
    tmp_path: Path,
) -> None:
    """LOADING comes back from redis-py's parser as a connection error, not as a reply: the
    call fails transient (not refused, and never handed to the caller as a reply)."""
    with RedisServer([]) as server:
        admin = Redis(port=server.port)
        try:
            for start in range(0, 2000, 500):
                await admin.mset({f"asyncq:fill:{i}": b"x" for i in range(start, start + 500)})
            await admin.save()
        finally:
            await admin.aclose()
        server.stop()
        loading = await asyncio.create_subprocess_exec(  # 2 ms per key: 4 s of loading
            "redis-server", "--bind", "127.0.0.1", "--port", str(server.port), "--save", "",
            "--appendonly", "no", "--dir", str(server.dir), "--key-load-delay", "2000",
            "--loading-process-events-interval-bytes", "1024",
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            await wait_until(lambda: _accepts(server.port), timeout=10, message="listening")
            broker = make_broker(server.url)
            try:
                with pytest.raises(BrokerError, match="loading") as info:
                    await broker.runner.run("enqueue", ["a", "b", "c", "d", "e"], [])
                assert info.value.transient and not info.value.refused
            finally:
                await broker.close()
        finally:
            loading.kill()
            await loading.wait()


def _accepts(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0
