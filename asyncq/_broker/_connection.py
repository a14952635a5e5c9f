"""Turns what the user passes into a RedisBroker, and the connection settings asyncq applies to
the clients it creates.

Accepted everywhere a connection is (Client, Worker, Inspector, Scheduler, the CLI):

* a URL, one of ``URL_FORMS``: a single node (``redis://``, ``rediss://``, ``unix://``), a Redis
  Cluster (``redis+cluster://h1:p1,h2:p2``) or a Sentinel-managed master
  (``redis+sentinel://h1:p1,h2:p2/service_name``); query parameters set ``ConnectionOptions``
  fields (``?ssl_ca_certs=/ca.pem&socket_timeout=2``), an unknown one is an error;
* a list of Redis Cluster startup nodes (``["h1:p1", ("h2", p2)]``);
* a ready ``redis.asyncio.Redis`` (also one from ``Sentinel.master_for``) or
  ``redis.asyncio.RedisCluster``, created with ``decode_responses=False``: it keeps its own
  settings and stays the caller's (asyncq does not close it).

The Redis layout spoken is asyncq's own unless the URL says ``?wire=asynq`` (or ``make_broker``
is given ``wire="asynq"``): then the broker is an AsynqBroker, sharing queues with Go asynq
(``asyncq._broker._asynq``; needs ``asyncq[asynq]``). Either layout refuses a queue that only
the other knows.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal

from redis.asyncio import Redis, RedisCluster
from redis.asyncio.cluster import ClusterNode
from redis.asyncio.connection import ConnectionPool, SSLConnection, UnixDomainSocketConnection
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel, SentinelManagedSSLConnection
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from .._clock import SYSTEM_CLOCK, Clock
from ._asynq import asynq_broker_class
from ._asynq._guarded import GuardedRedisBroker
from ._connection_options import DEFAULT_CONNECTION, ConnectionOptions
from ._protocol import Broker, is_broker
from ._redis import RedisBroker
from ._redis_errors import broker_error
from ._redis_url import URL_FORMS, WIRES, Target, parse_url, redact, startup_nodes

__all__ = ["URL_FORMS", "WIRES", "ConnectionOptions", "RedisLike", "Wire", "check_reachable",
           "connect", "make_broker", "open_broker", "parse_url", "redact"]

StartupNode = str | tuple[str, int]
RedisLike = str | Redis | RedisCluster | list[StartupNode] | tuple[StartupNode, ...]
RedisClient = Redis | RedisCluster
Closer = Callable[[], Awaitable[None]]
Wire = Literal["asyncq", "asynq"]


# -- TLS with an explicit server name

def _with_server_name(kwargs: Mapping[str, Any], name: str | None) -> Mapping[str, Any]:
    if not name:
        return kwargs
    return {**kwargs, "server_hostname": name}


class _TLSConnection(SSLConnection):
    """redis-py's TLS connection, plus a server name that differs from the host dialled."""

    def __init__(self, *, ssl_server_hostname: str | None = None, **kwargs: Any) -> None:
        self.ssl_server_hostname = ssl_server_hostname
        super().__init__(**kwargs)

    def _connection_arguments(self) -> Mapping[str, Any]:
        return _with_server_name(super()._connection_arguments(), self.ssl_server_hostname)


class _SentinelTLSConnection(SentinelManagedSSLConnection):
    """A Sentinel-managed TLS connection with a server name (see ``_TLSConnection``)."""

    def __init__(self, *, ssl_server_hostname: str | None = None, **kwargs: Any) -> None:
        self.ssl_server_hostname = ssl_server_hostname
        super().__init__(**kwargs)  # type: ignore[no-untyped-call]

    def _connection_arguments(self) -> Mapping[str, Any]:
        return _with_server_name(super()._connection_arguments(), self.ssl_server_hostname)


# -- building clients

def _tls_kwargs(o: ConnectionOptions) -> dict[str, Any]:
    for name in ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile"):
        path = getattr(o, name)
        if path is not None and not os.path.isfile(path):
            raise ValueError(f"{name}: no such file {path!r}")
    verify = o.ssl_cert_reqs != "none"
    return {"ssl_ca_certs": o.ssl_ca_certs, "ssl_certfile": o.ssl_certfile,
            "ssl_keyfile": o.ssl_keyfile, "ssl_password": o.ssl_password,
            "ssl_cert_reqs": o.ssl_cert_reqs, "ssl_check_hostname": verify and o.ssl_check_hostname}


