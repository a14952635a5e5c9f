"""Every page of the dashboard renders what is in Redis: queues, tasks in each state, a task's
payload, error, headers and result, workers, scheduler entries and groups."""

from __future__ import annotations

import asyncio
import html
from collections.abc import AsyncIterator
from typing import Any

import pytest

import asyncq
from asyncq import Client, Inspector, ServeMux, Task
from asyncq.testing import WorkerFactory, wait_until
from tests.web.web_helpers import XSS, WebFactory

pytestmark = pytest.mark.anyio


@pytest.fixture
async def seeded(asyncq_client: Client, asyncq_queue: str,
                 asyncq_worker: WorkerFactory) -> AsyncIterator[dict[str, Any]]:
    """A queue with tasks in every state (one running until the test ends) and a server."""
    queue = asyncq_queue
    release = asyncio.Event()
    mux = ServeMux()

    @mux.handler("ok")
    async def ok(task: Task) -> Any:
        return {"answer": 42}

    @mux.handler("fail")
    async def fail(task: Task) -> None:
        raise RuntimeError(f"boom {XSS}")

    @mux.handler("block")
    async def block(task: Task) -> None:
        await release.wait()

    c = asyncq_client
    ids: dict[str, str] = {}
    async with asyncq_worker(mux, queues={queue: 1}, concurrency=2) as w:
        ids["completed"] = (await c.enqueue("ok", {"n": 1}, queue=queue, retention=600)).id
        ids["archived"] = (await c.enqueue("fail", XSS, queue=queue, max_retry=0)).id
        await w.wait_drained(queue)
        ids["active"] = (await c.enqueue("block", None, queue=queue)).id
        async with Inspector(c.broker) as inspector:
            await wait_until(lambda: _active(inspector, queue), message="a task running")
        ids["scheduled"] = (await c.enqueue("later", b"\x00\xff\xfe", queue=queue,
                                            process_in=3600)).id
        ids["aggregating"] = (await c.enqueue("agg", {"g": 1}, queue=queue,
                                              group="grp-1")).id
        ids["xss"] = (await c.enqueue(XSS, {"html": XSS}, queue=queue, process_in=3600,
                                      headers={"h": XSS})).id
        try:
            yield {"queue": queue, "ids": ids}
        finally:
            release.set()


async def _active(inspector: Inspector, queue: str) -> bool:
    return bool(await inspector.list_tasks(queue, "active"))


async def test_overview_lists_every_queue_with_its_counts_and_a_chart(
        web: WebFactory, seeded: dict[str, Any]) -> None:
    queue = seeded["queue"]
    async with web() as http:
        page = await http.get("/")
    assert page.status_code == 200
    assert f'<tr data-queue="{queue}">' in page.text
    assert f'href="/queue?q={queue}"' in page.text
    assert 'data-field="archived">1<' in page.text and 'data-field="active">1<' in page.text
    assert "<svg" in page.text and 'class="bar processed"' in page.text
    assert 'data-live="/live?"' in page.text


@pytest.mark.parametrize("state", ["pending", "active", "scheduled", "retry", "archived",
                                   "completed", "aggregating"])
async def test_the_queue_page_has_a_tab_per_state_listing_its_tasks(
        web: WebFactory, seeded: dict[str, Any], state: str) -> None:
    queue, ids = seeded["queue"], seeded["ids"]
    async with web() as http:
        page = await http.get("/queue", params={"q": queue, "state": state})
        assert page.status_code == 200
        for s in ("pending", "active", "scheduled", "archived", "completed", "aggregating"):
            assert f"/queue?q={queue}&amp;state={s}" in page.text
        if state == "aggregating":
            assert "grp-1" in page.text
            page = await http.get("/queue", params={"q": queue, "state": state,
                                                    "group": "grp-1"})
        if state in ids:
            assert ids[state] in page.text
        elif state == "pending":
            assert "no pending task" in page.text


async def test_tasks_are_paginated(web: WebFactory, asyncq_client: Client,
                                   asyncq_queue: str) -> None:
    infos = [await asyncq_client.enqueue("t", {"i": i}, queue=asyncq_queue) for i in range(30)]
    async with web() as http:
        first = await http.get("/queue", params={"q": asyncq_queue})
        second = await http.get("/queue", params={"q": asyncq_queue, "page": 2})
    assert "page 1 of 2" in first.text and "page 2 of 2" in second.text
    assert infos[0].id in first.text and infos[0].id not in second.text
    assert infos[29].id in second.text and infos[29].id not in first.text


