"""``expires_in``/``expires_at``: validated at enqueue with a message saying what to do, merged
"last wins" like ``process_in``/``process_at``, stored in the message, and a handler's default
(``mux.handle(..., expires_in=...)``) resolved from the task's enqueue time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from asyncq import ServeMux, Task
from asyncq._model._enqueue import prepare
from asyncq._model._info import TaskState, task_info
from asyncq._model._message import TaskMessage, decode_message
from asyncq._model._rules import HandlerRules, apply_rules, expired_reason, expiry_of
from asyncq._worker._mux import RulesCache
from asyncq._workflow._canvas import check_step_options

NOW = 1_750_000_000_000  # Unix ms
NOW_DT = datetime.fromtimestamp(NOW / 1000, UTC)


def expiry(**options: Any) -> int:
    return prepare(Task("t"), options, NOW).msg.expires_at_ms


def test_expires_in_counts_from_the_enqueue_and_expires_at_is_a_time() -> None:
    assert expiry(expires_in=5) == NOW + 5000
    assert expiry(expires_in=timedelta(minutes=5)) == NOW + 300_000
    assert expiry(expires_in=0.0001) == NOW + 1  # never 0: that would mean "none"
    assert expiry(expires_at=NOW_DT + timedelta(hours=1)) == NOW + 3_600_000
    assert expiry() == 0 and expiry(expires_in=None) == 0


@pytest.mark.parametrize(("options", "error", "says"), [
    ({"expires_at": NOW_DT}, ValueError, "is not in the future: the task would never run; "
                                         "give a later time"),
    ({"expires_at": NOW_DT - timedelta(days=1)}, ValueError, "not in the future"),
    ({"expires_at": datetime(2030, 1, 1)}, ValueError, "must be timezone-aware"),
    ({"expires_at": 5}, TypeError, "expires_at must be a datetime"),
    ({"expires_in": 0}, ValueError, "expires_in must be more than 0 seconds"),
    ({"expires_in": -3}, ValueError, "leave it out for no expiry"),
    ({"expires_in": timedelta(seconds=-1)}, ValueError, "more than 0 seconds"),
    ({"expires_in": "5m"}, TypeError, "expires_in must be seconds"),
    ({"expires_in": float("nan")}, ValueError, "finite"),
    ({"expires_in": 5, "expires_at": NOW_DT + timedelta(hours=1)}, ValueError,
     "give either expires_at (a time) or expires_in (seconds from now), not both"),
    ({"expires_in": 5, "process_in": 10}, ValueError,
     "would expire (2025-06-15T15:06:45+00:00) before it is due"),
    ({"expires_in": 10, "process_in": 10}, ValueError, "before it is due"),
    ({"expires_in": 10 * 365 * 86400 * 1000 - 1}, ValueError, "after the year 9999"),
])
def test_a_bad_expiry_is_refused_at_enqueue_saying_what_to_do(
        options: dict[str, Any], error: type[Exception], says: str) -> None:
    with pytest.raises(error) as raised:
        expiry(**options)
    assert says in str(raised.value)


def test_an_expiry_after_the_scheduled_time_is_fine() -> None:
    new = prepare(Task("t"), {"process_in": 10, "expires_in": 10.001}, NOW)
    assert (new.process_at_ms, new.msg.expires_at_ms) == (NOW + 10_000, NOW + 10_001)


def test_the_later_of_the_two_options_wins_as_for_process_at_and_in() -> None:
    task = Task("t", expires_at=NOW_DT + timedelta(hours=1))
    assert prepare(task, {"expires_in": 5}, NOW).msg.expires_at_ms == NOW + 5000
    task = Task("t", expires_in=5)
    assert prepare(task, {"expires_at": NOW_DT + timedelta(hours=1)},
                   NOW).msg.expires_at_ms == NOW + 3_600_000


def test_the_message_carries_the_expiry_only_when_set() -> None:
    msg = prepare(Task("t", expires_in=5), {}, NOW).msg
    raw = msg.encode()
    assert b'"enqueued_at":%d,"expires":%d' % (NOW, NOW + 5000) in raw
    assert decode_message(raw).expires_at_ms == NOW + 5000
    plain = prepare(Task("t"), {}, NOW).msg.encode()
    assert b"expires" not in plain and decode_message(plain).expires_at_ms == 0


def test_task_info_shows_the_expiry_that_applies() -> None:
    own = TaskMessage(id="a", type="t", queue="q", enqueued_at_ms=NOW, expires_at_ms=NOW + 1000)
    plain = TaskMessage(id="b", type="t", queue="q", enqueued_at_ms=NOW)
    rules = HandlerRules(expires_ms=60_000)
    assert task_info(own, b"", TaskState.PENDING, rules=rules).expires_at == (
        NOW_DT + timedelta(seconds=1))  # the producer's wins
    assert task_info(plain, b"", TaskState.PENDING, rules=rules).expires_at == (
        NOW_DT + timedelta(minutes=1))
    assert task_info(plain, b"", TaskState.PENDING).expires_at is None


def test_a_handler_default_counts_from_the_enqueue_time() -> None:
    mux = ServeMux()
    mux.handle("push:", lambda t: None, expires_in=timedelta(minutes=5))
    mux.handle("push:slow", lambda t: None, max_retry=1)  # an exact match: no expiry of its own
    rules = RulesCache(mux)
    msg = TaskMessage(id="a", type="push:send", queue="q", enqueued_at_ms=NOW)
    assert expiry_of(msg, rules("push:send")) == NOW + 300_000
    assert expiry_of(msg, rules("push:slow")) == 0
    assert apply_rules(msg, rules("push:send")).expires_at_ms == NOW + 300_000
    own = TaskMessage(id="b", type="push:send", queue="q", enqueued_at_ms=NOW,
                      expires_at_ms=NOW + 1)
    assert expiry_of(own, rules("push:send")) == NOW + 1
    assert mux.published_rules()["push:"] == {"expires_ms": 300_000}
    assert HandlerRules.from_published({"expires_ms": 300_000}).expires_ms == 300_000


def test_a_nested_mux_inherits_the_expiry_of_its_registration() -> None:
    inner = ServeMux()
    inner.handle("img:resize", lambda t: None, max_retry=2)
    outer = ServeMux()
    outer.handle("img:", inner, expires_in=30)
    found = outer.rules_for("img:resize")
    assert found is not None and (found.max_retry, found.expires_ms) == (2, 30_000)


@pytest.mark.parametrize(("value", "error"), [
    (0, ValueError), (-1, ValueError), ("soon", TypeError), (True, TypeError)])
def test_a_bad_handler_expiry_fails_at_registration(value: object,
                                                    error: type[Exception]) -> None:
    mux = ServeMux()
    with pytest.raises(error, match="expires_in"):
        mux.handle("t", lambda t: None, expires_in=value)  # type: ignore[arg-type]
    with pytest.raises(error, match="expires_in"):
        mux.handler("t", expires_in=value)  # type: ignore[arg-type]
    with pytest.raises(error, match="expires_in"):
        mux.task("t", expires_in=value)


def test_a_typed_task_takes_expires_in_as_its_handlers_and_options_per_enqueue() -> None:
    mux = ServeMux()

    @mux.task("notify", expires_in=300, queue="push")
    async def notify(user: int) -> None: ...

    assert notify.rules is not None and notify.rules.expires_ms == 300_000
    assert "expires_in" not in notify.defaults  # the handler's: applies however it is enqueued
    assert mux.rules_for("notify") == notify.rules
    task = notify.options(expires_in=5).task(1)
    assert prepare(task, {}, NOW).msg.expires_at_ms == NOW + 5000
    later = notify.options(expires_in=5).options(expires_at=NOW_DT + timedelta(hours=1))
    assert prepare(later.task(1), {}, NOW).msg.expires_at_ms == NOW + 3_600_000
    with pytest.raises(ValueError, match="more than 0"):
        notify.options(expires_in=0)


def test_a_workflow_step_takes_an_expiry() -> None:
    check_step_options({"expires_in": 60}, "step 't'")  # counted from the workflow's start


def test_the_reason_says_expired_and_when() -> None:
    assert expired_reason(NOW + 7) == (
        "expired: not started by its expiry at 2025-06-15T15:06:40.007Z")
