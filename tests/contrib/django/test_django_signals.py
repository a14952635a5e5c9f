"""The Tasks framework's signals with asyncq: ``task_enqueued`` where a call is enqueued,
``task_started`` and ``task_finished`` in the worker around each run, with the sender and
``task_result`` the framework's own backends send. The project's receivers
(tests/contrib/django/project/shop/signals.py) record each one, using the database as they
do so."""

from __future__ import annotations

import os
from contextlib import suppress
from typing import Any

import pytest

pytest.importorskip("django")

from tests.contrib.django.harness import WAIT, Shop, manage_worker
from tests.helpers.polling import poll_until

SENDER = "asyncq.contrib.django._backend.AsyncqBackend"


def _all_signals(shop: Shop, result_id: str) -> list[dict[str, Any]]:
    """The task's three signals: ``task_enqueued`` (sent by the enqueuing process once the
    enqueue returned: an idle worker may have run the task by then), then ``task_started`` and
    ``task_finished`` in the worker's order (the finished one may land just after the result
    is read)."""
    with suppress(TimeoutError):  # the caller's assertions say what is missing
        poll_until(lambda: len(shop.signals(result_id)) >= 3, timeout=WAIT,
                   message="three signals")
    return sorted(shop.signals(result_id), key=lambda s: s["signal"] != "task_enqueued")


def test_a_sync_task_sends_enqueued_started_and_finished(shop: Shop) -> None:
    started = shop.get("/add?a=2&b=3&priority=4")
    shop.finished(started["id"])

    enqueued, running, finished = _all_signals(shop, started["id"])

    assert [s["signal"] for s in (enqueued, running, finished)] == [
        "task_enqueued", "task_started", "task_finished"]
    assert {s["sender"] for s in (enqueued, running, finished)} == {SENDER}
    assert enqueued["pid"] == os.getpid() and enqueued["status"] == "READY"
    worker_pid = running["pid"]
    assert worker_pid != os.getpid() and finished["pid"] == worker_pid
    assert (running["status"], running["started"], running["finished"]) == (
        "RUNNING", True, False)
    assert (finished["status"], finished["return_value"], finished["finished"]) == (
        "SUCCESSFUL", 5, True)
    assert not running["main_thread"]  # sync receivers run in the task's worker thread
    for s in (enqueued, running, finished):
        assert (s["task"], s["args"], s["priority"], s["backend"]) == (
            "shop.tasks.add", [2, 3], 4, "default")
        assert s["queue_name"] == os.environ["SHOP_QUEUE"]


def test_a_failing_task_finishes_failed_with_its_exception(shop: Shop) -> None:
    started = shop.get("/refund?order=B-2")
    shop.finished(started["id"])

    signals = _all_signals(shop, started["id"])

    assert [s["signal"] for s in signals] == ["task_enqueued", "task_started", "task_finished"]
    assert signals[1]["pid"] == signals[2]["pid"] != os.getpid()
    finished = signals[-1]
    assert finished["status"] == "FAILED"
    assert finished["errors"] == ["shop.tasks.OutOfStockError"]


def test_an_async_task_and_an_async_enqueue_send_them_too(shop: Shop) -> None:
    """``aenqueue`` and an async task send with ``asend``: the project's sync receivers run in
    a thread, so their database query is allowed (in the event loop it would raise)."""
    started = shop.get("/greet?name=bo")
    shop.finished(started["id"])

    signals = _all_signals(shop, started["id"])

    assert [s["signal"] for s in signals] == ["task_enqueued", "task_started", "task_finished"]
    assert signals[-1]["return_value"] == {"greeting": "hello bo"}
    assert signals[-1]["status"] == "SUCCESSFUL"


def test_a_task_past_its_time_limit_finishes_failed_with_a_timeout(shop: Shop) -> None:
    """The "brief" backend's 1-second limit: an async task is cancelled at it, a sync one's
    thread runs on; either way ``task_finished`` says FAILED with a TimeoutError, as the
    worker records it and ``get_result`` reads it."""
    from shop.tasks import anap, nap

    from asyncq.contrib.django._compat import task_backends

    backend = task_backends["brief"]
    ids = [anap.enqueue(3).id, nap.enqueue(1.5).id]
    with manage_worker(["--backend", "brief"], shop.tmp / "brief.log", os.environ):
        finished = [_all_signals(shop, i)[-1] for i in ids]
    for result_id, signal in zip(ids, finished, strict=True):
        assert signal["signal"] == "task_finished", signal
        assert (signal["status"], signal["errors"]) == ("FAILED", ["builtins.TimeoutError"])
        stored = backend.get_result(result_id)
        assert stored.status == "FAILED"
        assert stored.errors[0].exception_class_path == "builtins.TimeoutError"
