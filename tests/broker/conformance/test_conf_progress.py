"""Progress (``Capability.PROGRESS``): a running task's report is stored for its run and
published as an event, only while the task is leased to the worker writing it; the
inspector's reads show the latest run's report, frozen when the run ends and hidden once
another run starts. A broker without the capability refuses it, saying so."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from broker_helpers import LEASE_MS, OTHER, OWNER, WAITER_TTL_MS, finish1, lease
from conformance_helpers import lacks, requires

from asyncq import BrokerError, Client, FakeClock, Inspector, TaskEvent, TaskState
from asyncq._broker import Broker, Capability, Outcome
from asyncq._clock import ms_to_datetime

pytestmark = pytest.mark.anyio

ON_CLUSTER = True


def report(value: float, message: str | None = None, data: object = None,
           at: int = 1_700_000_000_000) -> bytes:
    doc: dict[str, object] = {"v": value, "at": at}
    if message is not None:
        doc["m"] = message
    if data is not None:
        doc["d"] = data
    return orjson.dumps(doc)


async def test_a_report_is_stored_for_its_run_and_read_back(
    broker: Broker, client: Client, asyncq_queue: str,
) -> None:
    requires(broker, Capability.PROGRESS)
    q = asyncq_queue
    [task_id] = await lease(broker, client, q)
    assert await broker.set_progress(q, task_id, OWNER, report(0.25, "page 2 of 8",
                                                                {"pages": 8}))
    async with Inspector(broker) as inspector:
        info = await inspector.task_info(q, task_id)
        [listed] = await inspector.list_tasks(q, "active")
    for got in (info, listed):
        assert (got.progress, got.progress_message, got.progress_data) == (
            0.25, "page 2 of 8", {"pages": 8})
        assert got.progress_at == ms_to_datetime(1_700_000_000_000)
    # a later report replaces it
    assert await broker.set_progress(q, task_id, OWNER, report(0.5))
    async with Inspector(broker) as inspector:
        info = await inspector.task_info(q, task_id)
    assert (info.progress, info.progress_message, info.progress_data) == (0.5, None, None)


async def test_a_task_that_never_reported_has_no_progress(
    broker: Broker, client: Client, asyncq_queue: str,
) -> None:
    requires(broker, Capability.PROGRESS)
    [task_id] = await lease(broker, client, asyncq_queue)
    async with Inspector(broker) as inspector:
        info = await inspector.task_info(asyncq_queue, task_id)
    assert (info.progress, info.progress_message, info.progress_at) == (None, None, None)


async def test_a_write_without_the_lease_is_refused_and_changes_nothing(
    broker: Broker, client: Client, clock: FakeClock, asyncq_queue: str,
) -> None:
    requires(broker, Capability.PROGRESS)
    q = asyncq_queue
    pending = (await client.enqueue("t", queue=q, process_in=60)).id
    assert not await broker.set_progress(q, pending, OWNER, report(0.1))  # not running
    assert not await broker.set_progress(q, "no-such-task", OWNER, report(0.1))

    [task_id] = await lease(broker, client, q)
    assert await broker.set_progress(q, task_id, OWNER, report(0.4, "mine"))
    assert not await broker.set_progress(q, task_id, OTHER, report(0.9, "not mine"))
    assert not await broker.set_progress(q, task_id, "", report(0.9, "nobody's"))
    # Its lease lapsed and the recoverer gave it to a retry: the old run may not write.
    clock.advance(LEASE_MS / 1000 + 1)
    assert await broker.maintenance.recover(Outcome("retry", q, task_id, retry_at_ms=clock.now_ms(),
                                                    error="lease expired"), clock.now_ms())
    assert not await broker.set_progress(q, task_id, OWNER, report(0.95, "too late"))
    async with Inspector(broker) as inspector:
        info = await inspector.task_info(q, task_id)
    assert info.state is TaskState.RETRY
    assert (info.progress, info.progress_message) == (0.4, "mine")  # frozen, as it ended


async def test_a_new_run_hides_the_previous_runs_report_until_it_reports(
    broker: Broker, client: Client, clock: FakeClock, asyncq_queue: str,
) -> None:
    requires(broker, Capability.PROGRESS)
    q = asyncq_queue
    [task_id] = await lease(broker, client, q)
    assert await broker.set_progress(q, task_id, OWNER, report(0.6, "first run"))
    assert await finish1(broker, Outcome("retry", q, task_id, retry_at_ms=clock.now_ms(),
                                         error="boom"))
    async with Inspector(broker) as inspector:
        assert (await inspector.task_info(q, task_id)).progress == 0.6  # the failed run's
        assert (await broker.maintenance.forward(q, "retry", 10))[0] == 1
        clock.advance(1)
        raws, _ = await broker.dequeue(q, 1, OTHER, LEASE_MS, WAITER_TTL_MS)
        assert [r.id for r in raws] == [task_id]
        info = await inspector.task_info(q, task_id)
        [listed] = await inspector.list_tasks(q, "active")
        assert info.state is TaskState.ACTIVE
        assert info.progress is None and listed.progress is None  # a new run: not its report
        assert await broker.set_progress(q, task_id, OTHER, report(0.1, "second run"))
        info = await inspector.task_info(q, task_id)
    assert (info.progress, info.progress_message) == (0.1, "second run")


async def test_a_completed_task_keeps_its_last_report(
    broker: Broker, client: Client, asyncq_queue: str,
) -> None:
    requires(broker, Capability.PROGRESS)
    q = asyncq_queue
    [task_id] = await lease(broker, client, q)
    assert await broker.set_progress(q, task_id, OWNER, report(1.0, "done"))
    assert await finish1(broker, Outcome("complete", q, task_id, retention_ms=60_000,
                                         result=b"r"))
    async with Inspector(broker) as inspector:
        info = await inspector.task_info(q, task_id)
        [listed] = await inspector.list_tasks(q, "completed")
    assert info.state is TaskState.COMPLETED
    assert (info.progress, info.progress_message) == (1.0, "done")
    assert listed.progress == 1.0


async def test_a_report_is_published_as_an_event_that_changes_no_state(
    broker: Broker, client: Client, asyncq_queue: str,
) -> None:
    requires(broker, Capability.PROGRESS)
    q = asyncq_queue
    async with client.events(q) as events:
        [task_id] = await lease(broker, client, q)
        assert await broker.set_progress(q, task_id, OWNER, report(0.75, "¾ done", [1, 2]))
        assert await finish1(broker, Outcome("done", q, task_id))
        got: list[TaskEvent] = []
        async with asyncio.timeout(5):
            async for event in events:
                assert isinstance(event, TaskEvent)
                if event.id == task_id:
                    got.append(event)
                    if event.final:
                        break
    assert [(e.previous, e.state, e.progress) for e in got] == [
        (None, TaskState.PENDING, None), (TaskState.PENDING, TaskState.ACTIVE, None),
        (TaskState.ACTIVE, TaskState.ACTIVE, 0.75), (TaskState.ACTIVE, TaskState.COMPLETED, None)]
    progress = got[2]
    assert (progress.progress_message, progress.progress_data, progress.type) == (
        "¾ done", [1, 2], "t")
    assert not progress.final and progress.result is None


async def test_go_asynqs_layout_says_progress_is_not_available_yet(broker: Broker) -> None:
    lacks(broker, Capability.PROGRESS)
    with pytest.raises(BrokerError, match="set_progress is not yet available with "
                                          "wire=asynq") as caught:
        await broker.set_progress("default", "t1", OWNER, report(0.5))
    assert caught.value.refused and not caught.value.transient


@pytest.mark.parametrize("how", ["run_task", "run_all"])
@pytest.mark.parametrize("ended", ["archived", "retry", "completed"])
async def test_an_operators_requeue_hides_the_previous_runs_report(
    broker: Broker, client: Client, clock: FakeClock, asyncq_queue: str, how: str, ended: str,
) -> None:
    """Run again by an operator (CLI, API, dashboard), the task waits for a new run: the old
    run's report is not shown as if it were the new run's, in the task or in its list row."""
    requires(broker, Capability.PROGRESS)
    q = asyncq_queue
    [task_id] = await lease(broker, client, q)
    assert await broker.set_progress(q, task_id, OWNER, report(0.6, "old run"))
    outcome = {"archived": Outcome("archive", q, task_id, error="boom"),
               "retry": Outcome("retry", q, task_id, retry_at_ms=clock.now_ms() + 60_000,
                                error="boom"),
               "completed": Outcome("complete", q, task_id, retention_ms=60_000,
                                    result=b"r")}[ended]
    assert await finish1(broker, outcome)
    async with Inspector(broker) as inspector:
        assert (await inspector.task_info(q, task_id)).progress == 0.6  # the ended run's
        if how == "run_task":
            await inspector.run_task(q, task_id)
        else:
            assert await inspector.run_all(q, ended) == 1
        info = await inspector.task_info(q, task_id)
        [listed] = await inspector.list_tasks(q, "pending")
    assert info.state is TaskState.PENDING
    assert (info.progress, info.progress_message, info.progress_at) == (None, None, None)
    assert listed.progress is None


async def test_a_run_given_back_by_its_worker_drops_its_report(
    broker: Broker, client: Client, asyncq_queue: str,
) -> None:
    """A worker that stops hands its running task back (requeue): the task waits for a new run
    and shows no report of the interrupted one."""
    requires(broker, Capability.PROGRESS)
    q = asyncq_queue
    [task_id] = await lease(broker, client, q)
    assert await broker.set_progress(q, task_id, OWNER, report(0.4, "interrupted"))
    assert await broker.finish([Outcome("requeue", q, task_id)], OWNER) == [True]
    async with Inspector(broker) as inspector:
        info = await inspector.task_info(q, task_id)
        [listed] = await inspector.list_tasks(q, "pending")
    assert info.state is TaskState.PENDING
    assert (info.progress, info.progress_message, info.progress_at) == (None, None, None)
    assert listed.progress is None
