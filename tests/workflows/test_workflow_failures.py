"""Failure semantics: a step that fails for good fails its workflow (its successors never
run, the error callback runs once), re-running it from the archive resumes the workflow, a
cancelled or deleted step cancels it, and cancelling a workflow stops all of it."""

from __future__ import annotations

import pytest
import redis.asyncio

from asyncq import Client, Inspector, Task, TaskFailedError, TaskState, WorkflowState, chain, group
from asyncq._broker import _keys as K
from asyncq.testing import WorkerFactory, wait_until
from tests.workflows.flowapp import FLAGS, LEDGER, mux

pytestmark = pytest.mark.anyio
FAST = {"workflow_interval": 0.5, "forward_interval": 0.1,
        "retry_delay": lambda n, exc, task: 0.05}


async def runs(r: redis.asyncio.Redis) -> list[str]:
    return [x.decode() for x in await r.lrange(LEDGER, 0, -1)]


async def test_failure_in_the_middle_then_resume_from_the_archive(
        wf_redis: redis.asyncio.Redis, asyncq_worker: WorkerFactory, asyncq_client: Client,
        asyncq_inspector: Inspector) -> None:
    await wf_redis.hset(FLAGS, "fail", "1")
    flow = chain(Task("wf:ledger", "start"), Task("wf:maybe_fail"), Task("wf:ledger"))
    async with asyncq_worker(mux, **FAST):
        handle = await asyncq_client.enqueue_workflow(flow, on_error=Task("wf:ledger"))
        wf = handle.id
        with pytest.raises(TaskFailedError, match="told to fail") as failed:
            await asyncq_client.result(wf, timeout=10)
        assert failed.value.info.state is TaskState.ARCHIVED
        await wait_until(lambda: _has(wf_redis, f"{wf}.e"), message="error callback ran")
        info = await asyncq_inspector.workflow(wf)
        assert info.state is WorkflowState.FAILED and info.failed_step == "1"
        assert info.error == "SkipRetry: told to fail"
        # the step after the failed one never ran: it waits, and expires with the workflow
        third = await asyncq_inspector.task_info("default", f"{wf}.2")
        assert third.state is TaskState.WAITING
        assert await wf_redis.pttl(K.queue_keys("default").task(f"{wf}.2")) > 0

        # fix the cause and re-run the failed step from the archive: the workflow resumes
        await wf_redis.hdel(FLAGS, "fail")
        await asyncq_inspector.run_task("default", f"{wf}.1")
        await wait_until(lambda: _state_is(asyncq_inspector, wf, WorkflowState.SUCCEEDED),
                         message="workflow resumed and succeeded")
        assert await asyncq_client.result(wf, timeout=30) == "fixed"
    assert await runs(wf_redis) == [f"{wf}.0", f"{wf}.1", f"{wf}.e", f"{wf}.1", f"{wf}.2"]
    info = await asyncq_inspector.workflow(wf)
    assert info.state is WorkflowState.SUCCEEDED and info.error is None


async def _state_is(inspector: Inspector, wf: str, state: WorkflowState) -> bool:
    return (await inspector.workflow(wf)).state is state


async def _has(r: redis.asyncio.Redis, task_id: str) -> bool:
    return task_id in await runs(r)


async def test_exhausted_retries_fail_the_workflow_and_successors_never_run(
        wf_redis: redis.asyncio.Redis, asyncq_worker: WorkerFactory,
        asyncq_client: Client) -> None:
    flow = chain(Task("wf:flaky", max_retry=2), Task("wf:ledger", "never"))
    async with asyncq_worker(mux, **FAST):
        handle = await asyncq_client.enqueue_workflow(flow)
        with pytest.raises(TaskFailedError, match="attempt 2 broke"):
            await asyncq_client.result(handle.id, timeout=10)
    assert await runs(wf_redis) == [f"{handle.id}.0"] * 3


async def test_a_failing_member_fails_the_chord_and_its_callback_never_runs(
        wf_redis: redis.asyncio.Redis, asyncq_worker: WorkerFactory,
        asyncq_client: Client) -> None:
    await wf_redis.hset(FLAGS, "fail", "1")
    flow = chain(group(Task("wf:ledger", 1), Task("wf:maybe_fail"), Task("wf:ledger", 3)),
                 Task("wf:count"))
    async with asyncq_worker(mux, **FAST) as w:
        handle = await asyncq_client.enqueue_workflow(flow, on_error=Task("wf:ledger"))
        with pytest.raises(TaskFailedError, match="told to fail"):
            await asyncq_client.result(handle.id, timeout=10)
        await wait_until(lambda: _has(wf_redis, f"{handle.id}.e"), message="error callback")
        await w.wait_drained()
    done = await runs(wf_redis)
    assert f"{handle.id}.3" not in done  # the callback (node 3)
    assert done.count(f"{handle.id}.e") == 1


