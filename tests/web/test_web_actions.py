"""Actions change what is in Redis, go through the Inspector (its errors are shown), need the
CSRF token, ask for confirmation before touching every task of a state, and are impossible in
read-only mode."""

from __future__ import annotations

import asyncio
import html
from urllib.parse import parse_qs, urlsplit

import pytest

from asyncq import Client, Inspector, ServeMux, Task
from asyncq.testing import WorkerFactory
from tests.web.web_helpers import WebFactory, csrf_token, post_action

pytestmark = pytest.mark.anyio


def flash(response: object) -> dict[str, list[str]]:
    location = response.headers["location"]  # type: ignore[attr-defined]
    return parse_qs(urlsplit(location).query)


async def test_archive_run_and_delete_one_task(
        web: WebFactory, asyncq_client: Client, asyncq_inspector: Inspector,
        asyncq_queue: str) -> None:
    info = await asyncq_client.enqueue("t", {"a": 1}, queue=asyncq_queue, process_in=3600)
    page = f"/task?q={asyncq_queue}&id={info.id}"
    async with web() as http:
        for action, state in (("archive", "archived"), ("run", "pending")):
            done = await post_action(http, page, "/action/task", action=action,
                                     queue=asyncq_queue, id=info.id)
            assert done.status_code == 303 and "ok" in flash(done)
            found = await asyncq_inspector.task_info(asyncq_queue, info.id)
            assert found.state.value == state
        refused = await post_action(http, page, "/action/task", action="run",
                                    queue=asyncq_queue, id=info.id)
        assert flash(refused)["error"] == [f"task {info.id!r}: the task is already pending"]
        shown = await http.get(refused.headers["location"])
        assert f"task {info.id!r}: the task is already pending" in html.unescape(shown.text)
        asked = await post_action(http, page, "/action/task", action="delete",
                                  queue=asyncq_queue, id=info.id)
        assert asked.status_code == 200 and "It is deleted for good" in asked.text
        assert len(await asyncq_inspector.list_tasks(asyncq_queue, "pending")) == 1
        deleted = await post_action(http, page, "/action/task", action="delete",
                                    queue=asyncq_queue, id=info.id, confirmed="1")
    assert "ok" in flash(deleted)
    assert await asyncq_inspector.list_tasks(asyncq_queue, "pending") == []


async def test_cancel_a_running_task(
        web: WebFactory, asyncq_client: Client, asyncq_inspector: Inspector,
        asyncq_queue: str, asyncq_worker: WorkerFactory) -> None:
    started = asyncio.Event()

    async def handler(task: Task) -> None:
        started.set()
        await asyncio.sleep(60)

    async with asyncq_worker(handler, queues={asyncq_queue: 1}) as w:
        info = await asyncq_client.enqueue("slow", None, queue=asyncq_queue, max_retry=0)
        await asyncio.wait_for(started.wait(), 10)
        async with web() as http:
            done = await post_action(http, f"/task?q={asyncq_queue}&id={info.id}",
                                     "/action/task", action="cancel", queue=asyncq_queue,
                                     id=info.id)
        assert "ok" in flash(done)
        await w.wait_drained(asyncq_queue)
    assert (await asyncq_inspector.task_info(asyncq_queue, info.id)).state.value == "archived"


async def test_every_task_of_a_state_after_a_confirmation(
        web: WebFactory, asyncq_client: Client, asyncq_inspector: Inspector,
        asyncq_queue: str) -> None:
    for i in range(3):
        await asyncq_client.enqueue("t", {"i": i}, queue=asyncq_queue, process_in=3600)
    page = f"/queue?q={asyncq_queue}&state=scheduled"
    async with web() as http:
        confirm = await post_action(http, page, "/action/state", action="archive",
                                    queue=asyncq_queue, state="scheduled")
        assert confirm.status_code == 200 and "archive all <b>3</b> scheduled" in confirm.text
        assert len(await asyncq_inspector.list_tasks(asyncq_queue, "scheduled")) == 3
        done = await http.post("/action/state", data={
            "csrf": csrf_token(confirm, http), "next": page, "action": "archive",
            "queue": asyncq_queue, "state": "scheduled", "confirmed": "1"})
    assert flash(done)["ok"] == [f"archive: 3 scheduled task(s) of queue {asyncq_queue}"]
    assert len(await asyncq_inspector.list_tasks(asyncq_queue, "archived")) == 3


