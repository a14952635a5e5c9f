"""A running task's progress bar moves in a real browser, without a reload: in the queue's
active list and on the task page, as a real worker's handler reports; the task page then shows
it completed with its last report. Screenshots go to .run/screenshots/."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal

from asyncq import Client, Inspector, ServeMux, Task, Worker
from asyncq.testing import wait_until
from asyncq.web import create_app
from tests.web.web_helpers import serve, shot

expect = pytest.importorskip("playwright.sync_api").expect

STEPS = (0.25, 0.5, 0.75)


class Gates:
    """The handler's steps, opened one by one by the test (on the portal's loop)."""

    def __init__(self) -> None:
        self.events = [asyncio.Event() for _ in STEPS]

    def open(self, i: int) -> None:
        self.events[i].set()


@pytest.fixture
def worker(portal: BlockingPortal, asyncq_redis_url: str,
           asyncq_queue: str) -> Iterator[Gates]:
    """A real worker on the portal's loop whose handler reports each step, then waits for
    the test to open its gate."""
    gates: Gates = portal.call(Gates)  # (its events belong to the portal's loop)
    mux = ServeMux()

    @mux.handler("report:build", retention=600)
    async def build(task: Task) -> str:
        for i, step in enumerate(STEPS):
            await task.set_progress(step, f"step {i + 1} of {len(STEPS)}")
            await gates.events[i].wait()
        await task.set_progress(1.0, "done")
        return "built"

    with portal.wrap_async_context_manager(
            Worker(asyncq_redis_url, mux, queues={asyncq_queue: 1})):
        yield gates


def test_the_progress_bar_moves_live(page: Any, portal: BlockingPortal, worker: Gates,
                                     asyncq_redis_url: str, asyncq_queue: str) -> None:
    queue = asyncq_queue

    async def enqueue() -> str:
        async with Client(asyncq_redis_url) as client:
            return (await client.enqueue("report:build", queue=queue)).id

    with serve(create_app(asyncq_redis_url)) as url:
        page.goto(f"{url}/queue?q={queue}&state=active")
        page.wait_for_selector("#live-status.on")
        task_id = portal.call(enqueue)
        row_bar = page.locator("#active-rows progress")
        expect(row_bar).to_have_attribute("value", "0.25")  # the row came, with its bar
        expect(page.locator("#active-rows .progress-text")).to_have_text("25% · step 1 of 3")
        shot(page, "progress-active-list")
        portal.call(worker.open, 0)
        expect(row_bar).to_have_attribute("value", "0.5")  # moved, no reload

        page.click(f'#active-rows a:text-is("{task_id}")')
        bar = page.locator("#task-progress progress")
        expect(bar).to_have_attribute("value", "0.5")
        page.wait_for_selector("#live-status.on")
        portal.call(worker.open, 1)
        expect(bar).to_have_attribute("value", "0.75")
        expect(page.locator("#task-progress .progress-text")).to_have_text("75% · step 3 of 3")
        shot(page, "progress-task")
        portal.call(worker.open, 2)
        expect(page.locator("#task-state")).to_have_text("completed")
        expect(page.locator('[data-field="task-state"]')).to_have_text("completed")
        expect(bar).to_have_attribute("value", "1.0")
        expect(page.locator("#task-progress .progress-text")).to_have_text("100% · done")
        page.goto("about:blank")  # closes the event stream before the server stops
    assert not page.dialogs and not page.errors, (page.dialogs, page.errors)


def test_a_requeued_task_shows_no_progress_of_its_old_run(
        page: Any, portal: BlockingPortal, asyncq_redis_url: str, asyncq_queue: str) -> None:
    """Two tasks report 40 % and fail for good. One is run again through the API (as the CLI
    does) while its page is open: the bar of the old run goes, live. The other is run again
    with the dashboard's own button: its page shows no progress either."""
    queue = asyncq_queue
    mux = ServeMux()

    @mux.handler("report:fail", max_retry=0)
    async def fail(task: Task) -> None:
        await task.set_progress(0.4, "old run")
        raise RuntimeError("boom")

    async def archived_pair() -> list[str]:
        async with Client(asyncq_redis_url) as client, Inspector(asyncq_redis_url) as ins:
            ids = [(await client.enqueue("report:fail", queue=queue)).id for _ in range(2)]
            async with Worker(asyncq_redis_url, mux, queues={queue: 1}):
                async def both_archived() -> bool:
                    return len(await ins.list_tasks(queue, "archived")) == 2
                await wait_until(both_archived, timeout=30, message="both archived")
            return ids

    async def run_again(task_id: str) -> None:
        async with Inspector(asyncq_redis_url) as ins:
            await ins.run_task(queue, task_id)

    by_api, by_button = portal.call(archived_pair)
    with serve(create_app(asyncq_redis_url)) as url:
        page.goto(f"{url}/task?q={queue}&id={by_api}")
        expect(page.locator("#task-progress .progress-text")).to_have_text("40% · old run")
        page.wait_for_selector("#live-status.on")
        portal.call(run_again, by_api)
        expect(page.locator("#task-state")).to_have_text("pending")
        expect(page.locator("#task-progress")).to_have_text("none reported")  # live

        page.goto(f"{url}/task?q={queue}&id={by_button}")
        expect(page.locator("#task-progress .progress-text")).to_have_text("40% · old run")
        page.click('button[data-action="run"]')
        expect(page.locator("#task-state")).to_have_text("pending")
        expect(page.locator("#task-progress progress")).to_have_count(0)
        shot(page, "progress-requeued")
        page.goto("about:blank")
    assert not page.dialogs and not page.errors, (page.dialogs, page.errors)
