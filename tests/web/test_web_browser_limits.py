"""A queue's concurrency limit operated from the dashboard in a real browser, over a real worker
process: set on the queue page (after the confirmation), the page shows what runs and waits
under it live, a raise starts the waiting tasks at once, and the limit is cleared again."""

from __future__ import annotations

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
