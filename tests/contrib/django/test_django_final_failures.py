"""``task_finished`` for a call that fails for good while its backend allows retries
(``MAX_RETRY`` 2): through ``SkipRetry``, and through an error its definition's ``retry_on``
does not list (D2 of issue 38: no signal was sent, as if the call would be retried)."""

from __future__ import annotations

import os
from typing import Any

import pytest

pytest.importorskip("django")

from tests.contrib.django.harness import WAIT, Shop, cli_worker, manage_worker
from tests.helpers.polling import poll_until


def _finished(shop: Shop, result_id: str) -> dict[str, Any]:
    """The call's ``task_finished`` signal, once sent (and the call FAILED as stored)."""
    from asyncq.contrib.django._compat import task_backends

    backend = task_backends["patient"]
    poll_until(lambda: backend.get_result(result_id).status == "FAILED", timeout=WAIT,
               message="the call FAILED")
    poll_until(lambda: any(s["signal"] == "task_finished" for s in shop.signals(result_id)),
               timeout=WAIT, message=lambda: f"task_finished for {result_id}: got "
               f"{[s['signal'] for s in shop.signals(result_id)]}")
    [finished] = [s for s in shop.signals(result_id) if s["signal"] == "task_finished"]
    return finished


def test_skip_retry_finishes_the_call_failed_at_once(shop: Shop) -> None:
    from shop.tasks import give_up

    result_id = give_up.enqueue("E-5").id
    with manage_worker(["--backend", "patient"], shop.tmp / "patient.log", os.environ):
        finished = _finished(shop, result_id)

    assert (finished["status"], finished["errors"]) == ("FAILED", ["asyncq._errors.SkipRetry"])
    assert [s["signal"] for s in shop.signals(result_id)] == [
        "task_enqueued", "task_started", "task_finished"]


def test_an_error_retry_on_does_not_list_finishes_the_call_failed_at_once(shop: Shop) -> None:
    """Plain ``asyncq worker`` running the project's ServeMux (``shop.asyncq_app``), where
    ``register`` gave ``send_mail`` its definition's ``retry_on=ConnectionError``: a
    ValueError ends the call."""
    from shop.tasks import send_mail

    result_id = send_mail.enqueue("F-6").id
    with cli_worker(["shop.asyncq_app:mux", "-u", os.environ["SHOP_REDIS_URL"],
                     "-q", f"{os.environ['SHOP_PATIENT_QUEUE']}=1"],
                    shop.tmp / "patient-cli.log", os.environ):
        finished = _finished(shop, result_id)

    assert (finished["status"], finished["errors"]) == ("FAILED", ["builtins.ValueError"])
    started = [s for s in shop.signals(result_id) if s["signal"] == "task_started"]
    assert len(started) == 1  # one run: not retried
