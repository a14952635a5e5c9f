"""Who may see the dashboard (the allowed hosts, the auth hook, HTTP basic auth), the security
headers every response carries, and the CSRF token that every state-changing request must echo.

A request whose ``Host`` is not an allowed host is refused (400) before anything else: a page
served by a DNS-rebinding domain (a name of the attacker's that they re-point at 127.0.0.1)
reaches a loopback dashboard with its own name as ``Host``, so checking the name is what keeps
an unauthenticated dashboard on loopback private. The loopback names are always allowed.

CSRF uses the double-submit pattern: a random token in a ``SameSite=Strict``, HttpOnly cookie,
repeated in a hidden field of every form; a POST whose field does not match its cookie is
refused (403). It needs no server-side state and no secret to share between processes, so a
dashboard run by several uvicorn workers, or mounted in several apps, just works. Because a
cookie can be planted by a sibling subdomain or a plain-HTTP man in the middle, a POST is also
refused when its ``Origin`` (or, without one, its ``Referer``) names another host than the
request's, and over HTTPS the cookie is named ``__Host-asyncq_csrf``: a browser only accepts
that name from the host itself over HTTPS, with ``Path=/`` and ``Secure``.
"""

from __future__ import annotations

import base64
import binascii
import inspect
import ipaddress
import re
import secrets
from collections.abc import Awaitable, Callable, Iterable
from http.cookies import SimpleCookie
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._defaults import WEB_AUTH_REALM, WEB_LOOPBACK_HOSTS
from .._log import get_logger

#: A callable that receives the request and says whether it may proceed (sync or async).
AuthHook = Callable[[Request], bool | Awaitable[bool]]

CSRF_COOKIE = "asyncq_csrf"
#: The cookie's name over HTTPS: a browser accepts it only if Secure, Path=/, no Domain.
CSRF_COOKIE_HTTPS = "__Host-asyncq_csrf"
CSRF_FIELD = "csrf"
_DEFAULT_PORTS = {"http": "80", "https": "443", "ws": "80", "wss": "443"}

CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self'; "
                           "img-src 'self' data:; frame-ancestors 'none'")
_HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
]


class BasicAuth:
    """An auth hook accepting one user name and password by HTTP basic auth (compared in
    constant time); a refused request gets a ``WWW-Authenticate`` challenge."""

    def __init__(self, username: str, password: str, realm: str = WEB_AUTH_REALM) -> None:
        for name, value in (("username", username), ("password", password)):
            if not isinstance(value, str) or not value:
                raise ValueError(f"basic_auth: {name} must be a non-empty str")
        if ":" in username:
            raise ValueError("basic_auth: username must not contain ':'")
        self._expected = f"{username}:{password}".encode()
        self.realm = realm

    def __call__(self, request: Request) -> bool:
        scheme, _, encoded = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            given = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            return False
        return secrets.compare_digest(given, self._expected)

    @property
    def challenge(self) -> str:
        realm = self.realm.replace("\\", "\\\\").replace('"', '\\"')
        return f'Basic realm="{realm}", charset="UTF-8"'


def basic_auth(username: str, password: str, *, realm: str = WEB_AUTH_REALM) -> BasicAuth:
    """An ``auth`` hook for ``create_app`` that lets in ``username``/``password`` only."""
    return BasicAuth(username, password, realm)


#: ``name[:port]`` of a Host header: a DNS name or IPv4 address, or a bracketed IPv6 one.
_HOST_HEADER = re.compile(r"(?P<name>\[[0-9a-f:.]+\]|[a-z0-9_.-]+)(?::(?P<port>[0-9]{1,5}))?")
_HOST_NAME = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*")


def host_name(netloc: str) -> str | None:
    """The name of ``host[:port]`` lower-cased, without port, brackets or a final dot
    (``[::1]:8080`` -> ``::1``), or None when it is not a host."""
    match = _HOST_HEADER.fullmatch(netloc.strip().lower())
    if match is None:
        return None
    name = match["name"]
    if name.startswith("["):
        try:
            return str(ipaddress.IPv6Address(name[1:-1]))
        except ValueError:
            return None
    return name.removesuffix(".") or None


