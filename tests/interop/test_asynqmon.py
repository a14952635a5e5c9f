"""asynqmon, the web UI of Go's asynq (v0.7.2, built from the Go module proxy), on the asynq
layout asyncq writes (``?wire=asynq``), in the system's headless Chromium: the Servers page lists
an asyncq worker (host:pid, queues, status, its running task), the Queues page shows the queue
asyncq's client filled with its sizes and counts, and an archived task retried with the Run
button of asynqmon's archived tab is processed by the asyncq worker and leaves the archive.

Only loopback requests leave the browser: asynqmon's page asks Google Fonts for two stylesheets,
which are aborted (the page then falls back to system fonts; its icons are inline SVG).
Screenshots go to the test's tmp directory.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from asyncqpeer import asynq_url
from goharness import ASYNQMON_VERSION, GoBuildError, build_asynqmon

from asyncq import Client, ServeMux, SkipRetry, Task, TaskInfo, Worker
from tests.helpers.polling import answers, poll_until
from tests.helpers.ports import free_port

CHROMIUM = "/usr/bin/chromium"  # Debian's; never a downloaded browser
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
#: asynqmon polls its API every pollInterval seconds (8 by default; a setting it keeps in
#: localStorage): 1 s here, so the pages follow Redis within the assertions' timeouts.
POLL_SETTINGS = ('localStorage.setItem("asynqmon:state", '
                 'JSON.stringify({settings: {pollInterval: 1}}))')
UI_TIMEOUT_MS = 20_000


@pytest.fixture(scope="session")
def asynqmon_bin() -> Path:
    """asynqmon, built once per session by ``tests/interop/asynqmon/build.sh``."""
    try:
        return build_asynqmon()
    except GoBuildError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
def asynqmon(asynqmon_bin: Path, interop_redis: str, tmp_path: Path) -> Iterator[str]:
    """asynqmon on a free loopback port against this test's Redis; its base URL."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with (tmp_path / "asynqmon.log").open("wb") as log:
        proc = subprocess.Popen([str(asynqmon_bin), "--port", str(port), "--redis-url",
                                 interop_redis], stdout=log, stderr=log)

        def up() -> bool:
            if proc.poll() is not None:
                pytest.fail(f"asynqmon {ASYNQMON_VERSION} exited: {started_log()}")
            return answers(lambda: urllib.request.urlopen(f"{base}/api/queues", timeout=1).close(),
                           (urllib.error.URLError, ConnectionError))

        def started_log() -> str:
            return (tmp_path / "asynqmon.log").read_text()[-2000:]

        try:  # it listens within a second
            poll_until(up, timeout=15, message=lambda: f"asynqmon {ASYNQMON_VERSION} did not "
                       f"start: {started_log()}")
            yield base
        finally:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's headless Chromium driven by playwright (as tests/web/conftest.py)."""
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


@dataclass
class Page:
    """A browser page on asynqmon, with what went wrong on loopback (failed requests, error
    answers, uncaught script errors) and the off-machine requests it aborted."""

    page: Any
    base: str
    shots: Path
    problems: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)

    def goto(self, path: str) -> None:
        self.page.goto(self.base + path)

    def shot(self, name: str) -> None:
        self.page.screenshot(path=str(self.shots / f"{name}.png"), full_page=True)


@pytest.fixture
def page(browser: Any, asynqmon: str, tmp_path: Path) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_init_script(POLL_SETTINGS)
    shots = tmp_path / "screenshots"
    shots.mkdir()
    wrapped = Page(context.new_page(), asynqmon, shots)

    def route(r: Any) -> None:
        if r.request.url.startswith(asynqmon + "/"):
            r.continue_()
        else:  # Google Fonts: never leave the machine
            wrapped.blocked.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    p = wrapped.page
    p.set_default_timeout(UI_TIMEOUT_MS)
    p.on("pageerror", lambda e: wrapped.problems.append(f"script error: {e}"))
    p.on("requestfailed", lambda r: wrapped.problems.append(f"failed: {r.url}")
         if r.url.startswith(asynqmon) else None)
    p.on("response", lambda r: wrapped.problems.append(f"{r.status}: {r.url}")
         if r.status >= 400 and r.url.startswith(asynqmon) else None)
    try:
        yield wrapped
    finally:
        context.close()


