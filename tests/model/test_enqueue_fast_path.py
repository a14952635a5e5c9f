"""The enqueue hot path's shortcuts give exactly what the general path gives: the TaskInfo of a
just-stored task, the stored form of ``enqueue("type", payload)``, merged options, the ids
drawn in batches, and the memory of good task types and queue names."""

from __future__ import annotations

import dataclasses
import os
import threading
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from asyncq import Task, TaskInfo
from asyncq._model._enqueue import new_task_id, prepare, prepare_plain, stored_info
from asyncq._model._info import TaskState, task_info
from asyncq._model._options import NO_OPTIONS, UNSET, ParsedOptions, parse_options
from asyncq._validate import validate_queue_name

NOW = 1_780_000_000_123
LATER = datetime(2030, 1, 1, tzinfo=UTC)

#: (task options, call options): every option, alone and in the combinations that interact.
CASES: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({}, {}),
    ({"queue": "q1"}, {}),
    ({}, {"queue": "q2", "max_retry": 3}),
    ({"max_retry": 2, "timeout": 5}, {"timeout": 0}),
    ({}, {"timeout": 0}),
    ({}, {"deadline": LATER}),
    ({"timeout": 7}, {"deadline": LATER}),
    ({}, {"process_in": 10}),
    ({"process_in": 10}, {"process_at": LATER}),
    ({"process_at": LATER}, {"process_in": 3}),
    ({}, {"expires_in": 60}),
    ({"expires_in": 60}, {"process_in": 5}),
    ({"expires_at": LATER}, {}),
    ({"expires_at": LATER}, {"expires_in": 30}),
    ({}, {"unique": 5}),
    ({}, {"unique": 5, "unique_key": "k"}),
    ({"headers": {"a": "1", "b": "1"}}, {"headers": {"b": "2"}}),
    ({}, {"headers": {"b": "2"}}),
    ({}, {"group": "g"}),
    ({}, {"retention": 0}),
    ({"retention": 30}, {}),
    ({"task_id": "fixed"}, {"retention": timedelta(hours=1)}),
]


def _fields(info: TaskInfo) -> dict[str, tuple[type, Any]]:
    return {f.name: (type(getattr(info, f.name)), getattr(info, f.name))
            for f in dataclasses.fields(info)}


@pytest.mark.parametrize(("task_options", "call_options"), CASES)
@pytest.mark.parametrize("payload", [None, b"raw", {"i": 1}])
def test_stored_info_is_what_task_info_says(task_options: dict[str, Any],
                                            call_options: dict[str, Any],
                                            payload: Any) -> None:
    new = prepare(Task("t", payload, **task_options), call_options, NOW)
    if new.process_at_ms > NOW:
        state, next_at = TaskState.SCHEDULED, new.process_at_ms
    elif new.msg.group:
        state, next_at = TaskState.AGGREGATING, 0
    else:
        state, next_at = TaskState.PENDING, NOW
    expected = task_info(new.msg, new.payload, state, next_process_at_ms=next_at)
    got = stored_info(new, NOW)
    assert _fields(got) == _fields(expected)
    assert got == expected
    assert got.headers is not stored_info(prepare(Task("t", payload, **task_options),
                                                  call_options, NOW), NOW).headers


@pytest.mark.parametrize("call_options", [c for _, c in CASES])
@pytest.mark.parametrize("payload", [None, b"raw", bytearray(b"x"), {"i": 1}, [1, "a"], "s"])
def test_enqueue_of_a_type_is_stored_as_a_task_of_that_type(payload: Any,
                                                           call_options: dict[str, Any]) -> None:
    plain = prepare_plain("t", payload, call_options, NOW)
    general = prepare(Task("t", payload), call_options, NOW)
    assert plain._replace(msg=None) == general._replace(msg=None)
    if "task_id" not in call_options:
        assert plain.msg.id != general.msg.id
    assert dataclasses.replace(plain.msg, id="x") == dataclasses.replace(general.msg, id="x")
    assert plain.msg.encode().replace(plain.msg.id.encode(), b"x") == \
        general.msg.encode().replace(general.msg.id.encode(), b"x")


@pytest.mark.parametrize(("task_type", "options"), [
    ("t", {"queue": "wf:b"}), ("t", {"max_retry": True}), ("t", {"bogus": 1}),
    ("t", {"process_in": 1, "process_at": LATER}), ("t", {"unique_key": "k"}),
    ("t", {"expires_in": 0}), ("", {"bogus": 1}),
])
def test_enqueue_of_a_type_refuses_the_options_a_task_refuses(task_type: str,
                                                              options: dict[str, Any]) -> None:
    with pytest.raises((TypeError, ValueError)) as general:
        prepare(Task(task_type, {"i": 1}), options, NOW)
    with pytest.raises((TypeError, ValueError)) as plain:
        prepare_plain(task_type, {"i": 1}, options, NOW)
    assert (type(plain.value), str(plain.value)) == (type(general.value), str(general.value))