async def test_pause_and_resume_a_queue(
        web: WebFactory, asyncq_client: Client, asyncq_inspector: Inspector,
        asyncq_queue: str) -> None:
    await asyncq_client.enqueue("t", None, queue=asyncq_queue)
    async with web() as http:
        await post_action(http, "/", "/action/queue", action="pause", queue=asyncq_queue)
        assert (await asyncq_inspector.queue_info(asyncq_queue)).paused
        again = await post_action(http, "/", "/action/queue", action="pause",
                                  queue=asyncq_queue)
        assert flash(again)["ok"] == [f"queue {asyncq_queue} was already paused"]
        await post_action(http, "/", "/action/queue", action="unpause", queue=asyncq_queue)
    assert not (await asyncq_inspector.queue_info(asyncq_queue)).paused


async def test_a_paused_queue_is_not_worked_on(
        web: WebFactory, asyncq_client: Client, asyncq_inspector: Inspector,
        asyncq_queue: str, asyncq_worker: WorkerFactory) -> None:
    mux = ServeMux()
    mux.handle("t", lambda_handler)
    async with web() as http:
        await asyncq_client.enqueue("t", None, queue=asyncq_queue)
        await post_action(http, "/", "/action/queue", action="pause", queue=asyncq_queue)
        other = f"{asyncq_queue}-other"
        async with asyncq_worker(mux, queues={asyncq_queue: 1, other: 1},
                                 strict_priority=True) as w:
            await asyncq_client.enqueue("t", None, queue=asyncq_queue)
            # The worker drains a lower-priority queue it serves too: it tried the paused
            # one first each time, and a worker that ignored the pause would have run both.
            await asyncq_client.enqueue("t", None, queue=other)
            await w.wait_drained(other)
            assert len(await asyncq_inspector.list_tasks(asyncq_queue, "pending")) == 2
            await post_action(http, "/", "/action/queue", action="unpause", queue=asyncq_queue)
            await w.wait_drained(asyncq_queue)


async def lambda_handler(task: Task) -> None:
    return None


async def test_actions_need_the_csrf_token(
        web: WebFactory, asyncq_client: Client, asyncq_inspector: Inspector,
        asyncq_queue: str) -> None:
    info = await asyncq_client.enqueue("t", None, queue=asyncq_queue, process_in=3600)
    fields = {"action": "delete", "queue": asyncq_queue, "id": info.id, "next": "/"}
    async with web() as http:
        await http.get("/")  # the browser has its cookie
        missing = await http.post("/action/task", data=fields)
        wrong = await http.post("/action/task", data={**fields, "csrf": "x" * 43})
        http.cookies.clear()
        no_cookie = await http.post("/action/task", data={**fields, "csrf": "x" * 43})
    assert [r.status_code for r in (missing, wrong, no_cookie)] == [403, 403, 403]
    assert (await asyncq_inspector.task_info(asyncq_queue, info.id)).state.value == "scheduled"


async def test_read_only_shows_no_button_and_refuses_every_action(
        web: WebFactory, asyncq_client: Client, asyncq_inspector: Inspector,
        asyncq_queue: str) -> None:
    info = await asyncq_client.enqueue("t", None, queue=asyncq_queue, process_in=3600)
    async with web(read_only=True) as http:
        pages = [await http.get(p) for p in (
            "/", f"/queue?q={asyncq_queue}&state=scheduled",
            f"/task?q={asyncq_queue}&id={info.id}")]
        token = http.cookies.get("asyncq_csrf")
        answers = [await http.post(path, data={"csrf": token, "action": a, "queue": asyncq_queue,
                                               "id": info.id, "state": "scheduled",
                                               "confirmed": "1"})
                   for path, a in (("/action/task", "delete"), ("/action/state", "delete"),
                                   ("/action/queue", "pause"))]
    for page in pages:
        assert page.status_code == 200 and "read-only" in page.text
        assert 'method="post"' not in page.text
    assert [a.status_code for a in answers] == [403, 403, 403]
    assert (await asyncq_inspector.task_info(asyncq_queue, info.id)).state.value == "scheduled"
    assert not (await asyncq_inspector.queue_info(asyncq_queue)).paused


async def test_next_never_leaves_the_dashboard(
        web: WebFactory, asyncq_client: Client, asyncq_queue: str) -> None:
    await asyncq_client.enqueue("t", None, queue=asyncq_queue)
    async with web() as http:
        page = await http.get("/")
        token = csrf_token(page, http)
        for target in ("https://evil.test/", "//evil.test/x", "javascript:alert(1)", "/\\evil"):
            done = await http.post("/action/queue", data={
                "csrf": token, "next": target, "action": "unpause", "queue": asyncq_queue})
            assert done.headers["location"].startswith("/?"), target

