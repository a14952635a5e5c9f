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
from asyncq._testing.redis_server import RedisServer
from asyncq.web import create_app
from tests.helpers.ports import free_port
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



def test_the_last_hour_charts_a_queue_no_worker_serves_while_no_worker_lives(
        page: Any, portal: BlockingPortal) -> None:
    """No worker at all, a queue piling up in a Redis of its own: it was sampled a minute ago
    (by the dashboard, as the page left open does), and the dashboard in use samples it again
    now, so the chart shows the minute — before, only a serving worker's janitor wrote them."""
    redis = RedisServer(port=free_port())
    redis.start()
    try:
        async def pile_up_and_sample_a_minute_ago() -> None:
            async with Client(redis.url) as client, Inspector(
                    redis.url, clock=FakeClock(datetime.now(UTC) - timedelta(minutes=1))
            ) as inspector:
                await client.enqueue_many([Task("t", i, queue="unserved") for i in range(4)])
                assert await inspector.record_minutes() == 1

        portal.call(pile_up_and_sample_a_minute_ago)
        with serve(create_app(redis.url)) as url:
            page.goto(f"{url}/")
            chart = page.locator("#last-hour")
            expect(chart.locator("rect.bar.processed")).to_have_count(1)
            expect(chart.locator("text.backlog-max")).to_have_text("backlog 4")
            shot(page, "overview-last-hour-unserved")
            page.goto("about:blank")
    finally:
        redis.close()
    assert not page.dialogs and not page.errors, (page.dialogs, page.errors)