@pytest.fixture
def portal() -> Iterator[BlockingPortal]:
    """An event loop in a thread for the asyncq worker and client (playwright's sync API owns
    the test's thread)."""
    with start_blocking_portal() as portal:
        yield portal


@dataclass
class Runs:
    """What the asyncq handlers did: (task id, run number, outcome) in order."""

    log: list[tuple[str, int, str]] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    def of(self, task_id: str) -> list[tuple[int, str]]:
        return [(n, outcome) for i, n, outcome in self.log if i == task_id]


def make_mux(runs: Runs) -> ServeMux:
    """report:build is archived on its first run (SkipRetry) and succeeds when run again;
    report:hold runs until the test releases it."""
    mux = ServeMux()

    @mux.handler("report:build")
    async def build(task: Task) -> None:
        task_id = str(task.id)
        n = len(runs.of(task_id)) + 1
        if n == 1:
            runs.log.append((task_id, n, "skip"))
            raise SkipRetry("first run archives")
        runs.log.append((task_id, n, "ok"))

    @mux.handler("report:hold")
    async def hold(task: Task) -> None:
        runs.log.append((str(task.id), 1, "started"))
        await runs.release.wait()
        runs.log.append((str(task.id), 1, "ok"))

    return mux


@asynccontextmanager
async def asyncq_worker(url: str, runs: Runs, queues: dict[str, int],
                        concurrency: int) -> AsyncIterator[Worker]:
    async with Worker(asynq_url(url), make_mux(runs), queues=queues, concurrency=concurrency,
                      heartbeat_interval=1.0, idle_poll_interval=0.2,
                      shutdown_timeout=2.0) as worker:
        yield worker


def enqueue(portal: BlockingPortal, url: str, type: str, payload: bytes,
            **options: Any) -> TaskInfo:
    async def run() -> TaskInfo:
        async with Client(asynq_url(url)) as client:
            return await client.enqueue(type, payload, **options)

    info: TaskInfo = portal.call(run)
    return info


def test_servers_page_lists_the_asyncq_worker(page: Page, portal: BlockingPortal,
                                              interop_redis: str, asyncq_queue: str) -> None:
    """Needs asyncq's server state in asynq:servers/asynq:workers (wire=asynq heartbeat)."""
    expect = pytest.importorskip("playwright.sync_api").expect
    queue, low = asyncq_queue, f"{asyncq_queue}-low"
    runs = Runs()
    with portal.wrap_async_context_manager(
            asyncq_worker(interop_redis, runs, {queue: 3, low: 1}, concurrency=4)):
        try:
            held = enqueue(portal, interop_redis, "report:hold", b'{"n": 1}', queue=queue)
            poll_until(lambda: runs.of(held.id), timeout=15,
                       message="report:hold started")
            page.goto("/servers")
            row = page.page.locator("table[aria-label='server info table'] tbody tr",
                                    has_text=f"{socket.gethostname()}:{os.getpid()}")
            expect(row).to_have_count(1, timeout=UI_TIMEOUT_MS)  # (written every heartbeat)
            expect(row.locator("td").nth(2)).to_have_text("active")
            expect(row.locator("td").nth(3)).to_contain_text(queue)
            expect(row.locator("td").nth(3)).to_contain_text(low)
            expect(row.locator("td").nth(4)).to_have_text("1/4")  # its running task
            row.locator("button[aria-label='expand row']").click()
            details = page.page.locator("table[aria-label='active workers']").first
            expect(details).to_contain_text(held.id.split("-")[0])  # (the id's first part)
            expect(details).to_contain_text('"n": 1')
            expect(details).to_contain_text(queue)
            priorities = page.page.locator("table[aria-label='active workers']").nth(1)
            expect(priorities.locator("tbody tr")).to_have_text([f"{queue} 3", f"{low} 1"],
                                                                use_inner_text=True)
            page.shot("servers")
        finally:
            portal.call(runs.release.set)
        poll_until(lambda: runs.of(held.id) == [(1, "started"), (1, "ok")], timeout=15,
                   message="report:hold done")
        expect(row.locator("td").nth(4)).to_have_text("0/4", timeout=UI_TIMEOUT_MS)
    # a worker that stopped takes its entry away
    expect(page.page.get_by_text("No servers found")).to_be_visible(timeout=UI_TIMEOUT_MS)
    page.shot("servers-after-stop")
    assert page.problems == [], page.problems


