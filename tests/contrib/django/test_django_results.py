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


def test_a_call_enqueued_by_another_door_is_kept_as_one_enqueued_by_django(shop: Shop) -> None:
    """Enqueued by asyncq's own client without a retention, a call that returned ``None`` is
    kept as the framework's own calls are (the worker applies the task's registration, not
    the door's options): SUCCESSFUL with ``None``, not a bare completion mark."""
    from asyncq import SyncClient
    from asyncq.contrib.django._compat import task_backends

    with SyncClient(os.environ["SHOP_REDIS_URL"]) as client:
        info = client.enqueue("shop.tasks.forget", {"args": ["D-4"], "kwargs": {}},
                              queue=os.environ["SHOP_QUEUE"])
        assert client.result(info.id, queue=info.queue, timeout=WAIT) is None

    result = task_backends["default"].get_result(info.id)
    assert result.status == "SUCCESSFUL"
    assert result.return_value is None
    assert result.args == ["D-4"]
