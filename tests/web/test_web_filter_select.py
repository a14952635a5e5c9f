"""Task lists filter by type and by error text (Inspector.find_tasks: case-insensitive,
resumable, a bounded number of tasks examined per call), and several ticked tasks can be run,
archived or deleted at once after a confirmation, the result saying what was done and what
failed."""

from __future__ import annotations

import html
import re

import pytest

from asyncq import Client, Inspector, ServeMux, Task
from asyncq.testing import WorkerFactory
from tests.web.test_web_actions import flash
from tests.web.web_helpers import WebFactory, csrf_token

pytestmark = pytest.mark.anyio


async def _fail(task: Task) -> None:
    raise RuntimeError(task.json()["error"])


async def _archived_mix(client: Client, worker: WorkerFactory, queue: str) -> dict[str, str]:
    """Six archived tasks: mail.send failing with 'SMTP timeout' or 'bad address', report with
    'disk full'; returns id -> 'type/error'."""
    mux = ServeMux()
    mux.handle("mail.send", _fail)
    mux.handle("report", _fail)
    made = {}
    for i, (task_type, error) in enumerate([("mail.send", "SMTP timeout"),
                                            ("mail.send", "bad address"),
                                            ("report", "disk full")] * 2):
        info = await client.enqueue(task_type, {"error": f"{error} #{i}"}, queue=queue,
                                    max_retry=0)
        made[info.id] = f"{task_type}/{error}"
    async with worker(mux, queues={queue: 1}) as w:
        await w.wait_drained(queue)
    return made


async def test_find_tasks_by_type_and_error_text(
        asyncq_client: Client, asyncq_inspector: Inspector, asyncq_worker: WorkerFactory,
        asyncq_queue: str) -> None:
    made = await _archived_mix(asyncq_client, asyncq_worker, asyncq_queue)
    find = asyncq_inspector.find_tasks

    def kinds(found: list) -> list[str]:
        return sorted(made[t.id] for t in found)

    mail = await find(asyncq_queue, "archived", task_type="MAIL")
    assert kinds(mail.tasks) == ["mail.send/SMTP timeout"] * 2 + ["mail.send/bad address"] * 2
    assert (mail.next_start, mail.scanned) == (None, 6)
    smtp = await find(asyncq_queue, "archived", task_type="mail", error="smtp TIME")
    assert kinds(smtp.tasks) == ["mail.send/SMTP timeout"] * 2
    assert (await find(asyncq_queue, "archived", error="nothing like it")).tasks == []
    # in listing order, resumable where it stopped, and never examining more than asked
    listed = [t.id for t in await asyncq_inspector.list_tasks(asyncq_queue, "archived")]
    first = await find(asyncq_queue, "archived", error="disk", limit=1)
    rest = await find(asyncq_queue, "archived", error="disk", start=first.next_start or 0)
    assert [t.id for t in first.tasks + rest.tasks] == [
        i for i in listed if made[i].startswith("report")]
    short = await find(asyncq_queue, "archived", task_type="report", scan=2)
    assert (short.scanned, short.next_start) == (2, 2)
    assert [t.id for t in short.tasks] == [i for i in listed[:2] if made[i].startswith("report")]
    for bad, error in (({"start": -1}, ValueError), ({"limit": 0}, ValueError),
                       ({"task_type": 3}, TypeError)):
        with pytest.raises(error):
            await find(asyncq_queue, "archived", **bad)


def _row_ids(page: str) -> list[str]:
    return re.findall(r'name="id" value="([^"]+)" form="selection"', page)


async def test_the_queue_page_filters_and_acts_on_selected_tasks(
        web: WebFactory, asyncq_client: Client, asyncq_inspector: Inspector,
        asyncq_worker: WorkerFactory, asyncq_queue: str) -> None:
    made = await _archived_mix(asyncq_client, asyncq_worker, asyncq_queue)
    page = f"/queue?q={asyncq_queue}&state=archived&type=mail&error_contains=timeout"
    async with web() as http:
        shown = await http.get(page)
        ids = _row_ids(shown.text)
        assert sorted(made[i] for i in ids) == ["mail.send/SMTP timeout"] * 2
        assert "2 matching task(s) among archived tasks 1 to 6 of 6" in html.unescape(shown.text)
        assert "run all archived" not in shown.text  # acts on the state, not the filter
        confirm = await http.post("/action/tasks", data={
            "csrf": csrf_token(shown, http), "next": page, "queue": asyncq_queue,
            "action": "run", "id": ids})
        assert confirm.status_code == 200
        assert "run the <b>2</b> selected task(s)" in confirm.text
        assert all(i in confirm.text for i in ids)
        assert 'id="archive-overflow"' not in confirm.text
        gone = next(i for i in made if i not in ids)
        await asyncq_inspector.delete_task(asyncq_queue, gone)
        done = await http.post("/action/tasks", data={
            "csrf": csrf_token(confirm, http), "next": page, "queue": asyncq_queue,
            "action": "run", "id": [*ids, gone], "confirmed": "1"})
        assert flash(done)["ok"] == [
            f"run: 2 of 3 selected task(s) of queue {asyncq_queue}; 1 failed: task "
            f"{gone!r} not found in queue {asyncq_queue!r}"]
        assert done.headers["location"].startswith(f"/queue?q={asyncq_queue}&state=archived")
        assert "type=mail&error_contains=timeout&ok=" in done.headers["location"]  # kept
        nothing = await http.post("/action/tasks", data={
            "csrf": csrf_token(confirm, http), "next": page, "queue": asyncq_queue,
            "action": "delete"})
        assert flash(nothing)["error"] == ["no task selected: tick the tasks first"]
    for task_id in ids:
        assert (await asyncq_inspector.task_info(asyncq_queue, task_id)).state.value == (
            "pending")
