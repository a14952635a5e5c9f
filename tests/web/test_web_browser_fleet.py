"""The overview of a fleet in a real browser: 2 000 queues listed 50 a page, sorted by any
column, searched by name, with live counts for the queues shown; the page stays a page to
read (not one row per queue); every other page answers at 2 000 queues too."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal

from asyncq import Client, Task
from asyncq._testing.redis_server import RedisServer
from asyncq.web import create_app
from tests.helpers.ports import free_port
from tests.web.web_helpers import serve, shot

expect = pytest.importorskip("playwright.sync_api").expect

QUEUES = 2000


@pytest.fixture
def fleet(portal: BlockingPortal) -> Iterator[str]:
    """A Redis of its own holding 2 000 queues ``tenant:0000``... with one pending task each,
    and 7 more in ``tenant:1234``, 3 more in ``tenant:0007``; yields its URL."""
    redis = RedisServer(port=free_port())
    redis.start()

    async def fill() -> None:
        async with Client(redis.url) as client:
            names = [f"tenant:{i:04d}" for i in range(QUEUES)]
            names += ["tenant:1234"] * 7 + ["tenant:0007"] * 3
            for start in range(0, len(names), 200):
                await client.enqueue_many([Task("t", None, queue=q)
                                           for q in names[start:start + 200]])
    try:
        portal.call(fill)
        yield redis.url
    finally:
        redis.close()


def _rows(page: Any) -> list[str]:
    return [str(q) for q in page.locator("#queues tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.queue)")]


def test_two_thousand_queues_search_sort_and_page(page: Any, fleet: str,
                                                  portal: BlockingPortal) -> None:
    with serve(create_app(fleet)) as url:
        # (the first render reads every queue's counts and charts, pipelined: 1.5-2.2 s on a
        # loaded 2-core machine, 4.7-10 s before; the timeout is generous, not a measurement)
        page.goto(url + "/", timeout=120_000)
        expect(page.locator("#queue-range")).to_contain_text("queues 1 to 50 of 2000")
        assert _rows(page) == [f"tenant:{i:04d}" for i in range(50)]
        assert page.evaluate("document.documentElement.scrollHeight") < 4000
        shot(page, "fleet-overview")

        page.click('#queues a[data-sort="pending"]')  # the biggest backlog first
        expect(page.locator("#queue-range")).to_contain_text("by pending descending")
        assert _rows(page)[:3] == ["tenant:1234", "tenant:0007", "tenant:0000"]
        page.click('#queues a[data-sort="pending"]')  # again: the smallest first
        expect(page.locator("#queue-range")).to_contain_text("by pending ascending")
        assert "tenant:1234" not in _rows(page)

        page.click('#queues a[data-sort="queue"]')
        page.click('#queues a[data-sort="queue"]')  # names, descending
        assert _rows(page)[0] == "tenant:1999"
        page.click('#queue-pager a[rel="next"]')
        expect(page.locator("#queue-pager")).to_contain_text("page 2 of 40")
        assert _rows(page) == [f"tenant:{i:04d}" for i in range(1949, 1899, -1)]

        page.fill('#queue-search input[name="search"]', "TENANT:12")
        page.press('#queue-search input[name="search"]', "Enter")
        expect(page.locator("#queue-range")).to_contain_text(
            "queues 1 to 50 of 100 whose name contains “TENANT:12” (of 2000)")
        assert _rows(page)[0] == "tenant:1299"  # still by name, descending
        page.fill('#queue-search input[name="search"]', "tenant:0123")
        page.press('#queue-search input[name="search"]', "Enter")
        assert _rows(page) == ["tenant:0123"]
        expect(page.locator("#queue-pager")).to_have_count(0)
        shot(page, "fleet-search")

        # the counts of the queues shown stay live
        page.wait_for_selector("#live-status.on")

        async def one_more() -> None:
            async with Client(fleet) as client:
                await client.enqueue("t", None, queue="tenant:0123")
        portal.call(one_more)
        expect(page.locator('tr[data-queue="tenant:0123"] [data-field="pending"]')
               ).to_have_text("2")
        page.fill('#queue-search input[name="search"]', "no such queue")
        page.press('#queue-search input[name="search"]', "Enter")
        expect(page.locator("#queue-range")).to_contain_text("no queue whose name contains")

        # every page is usable at 2 000 queues: each answers, within the test's (generous,
        # not a measurement) navigation timeout, and shows what it is for
        for name in ("Workers", "Scheduler", "Groups", "Limits", "Workflows", "Queues"):
            with page.expect_navigation(timeout=60_000) as went:
                page.click(f'nav a:text-is("{name}")')
            assert went.value is not None and went.value.status == 200, name
            expect(page.locator("nav a.current")).to_have_text(name)
        expect(page.locator("#queue-range")).to_contain_text("queues 1 to 50 of 2000")
        page.click('#queues a:text-is("tenant:0007")')
        expect(page.locator('.count[data-field="pending"]')).to_have_text("4")
        page.goto("about:blank")
    assert not page.dialogs and not page.errors, (page.dialogs, page.errors)
