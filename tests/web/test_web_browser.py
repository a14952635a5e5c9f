"""The dashboard in a real browser: overview → queue → task, archive and run
again, pause; live counts; a script payload stays text; read-only and mounted inside a FastAPI
app. Screenshots of each page go to .run/screenshots/ (test artifacts)."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI

from asyncq.web import create_app
from tests.web.web_helpers import SHOTS, XSS, serve, shot

expect = pytest.importorskip("playwright.sync_api").expect


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
        for name in ("workers", "scheduler", "groups", "limits", "workflows"):
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


def test_read_only_mounted_in_a_fastapi_app(page: Any, redis_calls: Callable[..., Any],
                                            asyncq_redis_url: str, asyncq_queue: str) -> None:
    queue = asyncq_queue
    redis_calls(lambda c, i: c.enqueue("t", None, queue=queue, process_in=3600))
    dashboard = create_app(asyncq_redis_url, read_only=True)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        await dashboard.state.dashboard.close()  # a mounted app's own lifespan does not run

    host = FastAPI(lifespan=lifespan)

    @host.get("/")
    async def home() -> dict[str, str]:
        return {"app": "the host"}

    host.mount("/admin/queues", dashboard)
    with serve(host) as url:
        page.goto(f"{url}/admin/queues/")
        assert page.inner_text(".badge.ro") == "read-only"
        page.click(f'#queues a:text-is("{queue}")')
        assert page.url.startswith(f"{url}/admin/queues/queue?")
        page.click('nav.tabs a:has-text("scheduled")')
        assert page.locator("form[method=post]").count() == 0
        page.wait_for_selector("#live-status.on")
        shot(page, "read-only")
        assert page.request.get(f"{url}/").json() == {"app": "the host"}
        page.goto("about:blank")
    assert not page.errors, page.errors


def test_docs_screenshots_exist() -> None:
    """The dashboard how-to page shows two of the screenshots; keep their files in docs/."""
    docs = Path(__file__).resolve().parents[2] / "docs"
    for name in ("dashboard-overview.png", "dashboard-queue.png"):
        assert (docs / name).is_file(), f"copy .run/screenshots/ into docs/{name}"
    if (SHOTS / "overview.png").exists() and os.environ.get("ASYNCQ_UPDATE_DOCS") == "1":
        shutil.copy(SHOTS / "overview.png", docs / "dashboard-overview.png")
        shutil.copy(SHOTS / "queue.png", docs / "dashboard-queue.png")
