"""The TaskMessage codec of wire=asynq: asyncq's message <-> asynq's protobuf fields, with the
defaults a Go server relies on written out."""

from __future__ import annotations

import pytest

from asyncq._broker._asynq import _codec
from asyncq._broker._asynq._schema import TaskMessagePB
from asyncq._errors import DecodeError
from asyncq._model._message import NO_TIMEOUT, TaskMessage


def msg(**kw: object) -> TaskMessage:
    return TaskMessage(id="id-1", type="email:send", queue="default", **kw)  # type: ignore[arg-type]


def test_round_trip_keeps_every_field() -> None:
    task = _codec.AsynqTask(
        type="t", payload=b"\x00\xffbytes", id="i", queue="q", retry=3, retried=2,
        error_msg="boom", last_failed_at=1_700_000_000, timeout=60, deadline=1_700_000_900,
        unique_key="asynq:{q}:unique:t:abc", group_key="g", retention=3600,
        completed_at=1_700_000_100, headers={"trace": "x"})
    assert _codec.decode(_codec.encode(task)) == task


def test_go_defaults_are_written_when_the_producer_set_none() -> None:
    task = _codec.from_asyncq(msg(), b"p")
    assert (task.retry, task.timeout, task.deadline, task.retention) == (25, 1800, 0, 0)
    pb = TaskMessagePB.FromString(_codec.encode(task))
    assert (pb.retry, pb.timeout) == (25, 1800)


def test_a_deadline_alone_gets_no_default_timeout() -> None:
    task = _codec.from_asyncq(msg(deadline_ms=1_700_000_000_500), b"")
    assert (task.timeout, task.deadline) == (0, 1_700_000_001)


def test_durations_round_up_to_whole_seconds() -> None:
    task = _codec.from_asyncq(msg(timeout_ms=500, retention_ms=1500, max_retry=0), b"")
    assert (task.timeout, task.retention, task.retry) == (1, 2, 0)


def test_no_timeout_is_a_century_which_a_go_server_honours() -> None:
    """A Go server gives timeout 0 + deadline 0 its 30-minute default, so asyncq's no limit
    is written as a timeout Go's time.Duration still holds, and read back as no limit."""
    task = _codec.from_asyncq(msg(timeout_ms=NO_TIMEOUT), b"")
    assert (task.timeout, task.deadline) == (_codec.UNLIMITED_TIMEOUT_S, 0)
    assert task.timeout * 1_000_000_000 < 2**63  # Go's Duration(timeout) * time.Second fits
    assert _codec.to_asyncq(task).timeout_ms == NO_TIMEOUT


def test_a_go_message_without_timeout_or_deadline_runs_under_gos_default() -> None:
    go = _codec.AsynqTask(type="t", payload=b"", id="i", queue="q", retry=25)
    assert _codec.to_asyncq(go).timeout_ms == 1_800_000


def test_a_go_message_reads_as_explicit_options() -> None:
    go = _codec.AsynqTask(type="t", payload=b"{}", id="i", queue="q", retry=5, timeout=30,
                          retention=60, group_key="g", headers={"h": "v"})
    m = _codec.to_asyncq(go)
    assert (m.max_retry, m.timeout_ms, m.retention_ms, m.group, m.headers, m.enc) == (
        5, 30_000, 60_000, "g", {"h": "v"}, "b")


def test_raw_task_prefers_asyncqs_own_message() -> None:
    own = msg(max_retry=None, enc="j")
    pb = _codec.encode(_codec.from_asyncq(own, b'{"a":1}'))
    raw = _codec.raw_task("id-1", pb, own.encode(), b"1700000000123456789")
    assert raw.msg == own  # max_retry stays unset: the handler's rule applies
    assert (raw.payload, raw.retried, raw.pending_since) == (b'{"a":1}', 0, 1_700_000_000_123)


def test_raw_task_of_a_go_task_builds_the_message() -> None:
    go = _codec.AsynqTask(type="t", payload=b"x", id="g1", queue="q", retry=7, retried=2,
                          timeout=1800)
    raw = _codec.raw_task("g1", _codec.encode(go), None, None)
    m = raw.msg
    assert (m.id, m.type, m.max_retry, m.timeout_ms) == ("g1", "t", 7, 1_800_000)
    assert (raw.payload, raw.retried, raw.pending_since) == (b"x", 2, 0)


def test_garbage_is_a_decode_error_and_an_empty_raw_message() -> None:
    with pytest.raises(DecodeError):
        _codec.decode(b"\xff\xff\xff")
    with pytest.raises(DecodeError, match="missing"):
        _codec.decode(b"")
    assert isinstance(_codec.raw_task("x", b"\xff\xff\xff", None, "0").msg, DecodeError)