def host_allowed(netloc: str, allowed: frozenset[str]) -> bool:
    """Whether ``host[:port]`` names an allowed host (any port): a name listed, a subdomain of
    a listed ``.example.com``, or anything when ``*`` is listed."""
    name = host_name(netloc)
    if name is None:
        return False
    if "*" in allowed or name in allowed:
        return True
    return any(a.startswith(".") and (name == a[1:] or name.endswith(a)) for a in allowed)


def check_hosts(hosts: Iterable[str]) -> frozenset[str]:
    """``create_app(allowed_hosts=...)``: host names (``ops.example.com``), ``.example.com``
    (that domain and its subdomains), IP addresses, or ``*`` (any Host: only behind something
    that checks it); kept lower-cased, with the loopback names, which are always allowed."""
    if isinstance(hosts, str):
        raise TypeError("allowed_hosts must be a list of host names, not one str")
    out = set(WEB_LOOPBACK_HOSTS)
    for host in hosts:
        if not isinstance(host, str):
            raise TypeError(f"allowed_hosts: {host!r} is not a str")
        given = host.strip().lower()
        if given == "*":
            out.add(given)
            continue
        subdomains = given.startswith(".")
        bare = given[1:] if subdomains else given
        try:
            name = str(ipaddress.ip_address(bare.strip("[]")))
        except ValueError:
            name = bare.removesuffix(".")
            if not _HOST_NAME.fullmatch(name):
                name = ""
        if not name or (subdomains and ":" in name):
            raise ValueError(f"allowed_hosts: {host!r} is not a host name; give the name "
                             "browsers use, without scheme or port: 'ops.example.com', "
                             "'.example.com' (and its subdomains), '10.0.0.5' or '*'")
        out.add(f".{name}" if subdomains else name)
    return frozenset(out)


def _host_refused(host: str) -> PlainTextResponse:
    get_logger("web").warning("dashboard: request refused, its Host is not an allowed host",
                              host=host)
    return PlainTextResponse(
        f"Bad Request: Host {host!r} is not an allowed host of this dashboard; if browsers "
        f"reach it by that name, add it to create_app(allowed_hosts=[...]) or asyncq web "
        f"--allowed-host", 400)


class SecurityMiddleware:
    """Refuses a request for a Host that is not allowed (400), then runs the auth hook before
    anything else, adds the security headers to every response, and gives each browser its
    CSRF cookie (the token is in ``scope["state"]["csrf"]``)."""

    def __init__(self, app: ASGIApp, auth: AuthHook | None,
                 allowed_hosts: frozenset[str] = frozenset(WEB_LOOPBACK_HOSTS)) -> None:
        self.app = app
        self.auth = auth
        self.allowed_hosts = allowed_hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # the dashboard serves nothing else
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        # No Host at all is no browser's request (HTTP/1.1 requires it): nothing to rebind.
        host = request.headers.get("host")
        if host is not None and not host_allowed(host, self.allowed_hosts):
            await _host_refused(host)(scope, receive, _with_headers(send, []))
            return
        if self.auth is not None and not await _allowed(self.auth, request):
            headers = {}
            if isinstance(self.auth, BasicAuth):
                headers["WWW-Authenticate"] = self.auth.challenge
            response = PlainTextResponse("authentication required", 401, headers=headers)
            await response(scope, receive, _with_headers(send, []))
            return
        token = request.cookies.get(csrf_cookie_name(request), "")
        extra: list[tuple[bytes, bytes]] = []
        if not _valid_token(token):
            token = secrets.token_urlsafe(32)
            extra.append((b"set-cookie", _csrf_cookie(token, request)))
        scope.setdefault("state", {})["csrf"] = token
        await self.app(scope, receive, _with_headers(send, extra))


async def _allowed(auth: AuthHook, request: Request) -> bool:
    verdict = auth(request)
    if inspect.isawaitable(verdict):
        verdict = await verdict
    return verdict is True


