"""The Django Tasks backend in a real Django project (tests/contrib/django/project): views
enqueue through ``AsyncqBackend`` and read results back, while ``manage.py asyncq_worker``, a
separate process, runs the project's ``@task`` functions."""

from __future__ import annotations

import os
import uuid
import warnings
from datetime import datetime
from typing import Any

import pytest

pytest.importorskip("django")

from tests.contrib.django.harness import CONCURRENCY, WAIT, Shop
from tests.helpers.polling import poll_until


def test_a_sync_view_enqueues_and_the_worker_returns_the_value(shop: Shop) -> None:
    started = shop.get("/add?a=2&b=40")
    assert started["status"] == "READY"

    done = shop.finished(started["id"])

    assert done["status"] == "SUCCESSFUL"
    assert done["return_value"] == 42
    assert done["args"] == [2, 40]
    assert done["errors"] == []


def test_an_async_view_enqueues_an_async_task_and_reads_it_async(shop: Shop) -> None:
    started = shop.get("/greet?name=ada")

    done = shop.finished(started["id"], view="aresult")

    assert done["status"] == "SUCCESSFUL"
    assert done["return_value"] == {"greeting": "hello ada"}


def test_a_task_that_raises_is_failed_with_its_exception(shop: Shop) -> None:
    started = shop.get("/refund?order=A-17")

    done = shop.finished(started["id"])

    assert done["status"] == "FAILED"
    [error] = done["errors"]
    assert error["class"] == "shop.tasks.OutOfStockError"
    assert "order A-17 cannot be refunded" in error["traceback"]
    assert "return_value" not in done


def test_run_after_waits_scheduled_then_runs(shop: Shop) -> None:
    started = shop.get("/add-later?in=1.5")

    waiting = shop.get(f"/result/{started['id']}")
    assert waiting["status"] == "READY"
    done = shop.finished(started["id"])

    assert done["status"] == "SUCCESSFUL"
    assert done["return_value"] == 3
    assert datetime.fromisoformat(done["started_at"]) >= datetime.fromisoformat(
        done["run_after"])


def test_a_task_uses_the_database_in_the_worker(shop: Shop) -> None:
    done = shop.finished(shop.get("/count")["id"])

    assert done["status"] == "SUCCESSFUL"
    assert isinstance(done["return_value"], int)


def test_sync_tasks_run_as_many_at_once_as_the_worker_concurrency(shop: Shop) -> None:
    folder = shop.tmp / "rendezvous"
    folder.mkdir()
    ids = [shop.get(f"/rendezvous?folder={folder}&parties={CONCURRENCY}")["id"]
           for _ in range(CONCURRENCY)]

    done = [shop.finished(result_id) for result_id in ids]

    assert [d["status"] for d in done] == ["SUCCESSFUL"] * CONCURRENCY, done[0]["errors"]


def test_a_task_that_takes_context_gets_its_result_id_and_attempt(shop: Shop) -> None:
    started = shop.get("/whoami?tag=t1")

    done = shop.finished(started["id"])

    assert done["return_value"] == {"id": started["id"], "attempt": 1, "tag": "t1"}


def test_a_forked_child_enqueues_without_its_parents_loop(shop: Shop) -> None:
    # A pre-fork server (gunicorn) forks after the app enqueued: the child has no copy of the
    # parent's loop thread and must start its own instead of waiting on the parent's.
    shop.finished(shop.get("/add?a=1&b=1")["id"])
    read, write = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # (fork of a threaded process)
        pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.write(write, shop.get("/add?a=20&b=22")["id"].encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    try:
        done = poll_until(lambda: (r := os.waitpid(pid, os.WNOHANG))[0] and r, timeout=WAIT,
                          message="the forked child's enqueue did not return")
    except TimeoutError:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        raise
    with os.fdopen(read) as pipe:
        result_id = pipe.read()
    assert os.waitstatus_to_exitcode(done[1]) == 0

    assert shop.finished(result_id)["return_value"] == 42


def test_arguments_that_are_not_json_are_refused_at_enqueue(shop: Shop) -> None:
    from shop.tasks import add

    with pytest.raises(TypeError, match="must be JSON values"):
        add.enqueue(object(), 1)


def test_an_unknown_result_id_does_not_exist(shop: Shop) -> None:
    from asyncq.contrib.django._compat import TaskResultDoesNotExist, task_backends

    with pytest.raises(TaskResultDoesNotExist):
        task_backends["default"].get_result(str(uuid.uuid4()))


@pytest.mark.parametrize(("params", "says"), [
    ({"QUEUES": ["default"], "OPTIONS": {}}, r"needs OPTIONS\['URL'\]"),
    ({"OPTIONS": {"URL": "redis://localhost", "RETRIES": 3}}, r"unknown keys \['RETRIES'\]"),
    ({"QUEUES": ["wf:x"], "OPTIONS": {"URL": "redis://localhost"}}, "reserved for workflows"),
])
def test_a_bad_backend_configuration_says_what_to_fix(params: dict[str, Any], says: str) -> None:
    from django.core.exceptions import ImproperlyConfigured

    from asyncq.contrib.django import AsyncqBackend

    with pytest.raises(ImproperlyConfigured, match=says):
        AsyncqBackend("default", params)