def _socket_kwargs(o: ConnectionOptions, *, tcp: bool = True) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"socket_timeout": o.socket_timeout,
                              "socket_connect_timeout": o.socket_connect_timeout}
    if tcp:
        kwargs["socket_keepalive"] = o.socket_keepalive
    return kwargs


def _auth_kwargs(o: ConnectionOptions) -> dict[str, Any]:
    return {"username": o.username, "password": o.password, "decode_responses": False,
            "health_check_interval": o.health_check_interval}


def _build(target: Target) -> tuple[RedisClient, Closer | None]:
    """A client for ``target`` and, for Sentinel, what else to close with it."""
    o = target.options
    if o.tls_settings() and not o.tls:
        raise ValueError(f"TLS options ({', '.join(o.tls_settings())}) need TLS: use a rediss:// "
                         "URL (rediss+cluster://, rediss+sentinel://) or tls=True")
    if (o.sentinel_username or o.sentinel_password) and target.kind != "sentinel":
        raise ValueError("sentinel_username/sentinel_password apply to redis+sentinel:// only")
    # Callers beyond max_connections wait for a free connection instead of failing with
    # "Too many connections": the ScriptRunner retries a call refused for that reason (it was
    # not sent). redis-py's blocking pool would do it too, but costs ~20 % per enqueue.
    pool_size: dict[str, Any] = {"max_connections": o.max_connections}
    if target.kind == "cluster":
        if o.ssl_server_hostname:
            raise ValueError("ssl_server_hostname is not supported on a cluster (nodes are "
                             "reached at the addresses the cluster announces): use "
                             "certificates valid for those addresses")
        tls: dict[str, Any] = {"ssl": True, **_tls_kwargs(o)} if o.tls else {}
        return RedisCluster(
            startup_nodes=[ClusterNode(host, port) for host, port in target.hosts],
            retry=Retry(NoBackoff(), 0), **_auth_kwargs(o), **_socket_kwargs(o), **pool_size,
            **tls,
        ), None
    if target.kind == "sentinel":
        sentinel_kwargs: dict[str, Any] = {
            **_socket_kwargs(o), "username": o.sentinel_username,
            "password": o.sentinel_password}
        if o.tls:
            sentinel_kwargs.update(ssl=True, **_tls_kwargs(o))
        sentinel = Sentinel(  # type: ignore[no-untyped-call]
            target.hosts, sentinel_kwargs=sentinel_kwargs)
        master_kwargs: dict[str, Any] = {**_auth_kwargs(o), **_socket_kwargs(o), **pool_size,
                                         "db": target.db}
        if o.tls:
            master_kwargs.update(connection_class=_SentinelTLSConnection,
                                 ssl_server_hostname=o.ssl_server_hostname, **_tls_kwargs(o))
        master = sentinel.master_for(target.service, redis_class=Redis, **master_kwargs)
        return master, sentinel.aclose
    kwargs: dict[str, Any] = {**_auth_kwargs(o), **pool_size, "db": target.db}
    if target.kind == "unix":
        if o.tls:
            raise ValueError("TLS over a unix socket is not supported")
        kwargs.update(path=target.path, connection_class=UnixDomainSocketConnection,
                      **_socket_kwargs(o, tcp=False))
    else:
        (host, port), = target.hosts
        kwargs.update(host=host, port=port, **_socket_kwargs(o))
        if o.tls:
            kwargs.update(connection_class=_TLSConnection,
                          ssl_server_hostname=o.ssl_server_hostname, **_tls_kwargs(o))
    return Redis.from_pool(ConnectionPool(**kwargs)), None


def _target(redis: str | Sequence[StartupNode], options: ConnectionOptions | None) -> Target:
    if options is not None and not isinstance(options, ConnectionOptions):
        raise TypeError(f"connection must be a ConnectionOptions, got {options!r}")
    opts = options or DEFAULT_CONNECTION
    return parse_url(redis, opts) if isinstance(redis, str) else startup_nodes(redis, opts)


def _open(redis: str | Sequence[StartupNode], options: ConnectionOptions | None
          ) -> tuple[RedisClient, Closer | None]:
    return _build(_target(redis, options))


