"""A throwaway local Redis Cluster for tests: N masters (and optionally replicas) on loopback.

Each node is a :class:`RedisServer` started with ``--cluster-enabled yes``; the cluster is formed
with ``redis-cli --cluster create ... --cluster-yes`` and :meth:`LocalCluster.start` returns once
every node reports ``cluster_state:ok`` and agrees on who serves every slot.

Example::

    with LocalCluster(masters=3) as cluster:
        client = redis.asyncio.RedisCluster.from_url(cluster.nodes[0].url)
        ...
        cluster.url   # "redis+cluster://127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3"
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Self

import pytest

from asyncq._testing.redis_server import RedisServer
from tests.helpers.polling import poll_until
from tests.helpers.ports import free_ports

__all__ = ["LocalCluster", "redis_cli", "three_masters"]

_HOST = "127.0.0.1"
_START_ATTEMPTS = 3


def redis_cli(*args: str, timeout: float = 30.0) -> str:
    """Run ``redis-cli`` with ``args``; return its stdout, raise RuntimeError on failure."""
    binary = shutil.which("redis-cli")
    if binary is None:
        raise RuntimeError("redis-cli not found; install it (apt-get install redis-server)")
    proc = subprocess.run([binary, *args], capture_output=True, timeout=timeout, check=False,
                          stdin=subprocess.DEVNULL)
    out = proc.stdout.decode(errors="replace")
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace")
        raise RuntimeError(f"redis-cli {' '.join(args)} failed ({proc.returncode}):\n{out}{err}")
    return out


class LocalCluster:
    """``masters`` master nodes with ``replicas`` replicas each, all on 127.0.0.1.

    Args:
        masters: Number of masters (at least 3, as ``redis-cli --cluster create`` requires).
        replicas: Replicas per master.
        extra_args: More ``redis-server`` arguments for every node.
        node_timeout_ms: ``cluster-node-timeout`` (failure detection), small for tests.
        startup_timeout: Seconds :meth:`start` waits for ``cluster_state:ok``.
    """

    def __init__(self, masters: int = 3, *, replicas: int = 0, extra_args: Sequence[str] = (),
                 node_timeout_ms: int = 2000, startup_timeout: float = 30.0) -> None:
        if masters < 3:
            raise ValueError("a Redis Cluster needs at least 3 masters")
        if replicas < 0:
            raise ValueError("replicas must be >= 0")
        self.masters = masters
        self.replicas = replicas
        self._extra_args = list(extra_args)
        self._node_timeout_ms = node_timeout_ms
        self._startup_timeout = startup_timeout
        self.nodes: list[RedisServer] = []

    # ------------------------------------------------------------ properties

    @property
    def addresses(self) -> list[str]:
        return [f"{_HOST}:{node.port}" for node in self.nodes]

    @property
    def url(self) -> str:
        """``redis+cluster://`` URL listing every node as a startup node."""
        return "redis+cluster://" + ",".join(self.addresses)

    # ------------------------------------------------------------- lifecycle

    def start(self) -> Self:
        """Start the nodes, create the cluster and wait until it serves every slot."""
        if self.nodes:
            return self
        for attempt in range(1, _START_ATTEMPTS + 1):
            try:
                self._start_nodes()
                break
            except RuntimeError:
                self.close()
                if attempt == _START_ATTEMPTS:
                    raise
        try:
            redis_cli("--cluster", "create", *self.addresses,
                      "--cluster-replicas", str(self.replicas), "--cluster-yes")
            self.wait_ok()
        except BaseException:
            self.close()
            raise
        return self

    def _start_nodes(self) -> None:
        count = self.masters * (1 + self.replicas)
        for port in free_ports(count, bus=True):
            node = RedisServer([
                "--cluster-enabled", "yes",
                "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", str(self._node_timeout_ms),
                "--repl-diskless-sync-delay", "0",  # replicas in sync at once, not after 5 s
                *self._extra_args,
            ], port=port)
            self.nodes.append(node)
            node.start()

    def wait_ok(self, timeout: float | None = None) -> None:
        """Wait until every running node says ``cluster_state:ok`` and all agree on slots."""
        last = ""

        def ok() -> bool:
            nonlocal last
            states = []
            for node in self.nodes:
                if not node.running:
                    continue
                try:
                    states.append(redis_cli("-p", str(node.port), "cluster", "info", timeout=5))
                    last = redis_cli("-p", str(node.port), "cluster", "nodes", timeout=5)
                except (RuntimeError, subprocess.TimeoutExpired):
                    states.append("")
            return bool(states and all("cluster_state:ok" in s for s in states)
                        and self._agree() and self._replicas_synced())

        poll_until(ok, timeout=timeout or self._startup_timeout,
                   message=lambda: f"cluster not ok; CLUSTER NODES:\n{last}")

    def _agree(self) -> bool:
        views = set()
        for node in self.nodes:
            if node.running:
                try:
                    views.add(redis_cli("-p", str(node.port), "cluster", "slots", timeout=5))
                except (RuntimeError, subprocess.TimeoutExpired):
                    return False
        return len(views) == 1

    def _replicas_synced(self) -> bool:
        """Every replica finished its initial sync (a replica that never synced cannot be
        promoted, so a failover test needs this) and every node knows it is a replica."""
        if not self.replicas:
            return True
        want = self.masters * self.replicas
        synced = 0
        for node in self.nodes:
            if node.running:
                try:
                    info = redis_cli("-p", str(node.port), "info", "replication", timeout=5)
                    view = redis_cli("-p", str(node.port), "cluster", "nodes", timeout=5)
                except (RuntimeError, subprocess.TimeoutExpired):
                    return False
                synced += "master_link_status:up" in info
                if sum("slave" in line.split()[2] for line in view.splitlines()) < want:
                    return False
        return synced >= want

    def master_ports(self) -> list[int]:
        """Ports of the nodes that are masters right now (CLUSTER NODES of a running node)."""
        out: list[int] = []
        for line in self.cluster_nodes().splitlines():
            fields = line.split()
            if len(fields) > 2 and "master" in fields[2] and "fail" not in fields[2]:
                out.append(int(fields[1].split("@")[0].rsplit(":", 1)[1]))
        return sorted(out)

    def replicas_of(self, master_port: int) -> list[int]:
        """Ports of the replicas of the master at ``master_port``."""
        rows = [line.split() for line in self.cluster_nodes().splitlines()]
        master_id = next(r[0] for r in rows if f":{master_port}@" in r[1])
        return sorted(int(r[1].split("@")[0].rsplit(":", 1)[1]) for r in rows
                      if "slave" in r[2] and r[3] == master_id)

    def cluster_nodes(self) -> str:
        """``CLUSTER NODES`` as seen by the first running node."""
        for node in self.nodes:
            if node.running:
                return redis_cli("-p", str(node.port), "cluster", "nodes", timeout=5)
        raise RuntimeError("no cluster node is running")

    def node_for_slot(self, slot: int) -> int:
        """Port of the master serving ``slot``."""
        for line in self.cluster_nodes().splitlines():
            fields = line.split()
            if len(fields) < 9 or "master" not in fields[2]:
                continue
            port = int(fields[1].split("@")[0].rsplit(":", 1)[1])
            for rng in fields[8:]:
                if rng.startswith("["):
                    continue  # a slot being migrated
                lo, _, hi = rng.partition("-")
                if int(lo) <= slot <= int(hi or lo):
                    return port
        raise LookupError(f"no master serves slot {slot}")

    def close(self) -> None:
        """Stop every node and delete their directories."""
        for node in self.nodes:
            node.close()
        self.nodes = []

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<LocalCluster {self.url}>"


@contextmanager
def three_masters() -> Iterator[LocalCluster]:
    """A fresh 3-master cluster for a fixture; the test is skipped, saying why, when
    redis-server or redis-cli is missing."""
    missing = [tool for tool in ("redis-server", "redis-cli") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"a cluster needs {', '.join(missing)}")
    with LocalCluster(masters=3) as cluster:
        yield cluster
