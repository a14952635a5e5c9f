"""LeanSettings: how a lean connection reaches the Redis that a redis-py client talks to.

Everything is read once from the client's connection pool, so both paths share one set of
settings (a URL's options, or those of a client the user made): the address (for a
Sentinel-managed master, asked of the Sentinels at every connect, so a failover is followed),
TLS context and server name, unix socket, credentials, db, client name, timeouts, keepalive and
health-check interval. A client whose connections do something this module does not know (a
custom handshake or connect, RESP3, a replica pool, a cluster) gets no lean path: ``None``.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.connection import AbstractConnection, Connection, UnixDomainSocketConnection
from redis.asyncio.sentinel import SentinelConnectionPool
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.utils import format_error_message

from ._resp import pack

#: The connects redis-py does that a lean connection reproduces (TCP with or without TLS,
#: a unix socket); a connection class that replaces them keeps to redis-py.
_KNOWN_CONNECTS = (Connection._connect, UnixDomainSocketConnection._connect)


@dataclass(frozen=True, eq=False)
class LeanSettings:
    """How to open and prepare one lean connection (see the module docstring)."""

    template: AbstractConnection
    """A redis-py connection built from the pool's settings and never connected: its
    address, TLS context (built once, shared) and credentials are read from it."""
    sentinel: SentinelConnectionPool | None
    socket_timeout: float | None
    connect_timeout: float | None
    health_check_interval: float
    max_connections: int

    @property
    def where(self) -> str:
        """The address, for error messages (as redis-py words it)."""
        return self.template._host_error()

    async def open(self, factory: Callable[[], asyncio.Protocol]
                   ) -> tuple[asyncio.BaseTransport, asyncio.Protocol]:
        """A new connection with a protocol from ``factory``; errors as redis-py raises them
        (``ConnectionError`` naming the address, ``TimeoutError`` for the connect timeout)."""
        loop = asyncio.get_running_loop()
        template = self.template
        if self.sentinel is not None:  # the current master, as redis-py asks before a connect
            address = await self.sentinel.get_master_address()  # type: ignore[no-untyped-call]
            template.host, template.port = address  # type: ignore[attr-defined]
        try:
            async with asyncio.timeout(self.connect_timeout):
                if isinstance(template, UnixDomainSocketConnection):
                    return await loop.create_unix_connection(factory, template.path)
                transport, protocol = await loop.create_connection(
                    factory, **template._connection_arguments())  # type: ignore[attr-defined]
        except TimeoutError:
            raise RedisTimeoutError("Timeout connecting to server") from None
        except OSError as exc:
            raise RedisConnectionError(format_error_message(self.where, exc)) from exc
        try:
            _tune(transport, template)
        except (OSError, TypeError):
            transport.abort()
            raise
        return transport, protocol

    async def handshake(self) -> list[tuple[bytes, str]]:
        """The commands a new connection sends before any other (AUTH, CLIENT SETNAME,
        SELECT), each with the error redis-py raises when it is not answered OK."""
        template = self.template
        steps: list[tuple[bytes, str]] = []
        if template.credential_provider is not None or template.username or template.password:
            provider = template.credential_provider
            credentials: tuple[Any, ...] = (
                tuple(await provider.get_credentials_async()) if provider is not None
                else (template.username, template.password) if template.username
                else (template.password,))
            steps.append((pack(("AUTH", *credentials)), "Invalid Username or Password"))
        if template.client_name:
            steps.append((pack(("CLIENT", "SETNAME", template.client_name)),
                          "Error setting client name"))
        if template.db:
            steps.append((pack(("SELECT", template.db)), "Invalid Database"))
        return steps


def _tune(transport: asyncio.BaseTransport, template: AbstractConnection) -> None:
    """TCP_NODELAY and keepalive, as redis-py sets them."""
    sock = transport.get_extra_info("socket")
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if getattr(template, "socket_keepalive", False):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for option, value in getattr(template, "socket_keepalive_options", {}).items():
            sock.setsockopt(socket.SOL_TCP, option, value)


def lean_settings(redis: object) -> LeanSettings | None:
    """The settings of ``redis``'s connections, or None when they are not all understood
    here (then every call stays on redis-py)."""
    if not isinstance(redis, Redis):
        return None
    pool = redis.connection_pool
    cls = pool.connection_class
    kwargs: dict[str, Any] = dict(pool.connection_kwargs)
    if (not issubclass(cls, AbstractConnection) or cls._connect not in _KNOWN_CONNECTS
            or kwargs.get("redis_connect_func") is not None
            or kwargs.get("protocol") not in (None, 2, "2")
            or getattr(pool, "is_master", True) is not True):
        return None
    try:
        template = cls(**kwargs)
    except Exception:  # a class that cannot be built from its pool's settings alone
        return None
    sentinel = pool if isinstance(pool, SentinelConnectionPool) else None
    return LeanSettings(
        template=template, sentinel=sentinel,
        socket_timeout=template.socket_timeout,
        connect_timeout=template.socket_connect_timeout,
        health_check_interval=float(template.health_check_interval or 0),
        max_connections=int(getattr(pool, "max_connections", 0) or 0) or 2**31)
