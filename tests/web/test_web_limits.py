"""Changing limits from the dashboard: a queue's concurrency limit from its page, an operator's
value over a declared limit from the limits page; each after a confirmation saying what it
does, with the result shown; refused without the CSRF token, from another origin and in
read-only mode."""

from __future__ import annotations

import asyncio
import html
from urllib.parse import parse_qs, urlsplit

import pytest

import asyncq
from asyncq import Client, Inspector
from asyncq.testing import WorkerFactory, wait_until
from tests.web.web_helpers import WebFactory, csrf_token, post_action

pytestmark = pytest.mark.anyio


def flash(response: object) -> dict[str, list[str]]:
    location = response.headers["location"]  # type: ignore[attr-defined]
    return parse_qs(urlsplit(location).query)


async def test_set_change_and_remove_a_queue_cap_after_a_confirmation(
        web: WebFactory, asyncq_client: Client, asyncq_inspector: Inspector,
        asyncq_queue: str) -> None:
    q = asyncq_queue
    await asyncq_client.enqueue("t", queue=q)
    page = f"/queue?q={q}"
    async with web() as http:
        shown = await http.get(page)
        assert 'id="cap-form"' in shown.text and "no concurrency limit" in shown.text
        confirm = await post_action(http, page, "/action/limit", action="set_cap", queue=q,
                                    concurrency="3")
        assert confirm.status_code == 200
        question = html.unescape(confirm.text)
        assert f"Limit queue {q} to 3 task(s) at once across every worker (now no limit)?" \
            in question
        assert "a lower limit stops nothing that runs" in question
        assert await asyncq_inspector.queue_concurrency(q) is None  # not before the yes
        token = csrf_token(confirm, http)
        done = await http.post("/action/limit", data={
            "csrf": token, "next": page, "action": "set_cap", "queue": q,
            "concurrency": "3", "confirmed": "1"})
        assert done.status_code == 303
        assert flash(done)["ok"] == [
            f"queue {q}: concurrency limit at most 3 at once (was no limit)"]
        cap = await asyncq_inspector.queue_concurrency(q)
        assert cap is not None and cap.limit == 3
        shown = await http.get(done.headers["location"])
        assert "at most 3 at once</b> across every worker" in shown.text
        assert f"queue {q}: concurrency limit at most 3 at once (was no limit)" in html.unescape(
            shown.text)

        removed = await http.post("/action/limit", data={
            "csrf": token, "next": page, "action": "clear_cap", "queue": q, "confirmed": "1"})
        assert flash(removed)["ok"] == [
            f"queue {q}: no concurrency limit (was at most 3 at once)"]
        assert await asyncq_inspector.queue_concurrency(q) is None

        for bad, says in (("0", "must be between 1 and"), ("x", "a whole number of tasks")):
            refused = await post_action(http, page, "/action/limit", action="set_cap",
                                        queue=q, concurrency=bad)
            assert refused.status_code == 303 and says in flash(refused)["error"][0]
        unknown = await post_action(http, page, "/action/limit", action="drop", queue=q)
        assert flash(unknown)["error"] == ["unknown action 'drop'"]


async def test_limit_actions_are_checked_like_every_action(
        web: WebFactory, asyncq_client: Client, asyncq_inspector: Inspector,
        asyncq_queue: str) -> None:
    q = asyncq_queue
    await asyncq_client.enqueue("t", queue=q)
    form = {"action": "set_cap", "queue": q, "concurrency": "2", "confirmed": "1"}
    async with web() as http:
        page = await http.get(f"/queue?q={q}")
        token = csrf_token(page, http)
        assert (await http.post("/action/limit", data=form)).status_code == 403
        assert (await http.post("/action/limit", data={**form, "csrf": "forged"})
                ).status_code == 403
        foreign = await http.post("/action/limit", data={**form, "csrf": token},
                                  headers={"origin": "https://evil.example"})
        assert foreign.status_code == 403
    async with web(read_only=True) as http:
        shown = await http.get(f"/queue?q={q}")
        assert 'id="cap-form"' not in shown.text and "no concurrency limit" in shown.text
        assert (await http.post("/action/limit", data=form)).status_code == 403
    assert await asyncq_inspector.queue_concurrency(q) is None


async def test_an_operator_value_over_a_declared_limit_from_the_limits_page(
        web: WebFactory, asyncq_client: Client, asyncq_inspector: Inspector,
        asyncq_queue: str, asyncq_worker: WorkerFactory) -> None:
    q = asyncq_queue
    go = asyncio.Event()
    running = 0

    async def api(task: asyncq.Task) -> None:
        nonlocal running
        running += 1
        await go.wait()

    mux = asyncq.ServeMux()
    mux.handle("api", api, limits=[asyncq.ConcurrencyLimit(1)])
    await asyncq_client.enqueue_many(asyncq.Task("api", queue=q) for _ in range(3))
    async with asyncq_worker(mux, queues={q: 1}, concurrency=10) as w, web() as http:
        await wait_until(lambda: running == 1, timeout=10, message="1 running (declared)")
        limits = await http.get("/limits")
        assert 'class="inline limit-form"' in limits.text and ">code</td>" in limits.text
        confirm = await post_action(http, "/limits", "/action/limit", action="set_limit",
                                    queue=q, kind="concurrency", name="api", concurrency="3")
        question = html.unescape(confirm.text)
        assert (f"Set the concurrency limit 'api' of queue {q} to at most 3 at once (now at "
                f"most 1 at once)?") in question
        assert "It replaces what the handlers declare (at most 1 at once)" in question
        done = await http.post("/action/limit", data={
            "csrf": csrf_token(confirm, http), "next": "/limits", "action": "set_limit",
            "queue": q, "kind": "concurrency", "name": "api", "concurrency": "3",
            "confirmed": "1"})
        assert flash(done)["ok"] == [f"concurrency limit 'api' of queue {q}: at most 3 at "
                                     f"once, set by an operator; 2 waiting task(s) started"]
        await wait_until(lambda: running == 3, timeout=10, message="3 running (operator)")
        limits = await http.get("/limits")
        assert "operator (code: 1)" in limits.text and 'data-action="clear_limit"' in limits.text
        cleared = await http.post("/action/limit", data={
            "csrf": csrf_token(limits, http), "next": "/limits", "action": "clear_limit",
            "queue": q, "kind": "concurrency", "name": "api", "confirmed": "1"})
        assert flash(cleared)["ok"] == [f"concurrency limit 'api' of queue {q}: at most 1 at "
                                        f"once, as the handlers declare it"]
        rate = await post_action(http, "/limits", "/action/limit", action="set_limit",
                                 queue=q, kind="rate", name="api", rate="often")
        assert "must look like '100/s'" in flash(rate)["error"][0]
        go.set()
        await w.wait_drained(include_scheduled=True, timeout=10)
    (use,) = await asyncq_inspector.limits(q)
    assert (use.limit, use.runtime) == (1, False)
