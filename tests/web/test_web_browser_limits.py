"""A queue's concurrency limit operated from the dashboard in a real browser, over a real worker
process: set on the queue page (after the confirmation), the page shows what runs and waits
under it live, a raise starts the waiting tasks at once, and the limit is cleared again."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal

from asyncq.web import create_app
from tests.helpers.processes import worker_process
from tests.web.web_helpers import serve, shot

expect = pytest.importorskip("playwright.sync_api").expect


def test_a_queue_cap_set_raised_and_removed_from_the_queue_page(
        page: Any, portal: BlockingPortal, redis_calls: Callable[..., Any],
        asyncq_redis_url: str, asyncq_queue: str, tmp_path: Path) -> None:
    q = asyncq_queue
    redis_calls(lambda c, i: c.enqueue("slow:echo", 0, queue=q))  # the queue exists
    worker = worker_process(asyncq_redis_url, q, tmp_path / "worker.log")
    with serve(create_app(asyncq_redis_url)) as url, portal.wrap_async_context_manager(worker):
        page.goto(f"{url}/queue?q={q}")
        expect(page.locator("#cap-limit")).to_have_text("no concurrency limit")
        page.fill('#cap-form input[name="concurrency"]', "1")
        page.click('#cap-form button[data-action="set_cap"]')
        expect(page.locator("#limit-question")).to_contain_text(
            f"Limit queue {q} to 1 task(s) at once across every worker (now no limit)?")
        page.click("#confirm")
        expect(page.locator(".flash.ok")).to_have_text(
            f"queue {q}: concurrency limit at most 1 at once (was no limit)")
        expect(page.locator("#cap-limit")).to_have_text("at most 1 at once")

        for n in range(3):
            redis_calls(lambda c, i, n=n: c.enqueue("slow:block", n, queue=q, max_retry=0))
        page.wait_for_selector("#live-status.on")
        running = page.locator('#concurrency-cap [data-field="concurrency_in_use"]')
        waiting = page.locator('#concurrency-cap [data-field="concurrency_waiting"]')
        expect(running).to_have_text("1")  # updated live, no reload
        expect(waiting).to_have_text("2")
        shot(page, "queue-cap")

        page.fill('#cap-form input[name="concurrency"]', "3")
        page.click('#cap-form button[data-action="set_cap"]')
        expect(page.locator("#limit-note")).to_contain_text("(1 running, 2 waiting for a slot)")
        page.click("#confirm")
        expect(page.locator(".flash.ok")).to_have_text(
            f"queue {q}: concurrency limit at most 3 at once (was at most 1 at once); 2 waiting "
            f"task(s) started")
        expect(running).to_have_text("3")
        expect(waiting).to_have_text("0")
        page.click('nav a:text-is("Limits")')
        row = page.locator(f'tr[data-limit="{q} queue  "]')
        expect(row.locator('[data-field="set_by"]')).to_have_text("operator")
        expect(row.locator('[data-field="in_use"]')).to_have_text("3")
        shot(page, "limits-queue-cap")
        page.go_back()

        page.click('#concurrency-cap button[data-action="clear_cap"]')
        expect(page.locator("#limit-question")).to_contain_text(
            f"Clear the concurrency limit of queue {q} (now at most 3 at once)?")
        page.click("#confirm")
        expect(page.locator(".flash.ok")).to_have_text(
            f"queue {q}: no concurrency limit (was at most 3 at once)")
        expect(page.locator("#cap-limit")).to_have_text("no concurrency limit")
        assert redis_calls(lambda c, i: i.queue_concurrency(q)) is None
        page.goto("about:blank")
    assert not page.dialogs and not page.errors, (page.dialogs, page.errors)


def test_a_task_held_by_a_full_limit_is_shown_waiting_for_a_slot(
        page: Any, portal: BlockingPortal, redis_calls: Callable[..., Any],
        asyncq_redis_url: str, asyncq_queue: str, tmp_path: Path) -> None:
    """Not "scheduled, in ~30 s": the list and the task page say it waits for a slot of the
    queue's concurrency limit, and starts as soon as one frees."""
    q = asyncq_queue
    redis_calls(lambda c, i: i.set_queue_concurrency(q, 1))
    for n in range(2):
        redis_calls(lambda c, i, n=n: c.enqueue("slow:block", n, queue=q, max_retry=0))
    later = redis_calls(lambda c, i: c.enqueue("slow:echo", 0, queue=q, process_in=600)).id
    worker = worker_process(asyncq_redis_url, q, tmp_path / "worker.log")
    with serve(create_app(asyncq_redis_url)) as url, portal.wrap_async_context_manager(worker):
        page.goto(f"{url}/queue?q={q}")
        page.wait_for_selector("#live-status.on")
        expect(page.locator('#concurrency-cap [data-field="concurrency_waiting"]')).to_have_text(
            "1")
        page.goto(f"{url}/queue?q={q}&state=scheduled")
        held = page.locator('td[data-field="waiting-for-slot"]')
        expect(held).to_have_count(1)
        expect(held).to_have_text("waiting for a slot")
        expect(held).to_have_attribute("title", re.compile(
            r"^held by queue concurrency limit: it starts as soon as a slot frees"))
        expect(page.locator(f'tr:has(a:text-is("{later}")) [data-field="waiting-for-slot"]')
               ).to_have_count(0)  # a task scheduled for later is not
        page.locator('tr:has(td[data-field="waiting-for-slot"]) td.mono a').click()
        expect(page.locator('span[data-field="waiting-for-slot"]')).to_have_text(
            "waiting for a slot")
        expect(page.locator('[data-field="limited-by"]')).to_have_text("queue concurrency limit")
        expect(page.locator('[data-field="next-run"]')).to_contain_text(
            "as soon as a slot frees (at the latest ")
        shot(page, "task-waiting-for-slot")
        page.goto("about:blank")
    assert not page.dialogs and not page.errors, (page.dialogs, page.errors)
