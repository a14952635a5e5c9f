"""The lean connections (``asyncq._broker._lean``) in each deployment: TLS with the client
certificate and server name of the URL, a Sentinel-managed master followed across a failover,
and a cluster left on redis-py's per-node connections."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from topology.cluster import LocalCluster
from topology.sentinel import LocalSentinel
from topology.tls import TLSRedisServer

from asyncq import BrokerError, Client
from asyncq._broker import RedisBroker
from asyncq._broker._resp import pack
from asyncq.testing import wait_until

from .conftest import ACL_PASSWORD, ACL_USER

pytestmark = pytest.mark.anyio


def lean_of(client: Client) -> object:
    broker = client.broker
    assert isinstance(broker, RedisBroker)
    return broker.runner._lean


async def lean_port(client: Client) -> int:
    """The port of the server the lean connection is on (from its own INFO)."""
    lean = lean_of(client)
    assert lean is not None
    info = await lean.submit(pack(("INFO", "server")))  # type: ignore[attr-defined]
    line = next(x for x in info.decode().splitlines() if x.startswith("tcp_port:"))
    return int(line.split(":")[1])


async def test_tls_lean_connection_with_certificates_and_server_name(
    tls_server: TLSRedisServer,
) -> None:
    q = f"lean-tls-{uuid.uuid4().hex[:6]}"
    async with Client(tls_server.url + "&ssl_server_hostname=localhost") as client:
        assert lean_of(client) is not None
        assert (await client.enqueue("t", queue=q)).id
        [raw], _ = await client.broker.dequeue(  # type: ignore[attr-defined]
            q, 1, "owner", 30_000, 30_000)
        assert raw.id
    async with Client(tls_server.url + "&ssl_server_hostname=redis.example") as client:
        with pytest.raises(BrokerError, match=r"Hostname mismatch|doesn't match") as info:
            await client.enqueue("t", queue=q)
        assert info.value.transient


@pytest.fixture
def failover_topology() -> Iterator[LocalSentinel]:
    with LocalSentinel() as topo:
        yield topo


async def test_sentinel_lean_connection_follows_the_master(
    failover_topology: LocalSentinel,
) -> None:
    topo = failover_topology
    q = f"lean-sentinel-{uuid.uuid4().hex[:6]}"
    async with Client(topo.url) as client:
        await client.enqueue("t", queue=q)
        old = topo.master_port()
        assert await lean_port(client) == old
        topo.kill_master()
        new = topo.wait_failover(old)

        async def enqueued() -> bool:
            try:
                await client.enqueue("t", queue=q)
            except BrokerError as exc:
                assert exc.transient, exc
                return False
            return True

        await wait_until(enqueued, timeout=30, message="an enqueue on the new master")
        assert await lean_port(client) == new


async def test_cluster_script_calls_stay_on_redis_py(cluster: LocalCluster) -> None:
    url = cluster.url.replace("redis+cluster://", f"redis+cluster://{ACL_USER}:{ACL_PASSWORD}@")
    async with Client(url) as client:
        assert lean_of(client) is None
        infos = [await client.enqueue("t", queue=f"lean-c-{i}-{uuid.uuid4().hex[:4]}")
                 for i in range(6)]
        assert all(i.id for i in infos)
