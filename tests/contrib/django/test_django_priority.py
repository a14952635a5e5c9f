"""Django task priorities on asyncq: each priority band of a queue is an asyncq queue
(``<queue>:<band>``) and ``manage.py asyncq_worker`` serves the higher bands first."""

from __future__ import annotations

import os
from typing import Any

import pytest

pytest.importorskip("django")

from tests.contrib.django.harness import Shop, manage_worker


def test_higher_priorities_run_first_once_a_worker_starts(shop: Shop) -> None:
    """Calls enqueued while no worker serves their queue, lowest first; a worker with one
    slot then runs them by band, highest first, and in enqueue order within a band."""
    order = shop.tmp / "ranked-order.txt"
    calls = [("low-a", -10), ("plain", 0), ("high", 10), ("urgent", 80), ("low-b", -5),
             ("urgent-edge", 50)]
    ids = {label: shop.get(f"/mark?path={order}&label={label}&priority={priority}")["id"]
           for label, priority in calls}
    waiting = shop.get(f"/ranked-result/{ids['urgent']}")
    assert (waiting["status"], waiting["priority"]) == ("READY", 80)
    assert waiting["queue_name"] == os.environ["SHOP_RANKED_QUEUE"]  # not its band's queue

    with manage_worker(["--backend", "ranked", "-c", "1"], shop.tmp / "ranked.log",
                       os.environ):
        done = {label: shop.finished(i, view="ranked-result") for label, i in ids.items()}

    assert order.read_text().split() == ["urgent", "urgent-edge", "high", "plain", "low-a",
                                         "low-b"]
    assert {label: d["status"] for label, d in done.items()} == dict.fromkeys(
        ids, "SUCCESSFUL")
    assert done["low-a"]["priority"] == -10 and done["urgent"]["priority"] == 80


def test_a_prioritised_call_on_the_default_bands_runs_and_keeps_its_priority(
    shop: Shop,
) -> None:
    """The default backend has the default bands (high >= 1, low <= -1), all served by the
    session's worker; the result names the Django queue and the priority it was given."""
    done = shop.finished(shop.get("/add?a=1&b=2&priority=7")["id"])

    assert (done["status"], done["return_value"], done["priority"]) == ("SUCCESSFUL", 3, 7)
    assert done["queue_name"] == os.environ["SHOP_QUEUE"]


@pytest.mark.parametrize(("priority", "queue"), [
    (100, "q:urgent"), (50, "q:urgent"), (49, "q:high"), (1, "q:high"), (0, "q"),
    (-1, "q:low"), (-49, "q:low"), (-50, "q:bulk"), (-100, "q:bulk"),
])
def test_a_priority_goes_to_the_most_extreme_band_it_reaches(priority: int, queue: str) -> None:
    from asyncq.contrib.django._priority import parse_priorities

    bands = parse_priorities({"urgent": 50, "high": 1, "low": -1, "bulk": -50}, {"q"})

    assert bands.queue_for("q", priority) == queue
    assert bands.queues_of("q") == ["q:urgent", "q:high", "q", "q:low", "q:bulk"]


def test_the_worker_serves_bands_strictly_or_weighted() -> None:
    from asyncq.contrib.django._priority import DEFAULT_PRIORITIES, parse_priorities

    bands = parse_priorities(DEFAULT_PRIORITIES, {"mail", "pdf"})
    queues = {"mail": 2, "pdf": 1}

    # Strict: every high band before every default one; the weights order queues in a band.
    strict = bands.served(queues, strict=True)
    assert list(strict) == ["mail:high", "pdf:high", "mail", "pdf", "mail:low", "pdf:low"]
    # Weighted: 3x per band above the lowest, times the queue's weight.
    assert bands.served(queues, strict=False) == {
        "mail:high": 18, "pdf:high": 9, "mail": 6, "pdf": 3, "mail:low": 2, "pdf:low": 1}


def test_the_backend_supports_priority_unless_its_bands_are_turned_off(shop: Shop) -> None:
    from shop.tasks import add

    from asyncq.contrib.django import AsyncqBackend
    from asyncq.contrib.django._compat import InvalidTaskError, task_backends

    assert task_backends["default"].supports_priority is True
    flat = AsyncqBackend("flat", {"QUEUES": [os.environ["SHOP_QUEUE"]],
                                  "OPTIONS": {"URL": "redis://localhost", "PRIORITIES": {}}})
    assert flat.supports_priority is False
    with pytest.raises(InvalidTaskError, match="priority"):
        flat.validate_task(add.using(priority=10))
    flat.validate_task(add)  # (the default priority is fine)


@pytest.mark.parametrize(("priorities", "says"), [
    ({"high": 0}, r"other than 0"),
    ({"high": 101}, r"between -100 and 100"),
    ({"high": True}, r"whole number"),
    ({"high": 1.5}, r"whole number"),
    ({"high": 5, "up": 5}, r"two bands start at 5"),
    ({"hi\nGH": 5}, r"control characters"),
    ({"": 5}, r"non-empty"),
    (["high"], r"must map band names"),
])
def test_bad_priorities_say_what_to_fix(priorities: Any, says: str) -> None:
    from django.core.exceptions import ImproperlyConfigured

    from asyncq.contrib.django import AsyncqBackend

    with pytest.raises(ImproperlyConfigured, match=says):
        AsyncqBackend("default", {"QUEUES": ["q"], "OPTIONS": {"URL": "redis://localhost",
                                                                "PRIORITIES": priorities}})


def test_a_band_that_is_also_a_queue_is_refused() -> None:
    from django.core.exceptions import ImproperlyConfigured

    from asyncq.contrib.django import AsyncqBackend

    with pytest.raises(ImproperlyConfigured, match="also one of the QUEUES"):
        AsyncqBackend("default", {"QUEUES": ["mail", "mail:high"],
                                  "OPTIONS": {"URL": "redis://localhost"}})



def test_the_worker_command_takes_django_queues_not_their_bands(shop: Shop) -> None:
    from django.core.management import CommandError, call_command

    band = f"{os.environ['SHOP_QUEUE']}:high"
    with pytest.raises(CommandError, match="priority bands are served with them"):
        call_command("asyncq_worker", "--queue", band)