def test_archived_task_run_from_asynqmon_is_processed_by_asyncq(
        page: Page, portal: BlockingPortal, interop_redis: str, asyncq_queue: str) -> None:
    expect = pytest.importorskip("playwright.sync_api").expect
    queue = asyncq_queue
    runs = Runs()
    for i in range(3):  # they stay scheduled: part of the queue's size
        enqueue(portal, interop_redis, "report:later", f'{{"i": {i}}}'.encode(), queue=queue,
                process_in=3600)
    with portal.wrap_async_context_manager(
            asyncq_worker(interop_redis, runs, {queue: 1}, concurrency=2)):
        task = enqueue(portal, interop_redis, "report:build", b'{"month": "2026-10"}',
                       queue=queue, max_retry=5)
        poll_until(lambda: runs.of(task.id) == [(1, "skip")], timeout=15,
                   message="report:build archived")

        # the Queues page: the queue asyncq filled, its size, processed and failed counts
        page.goto("/")
        row = page.page.locator("table[aria-label='queues overview table'] tbody tr",
                                has_text=queue)
        expect(row).to_have_count(1)
        cells = row.locator("th, td")
        expect(cells.nth(0)).to_have_text(queue)
        expect(cells.nth(1)).to_have_text("run")
        expect(cells.nth(2)).to_have_text("4")  # 3 scheduled + 1 archived
        expect(cells.nth(5)).to_have_text("1")  # processed
        expect(cells.nth(6)).to_have_text("1")  # failed
        page.shot("queues")

        # the queue's page, archived tab: the task with asyncq's error
        cells.nth(0).locator("a").click()
        chip = page.page.locator(".MuiChip-root", has_text="Archived")
        expect(chip).to_have_text("Archived 1")
        expect(page.page.locator(".MuiChip-root", has_text="Scheduled")).to_have_text(
            "Scheduled 3")
        chip.click()
        archived = page.page.locator("tbody tr", has_text="report:build")
        expect(archived).to_have_count(1)
        expect(archived).to_contain_text(task.id.split("-")[0])
        expect(archived).to_contain_text("first run archives")
        expect(archived).to_contain_text('"month": "2026-10"')
        page.shot("archived")

        # Run: asynqmon's own button (shown when the pointer is on the row's action cell)
        archived.locator("td").last.hover()
        archived.locator("button[title='Run']").click()
        expect(page.page.get_by_text("Archived task is now pending")).to_be_visible()
        poll_until(lambda: runs.of(task.id) == [(1, "skip"), (2, "ok")], timeout=20,
                   message="the asyncq worker ran the task again")
        expect(chip).to_have_text("Archived 0", timeout=UI_TIMEOUT_MS)
        expect(page.page.locator("tbody tr", has_text="report:build")).to_have_count(0)
        page.shot("archived-after-run")

        page.goto("/")
        cells = row.locator("th, td")
        expect(cells.nth(2)).to_have_text("3", timeout=UI_TIMEOUT_MS)  # the scheduled ones
        expect(cells.nth(5)).to_have_text("2")  # processed: both runs
        expect(cells.nth(6)).to_have_text("1")
    assert [outcome for _, _, outcome in runs.log] == ["skip", "ok"]
    assert page.problems == [], page.problems
    assert page.blocked and all("fonts.googleapis.com" in u for u in page.blocked), page.blocked
