"""Fixtures of the dashboard tests: the app on a real Redis, reached through httpx (in-process)
or through a real uvicorn server on a free loopback port (server-sent events, the browser); a
page of the system's headless chromium, and an event loop in a thread for the browser tests'
own Redis calls (playwright's sync API owns the test's thread). Screenshots go to
.run/screenshots/ (test artifacts)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal

from asyncq import Client, Inspector
from asyncq.web import create_app
from tests.web.web_helpers import WebFactory, web_http


@pytest.fixture
def web(asyncq_redis_url: str) -> WebFactory:
    """``async with web(**create_app_options) as http:`` an httpx client on a fresh app."""
    def make(**options: Any) -> Any:
        return web_http(create_app(asyncq_redis_url, **options))
    return make


CHROMIUM = "/usr/bin/chromium"
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
