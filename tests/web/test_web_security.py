"""What keeps the dashboard safe: the auth hook and basic auth, security headers with a strict
CSP, escaping of every string a task carries, the CLI's refusal to serve the world without auth,
and the optional extra (``import asyncq`` never imports the web code)."""

from __future__ import annotations

import base64
import subprocess
import sys

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Mount

from asyncq import Client, Inspector
from asyncq._cli import main
from asyncq._cli._web_cmd import is_loopback
from asyncq.web import basic_auth, create_app
from tests.web.web_helpers import XSS, WebFactory, web_http

pytestmark = pytest.mark.anyio


def _basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


async def test_basic_auth_challenges_then_lets_the_right_user_in(web: WebFactory) -> None:
    async with web(auth=basic_auth("admin", "s3cret")) as http:
        anonymous = await http.get("/")
        wrong = await http.get("/", headers=_basic("admin", "nope"))
        static = await http.get("/static/app.css")
        right = await http.get("/", headers=_basic("admin", "s3cret"))
    assert anonymous.status_code == wrong.status_code == static.status_code == 401
    assert anonymous.headers["www-authenticate"].startswith('Basic realm="asyncq"')
    assert right.status_code == 200


async def test_an_auth_hook_sync_or_async_decides(web: WebFactory) -> None:
    def by_header(request: Request) -> bool:
        return request.headers.get("x-user") == "ops"

    async def by_header_async(request: Request) -> bool:
        return by_header(request)

    for hook in (by_header, by_header_async):
        async with web(auth=hook) as http:
            refused = await http.get("/")
            allowed = await http.get("/", headers={"x-user": "ops"})
        assert refused.status_code == 401 and "www-authenticate" not in refused.headers
        assert allowed.status_code == 200


async def test_every_response_carries_the_security_headers(web: WebFactory) -> None:
    async with web() as http:
        responses = [await http.get(p) for p in ("/", "/static/app.js", "/queue?q=none")]
    for r in responses:
        assert r.headers["content-security-policy"] == (
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
            "frame-ancestors 'none'")
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["referrer-policy"] == "same-origin"
    cookie = responses[0].headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie


async def test_pages_have_no_inline_script_or_style(web: WebFactory) -> None:
    async with web() as http:
        page = await http.get("/")
    assert "<script>" not in page.text and "<style" not in page.text
    assert " style=" not in page.text and " onclick=" not in page.text


async def test_a_script_in_any_field_a_task_carries_is_shown_as_text(
        web: WebFactory, asyncq_client: Client, asyncq_inspector: Inspector) -> None:
    queue = f"q{XSS}"
    info = await asyncq_client.enqueue(XSS, {"body": XSS}, queue=queue, process_in=3600,
                                       headers={XSS: XSS}, task_id=f"id-{XSS}")
    try:
        async with web() as http:
            pages = [await http.get(path, params=params) for path, params in (
                ("/", {}), ("/queue", {"q": queue, "state": "scheduled"}),
                ("/task", {"q": queue, "id": info.id}),
                ("/queue", {"q": queue, "id": XSS}), ("/", {"error": XSS, "ok": XSS}))]
            live = await http.get("/live", params={"q": queue, "active": "1"})
        for page in pages:
            assert page.status_code == 200
            assert XSS not in page.text
            assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
        assert "<" not in live.text and XSS in str(live.json())
    finally:
        await asyncq_inspector.delete_queue(queue, force=True)


