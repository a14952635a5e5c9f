"""Deleting one task is for good, so it asks first, in a real browser: the confirmation names
the task (type, state, queue), Cancel leaves it, Yes deletes it and says so."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from asyncq._errors import TaskNotFoundError
from asyncq.web import create_app
from tests.web.web_helpers import serve, shot

expect = pytest.importorskip("playwright.sync_api").expect


def _state(redis_calls: Callable[..., Any], queue: str, task_id: str) -> str:
    async def read(client: Any, inspector: Any) -> str:
        try:
            return str((await inspector.task_info(queue, task_id)).state.value)
        except TaskNotFoundError:
            return "gone"
    return str(redis_calls(read))


def test_deleting_one_task_asks_first(page: Any, redis_calls: Callable[..., Any],
                                      asyncq_redis_url: str, asyncq_queue: str) -> None:
    queue = asyncq_queue
    info = redis_calls(lambda c, i: c.enqueue("mail.send", None, queue=queue, process_in=3600))
    with serve(create_app(asyncq_redis_url)) as url:
        # from the queue's list: asked, then cancelled
        page.goto(f"{url}/queue?q={queue}&state=scheduled")
        page.click('#tasks button[data-action="delete"]')
        expect(page.locator(".confirm")).to_have_text(
            f"delete task {info.id} (mail.send, scheduled) of queue {queue}? It is deleted "
            "for good.")
        assert _state(redis_calls, queue, info.id) == "scheduled"
        page.click("#cancel")
        expect(page.locator("#tasks")).to_contain_text(info.id)
        # from the task's page: asked, then deleted, the result on the queue's list
        page.goto(f"{url}/task?q={queue}&id={info.id}")
        page.click('button[data-action="delete"]')
        shot(page, "confirm-delete-task")
        assert _state(redis_calls, queue, info.id) == "scheduled"
        page.click("#confirm")
        expect(page.locator(".flash.ok")).to_have_text(f"task {info.id}: delete done")
        expect(page.locator("#tasks")).to_contain_text("no scheduled task")
        assert _state(redis_calls, queue, info.id) == "gone"
        page.goto("about:blank")
    assert not page.dialogs and not page.errors, (page.dialogs, page.errors)
