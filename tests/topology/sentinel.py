"""A throwaway Sentinel setup for tests: one master, its replicas and three Sentinels on loopback.

The Sentinels watch the master as ``service`` with a quorum of 2, ``down-after-milliseconds``
1000 and a short failover timeout, so killing the master promotes the replica within seconds::

    with LocalSentinel() as topo:
        client = Client(topo.url)      # redis+sentinel://127.0.0.1:s1,.../mymaster
        topo.kill_master()             # SIGKILL, as a crash
        topo.wait_failover()           # until the Sentinels name a new master
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Self

from asyncq._testing.redis_server import HOST, RedisServer
from tests.helpers.polling import poll_until

from .cluster import redis_cli

__all__ = ["LocalSentinel", "SentinelServer"]


class SentinelServer(RedisServer):
    """``redis-server <config> --sentinel``: Sentinel needs a config file it can rewrite."""

    def __init__(self, config: str, *, port: int | None = None) -> None:
        self._config = config
        super().__init__(port=port)

    def args(self) -> list[str]:
        conf = self.dir / "sentinel.conf"
        if not conf.exists():  # a restart keeps what the Sentinel rewrote
            conf.write_text(f"dir {self.dir}\n{self._config}")
        return [str(conf), "--sentinel", "--bind", HOST, "--port", str(self.port),
                "--daemonize", "no", "--protected-mode", "yes"]


class LocalSentinel:
    """A master, ``replicas`` replicas and ``sentinels`` Sentinels watching them.

    Args:
        service: The name the Sentinels know the master by.
        replicas: Number of replicas (at least 1, for a failover to have a candidate).
        sentinels: Number of Sentinel processes (quorum: a majority of them).
        down_after_ms: ``sentinel down-after-milliseconds``.
        failover_timeout_ms: ``sentinel failover-timeout``.
        extra_args: More ``redis-server`` arguments for the master and the replicas.
    """

    def __init__(self, service: str = "mymaster", *, replicas: int = 1, sentinels: int = 3,
                 down_after_ms: int = 1000, failover_timeout_ms: int = 3000,
                 extra_args: Sequence[str] = (), startup_timeout: float = 30.0) -> None:
        if replicas < 1 or sentinels < 1:
            raise ValueError("a failover needs at least one replica and one Sentinel")
        self.service = service
        self._replicas = replicas
        self._sentinels = sentinels
        self._down_after_ms = down_after_ms
        self._failover_timeout_ms = failover_timeout_ms
        # Replicas sync at once, not after the default 5 s wait for more replicas.
        self._extra_args = ["--repl-diskless-sync-delay", "0", *extra_args]
        self._startup_timeout = startup_timeout
        self.data_nodes: list[RedisServer] = []
        self.sentinels: list[SentinelServer] = []

    # ------------------------------------------------------------ properties

    @property
    def url(self) -> str:
        """``redis+sentinel://`` URL naming every Sentinel and the service."""
        hosts = ",".join(f"{HOST}:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{self.service}"

    @property
    def quorum(self) -> int:
        return self._sentinels // 2 + 1

    def master_port(self) -> int:
        """The master's port according to the first Sentinel that answers."""
        for sentinel in self.sentinels:
            if not sentinel.running:
                continue
            try:
                out = redis_cli("-p", str(sentinel.port), "sentinel",
                                "get-master-addr-by-name", self.service, timeout=5)
            except RuntimeError:
                continue
            lines = out.split()
            if len(lines) == 2:
                return int(lines[1])
        raise RuntimeError("no Sentinel answered with the master's address")

    def master(self) -> RedisServer:
        """The data node that is the master now."""
        port = self.master_port()
        return next(node for node in self.data_nodes if node.port == port)

    # ------------------------------------------------------------- lifecycle

    def start(self) -> Self:
        if self.data_nodes:
            return self
        try:
            master = RedisServer(self._extra_args).start()
            self.data_nodes.append(master)
            for _ in range(self._replicas):
                self.data_nodes.append(RedisServer(
                    [*self._extra_args, "--replicaof", HOST, str(master.port)]).start())
            config = (
                f"sentinel monitor {self.service} {HOST} {master.port} {self.quorum}\n"
                f"sentinel down-after-milliseconds {self.service} {self._down_after_ms}\n"
                f"sentinel failover-timeout {self.service} {self._failover_timeout_ms}\n"
                f"sentinel parallel-syncs {self.service} 1\n"
            )
            for _ in range(self._sentinels):
                self.sentinels.append(SentinelServer(config).start())
            self._wait_ready()
        except BaseException:
            self.close()
            raise
        return self

    def _wait_ready(self) -> None:
        """Until replication is up and every Sentinel knows the replicas and the others."""
        poll_until(self._ready, timeout=self._startup_timeout, message="Sentinel setup ready")

    def _ready(self) -> bool:
        try:
            for replica in self.data_nodes[1:]:
                info = redis_cli("-p", str(replica.port), "info", "replication", timeout=5)
                if "master_link_status:up" not in info:
                    return False
            for sentinel in self.sentinels:
                info = redis_cli("-p", str(sentinel.port), "info", "sentinel", timeout=5)
                want = f"slaves={self._replicas},sentinels={self._sentinels}"
                if want not in info:
                    return False
        except RuntimeError:
            return False
        return True

    def kill_master(self) -> RedisServer:
        """SIGKILL the current master (a crash); return it (``restart()`` brings it back)."""
        master = self.master()
        master.kill()
        return master

    def wait_failover(self, old_port: int, timeout: float = 30.0) -> int:
        """Wait until every Sentinel names a master other than ``old_port`` that answers as a
        master; return its port."""

        def new_master() -> int | None:
            ports = set()
            for sentinel in self.sentinels:
                try:
                    out = redis_cli("-p", str(sentinel.port), "sentinel",
                                    "get-master-addr-by-name", self.service, timeout=5).split()
                    ports.add(int(out[1]) if len(out) == 2 else 0)
                except RuntimeError:
                    ports.add(0)
            if len(ports) == 1 and (port := ports.pop()) not in (0, old_port):
                try:
                    if "role:master" in redis_cli("-p", str(port), "info", "replication",
                                                  timeout=5):
                        return port
                except RuntimeError:
                    pass
            return None

        port: int = poll_until(new_master, timeout=timeout,
                               message=f"a failover from port {old_port}")
        return port

    def close(self) -> None:
        for server in [*self.sentinels, *self.data_nodes]:
            server.close()
        self.sentinels = []
        self.data_nodes = []

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<LocalSentinel {self.url}>"
