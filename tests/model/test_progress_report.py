"""A progress report's rules: a fraction from 0.0 to 1.0 (a percentage is refused with the
fraction it meant), a bounded message and bounded JSON data; only inside a running handler;
the stored form and the event decode back to what the handler gave."""

from __future__ import annotations

import math

import orjson
import pytest

from asyncq import Task, TaskState
from asyncq._model._events import decode_event
from asyncq._model._info import decode_progress
from asyncq._model._task import PROGRESS_DATA_MAX, PROGRESS_MESSAGE_MAX, check_progress
from asyncq._worker._progress import encode_report


@pytest.mark.parametrize("value", [0, 0.0, 0.5, 1, 1.0, 1e-9])
def test_a_fraction_from_zero_to_one_is_a_report(value: float) -> None:
    assert check_progress(value, None, None) == (float(value), None, None)


def test_a_percentage_is_refused_with_the_fraction_it_meant() -> None:
    with pytest.raises(ValueError, match=r"fraction from 0.0 to 1.0, got 50 \(a fraction: "
                                         r"0.5 for 50%\)"):
        check_progress(50, None, None)


@pytest.mark.parametrize("value", [-0.01, 1.0001, 250, math.nan, math.inf, -math.inf])
def test_a_value_out_of_range_is_refused(value: float) -> None:
    with pytest.raises(ValueError, match=r"fraction from 0\.0 to 1\.0"):
        check_progress(value, None, None)


@pytest.mark.parametrize("value", [True, "0.5", None, [0.5]])
def test_a_value_that_is_no_number_is_refused(value: object) -> None:
    with pytest.raises(TypeError, match="progress must be a number"):
        check_progress(value, None, None)


def test_the_message_and_data_are_bounded() -> None:
    assert check_progress(0.1, "x" * PROGRESS_MESSAGE_MAX, None)[1] == "x" * PROGRESS_MESSAGE_MAX
    with pytest.raises(ValueError, match=f"at most {PROGRESS_MESSAGE_MAX} are kept"):
        check_progress(0.1, "x" * (PROGRESS_MESSAGE_MAX + 1), None)
    with pytest.raises(TypeError, match="message must be a str"):
        check_progress(0.1, 3, None)
    big = "y" * (PROGRESS_DATA_MAX - 2)  # its JSON: the quotes make it exactly the limit
    assert check_progress(0.1, None, big)[2] == orjson.dumps(big)
    with pytest.raises(ValueError, match=f"at most {PROGRESS_DATA_MAX} ride along"):
        check_progress(0.1, None, big + "y")
    with pytest.raises(TypeError, match="JSON-serializable"):
        check_progress(0.1, None, {1, 2})


LONE = "page \ud800 of 3"  # (a lone surrogate: what undecodable bytes leave in a str)


def test_a_message_with_a_lone_surrogate_is_refused_at_the_call() -> None:
    """It cannot be stored as UTF-8: refused where the handler made it, saying how to fix it,
    not accepted and then dropped by the worker."""
    with pytest.raises(ValueError, match=r"progress message 'page \\ud800 of 3' is not "
                                         r"valid text: it holds a lone surrogate"):
        check_progress(0.5, LONE, None)
    with pytest.raises(ValueError, match=r"progress data is not valid text: a str in it "
                                         r"holds a lone surrogate"):
        check_progress(0.5, None, {"file": LONE})
    fixed = LONE.encode("utf-8", "replace").decode()  # the fix the error suggests
    assert check_progress(0.5, fixed, None)[1] == "page ? of 3"


@pytest.mark.anyio
async def test_outside_a_running_handler_it_says_so() -> None:
    task = Task("report:build", {"month": 10})
    with pytest.raises(RuntimeError, match="only available inside a running handler"):
        await task.set_progress(0.5)
    with pytest.raises(RuntimeError, match="only available inside a running handler"):
        task.set_progress_sync(0.5)


def test_the_stored_report_decodes_to_what_the_handler_gave() -> None:
    raw = encode_report((0.25, "page 2 of 8", orjson.dumps({"pages": 8})), 1_700_000_000_000)
    assert orjson.loads(raw) == {"v": 0.25, "m": "page 2 of 8", "d": {"pages": 8},
                                 "at": 1_700_000_000_000}
    got = decode_progress(raw)
    assert got is not None
    assert (got.value, got.message, got.data, got.at_ms) == (
        0.25, "page 2 of 8", {"pages": 8}, 1_700_000_000_000)
    bare = decode_progress(encode_report((1.0, None, None), 5))
    assert bare is not None and (bare.value, bare.message, bare.data) == (1.0, None, None)


@pytest.mark.parametrize("raw", [b"", None, b"not json", b"[]", b'{"m": "no value"}',
                                 b'{"v": "x"}'])
def test_a_report_that_is_not_one_reads_as_none(raw: bytes | None) -> None:
    assert decode_progress(raw) is None


def test_a_progress_event_decodes_with_its_report() -> None:
    head = orjson.dumps({"id": "t1", "from": "active", "to": "active", "at": 1_700_000_000_000,
                         "retried": 2, "type": "report:build", "p": 1})
    body = encode_report((0.5, "half", orjson.dumps([1])), 1_700_000_000_000)
    event = decode_event("reports", head + b"\n" + body)
    assert (event.previous, event.state, event.final) == (TaskState.ACTIVE, TaskState.ACTIVE,
                                                          False)
    assert (event.progress, event.progress_message, event.progress_data) == (0.5, "half", [1])
    assert (event.retried, event.type, event.result) == (2, "report:build", None)
    with pytest.raises(ValueError, match="progress event without a valid report"):
        decode_event("reports", head + b"\nnonsense")
