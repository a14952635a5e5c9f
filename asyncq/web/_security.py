"""Who may see the dashboard (the auth hook, HTTP basic auth), the security headers every
response carries, and the CSRF token that every state-changing request must echo.

CSRF uses the double-submit pattern: a random token in a ``SameSite=Strict``, HttpOnly cookie,
repeated in a hidden field of every form; a POST whose field does not match its cookie is
refused (403). It needs no server-side state and no secret to share between processes, so a
dashboard run by several uvicorn workers, or mounted in several apps, just works.
"""

from __future__ import annotations

import base64
import binascii
import inspect
import secrets
from collections.abc import Awaitable, Callable
from http.cookies import SimpleCookie

from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._defaults import WEB_AUTH_REALM

#: A callable that receives the request and says whether it may proceed (sync or async).
AuthHook = Callable[[Request], bool | Awaitable[bool]]

CSRF_COOKIE = "asyncq_csrf"
CSRF_FIELD = "csrf"

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
        token = request.cookies.get(CSRF_COOKIE, "")
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


def _csrf_cookie(token: str, request: Request) -> bytes:
    cookie: SimpleCookie = SimpleCookie()
    cookie[CSRF_COOKIE] = token
    morsel = cookie[CSRF_COOKIE]
    morsel["path"] = (request.scope.get("root_path") or "") + "/"
    morsel["httponly"] = True
    morsel["samesite"] = "Strict"
    if request.url.scheme == "https":
        morsel["secure"] = True
    return morsel.OutputString().encode("latin-1")


def csrf_ok(request: Request, submitted: object) -> bool:
    """True when the form's token matches the browser's CSRF cookie."""
    cookie = request.cookies.get(CSRF_COOKIE, "")
    return (isinstance(submitted, str) and _valid_token(cookie)
            and secrets.compare_digest(submitted.encode(), cookie.encode()))
