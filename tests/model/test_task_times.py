"""TaskInfo's times: when a task was enqueued and when its latest run started, beside when it
completed, and how long that run took (what ``task inspect`` and the dashboard show)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from asyncq import Client, Inspector, TaskInfo, TaskState
from asyncq._clock import ms_to_datetime
from asyncq._model._info import run_time, task_info
from asyncq._model._message import TaskMessage

pytestmark = pytest.mark.anyio

T0 = 1_700_000_000_000


def info_at(state: TaskState, **times: int) -> TaskInfo:
    return task_info(TaskMessage(id="i", type="t", queue="q", enqueued_at_ms=T0), b"", state,
                     **times)


def test_times_come_from_the_message_and_the_task_hash() -> None:
    info = info_at(TaskState.COMPLETED, started_at_ms=T0 + 1500, completed_at_ms=T0 + 4000)
    assert info.enqueued_at == ms_to_datetime(T0)
    assert info.started_at == ms_to_datetime(T0 + 1500)
    assert info.completed_at == ms_to_datetime(T0 + 4000)
    assert all(t is not None and t.tzinfo is not None
               for t in (info.enqueued_at, info.started_at, info.completed_at))
    # Unknown times are None: a task that never ran, a message written without its time.
    bare = task_info(TaskMessage(id="i", type="t", queue="q"), b"", TaskState.PENDING)
    assert (bare.enqueued_at, bare.started_at, bare.completed_at) == (None, None, None)
    assert {"enqueued_at", "started_at"} <= {f.name for f in dataclasses.fields(TaskInfo)}


def test_run_time_of_the_latest_run() -> None:
    now = ms_to_datetime(T0 + 60_000)
    assert run_time(info_at(TaskState.ACTIVE, started_at_ms=T0 + 10_000), now) == (
        timedelta(seconds=50), True)
    assert run_time(info_at(TaskState.COMPLETED, started_at_ms=T0 + 1500,
                            completed_at_ms=T0 + 4000), now) == (timedelta(seconds=2.5), False)
    assert run_time(info_at(TaskState.RETRY, started_at_ms=T0 + 1000,
                            last_failed_at_ms=T0 + 1250), now) == (
        timedelta(milliseconds=250), False)
    # Its failure is that of an earlier run: the latest one (requeued at a shutdown) did not end.
    assert run_time(info_at(TaskState.PENDING, started_at_ms=T0 + 5000,
                            last_failed_at_ms=T0 + 1250), now) is None
    assert run_time(info_at(TaskState.PENDING), now) is None  # never ran
    # Start and end stamped by two hosts whose clocks differ by a few ms: never negative.
    assert run_time(info_at(TaskState.COMPLETED, started_at_ms=T0 + 5,
                            completed_at_ms=T0 + 2), now) == (timedelta(0), False)


async def test_an_enqueued_task_says_when_it_was_enqueued(
    asyncq_client: Client, asyncq_inspector: Inspector, asyncq_queue: str,
) -> None:
    info = await asyncq_client.enqueue("t", queue=asyncq_queue, process_in=60)
    assert info.enqueued_at is not None and info.started_at is None
    assert info.next_process_at is not None
    assert info.next_process_at - info.enqueued_at == timedelta(seconds=60)
    stored = await asyncq_inspector.task_info(asyncq_queue, info.id)
    assert (stored.enqueued_at, stored.started_at) == (info.enqueued_at, None)
    [listed] = await asyncq_inspector.list_tasks(asyncq_queue, "scheduled")
    assert listed.enqueued_at == info.enqueued_at
