"""Who may see the dashboard (the auth hook, HTTP basic auth), the security headers every
response carries, and the CSRF token that every state-changing request must echo.

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
import secrets
from collections.abc import Awaitable, Callable, Iterable
from http.cookies import SimpleCookie
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._defaults import WEB_AUTH_REALM

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


class SecurityMiddleware:
    """Runs the auth hook before anything else, adds the security headers to every response,
    and gives each browser its CSRF cookie (the token is in ``scope["state"]["csrf"]``)."""

    def __init__(self, app: ASGIApp, auth: AuthHook | None) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
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


def foreign_origin(request: Request, allowed: frozenset[str]) -> str | None:
    """The origin a POST came from when it is not this dashboard's host (nor in ``allowed``),
    else None. Read from ``Origin``, else from ``Referer``; a request with neither (not a
    browser's form) is left to the token check. Hosts are compared without the scheme, so a
    dashboard behind a TLS-terminating proxy that forwards ``Host`` needs no setting."""
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
    if parts.scheme and parts.netloc and own and (
            _host(parts.scheme, parts.netloc) == _host(request.url.scheme, own)):
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
