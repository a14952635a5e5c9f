"""The dashboard shows a run's progress: a <progress> bar with its text on the task page and
in the active list (escaped, no inline style), and the task page's live document carries the
task's state and its progress cell."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import orjson
import pytest

from asyncq import Client
from asyncq._broker import Outcome, RedisBroker
from asyncq._broker._connection import make_broker
from tests.web.web_helpers import XSS, WebFactory

pytestmark = pytest.mark.anyio

OWNER = "srv-web"


@pytest.fixture
async def broker(asyncq_redis_url: str, anyio_backend: object) -> AsyncIterator[RedisBroker]:
    b = make_broker(asyncq_redis_url)
    try:
        yield b
    finally:
        await b.close()


async def running(broker: RedisBroker, queue: str) -> str:
    """A task of ``queue`` leased to OWNER (as a worker would hold it)."""
    info = await Client(broker).enqueue("report:build", {"month": 10}, queue=queue,
                                        retention=60)
    raws, _ = await broker.dequeue(queue, 1, OWNER, 60_000, 60_000)
    assert [r.id for r in raws] == [info.id]
    return info.id


async def report(broker: RedisBroker, queue: str, task_id: str, value: float,
                 message: str | None) -> None:
    doc = {"v": value, "m": message, "at": 1_700_000_000_000}
    assert await broker.set_progress(queue, task_id, OWNER, orjson.dumps(doc))


def bar(html: str) -> str:
    """The progress element of a page or fragment."""
    match = re.search(r'<span class="progress"[^>]*>.*?</span></span>', html, re.S)
    assert match, html
    return match.group(0)


async def test_the_task_page_shows_the_bar_and_follows_the_task_live(
    web: WebFactory, broker: RedisBroker, asyncq_queue: str,
) -> None:
    q = asyncq_queue
    task_id = await running(broker, q)
    async with web() as http:
        page = await http.get(f"/task?q={q}&id={task_id}")
        assert 'id="task-progress"' in page.text and "none reported" in page.text
        assert f'data-events="/events?q={q}&amp;task={task_id}"' in page.text  # live
        await report(broker, q, task_id, 0.375, "page 3 of 8")
        page = await http.get(f"/task?q={q}&id={task_id}")
        shown = bar(page.text)
        assert '<progress value="0.375" max="1"' in shown and "38% · page 3 of 8" in shown
        assert "style=" not in shown  # (the CSP allows no inline style)
        live = orjson.loads((await http.get(f"/live?q={q}&task={task_id}")).content)
        assert live["task_state"] == "active" and live["task_progress"] == 0.375
        assert "38% · page 3 of 8" in live["progress_html"]
        assert live["queues"] == {}  # (a task page shows no counts)
        await report(broker, q, task_id, 1.0, "done")
        assert await broker.finish([Outcome("complete", q, task_id, retention_ms=60_000)],
                                   OWNER) == [True]
        live = orjson.loads((await http.get(f"/live?q={q}&task={task_id}")).content)
        assert live["task_state"] == "completed" and "100% · done" in live["progress_html"]
        page = await http.get(f"/task?q={q}&id={task_id}")
        assert '<progress value="1.0" max="1"' in bar(page.text)  # frozen as it ended
        gone = orjson.loads((await http.get(f"/live?q={q}&task=no-such-task")).content)
        assert gone == {"queues": {}, "task_state": "deleted"}


async def test_the_active_list_shows_each_runs_bar(
    web: WebFactory, broker: RedisBroker, asyncq_queue: str,
) -> None:
    q = asyncq_queue
    quiet = await running(broker, q)
    busy = await running(broker, q)
    await report(broker, q, busy, 0.5, XSS)
    async with web() as http:
        page = await http.get(f"/queue?q={q}&state=active")
        live = orjson.loads((await http.get(f"/live?q={q}&active=1")).content)
    assert "<th>progress</th>" in page.text
    for html in (page.text, live["active_html"]):
        rows = {m.group(1): m.group(0) for m in re.finditer(
            r'<tr>\s*<td class="mono"><a href="[^"]*id=([^"&]+)">.*?</tr>', html, re.S)}
        assert set(rows) == {quiet, busy}
        assert "<progress" not in rows[quiet]
        assert '<progress value="0.5" max="1"' in rows[busy]
        assert XSS not in rows[busy] and "&lt;script&gt;alert(1)&lt;/script&gt;" in rows[busy]
