"""Operating real worker processes from the dashboard in a real browser: cancel a running task,
pause a queue so its worker stops taking its tasks (and unpause it), and a state-changing
request without the page's CSRF token refused (a forged token, a form on another origin)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal
from starlette.applications import Starlette
from starlette.responses import HTMLResponse
from starlette.routing import Route

from asyncq.web import create_app
from tests.helpers.processes import worker_process
from tests.web.web_helpers import serve, shot

expect = pytest.importorskip("playwright.sync_api").expect


@contextmanager
def running_worker(portal: BlockingPortal, url: str, queue: str, log: Path,
                   *extra: str) -> Iterator[None]:
    """A ``python -m asyncq worker tests.apps.slow:mux`` process serving ``queue``."""
    with portal.wrap_async_context_manager(worker_process(url, queue, log, *extra)):
        yield


def test_cancel_a_running_task(page: Any, portal: BlockingPortal,
                               redis_calls: Callable[..., Any], asyncq_redis_url: str,
                               asyncq_queue: str, tmp_path: Path) -> None:
    queue = asyncq_queue
    info = redis_calls(lambda c, i: c.enqueue("slow:block", None, queue=queue, max_retry=3))
    with serve(create_app(asyncq_redis_url)) as url, running_worker(
            portal, asyncq_redis_url, queue, tmp_path / "worker.log"):
        page.goto(f"{url}/queue?q={queue}&state=active")
        page.wait_for_selector("#live-status.on")
        # the worker picks the task up: the live active list shows it without a reload
        expect(page.locator(f'#active-rows a:text-is("{info.id}")')).to_be_visible()
        shot(page, "active")
        page.click(f'#active-rows a:text-is("{info.id}")')
        expect(page.locator("#task-state")).to_have_text("active")
        page.click('button[data-action="cancel"]')
        expect(page.locator(".flash.ok")).to_contain_text(
            f"cancellation recorded for running task {info.id}")
        final = redis_calls(lambda c, i: c.wait(info.id, queue=queue, timeout=30))
        assert final.state.value == "archived" and final.retried == 0  # no retry after cancel
        assert "cancel" in (final.last_error or "").lower()
        page.reload()
        expect(page.locator("#task-state")).to_have_text("archived")
        page.goto("about:blank")
    assert not page.dialogs and not page.errors, (page.dialogs, page.errors)


def test_a_paused_queue_stops_feeding_its_worker(page: Any, portal: BlockingPortal,
                                                 redis_calls: Callable[..., Any],
                                                 asyncq_redis_url: str, asyncq_queue: str,
                                                 tmp_path: Path) -> None:
    paused, other = f"{asyncq_queue}-hot", asyncq_queue
    first = redis_calls(lambda c, i: c.enqueue("slow:echo", 0, queue=paused, retention=60))
    with serve(create_app(asyncq_redis_url)) as url, running_worker(
            portal, asyncq_redis_url, other, tmp_path / "worker.log",
            "--queue", f"{paused}=2", "--strict"):
        done = redis_calls(lambda c, i: c.wait(first, queue=paused, timeout=30))
        assert done.state.value == "completed"  # the worker takes the queue's tasks
        page.goto(url + "/")
        page.click(f'tr[data-queue="{paused}"] button[data-action="pause"]')
        expect(page.locator(".flash.ok")).to_contain_text(f"queue {paused} paused")
        held = [redis_calls(lambda c, i, n=n: c.enqueue("slow:echo", n, queue=paused,
                                                         retention=60)) for n in range(3)]
        # strict priority: the worker tries the paused queue before this one, so once this
        # task is done it has passed the paused queue by without taking anything from it
        probe = redis_calls(lambda c, i: c.enqueue("slow:echo", "probe", queue=other,
                                                    retention=60))
        assert redis_calls(lambda c, i: c.wait(probe, queue=other, timeout=30)).state.value \
            == "completed"
        states = [redis_calls(lambda c, i, t=t: i.task_info(paused, t.id)).state.value
                  for t in held]
        assert states == ["pending"] * 3
        page.goto(url + "/")
        row = f'tr[data-queue="{paused}"]'
        expect(page.locator(f'{row} [data-field="paused"]')).to_have_text("paused")
        expect(page.locator(f'{row} [data-field="pending"]')).to_have_text("3")
        shot(page, "paused")
        page.click(f'{row} button[data-action="unpause"]')
        expect(page.locator(".flash.ok")).to_contain_text(f"queue {paused} unpaused")
        for task in held:  # the worker takes them again
            done = redis_calls(lambda c, i, t=task: c.wait(t, queue=paused, timeout=30))
            assert done.state.value == "completed"
        expect(page.locator(f'{row} [data-field="pending"]')).to_have_text("0")
        page.goto("about:blank")
    assert not page.dialogs and not page.errors, (page.dialogs, page.errors)


def test_state_changes_without_the_page_token_are_refused(
        page: Any, redis_calls: Callable[..., Any], asyncq_redis_url: str,
        asyncq_queue: str) -> None:
    queue = asyncq_queue
    info = redis_calls(lambda c, i: c.enqueue("t", None, queue=queue, process_in=3600))
    with serve(create_app(asyncq_redis_url)) as url:
        # a forged token in the page's own form
        page.goto(f"{url}/task?q={queue}&id={info.id}")
        page.eval_on_selector_all("input[name=csrf]", "els => els.forEach(e => e.value = 'x')")
        page.click('button[data-action="delete"]')
        assert "CSRF token missing or wrong" in page.inner_text("body")
        # a page on another origin posting a form to the dashboard: refused for its Origin
        # (and the attacker could not know the token anyway)
        attack = (f'<form method="post" action="{url}/action/task">'
                  f'<input type="hidden" name="action" value="delete">'
                  f'<input type="hidden" name="queue" value="{queue}">'
                  f'<input type="hidden" name="id" value="{info.id}">'
                  f'<button id="go">win a prize</button></form>')
        evil = Starlette(routes=[Route("/", lambda request: HTMLResponse(attack))])
        with serve(evil) as evil_url:
            page.goto(evil_url + "/")
            page.click("#go")
            page.wait_for_url(f"{url}/action/task")
            assert "cross-origin request refused: it comes from " + evil_url in (
                page.inner_text("body"))
        task = redis_calls(lambda c, i: i.task_info(queue, info.id))
        assert task.state.value == "scheduled"  # nothing changed
        page.goto("about:blank")