def connect(redis: str | Sequence[StartupNode], options: ConnectionOptions | None = None
            ) -> tuple[RedisClient, Closer]:
    """A new client for a URL or a list of cluster startup nodes, and the coroutine function
    that closes it (with the Sentinel connections, if any). Raises ValueError/TypeError."""
    client, extra = _open(redis, options)

    async def close() -> None:
        try:
            await client.aclose()
        finally:
            if extra is not None:
                await extra()

    return client, close


async def check_reachable(url: str) -> None:
    """Check that Redis answers at ``url``: ValueError/TypeError for a bad URL, BrokerError
    (``cannot reach Redis at <url>: ...``) when it does not answer."""
    client, close = connect(url)
    try:
        await client.ping()
    except RedisError as exc:
        raise broker_error(f"cannot reach Redis at {redact(url)}: {exc}", exc) from None
    finally:
        await close()


def _client_settings(redis: RedisClient) -> Mapping[str, Any]:
    if isinstance(redis, RedisCluster):
        return redis.connection_kwargs
    kwargs: Mapping[str, Any] = redis.connection_pool.connection_kwargs
    return kwargs


def _broker_class(wire: Wire | None) -> Any:
    """The broker class of a layout (ImportError naming ``asyncq[asynq]`` if it needs protobuf
    and that is missing)."""
    return asynq_broker_class() if wire == "asynq" else GuardedRedisBroker


def make_broker(redis: RedisLike, *, clock: Clock = SYSTEM_CLOCK,
                connection: ConnectionOptions | None = None,
                wire: Wire | None = None) -> RedisBroker:
    """A broker over ``redis``; a client passed in stays the caller's (it is not closed).

    ``connection`` only applies to a URL or startup nodes: a client passed in keeps its own
    settings. ``wire`` is the Redis layout: "asyncq" (asyncq's own, the default) or "asynq"
    (Go asynq's: an AsynqBroker, typed here as the RedisBroker it stands in for); a URL may
    say it as ``?wire=``, and both may not disagree.
    """
    if wire is not None and wire not in WIRES:
        raise ValueError(f"wire must be one of {', '.join(WIRES)}, got {wire!r}")
    extra: Closer | None = None
    if isinstance(redis, str | list | tuple):
        target = _target(redis, connection)
        if wire is not None and target.wire is not None and target.wire != wire:
            raise ValueError(f"wire={wire!r} disagrees with the URL's ?wire={target.wire}")
        wire = wire or target.wire  # type: ignore[assignment]
        cls = _broker_class(wire)  # (before a client is made: protobuf may be missing)
        client, extra = _build(target)
    elif isinstance(redis, Redis | RedisCluster):
        if connection is not None:
            raise ValueError("connection options apply to a Redis URL; a redis.asyncio "
                             "client keeps the settings it was created with")
        if redis.get_encoder().decode_responses:
            raise ValueError("asyncq needs a redis client created with decode_responses=False")
        client = redis
        cls = _broker_class(wire)
    else:
        raise TypeError(f"expected a Redis URL, a list of cluster startup nodes, or a "
                        f"redis.asyncio Redis/RedisCluster client, got {redis!r}")
    kwargs = _client_settings(client)
    broker: RedisBroker = cls(client, owns_client=client is not redis, also_close=extra,
                              clock=clock,
                              ping_interval=float(kwargs.get("health_check_interval") or 0),
                              reply_timeout=kwargs.get("socket_timeout"))
    return broker


def open_broker(redis: RedisLike | Broker | None, broker: Broker | None = None, *,
                clock: Clock = SYSTEM_CLOCK,
                connection: ConnectionOptions | None = None) -> tuple[Broker, bool]:
    """The broker a Client, Worker, Inspector or Scheduler works through, and whether it owns
    it (closes it on close).

    ``broker=`` (or a Broker passed where a Redis URL/client is expected) is used as it is and
    stays the caller's; anything else is a Redis URL, startup nodes or a redis.asyncio client
    (see ``make_broker``).
    """
    if broker is not None:
        if redis is not None:
            raise TypeError("give either a Redis URL/client or broker=, not both")
        redis = broker
    if redis is None:
        raise TypeError("give a Redis URL, a redis.asyncio client or broker=")
    if is_broker(redis):
        if connection is not None:
            raise ValueError("connection options apply to a Redis URL, not to a broker")
        return redis, False
    if broker is not None:
        raise TypeError(f"broker= must be an asyncq Broker, got {broker!r}")
    return make_broker(redis, clock=clock, connection=connection), True  # type: ignore[arg-type]
