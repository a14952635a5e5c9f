"""Filtering a task list and acting on the tasks ticked, in a real browser: filter by type,
tick every task of the page at once, archive them after a confirmation that says what the
archive will delete, and see the result."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from asyncq import Task
from asyncq.web import create_app
from tests.web.web_helpers import serve, shot

expect = pytest.importorskip("playwright.sync_api").expect


def test_filter_then_archive_the_selected_tasks(page: Any, redis_calls: Callable[..., Any],
                                                asyncq_redis_url: str,
                                                asyncq_queue: str) -> None:
    queue = asyncq_queue
    tasks = [Task("mail.send", i, queue=queue, process_in=3600) for i in range(3)]
    tasks += [Task("report", i, queue=queue, process_in=3600) for i in range(2)]
    made = redis_calls(lambda c, i: c.enqueue_many(tasks))
    mail = {t.id for t in made[:3]}
    with serve(create_app(asyncq_redis_url)) as url:
        page.goto(f"{url}/queue?q={queue}&state=scheduled")
        expect(page.locator("#tasks tbody tr")).to_have_count(5)
        page.fill('#filter input[name="type"]', "MAIL")
        page.click('#filter button[type="submit"]')
        expect(page.locator("#tasks tbody tr")).to_have_count(3)
        expect(page.locator("#matches")).to_contain_text("3 matching task(s)")
        page.check("#select-all")
        shot(page, "queue-filtered-selected")
        page.click('button[data-selected="archive"]')
        expect(page.locator(".confirm")).to_contain_text("archive the 3 selected task(s)")
        expect(page.locator("#archive-overflow")).to_contain_text(
            "No archived task will be deleted")
        page.click("#confirm")
        expect(page.locator(".flash.ok")).to_have_text(
            f"archive: 3 of 3 selected task(s) of queue {queue}")
        # back on the filtered list, which is now empty
        expect(page.locator("#tasks tbody tr")).to_have_count(1)
        expect(page.locator("#tasks tbody")).to_contain_text("no matching scheduled task")
        page.goto("about:blank")
    states = redis_calls(lambda c, i: i.list_tasks(queue, "archived"))
    assert {t.id for t in states} == mail
    assert not page.dialogs and not page.errors, (page.dialogs, page.errors)


def test_an_error_filter_is_a_filter_not_an_error_banner(
        page: Any, redis_calls: Callable[..., Any], asyncq_redis_url: str,
        asyncq_queue: str) -> None:
    queue = asyncq_queue
    redis_calls(lambda c, i: c.enqueue("mail.send", None, queue=queue, process_in=3600))
    with serve(create_app(asyncq_redis_url)) as url:
        page.goto(f"{url}/queue?q={queue}&state=scheduled")
        page.fill('#filter input[aria-label="error contains"]', "SMTP timeout")
        page.click('#filter button[type="submit"]')
        expect(page.locator("#matches")).to_contain_text("0 matching task(s)")
        expect(page.locator("#tasks tbody")).to_contain_text("no matching scheduled task")
        expect(page.locator('#filter input[aria-label="error contains"]')).to_have_value(
            "SMTP timeout")
        expect(page.locator(".flash")).to_have_count(0)  # no red banner saying the filter
        shot(page, "queue-error-filter")
        page.goto("about:blank")
    assert not page.dialogs and not page.errors, (page.dialogs, page.errors)