async def test_the_cli_refuses_a_public_host_without_auth(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["web", "--host", "0.0.0.0"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("asyncq: error: refusing to serve the dashboard on 0.0.0.0 without")
    assert err.count("\n") == 1
    assert main(["web", "--host", "10.1.2.3", "--basic-auth", "admin"]) == 1
    assert "ASYNCQ_WEB_PASSWORD" in capsys.readouterr().err
    assert main(["web", "--allowed-origin", "ops.example.com"]) == 1
    assert "'ops.example.com' is not an origin" in capsys.readouterr().err
    assert [is_loopback(h) for h in ("127.0.0.1", "::1", "localhost", "0.0.0.0", "example.com")
            ] == [True, True, True, False, False]


def test_import_asyncq_does_not_import_the_dashboard() -> None:
    code = "import sys, asyncq, asyncq._cli; print('asyncq.web' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "False"


def test_without_the_extra_the_import_error_says_what_to_install() -> None:
    code = ("import sys; sys.modules['starlette'] = None\n"
            "try:\n    import asyncq.web\nexcept ImportError as e:\n    print(e)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert "pip install 'asyncq[web]'" in out.stdout


def test_create_app_checks_its_arguments() -> None:
    with pytest.raises(TypeError, match="auth must be a callable"):
        create_app("redis://127.0.0.1:1/0", auth="admin")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="username must be a non-empty str"):
        basic_auth("", "x")


async def test_a_post_from_another_origin_is_refused_even_with_a_planted_cookie(
        web: WebFactory, asyncq_client: Client, asyncq_inspector: Inspector,
        asyncq_queue: str) -> None:
    info = await asyncq_client.enqueue("t", None, queue=asyncq_queue, process_in=3600)
    token = "p" * 43  # a token the attacker chose, planted as the cookie (sibling subdomain)
    fields = {"csrf": token, "action": "delete", "queue": asyncq_queue, "id": info.id,
              "next": "/"}
    async with web() as http:
        http.cookies.set("asyncq_csrf", token)
        answers = [await http.post("/action/task", data=fields, headers=headers)
                   for headers in ({"Origin": "https://evil.example"},
                                   {"Origin": "http://localhost.evil.example"},
                                   {"Origin": "null"},
                                   {"Referer": "https://evil.example/prize"})]
        for refused in answers:
            assert refused.status_code == 403
            assert refused.text.startswith("cross-origin request refused")
        assert "https://evil.example" in answers[0].text
        assert (await asyncq_inspector.task_info(asyncq_queue, info.id)).state.value == (
            "scheduled")
        # the dashboard's own origin (default port or not), or no header at all, passes
        for headers in ({"Origin": "http://localhost"}, {"Origin": "HTTP://LOCALHOST:80"},
                        {"Referer": "http://localhost/queue?q=x"}, {}):
            fields["action"] = "archive" if fields["action"] != "archive" else "run"
            done = await http.post("/action/task", data=fields, headers=headers)
            assert done.status_code == 303, (headers, done.text)


async def test_allowed_origins_for_a_proxy_that_rewrites_host(
        web: WebFactory, asyncq_client: Client, asyncq_queue: str) -> None:
    await asyncq_client.enqueue("t", None, queue=asyncq_queue)
    async with web(allowed_origins=["https://Ops.Example.com"]) as http:
        await http.get("/")
        token = http.cookies.get("asyncq_csrf")
        fields = {"csrf": token, "action": "pause", "queue": asyncq_queue, "next": "/"}
        ok = await http.post("/action/queue", data=fields,
                             headers={"Origin": "https://ops.example.com"})
        other = await http.post("/action/queue", data=fields,
                                headers={"Origin": "https://evil.example.com"})
    assert (ok.status_code, other.status_code) == (303, 403)
    for bad in (["ops.example.com"], ["https://ops.example.com/path"], "https://x.example"):
        with pytest.raises((ValueError, TypeError), match="allowed_origins"):
            create_app("redis://127.0.0.1:1/0", allowed_origins=bad)


async def test_over_https_the_cookie_is_host_prefixed_and_a_plain_one_is_ignored(
        asyncq_redis_url: str, asyncq_client: Client, asyncq_inspector: Inspector,
        asyncq_queue: str) -> None:
    info = await asyncq_client.enqueue("t", None, queue=asyncq_queue, process_in=3600)
    app = create_app(asyncq_redis_url)
    async with web_http(app, base_url="https://localhost") as http:
        page = await http.get("/", headers={"Origin": "https://localhost"})
        set_cookie = page.headers["set-cookie"]
        assert set_cookie.startswith("__Host-asyncq_csrf=")
        assert {"Path=/", "Secure", "HttpOnly", "SameSite=Strict"} <= {
            part.strip() for part in set_cookie.split(";")}
        assert "domain" not in set_cookie.lower()
        token = http.cookies.get("__Host-asyncq_csrf")
        fields = {"csrf": token, "action": "archive", "queue": asyncq_queue, "id": info.id,
                  "next": "/"}
        done = await http.post("/action/task", data=fields)
        assert done.status_code == 303
        # a cookie without the prefix (which anyone on the network could plant) counts for
        # nothing over HTTPS
        http.cookies.clear()
        http.cookies.set("asyncq_csrf", "p" * 43)
        planted = await http.post("/action/task", data={**fields, "csrf": "p" * 43,
                                                        "action": "run"})
        assert planted.status_code == 403
    assert (await asyncq_inspector.task_info(asyncq_queue, info.id)).state.value == "archived"
    # mounted under a path, the prefixed cookie still says Path=/ (the prefix demands it)
    inner = create_app(asyncq_redis_url)
    async with web_http(Starlette(routes=[Mount("/admin", inner)]),
                        base_url="https://localhost") as http:
        page = await http.get("/admin/")
    await inner.state.dashboard.close()
    assert "Path=/;" in page.headers["set-cookie"] + ";"
