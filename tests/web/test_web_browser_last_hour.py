"""The overview's last-hour chart in a real browser: per-minute bars and the backlog line
drawn from the samples the workers record, with the latest minute's throughput shown before
any live update arrives."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal

from asyncq import Client, FakeClock, Inspector, Task
from asyncq.web import create_app
from tests.web.web_helpers import serve, shot

expect = pytest.importorskip("playwright.sync_api").expect


def test_the_overview_charts_the_last_hour(page: Any, portal: BlockingPortal,
                                           asyncq_redis_url: str, asyncq_queue: str) -> None:
    queue = asyncq_queue
    clock = FakeClock(datetime.now(UTC) - timedelta(minutes=6))

    async def record_minutes() -> None:
        async with Client(asyncq_redis_url) as client, Inspector(asyncq_redis_url,
                                                                  clock=clock) as inspector:
            for n in (3, 5, 2):
                await client.enqueue_many([Task("t", i, queue=queue) for i in range(n)])
                assert await inspector.broker.maintenance.record_minute(queue)
                clock.advance(60)

    portal.call(record_minutes)
    with serve(create_app(asyncq_redis_url)) as url:
        page.goto(f"{url}/")
        chart = page.locator("#last-hour")
        # (the Redis is shared with other tests: their queues may add minutes of their own)
        assert chart.locator("rect.bar.processed").count() >= 2
        expect(chart.locator("polyline.backlog")).to_have_count(1)
        expect(chart.locator("text.backlog-max")).to_have_text(re.compile(r"backlog \d+"))
        assert int((chart.locator("text.backlog-max").text_content() or "").split()[1]) >= 10
        expect(page.locator("#throughput")).to_have_text(re.compile(r"\d+\.\d /s"))
        shot(page, "overview-last-hour")
        page.goto("about:blank")
    assert not page.dialogs and not page.errors, (page.dialogs, page.errors)
