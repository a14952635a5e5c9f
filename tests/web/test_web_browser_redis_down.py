"""The dashboard while Redis is down, in a real browser: ``asyncq web`` (a real process) starts
without Redis, every page then answers 503 with a page saying so that reloads itself, the log
gets one line per failed request (no traceback), and the pages come back by themselves once
Redis answers, as often as Redis goes away."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from anyio.from_thread import BlockingPortal

from asyncq import Client
from asyncq._testing.redis_server import RedisServer
from tests.helpers.ports import free_port
from tests.web.web_helpers import shot, web_process

expect = pytest.importorskip("playwright.sync_api").expect


def _unreachable_page_then_back(page: Any, url: str, redis: RedisServer, name: str) -> None:
    answer = page.goto(f"{url}/")
    assert answer is not None and answer.status == 503
    expect(page.locator("#unavailable")).to_have_text("Redis is unreachable")
    expect(page.locator(".flash.error")).to_contain_text("cannot reach Redis")
    shot(page, name)
    redis.start()
    # the page reloads itself (every 5 s) and shows the queues, without a click
    expect(page.locator("h1")).to_have_text("Queues", timeout=20_000)


def test_the_dashboard_starts_without_redis_and_recovers(page: Any, tmp_path: Path) -> None:
    redis = RedisServer(port=free_port())
    log = tmp_path / "web.log"
    try:
        with web_process(redis.url, log) as url:
            assert "serving anyway" in log.read_text()
            _unreachable_page_then_back(page, url, redis, "redis-unreachable")
            assert httpx.get(f"{url}/queue?q=none").status_code == 404  # pages work again
            redis.stop()
            page.goto(f"{url}/workers")
            expect(page.locator("#unavailable")).to_be_visible()
            _unreachable_page_then_back(page, url, redis, "redis-unreachable-again")
            page.goto("about:blank")
    finally:
        redis.close()
    text = log.read_text()
    assert "Traceback" not in text, text
    failures = [line for line in text.splitlines() if "redis call failed" in line]
    assert failures and all("cannot reach Redis" in line for line in failures)
    # the browser reports each 503 it loaded in its console; nothing else went wrong
    assert all("status of 503" in e for e in page.errors), page.errors
    assert not page.dialogs, page.dialogs


def test_a_task_page_while_redis_is_down_is_a_503_that_comes_back(
        page: Any, tmp_path: Path, portal: BlockingPortal) -> None:
    redis = RedisServer(["--appendonly", "yes"], port=free_port())
    try:
        redis.start()

        async def enqueue() -> str:
            async with Client(redis.url) as client:
                return (await client.enqueue("t", None, queue="mail", process_in=3600)).id
        task_id = portal.call(enqueue)
        with web_process(redis.url, tmp_path / "web.log") as url:
            redis.stop()
            answer = page.goto(f"{url}/task?q=mail&id={task_id}")
            assert answer is not None and answer.status == 503  # not "task not found"
            expect(page.locator("#unavailable")).to_have_text("Redis is unreachable")
            shot(page, "task-redis-unreachable")
            redis.start()
            expect(page.locator("#task-state")).to_have_text("scheduled", timeout=20_000)
            page.goto("about:blank")
    finally:
        redis.close()
    assert all("status of 503" in e for e in page.errors), page.errors