async def test_a_cancelled_step_cancels_the_workflow(
        wf_redis: redis.asyncio.Redis, asyncq_worker: WorkerFactory,
        asyncq_client: Client, asyncq_inspector: Inspector) -> None:
    flow = chain(Task("wf:block"), Task("wf:ledger", "never"))
    async with asyncq_worker(mux, **FAST):
        handle = await asyncq_client.enqueue_workflow(flow)
        first = f"{handle.id}.0"
        await wait_until(lambda: _has(wf_redis, first), message="first step running")
        assert await asyncq_client.cancel(first, queue="default")
        with pytest.raises(TaskFailedError, match="cancelled"):
            await asyncq_client.result(handle.id, timeout=10)
        info = await asyncq_inspector.workflow(handle.id)
        assert info.state is WorkflowState.CANCELLED
        await wait_until(lambda: _gone(wf_redis, f"{handle.id}.1"), message="step deleted")
    assert await runs(wf_redis) == [first]


async def _gone(r: redis.asyncio.Redis, task_id: str) -> bool:
    return not await r.exists(K.queue_keys("default").task(task_id))


async def test_cancelling_a_workflow_stops_every_step(
        wf_redis: redis.asyncio.Redis, asyncq_worker: WorkerFactory,
        asyncq_client: Client, asyncq_inspector: Inspector) -> None:
    flow = chain(group(Task("wf:block"), Task("wf:block"), *(Task("wf:sleep", 5)
                                                             for _ in range(20))),
                 Task("wf:count"))
    async with asyncq_worker(mux, concurrency=2, **FAST) as w:
        handle = await asyncq_client.enqueue_workflow(flow)
        await wait_until(lambda: wf_redis.llen(LEDGER), message="steps running")
        assert await asyncq_client.cancel(handle.id)
        assert not await asyncq_client.cancel(handle.id)  # already cancelled
        with pytest.raises(TaskFailedError, match="cancelled on request"):
            await asyncq_client.result(handle.id, timeout=5)
        await w.wait_drained(timeout=10)
    info = await asyncq_inspector.workflow(handle.id)
    assert info.state is WorkflowState.CANCELLED
    assert len(await runs(wf_redis)) <= 3  # the two running when it was cancelled
    states = [node.state for node in info.nodes if node.kind == "task"]
    # the active ones were cancelled (archived as such), the others deleted
    assert set(states) <= {"cancelled", "deleted"}, states
    # Active when it was cancelled: the two running, and at most one per slot already leased
    # to the worker in one hop but not started yet (active from its lease on).
    archived = (await asyncq_inspector.queue_info("default")).archived
    assert archived <= min(states.count("cancelled"), 2 * 2), (archived, states)


async def test_deleting_a_step_cancels_its_workflow(
        wf_redis: redis.asyncio.Redis, asyncq_client: Client, asyncq_inspector: Inspector,
        asyncq_worker: WorkerFactory) -> None:
    handle = await asyncq_client.enqueue_workflow(
        chain(Task("wf:ledger", 1), Task("wf:ledger", 2)))
    await asyncq_inspector.delete_task("default", f"{handle.id}.1")
    async with asyncq_worker(mux, **FAST):
        with pytest.raises(TaskFailedError, match="step 1 deleted"):
            await asyncq_client.result(handle.id, timeout=10)
    # the first step may have run before the cancellation was applied; nothing after it did
    assert f"{handle.id}.1" not in await runs(wf_redis)


async def test_bulk_inspector_operations_reach_workflows(
        wf_redis: redis.asyncio.Redis, asyncq_client: Client, asyncq_inspector: Inspector,
        asyncq_worker: WorkerFactory) -> None:
    archived = await asyncq_client.enqueue_workflow(chain(Task("wf:noop", queue="bulk-a"),
                                                          Task("wf:noop", queue="bulk-a")))
    deleted = await asyncq_client.enqueue_workflow(chain(Task("wf:noop", queue="bulk-d"),
                                                         Task("wf:noop", queue="bulk-d")))
    await asyncq_inspector.archive_all("bulk-a", TaskState.PENDING)
    await asyncq_inspector.delete_all("bulk-d", TaskState.PENDING)
    async with asyncq_worker(mux, queues={"bulk-a": 1, "bulk-d": 1}, **FAST):
        with pytest.raises(TaskFailedError, match="archived by the inspector"):
            await asyncq_client.result(archived.id, timeout=10)
        with pytest.raises(TaskFailedError, match="deleted"):
            await asyncq_client.result(deleted.id, timeout=10)
    assert (await asyncq_inspector.workflow(archived.id)).state is WorkflowState.FAILED
    assert (await asyncq_inspector.workflow(deleted.id)).state is WorkflowState.CANCELLED