@pytest.mark.parametrize(("task_type", "payload", "error"), [
    ("", None, ValueError), (" ", None, ValueError), ("a\nb", None, ValueError),
    (3, None, TypeError), (b"t", None, TypeError),
    ("t", {1: 2}, ValueError), ("t", float("nan"), ValueError), ("t", object(), ValueError),
])
def test_plain_enqueue_refuses_what_a_task_refuses(task_type: Any, payload: Any,
                                                   error: type[Exception]) -> None:
    with pytest.raises(error) as general:
        Task(task_type, payload)
    with pytest.raises(error) as plain:
        prepare_plain(task_type, payload, {}, NOW)
    assert str(plain.value) == str(general.value)


def test_bad_names_are_refused_after_good_ones_were_remembered() -> None:
    for _ in range(2):
        assert prepare_plain("good", None, {}, NOW).msg.type == "good"
        assert validate_queue_name("good-queue") == "good-queue"
        with pytest.raises(ValueError, match="blank"):
            prepare_plain("  ", None, {}, NOW)
        with pytest.raises(ValueError, match="reserved for workflows"):
            validate_queue_name("wf:queue")
        with pytest.raises(TypeError):
            validate_queue_name(b"good-queue")


def _merged_by_the_rules(first: ParsedOptions, later: ParsedOptions) -> ParsedOptions:
    """Last wins field by field, headers merge, a time given one way unsets the other."""
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(later):
        value = getattr(later, f.name)
        if value is UNSET:
            continue
        if f.name == "headers" and first.headers is not UNSET:
            value = {**first.headers, **value}
        changes[f.name] = value
    for given, other in (("process_at_ms", "process_in_ms"), ("process_in_ms", "process_at_ms"),
                         ("expires_at_ms", "expires_in_ms"), ("expires_in_ms", "expires_at_ms")):
        if getattr(later, given) is not UNSET:
            changes[other] = UNSET
    return dataclasses.replace(first, **changes)


@pytest.mark.parametrize(("first", "later"), [*CASES, *[(b, a) for a, b in CASES]])
def test_merged_options_follow_the_rules(first: dict[str, Any], later: dict[str, Any]) -> None:
    a, b = parse_options(first), parse_options(later)
    assert a.merged(b) == _merged_by_the_rules(a, b)
    assert NO_OPTIONS.merged(b) == b
    assert a.merged(NO_OPTIONS) == a


def test_task_ids_are_version_4_uuids_never_repeated() -> None:
    ids = [new_task_id() for _ in range(5000)]
    assert len(set(ids)) == len(ids)
    for text in ids[:300]:
        parsed = uuid.UUID(text)
        assert (parsed.version, parsed.variant) == (4, uuid.RFC_4122)
        assert str(parsed) == text
    # Every variant digit occurs (its two low bits are random), and every other digit but
    # the version takes all 16 values.
    assert {text[19] for text in ids} == set("89ab")
    for at in set(range(36)) - {8, 13, 14, 18, 19, 23}:
        assert {text[at] for text in ids} == set("0123456789abcdef"), at


def test_task_ids_drawn_by_many_threads_are_distinct() -> None:
    found: list[list[str]] = [[] for _ in range(4)]

    def draw(into: list[str]) -> None:
        into.extend(new_task_id() for _ in range(3000))

    threads = [threading.Thread(target=draw, args=(into,)) for into in found]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ids = [i for into in found for i in into]
    assert len(set(ids)) == len(ids) == 12000


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_draws_ids_of_its_own() -> None:
    new_task_id()  # a batch drawn in the parent, most of it not handed out yet
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            os.write(write, ",".join(new_task_id() for _ in range(20)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = set(pipe.read().split(","))
    os.waitpid(pid, 0)
    parent = {new_task_id() for _ in range(20)}
    assert len(child) == 20
    assert not child & parent


def test_enqueue_time_and_due_time_are_equal_datetimes() -> None:
    info = stored_info(prepare_plain("t", None, {}, NOW), NOW)
    assert info.enqueued_at == info.next_process_at == datetime.fromtimestamp(NOW / 1000, UTC)
    other = stored_info(prepare_plain("t", None, {}, NOW + 1), NOW + 1)
    assert other.enqueued_at == datetime.fromtimestamp((NOW + 1) / 1000, UTC)


def test_options_built_without_init_are_the_frozen_dataclasses_they_stand_for() -> None:
    parsed = parse_options({"queue": "q", "max_retry": 2})
    assert parsed == ParsedOptions(queue="q", max_retry=2)
    assert hash(parsed) == hash(ParsedOptions(queue="q", max_retry=2))
    assert repr(parsed) == repr(ParsedOptions(queue="q", max_retry=2))
    with pytest.raises(dataclasses.FrozenInstanceError):
        parsed.queue = "other"  # type: ignore[misc]
    info = stored_info(prepare_plain("t", None, {}, NOW), NOW)
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.queue = "other"  # type: ignore[misc]
    assert dataclasses.replace(info, queue="other").queue == "other"
