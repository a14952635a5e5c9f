"""Connection settings: every URL form, ConnectionOptions, startup-node lists and ready clients,
and the one-line errors for bad input (issue 8, item 1)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis, RedisCluster
from redis.asyncio.connection import UnixDomainSocketConnection

from asyncq import Client, ConnectionOptions, Inspector
from asyncq._broker._connection import _TLSConnection, connect, make_broker, parse_url, redact
from asyncq._testing.redis_server import RedisServer

pytestmark = pytest.mark.anyio


def pool_kwargs(client: Any) -> dict[str, Any]:
    if isinstance(client, RedisCluster):
        return dict(client.connection_kwargs)
    return dict(client.connection_pool.connection_kwargs)


@pytest.fixture
def pem(tmp_path: Path) -> str:
    path = tmp_path / "ca.pem"
    path.write_text("not read until a connection is made\n")
    return str(path)


def test_single_node_urls() -> None:
    t = parse_url("redis://u%40x:p%3Aw@10.0.0.1:6380/3")
    assert (t.kind, t.hosts, t.db) == ("single", [("10.0.0.1", 6380)], 3)
    assert (t.options.username, t.options.password, t.options.tls) == ("u@x", "p:w", False)
    t = parse_url("redis://localhost")
    assert (t.hosts, t.db) == ([("localhost", 6379)], 0)
    t = parse_url("redis://:secret@[::1]:7000?db=2")
    assert (t.hosts, t.db, t.options.username, t.options.password) == (
        [("::1", 7000)], 2, None, "secret")
    t = parse_url("unix://user:pw@/run/redis.sock?db=1&socket_timeout=none")
    assert (t.kind, t.path, t.db, t.options.socket_timeout) == ("unix", "/run/redis.sock", 1, None)


def test_tls_url_options(pem: str) -> None:
    t = parse_url(f"rediss://h:6380/0?ssl_ca_certs={pem}&ssl_check_hostname=false"
                  "&ssl_server_hostname=redis.internal&socket_timeout=2&max_connections=7")
    o = t.options
    assert (o.tls, o.ssl_ca_certs, o.ssl_check_hostname, o.ssl_server_hostname) == (
        True, pem, False, "redis.internal")
    assert (o.socket_timeout, o.max_connections) == (2.0, 7)


def test_cluster_and_sentinel_urls() -> None:
    t = parse_url("redis+cluster://u:p@10.0.0.1:7000,10.0.0.2:7001")
    assert (t.kind, t.hosts, t.options.username) == (
        "cluster", [("10.0.0.1", 7000), ("10.0.0.2", 7001)], "u")
    t = parse_url("rediss+cluster://10.0.0.1:7000")
    assert t.options.tls
    t = parse_url("redis+sentinel://:pw@s1,s2:26380/mymaster?db=4&sentinel_password=spw")
    assert (t.kind, t.hosts, t.service, t.db) == (
        "sentinel", [("s1", 26379), ("s2", 26380)], "mymaster", 4)
    assert (t.options.password, t.options.sentinel_password) == ("pw", "spw")


@pytest.mark.parametrize(("url", "why"), [
    ("http://localhost:6379", "unsupported Redis URL"),
    ("localhost:6379", "unsupported Redis URL"),
    ("redis://h/0?socket_timout=1", "unknown option 'socket_timout'"),
    ("redis://h/0?socket_timeout=soon", "option socket_timeout"),
    ("redis://h/0?max_connections=0", "max_connections must be"),
    ("redis://h/x", "database number"),
    ("redis://h1:1,h2:2", "several hosts"),
    ("redis://h:port", "bad port"),
    ("redis+cluster://h1,h2:2", "missing port"),
    ("redis+cluster://h1:1/2", "only database 0"),
    ("redis+sentinel://s1:26379", "service name"),
    ("redis+sentinel://s1:26379/a/b", "service name"),
    ("unix://", "missing socket path"),
    ("redis://", "missing host"),
    ("rediss://h?ssl_cert_reqs=maybe", "ssl_cert_reqs must be"),
])
def test_bad_urls_are_one_line_errors_listing_the_forms(url: str, why: str) -> None:
    with pytest.raises(ValueError, match="accepted forms") as err:
        parse_url(url)
    assert why in str(err.value)
    assert "\n" not in str(err.value)
    assert "redis+sentinel://" in str(err.value)


async def test_invalid_combinations_are_rejected(pem: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="need TLS"):
        connect(f"redis://h/0?ssl_ca_certs={pem}")
    with pytest.raises(ValueError, match="need TLS"):
        connect("redis://h/0", ConnectionOptions(ssl_certfile=pem))
    with pytest.raises(ValueError, match="no such file"):
        connect(f"rediss://h/0?ssl_ca_certs={tmp_path / 'missing.pem'}")
    with pytest.raises(ValueError, match="not supported on a cluster"):
        connect("rediss+cluster://h:1?ssl_server_hostname=x")
    with pytest.raises(ValueError, match=r"redis\+sentinel:// only"):
        connect("redis://h/0?sentinel_password=x")
    with pytest.raises(ValueError, match="ssl_keyfile needs ssl_certfile"):
        ConnectionOptions(tls=True, ssl_keyfile=pem)
    with pytest.raises(TypeError, match="ConnectionOptions"):
        connect("redis://h/0", {"socket_timeout": 1})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="startup node"):
        make_broker([("h", "1")])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="at least one"):
        make_broker([])


async def test_url_values_win_over_options_and_reach_the_client(pem: str) -> None:
    opts = ConnectionOptions(socket_timeout=7, max_connections=3, password="from-options")
    client, close = connect("redis://u:from-url@h:1/2?socket_timeout=2", opts)
    try:
        kw = pool_kwargs(client)
        assert (kw["socket_timeout"], kw["password"], kw["username"], kw["db"]) == (
            2.0, "from-url", "u", 2)
        assert client.connection_pool.max_connections == 3  # type: ignore[union-attr]
    finally:
        await close()
    client, close = connect(f"rediss://127.0.0.1:1/0?ssl_ca_certs={pem}"
                            "&ssl_server_hostname=redis.internal")
    try:
        kw = pool_kwargs(client)
        assert client.connection_pool.connection_class is _TLSConnection  # type: ignore[union-attr]
        assert (kw["ssl_ca_certs"], kw["ssl_server_hostname"]) == (pem, "redis.internal")
    finally:
        await close()


async def test_cluster_clients_from_urls_and_startup_nodes() -> None:
    for target in ("redis+cluster://127.0.0.1:7000,127.0.0.1:7001",
                   ["127.0.0.1:7000", ("127.0.0.1", 7001)]):
        broker = make_broker(target, connection=ConnectionOptions(socket_timeout=3))
        try:
            assert isinstance(broker.redis, RedisCluster)
            nodes = sorted(n.name for n in broker.redis.startup_nodes)
            assert nodes == ["127.0.0.1:7000", "127.0.0.1:7001"]
            assert broker.redis.connection_kwargs["socket_timeout"] == 3
            assert broker.redis.retry.get_retries() == 0  # asyncq retries, redis-py does not
        finally:
            await broker.close()


async def test_ready_clients_stay_the_callers() -> None:
    cluster = RedisCluster(host="127.0.0.1", port=7000)
    decoded = RedisCluster(host="127.0.0.1", port=7000, decode_responses=True)
    try:
        broker = make_broker(cluster)
        assert broker.redis is cluster
        await broker.close()
        with pytest.raises(ValueError, match="decode_responses"):
            make_broker(decoded)
        with pytest.raises(ValueError, match="keeps the settings"):
            make_broker(cluster, connection=ConnectionOptions())
    finally:
        await cluster.aclose()
        await decoded.aclose()


@pytest.fixture
def unix_server(tmp_path: Path) -> Iterator[RedisServer]:
    with RedisServer(["--unixsocket", "redis.sock", "--unixsocketperm", "700"]) as server:
        yield server


async def test_unix_socket_end_to_end(unix_server: RedisServer, asyncq_queue: str) -> None:
    url = f"unix://{unix_server.dir / 'redis.sock'}?db=1"
    async with Client(url) as client:
        pool = client.broker.redis.connection_pool  # type: ignore[attr-defined]
        assert pool.connection_class is UnixDomainSocketConnection
        info = await client.enqueue("t", {"n": 1}, queue=asyncq_queue)
    async with Inspector(url) as inspector:
        assert (await inspector.task_info(asyncq_queue, info.id)).json() == {"n": 1}
    plain = Redis.from_url(unix_server.url)
    try:
        assert await plain.dbsize() == 0  # db 1 was used, not db 0
    finally:
        await plain.aclose()


async def test_sentinel_clients_from_urls(pem: str) -> None:
    client, close = connect(f"rediss+sentinel://:pw@127.0.0.1:26379,127.0.0.1:26380/main?db=2"
                            f"&ssl_ca_certs={pem}&sentinel_password=spw"
                            "&ssl_server_hostname=redis.internal")
    try:
        pool: Any = client.connection_pool  # type: ignore[union-attr]
        assert (pool.service_name, pool.connection_kwargs["db"]) == ("main", 2)
        assert pool.connection_kwargs["password"] == "pw"
        assert pool.connection_kwargs["ssl_server_hostname"] == "redis.internal"
        assert pool.connection_class.__name__ == "_SentinelTLSConnection"
        sentinels = pool.sentinel_manager.sentinels
        assert len(sentinels) == 2
        kw = sentinels[0].connection_pool.connection_kwargs
        assert (kw["password"], kw["ssl_ca_certs"]) == ("spw", pem)
    finally:
        await close()


def test_passwords_never_appear_in_errors() -> None:
    for url in ("redis://u:hunter2@h:1/0?bogus=1", "redis+sentinel://:hunter2@s:1/m?oops=1",
                "rediss://h:1/0?ssl_password=hunter2&bogus=1",
                "redis+sentinel://s:1/m?sentinel_password=hunter2&x=1", "http://u:hunter2@h"):
        with pytest.raises(ValueError) as err:
            parse_url(url)
        assert "hunter2" not in str(err.value)
        assert "***" in str(err.value)
    assert redact("redis://u:p@h:1/0?password=x&db=1") == "redis://u:***@h:1/0?password=***&db=1"
    assert redact("unix:///run/r.sock") == "unix:///run/r.sock"


def test_every_connection_option_is_a_query_parameter_parsed_by_its_type() -> None:
    with pytest.raises(ValueError, match="unknown option") as err:
        parse_url("redis://h/0?bogus=1")
    for f in dataclasses.fields(ConnectionOptions):
        assert f.name in str(err.value)
    o = parse_url("redis://h/0?socket_timeout=none&max_connections=7&password=none"
                  "&health_check_interval=0&socket_keepalive=off").options
    assert (o.socket_timeout, o.max_connections, o.password) == (None, 7, "none")
    assert (o.health_check_interval, o.socket_keepalive) == (0.0, False)
    for query, why in (("socket_timeout=nan", "finite"), ("health_check_interval=inf", "finite"),
                       ("socket_connect_timeout=0", "socket_connect_timeout must be > 0"),
                       ("max_connections=1.5", "option max_connections"),
                       ("tls=maybe", "option tls")):
        with pytest.raises(ValueError, match="accepted forms") as err:
            parse_url(f"redis://h/0?{query}")
        assert why in str(err.value)
