"""Fixtures of the dashboard tests: the app on a real Redis, reached through httpx (in-process)
or through a real uvicorn server on a free loopback port (server-sent events, the browser); a
page of the system's headless chromium, and an event loop in a thread for the browser tests'
own Redis calls (playwright's sync API owns the test's thread). Screenshots go to
.run/screenshots/ (test artifacts)."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from anyio.from_thread import BlockingPortal, start_blocking_portal
from starlette.types import ASGIApp

from asyncq import Client, Inspector
from asyncq.web import create_app

XSS = "<script>alert(1)</script>"

WebFactory = Callable[..., Any]


@asynccontextmanager
async def web_http(app: Any, base_url: str = "http://dash.test") -> AsyncIterator[
        httpx.AsyncClient]:
    """An httpx client talking to ``app`` in-process; closes the app's connection after."""
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url=base_url) as http:
            yield http
    finally:
        dashboard = getattr(app.state, "dashboard", None)
        if dashboard is not None:
            await dashboard.close()


@pytest.fixture
def web(asyncq_redis_url: str) -> WebFactory:
    """``async with web(**create_app_options) as http:`` an httpx client on a fresh app."""
    def make(**options: Any) -> Any:
        return web_http(create_app(asyncq_redis_url, **options))
    return make


def csrf_token(page: httpx.Response, http: httpx.AsyncClient) -> str:
    """The token the page's forms carry (and its cookie holds)."""
    match = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert match, "no CSRF field on the page"
    assert http.cookies.get("asyncq_csrf") == match.group(1)
    return match.group(1)


async def post_action(http: httpx.AsyncClient, page_path: str, action_path: str,
                      **fields: str) -> httpx.Response:
    """Open ``page_path`` (for its token), then post ``fields`` as its form would."""
    page = await http.get(page_path)
    data = {"csrf": csrf_token(page, http), "next": page_path, **fields}
    return await http.post(action_path, data=data)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def serve(app: ASGIApp) -> Iterator[str]:
    """Run ``app`` under uvicorn in a thread of its own; yields its base URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning",
                            lifespan="on", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=asyncio.run, args=(server.serve(),), daemon=True)
    thread.start()
    try:
        for _ in range(1000):
            if server.started:
                break
            if not thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            threading.Event().wait(0.01)
        else:
            raise TimeoutError("uvicorn did not start within 10 s")
        yield f"http://127.0.0.1:{config.port}"
    finally:
        server.should_exit = True
        thread.join(10)


CHROMIUM = "/usr/bin/chromium"
SHOTS = Path(__file__).resolve().parents[2] / ".run" / "screenshots"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]



@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's headless chromium driven by playwright (never a downloaded browser). Missing:
    an error saying how to install it when the tests run as root (make installs it), else the
    browser tests are skipped."""
    if not os.path.exists(CHROMIUM):
        if os.geteuid() == 0:
            pytest.fail(f"{CHROMIUM} not found: run `make browser-bin` (apt-get install "
                        "chromium)", pytrace=False)
        pytest.skip(f"{CHROMIUM} not found and not root: apt-get install chromium to run the "
                    "browser tests")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.dialogs, page.errors = dialogs, errors
    page.set_default_timeout(10_000)
    try:
        yield page
    finally:
        context.close()


@pytest.fixture
def portal() -> Iterator[BlockingPortal]:
    """An event loop in a thread, for the test's own Redis calls (playwright's sync API owns
    the test's thread)."""
    with start_blocking_portal() as portal:
        yield portal


@pytest.fixture
def redis_calls(portal: BlockingPortal, asyncq_redis_url: str) -> Callable[..., Any]:
    """``call(lambda client, inspector: coroutine)`` run on the portal's loop."""
    def call(fn: Callable[[Client, Inspector], Any]) -> Any:
        async def run() -> Any:
            async with Client(asyncq_redis_url) as client, Inspector(client.broker) as insp:
                return await fn(client, insp)
        return portal.call(run)
    return call


def shot(page: Any, name: str) -> None:
    """Save a screenshot of the whole page as a test artifact."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
