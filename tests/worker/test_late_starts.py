"""``LateStarts``: how the process pool moves a run's time limit to when its handler starts.
A hold stops the relative limit (a start-up budget may stand in), never an enqueued deadline;
a restart counts the whole limit from then. A fake clock and the loop's timers, no sleep."""

from __future__ import annotations

import pytest

from asyncq._model._message import NO_TIMEOUT, TaskMessage
from asyncq._model._task import task_for_handler
from asyncq._worker._running import (
    DeadlineTimers,
    LateStarts,
    Running,
    Stop,
    limit_of,
    limit_span,
)

pytestmark = pytest.mark.anyio


class _Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def now_ms(self) -> int:
        return self.ms


def _setup(timeout_ms: int, deadline_ms: int = 0
           ) -> tuple[Running, LateStarts, _Clock, list[tuple[str, Stop]]]:
    clock = _Clock()
    fired: list[tuple[str, Stop]] = []
    timers = DeadlineTimers(lambda run_id, limit: fired.append((run_id, limit)))
    msg = TaskMessage(id="i", type="t", queue="q", timeout_ms=timeout_ms,
                      deadline_ms=deadline_ms)
    deadline, limit = limit_of(clock.ms, msg)
    run = Running(msg, task_for_handler(msg, b"", 0, deadline, None), clock.ms, deadline)
    assert limit is not None
    timers.arm(run, (deadline - clock.ms) / 1000, limit)
    return run, LateStarts({"i": run}, timers, clock.now_ms), clock, fired


def _due_s(run: Running) -> float | None:
    """When the run's near timer is due, in seconds from now (None: no near timer)."""
    import asyncio

    if run.timer is None or run.timer.cancelled():
        return None
    return run.timer.when() - asyncio.get_running_loop().time()


@pytest.mark.parametrize(("timeout_ms", "deadline_ms", "span"), [
    (5_000, 0, (5_000, 0)), (0, 2_000_000, (0, 2_000_000)),
    (5_000, 9_000_000, (5_000, 9_000_000)),
    (NO_TIMEOUT, 0, (0, 0)), (0, 0, (30 * 60_000, 0)),
])
def test_limit_span_is_what_limit_of_counts_from_any_start(
        timeout_ms: int, deadline_ms: int, span: tuple[int, int]) -> None:
    msg = TaskMessage(id="i", type="t", queue="q", timeout_ms=timeout_ms,
                      deadline_ms=deadline_ms)
    assert limit_span(msg) == span


async def test_a_hold_stops_the_limit_and_a_restart_counts_it_from_then() -> None:
    run, starts, clock, fired = _setup(1_500)
    starts.hold("i", None)
    assert _due_s(run) is None
    clock.ms += 10_000  # it waited 10 s for a child
    starts.restart("i")
    due = _due_s(run)
    assert due is not None and 1.4 < due <= 1.5
    assert run.deadline_ms == run.task._deadline_ms == clock.ms + 1_500
    assert fired == []


async def test_a_start_up_budget_stands_in_while_the_child_imports() -> None:
    run, starts, _clock, _fired = _setup(1_500)
    starts.hold("i", 60.0)
    assert run.timer is None  # (far: swept in when it comes near)
    starts.restart("i")
    due = _due_s(run)
    assert due is not None and 1.4 < due <= 1.5


async def test_an_enqueued_deadline_does_not_move() -> None:
    run, starts, clock, _fired = _setup(1_000, deadline_ms=1_001_800)
    starts.hold("i", None)
    due = _due_s(run)
    assert due is not None and 1.7 < due <= 1.8  # (the deadline, 1.8 s away)
    clock.ms += 1_000  # it waited 1 s: 0.8 s left to the deadline, less than its timeout
    starts.restart("i")
    assert run.deadline_ms == 1_001_800
    due = _due_s(run)
    assert due is not None and 0.7 < due <= 0.8


async def test_a_run_being_stopped_is_left_alone() -> None:
    run, starts, clock, _fired = _setup(1_500)
    run.reason = Stop.CANCEL
    clock.ms += 10_000
    starts.restart("i")
    assert run.deadline_ms == 1_001_500
