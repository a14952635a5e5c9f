"""Archiving from the dashboard never deletes silently: the archive keeps at most
ARCHIVE_MAX_SIZE tasks per queue, so archiving into a full archive deletes its oldest tasks;
the confirmation page says how many will go (bulk, and single when one goes), and the result
how many went."""

from __future__ import annotations

import html
import re

import pytest

from asyncq import Client, Inspector, Task
from asyncq._defaults import ARCHIVE_MAX_SIZE
from tests.web.test_web_actions import flash
from tests.web.web_helpers import WebFactory, csrf_token, post_action

pytestmark = pytest.mark.anyio


def _overflow_text(page: str) -> str:
    match = re.search(r'id="archive-overflow">(.*?)</p>', page, re.S)
    assert match, "the confirmation page says nothing of the archive limits"
    return html.unescape(re.sub(r"<[^>]+>", "", match.group(1)))


async def test_archiving_into_a_full_archive_says_what_the_cap_deletes(
        web: WebFactory, asyncq_client: Client, asyncq_inspector: Inspector,
        asyncq_queue: str) -> None:
    queue = asyncq_queue
    await asyncq_client.enqueue_many([Task("t", i, queue=queue) for i in range(ARCHIVE_MAX_SIZE)])
    assert await asyncq_inspector.archive_all(queue, "pending") == ARCHIVE_MAX_SIZE
    await asyncq_client.enqueue_many([Task("t", i, queue=queue, process_in=3600)
                                      for i in range(3)])
    page = f"/queue?q={queue}&state=scheduled"
    async with web() as http:
        confirm = await post_action(http, page, "/action/state", action="archive",
                                    queue=queue, state="scheduled")
        assert confirm.status_code == 200 and "archive all <b>3</b> scheduled" in confirm.text
        said = _overflow_text(confirm.text)
        assert "deletes the 3 oldest archived task(s)" in said
        assert f"at most {ARCHIVE_MAX_SIZE} tasks, none older than 90.0 d (the defaults)" in said
        done = await http.post("/action/state", data={
            "csrf": csrf_token(confirm, http), "next": page, "action": "archive",
            "queue": queue, "state": "scheduled", "confirmed": "1"})
        assert flash(done)["ok"] == [
            f"archive: 3 scheduled task(s) of queue {queue}; the archive limits deleted the 3 "
            f"oldest archived task(s)"]
        shown = await http.get(done.headers["location"])
        assert "deleted the 3 oldest archived task(s)" in html.unescape(shown.text)

        one = await asyncq_client.enqueue("t", None, queue=queue, process_in=3600)
        # one task into the full archive: asked first, saying the oldest archived one goes
        asked = await post_action(http, f"/task?q={queue}&id={one.id}", "/action/task",
                                  action="archive", queue=queue, id=one.id)
        assert asked.status_code == 200
        assert f"archive task {one.id} (t, scheduled) of queue {queue}?" in html.unescape(
            re.sub(r"<[^>]+>", "", asked.text))
        assert "archiving it deletes the 1 oldest archived task(s)" in _overflow_text(
            asked.text)
        assert (await asyncq_inspector.task_info(queue, one.id)).state.value == "scheduled"
        single = await post_action(http, f"/task?q={queue}&id={one.id}", "/action/task",
                                   action="archive", queue=queue, id=one.id, confirmed="1")
        assert flash(single)["ok"] == [
            f"task {one.id}: archive done; the archive limits deleted the 1 oldest archived "
            f"task(s)"]
    assert (await asyncq_inspector.queue_info(queue)).archived == ARCHIVE_MAX_SIZE


async def test_archiving_with_room_says_nothing_is_deleted(
        web: WebFactory, asyncq_client: Client, asyncq_inspector: Inspector,
        asyncq_queue: str) -> None:
    for i in range(2):
        await asyncq_client.enqueue("t", i, queue=asyncq_queue)
    page = f"/queue?q={asyncq_queue}&state=pending"
    async with web() as http:
        confirm = await post_action(http, page, "/action/state", action="archive",
                                    queue=asyncq_queue, state="pending")
        assert _overflow_text(confirm.text).startswith("No archived task will be deleted")
        # other bulk actions delete nothing from the archive: no such note
        run = await post_action(http, page, "/action/state", action="delete",
                                queue=asyncq_queue, state="pending")
        assert 'id="archive-overflow"' not in run.text
    assert await asyncq_inspector.archive_overflow(asyncq_queue, ARCHIVE_MAX_SIZE + 5) == 5
    with pytest.raises(ValueError, match="adding"):
        await asyncq_inspector.archive_overflow(asyncq_queue, -1)
