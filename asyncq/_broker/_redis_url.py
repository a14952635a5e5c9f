"""Redis URLs: the accepted forms, their strict parsing into a ``Target``, and redaction of the
passwords they hold (for error messages and logs).

Query parameters set ``ConnectionOptions`` fields (an unknown one is an error, not ignored),
except ``db`` and ``wire`` (``?wire=asynq``: Go asynq's layout, see ``asyncq._broker._asynq``;
``?wire=asyncq``, the default: asyncq's own);
a value in the URL wins over the options passed along with it. Each parameter is parsed by the
type of its field (``float | None``: a number or ``none``; ``bool``: true/false...), so a new
field is a new parameter with no change here.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import parse_qsl, unquote, urlsplit

from .._validate import FieldKind, field_kinds
from ._connection_options import DEFAULT_CONNECTION, ConnectionOptions

URL_FORMS = (
    "redis://[[user]:password@]host[:port][/db], rediss://... (TLS), "
    "unix://[[user]:password@]/path/to/socket[?db=N], "
    "redis+cluster://[[user]:password@]host:port[,host:port...], rediss+cluster://... (TLS), "
    "redis+sentinel://[[user]:password@]host:port[,host:port...]/service_name[?db=N], "
    "rediss+sentinel://... (TLS); options as query parameters (?ssl_ca_certs=...); "
    "?wire=asynq for Go asynq's Redis layout"
)
WIRES = ("asyncq", "asynq")  # the Redis layouts a broker speaks: asyncq's own, Go asynq's
SCHEMES = ("redis", "rediss", "unix", "redis+cluster", "rediss+cluster", "redis+sentinel",
           "rediss+sentinel")


def _bool(value: str) -> bool:
    lowered = value.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {value!r}")


_FROM_TEXT: Mapping[type, Callable[[str], Any]] = {float: float, int: int, bool: _bool, str: str}


def _or_none(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    return lambda value: None if value.lower() == "none" else parse(value)


def _query_parser(name: str, kind: FieldKind | None) -> Callable[[str], Any]:
    """How the text of query parameter ``name`` becomes a value of its field; checking the
    value (range, choices) is left to ``ConnectionOptions`` itself."""
    if kind is None:
        raise TypeError(f"ConnectionOptions.{name} has a type no URL query parameter can carry")
    parse = _FROM_TEXT[kind.base]
    # "none" is None for numbers only: a password may well be "none".
    return _or_none(parse) if kind.optional and kind.base is not str else parse


_QUERY_PARSERS: Mapping[str, Callable[[str], Any]] = {
    f.name: _query_parser(f.name, field_kinds(ConnectionOptions).get(f.name))
    for f in dataclasses.fields(ConnectionOptions)
}


@dataclass(frozen=True)
class Target:
    """What a URL (or a list of startup nodes) names."""

    kind: Literal["single", "unix", "cluster", "sentinel"]
    hosts: list[tuple[str, int]]
    options: ConnectionOptions
    db: int = 0
    path: str = ""
    service: str = ""
    wire: str | None = None  # ?wire=: "asyncq" or "asynq" (None: not given, asyncq's own)


_SECRET_QUERY = re.compile(r"((?:^|[?&])(?:ssl_|sentinel_)?password=)[^&]*")


def redact(url: str) -> str:
    """``url`` with its passwords (user info and query parameters) replaced by ``***``, for
    error messages and logs."""
    if not isinstance(url, str):
        return repr(url)
    scheme, sep, rest = url.partition("://")
    if sep:
        netloc, slash, tail = rest.partition("/")
        userinfo, at, hosts = netloc.rpartition("@")
        if at and ":" in userinfo:
            netloc = userinfo.split(":", 1)[0] + ":***@" + hosts
        url = scheme + sep + netloc + slash + tail
    return _SECRET_QUERY.sub(r"\1***", url)


def _bad(url: str, why: str) -> ValueError:
    return ValueError(f"invalid Redis URL {redact(url)!r}: {why}; accepted forms: {URL_FORMS}")


def _hosts(url: str, netloc: str, default_port: int | None) -> list[tuple[str, int]]:
    hosts = []
    for item in netloc.rpartition("@")[2].split(","):
        item = item.strip()
        if item.startswith("["):  # [ipv6]:port
            host, _, port = item[1:].partition("]")
            port = port.removeprefix(":")
        else:
            host, _, port = item.rpartition(":") if ":" in item else (item, "", "")
        if not host:
            raise _bad(url, f"missing host in {item!r}")
        if not port and default_port is None:
            raise _bad(url, f"missing port in {item!r}")
        try:
            hosts.append((unquote(host), int(port) if port else default_port or 6379))
        except ValueError:
            raise _bad(url, f"bad port in {item!r}") from None
    return hosts


def parse_url(url: str, options: ConnectionOptions | None = None) -> Target:
    """Parse a Redis URL (its settings over ``options``, default ``ConnectionOptions()``);
    raise ValueError (one line, listing the accepted forms) if it is bad."""
    if options is None:
        options = DEFAULT_CONNECTION
    if not isinstance(url, str) or "://" not in url or url.split("://", 1)[0] not in SCHEMES:
        raise ValueError(f"unsupported Redis URL {redact(url)!r}; accepted forms: {URL_FORMS}")
    parts = urlsplit(url)
    scheme = parts.scheme
    overrides: dict[str, Any] = {}
    db: int | None = None
    wire: str | None = None
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name == "wire":
            if value not in WIRES:
                raise _bad(url, f"wire must be one of {', '.join(WIRES)}, got {value!r}")
            wire = value
            continue
        if name == "db":
            try:
                db = int(value)
            except ValueError:
                raise _bad(url, f"db must be an integer, got {value!r}") from None
            continue
        parser = _QUERY_PARSERS.get(name)
        if parser is None:
            known = ", ".join(["db", "wire", *_QUERY_PARSERS])
            raise _bad(url, f"unknown option {name!r} (known: {known})")
        try:
            overrides[name] = parser(value)
        except ValueError as exc:
            raise _bad(url, f"option {name}: {exc}") from None
    userinfo = parts.netloc.rpartition("@")[0]
    if userinfo:
        user, _, password = userinfo.partition(":")
        if user:
            overrides["username"] = unquote(user)
        if password:
            overrides["password"] = unquote(password)
    if scheme.startswith("rediss"):
        overrides["tls"] = True
    try:
        opts = dataclasses.replace(options, **overrides)
    except (TypeError, ValueError) as exc:
        raise _bad(url, str(exc)) from None
    path = unquote(parts.path)
    if scheme == "unix":
        if not path:
            raise _bad(url, "missing socket path")
        return Target("unix", [], opts, db=db or 0, path=path, wire=wire)
    if not parts.netloc.rpartition("@")[2]:
        raise _bad(url, "missing host")
    if scheme.endswith("+cluster"):
        if db or path.strip("/") not in ("", "0"):
            raise _bad(url, "a cluster has only database 0")
        return Target("cluster", _hosts(url, parts.netloc, None), opts, wire=wire)
    if scheme.endswith("+sentinel"):
        service = path.strip("/")
        if not service or "/" in service:
            raise _bad(url, "give the service name as the path (/mymaster)")
        return Target("sentinel", _hosts(url, parts.netloc, 26379), opts, db=db or 0,
                       service=service, wire=wire)
    if db is None and path.strip("/"):
        try:
            db = int(path.strip("/"))
        except ValueError:
            raise _bad(url, f"the path must be a database number, got {path!r}") from None
    hosts = _hosts(url, parts.netloc, 6379)
    if len(hosts) != 1:
        raise _bad(url, "several hosts need redis+cluster:// or redis+sentinel://")
    return Target("single", hosts, opts, db=db or 0, wire=wire)


def startup_nodes(nodes: Sequence[Any], options: ConnectionOptions) -> Target:
    hosts: list[tuple[str, int]] = []
    for node in nodes:
        if isinstance(node, str):
            hosts += _hosts(node, node, None)
        elif (isinstance(node, tuple) and len(node) == 2 and isinstance(node[0], str)
              and isinstance(node[1], int)):
            hosts.append((node[0], node[1]))
        else:
            raise TypeError(f"a cluster startup node is 'host:port' or (host, port), got {node!r}")
    if not hosts:
        raise ValueError("give at least one cluster startup node")
    return Target("cluster", hosts, options)
