"""The limits a deferred task waits for, as read from its record: named for people, and only
a concurrency limit (the queue's or a handler's) makes it wait for a slot — a rate limit's
time is when its token is due."""

from __future__ import annotations

import pytest

from asyncq import TaskState
from asyncq._broker._inspect import limits_named
from asyncq._model._message import TaskMessage
from asyncq._model._records import record_info
from asyncq._model._stored import TaskRecord


def test_the_stored_field_names_each_limit() -> None:
    assert limits_named(b"q:,c:gpu,r:api:v2") == (
        "queue concurrency limit", "concurrency limit gpu", "rate limit api:v2")
    assert limits_named(b"c:a,b") == ("concurrency limit a,b",)  # (a comma in a name)
    assert limits_named(None) == limits_named(b"") == ()


@pytest.mark.parametrize(("state", "limited", "waiting"), [
    ("scheduled", ("queue concurrency limit",), True),
    ("scheduled", ("rate limit api", "concurrency limit gpu"), True),
    ("scheduled", ("rate limit api",), False),
    ("scheduled", (), False),
    ("pending", ("queue concurrency limit",), False),  # run since: not held any more
])
def test_only_a_scheduled_task_held_by_a_concurrency_limit_waits_for_a_slot(
        state: str, limited: tuple[str, ...], waiting: bool) -> None:
    msg = TaskMessage(id="t1", type="t", queue="q").encode()
    info = record_info(TaskRecord("t1", msg, b"", state, 0, "", 0, 0, None, 1_700_000_060_000,
                                  queue="q", limited_by=limited), 1_700_000_000_000)
    assert info.state is TaskState(state)
    assert info.waiting_for_slot is waiting
    assert info.limited_by == (limited if state == "scheduled" else ())