async def test_search_by_task_id_opens_the_task_or_says_it_is_not_there(
        web: WebFactory, seeded: dict[str, Any]) -> None:
    queue, task_id = seeded["queue"], seeded["ids"]["scheduled"]
    async with web() as http:
        found = await http.get("/queue", params={"q": queue, "id": task_id})
        missing = await http.get("/queue", params={"q": queue, "id": "no-such-task"})
    assert found.status_code == 303
    assert found.headers["location"] == f"/task?q={queue}&id={task_id}"
    assert missing.status_code == 200 and "not found" in missing.text


async def test_the_task_page_shows_payload_error_headers_and_result(
        web: WebFactory, seeded: dict[str, Any]) -> None:
    queue, ids = seeded["queue"], seeded["ids"]
    async with web() as http:
        done = await http.get("/task", params={"q": queue, "id": ids["completed"]})
        failed = await http.get("/task", params={"q": queue, "id": ids["archived"]})
        raw = await http.get("/task", params={"q": queue, "id": ids["scheduled"]})
        odd = await http.get("/task", params={"q": queue, "id": ids["xss"]})
        gone = await http.get("/task", params={"q": queue, "id": "nope"})
    text = html.unescape(done.text)
    assert '"n": 1' in text and '"answer": 42' in text
    assert "boom" in failed.text and "archived" in failed.text
    assert "00 ff fe" in raw.text  # bytes that are not text are shown as hex
    assert html.escape(XSS) in odd.text and ">h<" in odd.text
    assert gone.status_code == 404 and "not found" in gone.text


async def test_workers_scheduler_and_groups_pages(
        web: WebFactory, seeded: dict[str, Any], asyncq_redis_url: str) -> None:
    queue = seeded["queue"]
    scheduler = asyncq.Scheduler(asyncq_redis_url)
    entry_id = scheduler.register("@every 1h", Task("report:daily", {"x": 1}, queue=queue))
    async with scheduler, web() as http:
        active_id = seeded["ids"]["active"]

        async def shows_running_task() -> str | None:
            page = await http.get("/workers")
            return page.text if active_id in page.text else None

        servers = await wait_until(shows_running_task, message="the heartbeat's tasks")
        await wait_until(lambda: _has_entry(asyncq_redis_url, entry_id),
                         message="the scheduler's entries published")
        periodic = await http.get("/scheduler")
        groups = await http.get("/groups")
    assert queue in servers
    assert "report:daily" in periodic.text and entry_id in periodic.text
    assert "grp-1" in groups.text and queue in groups.text


async def _has_entry(url: str, entry_id: str) -> bool:
    async with Inspector(url) as inspector:
        return any(e.id == entry_id for e in await inspector.scheduler_entries())


async def test_an_unknown_queue_is_a_404_page(web: WebFactory) -> None:
    async with web() as http:
        page = await http.get("/queue", params={"q": "no-such-queue"})
    assert page.status_code == 404 and "not found" in page.text


async def test_static_files_are_served_from_the_package(web: WebFactory) -> None:
    async with web() as http:
        css = await http.get("/static/app.css")
        js = await http.get("/static/app.js")
    assert css.status_code == 200 and "text/css" in css.headers["content-type"]
    assert js.status_code == 200 and "EventSource" in js.text


async def test_the_limits_page_shows_each_limit_key_in_use(
        asyncq_fresh_redis: str, web: WebFactory, asyncq_client: Client,
        asyncq_queue: str) -> None:
    # asyncq_fresh_redis: limits are server-wide, so no earlier test's limit may be in use
    await asyncq_client.enqueue("t", None, queue=asyncq_queue)  # a known queue
    stripe = asyncq.Limiter(asyncq_client, asyncq.ConcurrencyLimit(2, name="stripe"),
                            queue=asyncq_queue)
    paced = asyncq.Limiter(asyncq_client, asyncq.RateLimit("100/m", name="mailer"),
                           queue=asyncq_queue)
    async with web() as http:
        assert "No rate or concurrency limit is in use" in (await http.get("/limits")).text
        async with stripe.acquire(XSS), paced.acquire("acme"):
            page = await http.get("/limits")
    assert page.status_code == 200
    rows = {r.split('"')[0]: r for r in page.text.split('data-limit="')[1:]}
    held = rows[html.escape(f"{asyncq_queue} concurrency stripe {XSS}")]
    assert '"in_use">1<' in held and "2 at once" in held
    assert XSS not in page.text and html.escape(XSS) in held  # the key is shown as text
    window = rows[f"{asyncq_queue} rate mailer acme"]
    assert '"in_use">1<' in window and "100 / 60 s" in window
