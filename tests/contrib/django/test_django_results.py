"""``get_result`` of a call that returned ``None``: SUCCESSFUL with ``None`` and its arguments,
read back by a status view (D1 of issue 38: it raised ``DecodeError``, a 500, while only the
task's completion mark was left, then ``TaskResultDoesNotExist``)."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("django")

from tests.contrib.django.harness import WAIT, Shop


def test_a_task_that_returns_none_reads_successful_with_its_arguments(shop: Shop) -> None:
    started = shop.get("/forget?order=C-3")

    done = shop.finished(started["id"])

    assert done["status"] == "SUCCESSFUL"
    assert done["return_value"] is None
    assert done["args"] == ["C-3"]
    assert done["errors"] == []


def test_a_call_kept_only_as_a_completion_mark_does_not_exist(shop: Shop) -> None:
    """Enqueued by another door (asyncq's own client, no retention), a call that returned
    ``None`` leaves only a completion mark, which names no task: it does not exist for the
    framework (not a DecodeError)."""
    from asyncq import SyncClient
    from asyncq.contrib.django._compat import TaskResultDoesNotExist, task_backends

    with SyncClient(os.environ["SHOP_REDIS_URL"]) as client:
        info = client.enqueue("shop.tasks.forget", {"args": ["D-4"], "kwargs": {}},
                              queue=os.environ["SHOP_QUEUE"], max_retry=0)
        assert client.result(info.id, queue=info.queue, timeout=WAIT) is None

    with pytest.raises(TaskResultDoesNotExist):
        task_backends["default"].get_result(info.id)
