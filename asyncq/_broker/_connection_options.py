"""ConnectionOptions: how asyncq connects to Redis when it creates the client, validated from
the field annotations (which also drive the URL query parameters of ``_redis_url``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from .._validate import NONZERO, check_fields


@dataclass(frozen=True, kw_only=True)
class ConnectionOptions:
    """How asyncq connects to Redis when it creates the client (from a URL or startup nodes).

    Every field can also be given as a query parameter of the URL
    (``rediss://host:6380/0?ssl_ca_certs=/etc/ca.pem&socket_timeout=2``); a value in the URL
    wins over the same field here. A ``redis.asyncio`` client you pass in yourself keeps its
    own settings.

    asyncq never enables redis-py's automatic command retries on the clients it creates:
    re-sending a script whose reply was lost could run it twice. Its own loops retry at a level
    that knows what is safe to repeat (see docs/reference/delivery-guarantees.md).

    Each field is listed only here: its annotation says how it is validated (``check_fields``)
    and how a URL query parameter is parsed (``asyncq._broker._redis_url``).
    """

    socket_timeout: float | None = field(default=5.0, metadata=NONZERO)
    """Seconds to wait for a reply before the call fails and the connection is dropped
    (``None``: wait forever — a hung Redis then stalls the caller)."""
    socket_connect_timeout: float | None = field(default=5.0, metadata=NONZERO)
    """Seconds to wait for a connection to be established (``None``: the OS default)."""
    health_check_interval: float = 15.0
    """A pooled connection idle for longer than this is checked with a PING before reuse, and a
    worker's pub/sub connection that heard nothing for this long is pinged; 0 disables both."""
    socket_keepalive: bool = True
    """Enable TCP keepalive, so a peer that vanished is noticed even on idle connections."""
    max_connections: int = field(default=100, metadata=NONZERO)
    """Most connections in the pool (per node on a cluster). A call made while all of them are
    busy waits for one to be free (up to 20 s, then a transient BrokerError) instead of
    failing at once."""
    username: str | None = None
    """ACL user name (Redis 6+), when it is not in the URL."""
    password: str | None = None
    """Password (of ``username``, or of the ``default`` user), when it is not in the URL."""
    tls: bool = False
    """Connect with TLS; implied by the ``rediss://``, ``rediss+cluster://`` and
    ``rediss+sentinel://`` schemes."""
    ssl_ca_certs: str | None = None
    """CA certificate file (PEM) the server certificate must chain to (default: the system's)."""
    ssl_certfile: str | None = None
    """Client certificate file (PEM), for servers that require one (``tls-auth-clients yes``)."""
    ssl_keyfile: str | None = None
    """Private key of the client certificate (PEM)."""
    ssl_password: str | None = None
    """Password of ``ssl_keyfile``, if it is encrypted."""
    ssl_cert_reqs: Literal["required", "optional", "none"] = "required"
    """Whether the server certificate is verified; "none" turns verification off (testing
    only)."""
    ssl_check_hostname: bool = True
    """Check that the server certificate names the host connected to (or
    ``ssl_server_hostname``)."""
    ssl_server_hostname: str | None = None
    """The name the server certificate must carry (and the TLS SNI name), when it differs from
    the host in the URL — e.g. connecting to an IP address. Single node and Sentinel only."""
    sentinel_username: str | None = None
    """ACL user name for the Sentinel processes themselves (``redis+sentinel://`` only)."""
    sentinel_password: str | None = None
    """Password for the Sentinel processes themselves (``redis+sentinel://`` only)."""

    def __post_init__(self) -> None:
        check_fields(self)
        if self.ssl_keyfile and not self.ssl_certfile:
            raise ValueError("ssl_keyfile needs ssl_certfile (the client certificate)")

    def tls_settings(self) -> dict[str, Any]:
        """The TLS fields that differ from their defaults (they need TLS to be on)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name.startswith("ssl_") and getattr(self, f.name) != f.default}


DEFAULT_CONNECTION = ConnectionOptions()
