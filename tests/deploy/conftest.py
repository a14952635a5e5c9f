"""Fixtures of the deployment suite: real topologies started once per session.

* ``cluster``: 3 masters (``redis-server --cluster-enabled yes`` + ``redis-cli --cluster
  create``), with the asyncq ACL user on every node;
* ``sentinel_topology``: a master, a replica and 3 Sentinels (the failover test starts its own);
* ``tls_server``: TLS only, client certificates required, certificates made by openssl now;
* ``acl_server``: a plain server with a user limited by ``ACL_RULES``.

``deployment`` is parametrized over all four and gives the URL asyncq components use plus an
admin client for assertions. On every test here, the ``ScriptRunner`` (every script call) is wrapped
by a checker that fails the test if a script call names keys (or key prefixes in its arguments)
of more than one cluster hash slot, in asyncq's layout or Go asynq's (wire=asynq).
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis, RedisCluster
from redis.crc import key_slot
from topology.acl import acl_setuser
from topology.cluster import LocalCluster
from topology.sentinel import LocalSentinel
from topology.tls import TLSFiles, TLSRedisServer, make_certs

from asyncq._broker import _keys as K
from asyncq._broker._asynq import _keys as AK
from asyncq._broker._connection import connect
from asyncq._broker._runner import ScriptRunner
from asyncq._testing.redis_server import RedisServer

ACL_USER, ACL_PASSWORD = "asyncq", "s3cret-asyncq"
MISSING = [tool for tool in ("redis-server", "redis-cli", "openssl") if shutil.which(tool) is None]
HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if not MISSING:  # `make test` installs redis-server (and redis-cli with it) when it can
        return
    skip = pytest.mark.skip(reason=f"the deployment suite needs {', '.join(MISSING)}")
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(skip)
DEPLOYMENTS = ("cluster", "sentinel", "tls", "acl")


@dataclass
class Deployment:
    """One topology: ``url`` is what asyncq gets; ``admin_url`` has every right."""

    name: str
    url: str
    admin_url: str

    async def admin(self) -> tuple[Redis | RedisCluster, Any]:
        client, close = connect(self.admin_url)
        return client, close


# ---------------------------------------------------------------- topologies


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(masters=3) as topo:
        for node in topo.nodes:
            acl_setuser(node.port, ACL_USER, ACL_PASSWORD)
        yield topo


@pytest.fixture(scope="session")
def sentinel_topology() -> Iterator[LocalSentinel]:
    with LocalSentinel() as topo:
        yield topo


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    return make_certs(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="session")
def tls_server(tls_files: TLSFiles) -> Iterator[TLSRedisServer]:
    with TLSRedisServer(tls_files) as server:
        yield server


@pytest.fixture(scope="session")
def acl_server() -> Iterator[RedisServer]:
    with RedisServer() as server:
        acl_setuser(server.port, ACL_USER, ACL_PASSWORD)
        yield server


def with_user(url: str, scheme: str = "redis") -> str:
    return url.replace(f"{scheme}://", f"{scheme}://{ACL_USER}:{ACL_PASSWORD}@", 1)


@pytest.fixture(params=DEPLOYMENTS)
def deployment(request: pytest.FixtureRequest) -> Deployment:
    name = request.param
    if name == "cluster":
        topo: LocalCluster = request.getfixturevalue("cluster")
        return Deployment(name, with_user(topo.url, "redis+cluster"), topo.url)
    if name == "sentinel":
        sentinel: LocalSentinel = request.getfixturevalue("sentinel_topology")
        return Deployment(name, sentinel.url, sentinel.url)
    if name == "tls":
        server: RedisServer = request.getfixturevalue("tls_server")
        return Deployment(name, server.url, server.url)
    server = request.getfixturevalue("acl_server")
    return Deployment(name, with_user(server.url), server.url)


@pytest.fixture
async def admin(deployment: Deployment, anyio_backend: object
                ) -> AsyncIterator[Redis | RedisCluster]:
    client, close = await deployment.admin()
    try:
        yield client
    finally:
        await close()


# ---------------------------------------------------------------- one slot per script


class SlotChecker:
    """Records every script call and the slots of the keys it names."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.violations: list[str] = []

    def check(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1
        named = list(keys) + [a.decode(errors="replace") if isinstance(a, bytes) else a
                              for a in args if isinstance(a, str | bytes)]
        slots = {key_slot(k.encode()) for k in named
                 if k.startswith(KEY_PREFIXES) and k not in CHANNELS}
        if len(slots) > 1:
            self.violations.append(f"{name}: keys in slots {sorted(slots)}: {named}")


#: what a key name starts with: asyncq's layout, and Go asynq's (wire=asynq)
KEY_PREFIXES = ("asyncq:", f"{AK.PREFIX}:")
CHANNELS = frozenset({K.WAKE_CHANNEL, K.CANCEL_CHANNEL,  # channels, not keys
                      AK.CANCEL_CHANNEL, AK.WAKE_CHANNEL})
CHECKER = SlotChecker()


@pytest.fixture(autouse=True)
def slot_checker(monkeypatch: pytest.MonkeyPatch) -> Iterator[SlotChecker]:
    real_run = ScriptRunner.run
    real_pipeline = ScriptRunner._pipeline

    async def run(self: ScriptRunner, name: str, keys: Sequence[str],
                  args: Sequence[Any]) -> Any:
        CHECKER.check(name, keys, args)
        return await real_run(self, name, keys, args)

    async def _pipeline(self: ScriptRunner, calls: Sequence[Any],
                        preload: Sequence[Any] = ()) -> list[Any]:
        for script, keys, args in calls:
            CHECKER.check(script.name, keys, args)
        return await real_pipeline(self, calls, preload)

    monkeypatch.setattr(ScriptRunner, "run", run)
    monkeypatch.setattr(ScriptRunner, "_pipeline", _pipeline)
    before = len(CHECKER.violations)
    yield CHECKER
    assert CHECKER.violations[before:] == []
