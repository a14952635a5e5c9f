"""The dashboard's task times in a real browser: a task page shows when the task was enqueued,
when its latest run started and ended and how long it ran (or has been running); the queue's
task tables show the time limit of a run and how long finished runs took, also in the active
rows the page refreshes live."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from asyncq import Client, FakeClock, Inspector
from asyncq._broker import Outcome
from asyncq._broker._connection import make_broker
from asyncq.web import create_app
from tests.web.web_helpers import serve, shot

expect = pytest.importorskip("playwright.sync_api").expect

OWNER = "web-times"
DEADLINE = datetime(2099, 1, 1, tzinfo=UTC)


def utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def test_task_times_and_limits(page: Any, redis_calls: Callable[..., Any],
                               asyncq_redis_url: str, asyncq_queue: str) -> None:
    queue = asyncq_queue
    clock = FakeClock()
    t0 = clock.now_ms()

    async def seed(_: Client, __: Inspector) -> dict[str, str]:
        """A task that ran 2.5 s and completed, one running, one pending with a deadline."""
        broker = make_broker(asyncq_redis_url, clock=clock)
        try:
            client = Client(broker, clock=clock)
            done = await client.enqueue("t", queue=queue, timeout=600, retention=3600)
            clock.advance(2)
            await broker.dequeue(queue, 1, OWNER, 60_000, 1000)
            clock.advance(2.5)
            assert await broker.finish([Outcome("complete", queue, done.id,
                                                retention_ms=3_600_000)], OWNER) == [True]
            running = await client.enqueue("t", queue=queue, timeout=600)
            await broker.dequeue(queue, 1, OWNER, 60_000, 1000)
            pending = await client.enqueue("t", queue=queue, timeout=300, deadline=DEADLINE)
            return {"done": done.id, "running": running.id, "pending": pending.id}
        finally:
            await broker.close()

    ids = redis_calls(seed)
    with serve(create_app(asyncq_redis_url)) as url:
        page.goto(f"{url}/task?q={queue}&id={ids['done']}")
        expect(page.locator('[data-time="enqueued"]')).to_contain_text(utc(t0))
        expect(page.locator('[data-time="started"]')).to_contain_text(utc(t0 + 2000))
        expect(page.locator('[data-time="completed"]')).to_contain_text(utc(t0 + 4500))
        expect(page.locator('[data-time="run-time"]')).to_have_text("2.5 s, completed")
        shot(page, "task-times")
        page.goto(f"{url}/task?q={queue}&id={ids['running']}")
        expect(page.locator('[data-time="run-time"]')).to_contain_text("running for ")
        page.goto(f"{url}/task?q={queue}&id={ids['pending']}")
        assert page.locator('[data-time="started"]').count() == 0  # it never ran
        assert page.locator('[data-time="run-time"]').count() == 0

        page.goto(f"{url}/queue?q={queue}&state=completed")
        expect(page.locator('#tasks [data-time="ran"]')).to_have_text("2.5 s")
        page.goto(f"{url}/queue?q={queue}&state=pending")
        expect(page.locator('#tasks [data-time="limit"]')).to_have_text(
            "5 min · deadline 2099-01-01 00:00:00 UTC")
        page.goto(f"{url}/queue?q={queue}&state=active")
        row = page.locator(f'#active-rows tr:has(a:text-is("{ids["running"]}"))')
        expect(row.locator('[data-time="limit"]')).to_have_text("10 min")
        expect(row.locator('[data-time="running"]')).to_have_text(re.compile(r"^[\d.]+ m?s$"))
        # The live refresh redraws these rows (it has once the status turns on).
        page.wait_for_selector("#live-status.on")
        expect(row.locator('[data-time="limit"]')).to_have_text("10 min")
        live = page.request.get(f"{url}/live?q={queue}&active=1").json()
        assert "10 min" in live["active_html"] and ids["running"] in live["active_html"]
        shot(page, "queue-active-times")
        page.goto("about:blank")
    assert not page.dialogs and not page.errors, (page.dialogs, page.errors)