def _with_headers(send: Send, extra: list[tuple[bytes, bytes]]) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", []))
            present = {name.lower() for name, _ in headers}
            headers += [h for h in _HEADERS if h[0] not in present]
            headers += extra
            message = {**message, "headers": headers}
        await send(message)
    return sending


def _valid_token(token: str) -> bool:
    return 32 <= len(token) <= 64 and token.replace("-", "").replace("_", "").isalnum()


def csrf_cookie_name(request: Request) -> str:
    """``__Host-asyncq_csrf`` over HTTPS, else ``asyncq_csrf`` (the prefix needs Secure)."""
    return CSRF_COOKIE_HTTPS if request.url.scheme == "https" else CSRF_COOKIE


def _csrf_cookie(token: str, request: Request) -> bytes:
    name = csrf_cookie_name(request)
    cookie: SimpleCookie = SimpleCookie()
    cookie[name] = token
    morsel = cookie[name]
    morsel["httponly"] = True
    morsel["samesite"] = "Strict"
    if name == CSRF_COOKIE_HTTPS:
        morsel["path"] = "/"  # the prefix demands it, whatever the mount path
        morsel["secure"] = True
    else:
        morsel["path"] = (request.scope.get("root_path") or "") + "/"
    return morsel.OutputString().encode("latin-1")


def csrf_ok(request: Request, submitted: object) -> bool:
    """True when the form's token matches the browser's CSRF cookie."""
    cookie = request.cookies.get(csrf_cookie_name(request), "")
    return (isinstance(submitted, str) and _valid_token(cookie)
            and secrets.compare_digest(submitted.encode(), cookie.encode()))


def _host(scheme: str, netloc: str) -> str:
    """``host[:port]`` lower-cased, without the scheme's default port."""
    host, sep, port = netloc.lower().rpartition(":")
    if not sep or "]" in port:  # no port (an IPv6 literal's colons are inside brackets)
        return netloc.lower()
    return host if port == _DEFAULT_PORTS.get(scheme) else f"{host}:{port}"


def foreign_origin(request: Request, allowed: frozenset[str],
                   allowed_hosts: frozenset[str] = frozenset(WEB_LOOPBACK_HOSTS)) -> str | None:
    """The origin a POST came from when it is not this dashboard (nor in ``allowed``), else
    None. Read from ``Origin``, else from ``Referer``; a request with neither (not a browser's
    form) is left to the token check. The origin's host must be an allowed host, and on the
    port the request came to: cookies ignore ports, so a page of another port of the same host
    could have planted the token. Hosts are compared without the scheme, so a dashboard behind
    a TLS-terminating proxy that forwards ``Host`` needs no setting."""
    origin = request.headers.get("origin")
    if origin is None:
        referer = request.headers.get("referer")
        if referer is None:
            return None
        parts = urlsplit(referer)
        origin = f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else "null"
    origin = origin.strip().rstrip("/")
    if origin.lower() in allowed:
        return None
    parts = urlsplit(origin)
    own = request.headers.get("host", "")
    if (parts.scheme and parts.netloc and own and host_allowed(parts.netloc, allowed_hosts)
            and host_allowed(own, allowed_hosts)
            and _host(parts.scheme, parts.netloc) == _host(request.url.scheme, own)):
        return None
    return origin


def check_origins(origins: Iterable[str]) -> frozenset[str]:
    """``create_app(allowed_origins=...)``: each ``scheme://host[:port]``, kept lower-cased."""
    if isinstance(origins, str):
        raise TypeError("allowed_origins must be a list of origins, not one str")
    out = set()
    for origin in origins:
        parts = urlsplit(origin) if isinstance(origin, str) else None
        if (parts is None or parts.scheme not in ("http", "https") or not parts.netloc
                or parts.path not in ("", "/") or parts.query or parts.fragment):
            raise ValueError(f"allowed_origins: {origin!r} is not an origin; give "
                             "scheme://host[:port], e.g. 'https://ops.example.com'")
        out.add(f"{parts.scheme}://{parts.netloc}".lower())
    return frozenset(out)
