"""The dashboard in a real browser: Debian's headless chromium driven by playwright (never a
downloaded browser), against a real Redis through a real uvicorn server. Screenshots of each
page go to .run/screenshots/ (test artifacts)."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from conftest import XSS, serve
from starlette.applications import Starlette
from starlette.routing import Mount

from asyncq import Client, Inspector
from asyncq.web import create_app

CHROMIUM = "/usr/bin/chromium"
SHOTS = Path(__file__).resolve().parents[2] / ".run" / "screenshots"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]

if not os.path.exists(CHROMIUM):
    if os.geteuid() == 0:
        pytest.fail(f"{CHROMIUM} not found: run `make browser-bin` (apt-get install chromium)",
                    pytrace=False)
    pytest.skip(f"{CHROMIUM} not found and not root: apt-get install chromium to run the "
                "browser tests", allow_module_level=True)

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
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
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def test_operate_a_queue_from_the_browser(page: Any, redis_calls: Callable[..., Any],
                                          asyncq_redis_url: str, asyncq_queue: str) -> None:
    queue = asyncq_queue
    info = redis_calls(lambda c, i: c.enqueue("email:send", {"to": "a@example.com"},
                                              queue=queue, process_in=3600))
    redis_calls(lambda c, i: c.enqueue("report:build", {"month": "2026-10"}, queue=queue))
    with serve(create_app(asyncq_redis_url, title="asyncq demo")) as url:
        page.goto(url + "/")
        page.wait_for_selector("#live-status.on")  # the event stream delivered a document
        shot(page, "overview")
        page.click(f'#queues a:text-is("{queue}")')
        page.click('nav.tabs a:has-text("scheduled")')
        assert info.id in page.inner_text("#tasks")
        shot(page, "queue")
        page.click(f'a:text-is("{info.id}")')
        expect(page.locator("#task-state")).to_have_text("scheduled")
        shot(page, "task")
        page.click('button[data-action="archive"]')
        expect(page.locator(".flash.ok")).to_contain_text("archive done")
        state = redis_calls(lambda c, i: i.task_info(queue, info.id))
        assert state.state.value == "archived"
        page.click('button[data-action="run"]')
        expect(page.locator(".flash.ok")).to_contain_text("run done")
        assert redis_calls(lambda c, i: i.task_info(queue, info.id)).state.value == "pending"
        page.goto(url + "/")
        page.click(f'tr[data-queue="{queue}"] button[data-action="pause"]')
        expect(page.locator(".flash.ok")).to_contain_text(f"queue {queue} paused")
        assert redis_calls(lambda c, i: i.queue_info(queue)).paused
        expect(page.locator(f'tr[data-queue="{queue}"] [data-field="paused"]')).to_have_text(
            "paused")
        for name in ("servers", "periodic", "groups"):
            page.goto(f"{url}/{name}")
            shot(page, name)
        page.goto("about:blank")  # closes the event stream before the server stops
    assert not page.dialogs and not page.errors, (page.dialogs, page.errors)


def test_live_counts_change_without_a_reload(page: Any, redis_calls: Callable[..., Any],
                                             asyncq_redis_url: str, asyncq_queue: str) -> None:
    queue = asyncq_queue
    redis_calls(lambda c, i: c.enqueue("t", None, queue=queue))
    with serve(create_app(asyncq_redis_url)) as url:
        page.goto(f"{url}/queue?q={queue}")
        cell = 'nav.tabs [data-field="pending"]'
        assert page.inner_text(cell) == "1"
        page.wait_for_selector("#live-status.on")
        redis_calls(lambda c, i: c.enqueue("t", None, queue=queue))
        expect(page.locator(cell)).to_have_text("2")
        page.goto("about:blank")


def test_a_script_payload_stays_text(page: Any, redis_calls: Callable[..., Any],
                                     asyncq_redis_url: str, asyncq_queue: str) -> None:
    queue = asyncq_queue
    info = redis_calls(lambda c, i: c.enqueue(XSS, {"html": XSS}, queue=queue,
                                              process_in=3600, headers={"x": XSS}))
    with serve(create_app(asyncq_redis_url)) as url:
        page.goto(f"{url}/task?q={queue}&id={info.id}")
        assert XSS in page.inner_text("main")
        page.goto(f"{url}/queue?q={queue}&state=scheduled&error={XSS}")
        assert XSS in page.inner_text(".flash.error")
        page.goto(f"{url}/")
        page.goto("about:blank")
    assert page.dialogs == []


def test_read_only_mounted_under_a_path(page: Any, redis_calls: Callable[..., Any],
                                        asyncq_redis_url: str, asyncq_queue: str) -> None:
    queue = asyncq_queue
    redis_calls(lambda c, i: c.enqueue("t", None, queue=queue, process_in=3600))
    dashboard = create_app(asyncq_redis_url, read_only=True)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await dashboard.state.dashboard.close()  # a mounted app's own lifespan does not run

    host = Starlette(routes=[Mount("/admin/queues", app=dashboard)], lifespan=lifespan)
    with serve(host) as url:
        page.goto(f"{url}/admin/queues/")
        assert page.inner_text(".badge.ro") == "read-only"
        page.click(f'#queues a:text-is("{queue}")')
        assert page.url.startswith(f"{url}/admin/queues/queue?")
        page.click('nav.tabs a:has-text("scheduled")')
        assert page.locator("form[method=post]").count() == 0
        page.wait_for_selector("#live-status.on")
        shot(page, "read-only")
        page.goto("about:blank")
    assert not page.errors, page.errors


def test_docs_screenshots_exist() -> None:
    """The README shows two of the screenshots; keep their files in docs/."""
    docs = Path(__file__).resolve().parents[2] / "docs"
    for name in ("dashboard-overview.png", "dashboard-queue.png"):
        assert (docs / name).is_file(), f"copy .run/screenshots/ into docs/{name}"
    if (SHOTS / "overview.png").exists() and os.environ.get("ASYNCQ_UPDATE_DOCS") == "1":
        shutil.copy(SHOTS / "overview.png", docs / "dashboard-overview.png")
        shutil.copy(SHOTS / "queue.png", docs / "dashboard-queue.png")
