"""Workflows on one Redis with an in-process worker: chains, groups, chords, nesting, typed
steps, ``after=`` dependencies and what a user sees of them."""

from __future__ import annotations

import time

import pytest
import redis.asyncio

from asyncq import (
    Client,
    Inspector,
    Task,
    TaskNotFoundError,
    TaskState,
    WorkflowState,
    chain,
    chord,
    group,
)
from asyncq._broker import _keys as K
from asyncq.testing import WorkerFactory, wait_until
from tests.workflows.flowapp import LEDGER, add, echo, mul, mux, total

pytestmark = pytest.mark.anyio
FAST = {"workflow_interval": 0.5, "forward_interval": 0.1}


async def test_chain_of_ten_passes_each_result_to_the_next(
        wf_redis: redis.asyncio.Redis, asyncq_worker: WorkerFactory,
        asyncq_client: Client) -> None:
    flow = chain(add.s(1, 2), *(mul.pipe(2) for _ in range(9)))
    async with asyncq_worker(mux, **FAST):
        handle = await asyncq_client.enqueue_workflow(flow)
        assert handle.steps == 10
        assert await handle.result(asyncq_client, timeout=30) == 3 * 2**9
        info = await asyncq_client.wait(handle.id, timeout=30)
    assert info.state is TaskState.COMPLETED
    assert info.id == handle.id


async def test_group_and_chord_values_keep_member_order(
        wf_redis: redis.asyncio.Redis, asyncq_worker: WorkerFactory,
        asyncq_client: Client) -> None:
    async with asyncq_worker(mux, **FAST):
        g = await asyncq_client.enqueue_workflow(group(*(add.s(i, i) for i in range(20))))
        c = await asyncq_client.enqueue_workflow(
            chord([add.s(i, 1) for i in range(5)], total.pipe()))
        assert await g.result(asyncq_client, timeout=30) == [2 * i for i in range(20)]
        assert await c.result(asyncq_client, timeout=30) == sum(i + 1 for i in range(5))


async def test_nested_composition(wf_redis: redis.asyncio.Redis,
                                  asyncq_worker: WorkerFactory, asyncq_client: Client) -> None:
    # a group of chains, a chain of groups, a group inside a group, raw steps among typed
    flow = chain(
        group(chain(add.s(1, 1), mul.pipe(10)), chain(add.s(2, 2), mul.pipe(10)),
              group(add.s(0, 1), add.s(0, 2))),
        echo.pipe(),
        Task("wf:count"),
        group(mul.pipe(2), mul.pipe(3)),
    )
    async with asyncq_worker(mux, **FAST):
        handle = await asyncq_client.enqueue_workflow(flow)
        # echo gets [[20], ...]: [20, 40, [1, 2]] -> count -> 3 -> [6, 9]
        assert await handle.result(asyncq_client, timeout=30) == [6, 9]


async def test_raw_steps_take_the_previous_value_as_payload(
        wf_redis: redis.asyncio.Redis, asyncq_worker: WorkerFactory,
        asyncq_client: Client) -> None:
    flow = chain(Task("wf:ledger", {"a": 1}), Task("wf:ledger"), ("wf:ledger", "fixed"))
    async with asyncq_worker(mux, **FAST):
        handle = await asyncq_client.enqueue_workflow(flow)
        assert await asyncq_client.result(handle.id, timeout=30) == "fixed"
    runs = [r.decode() for r in await wf_redis.lrange(LEDGER, 0, -1)]
    assert runs == [f"{handle.id}.0", f"{handle.id}.1", f"{handle.id}.2"]


async def test_group_of_10000_with_chord_callback(
        wf_redis: redis.asyncio.Redis, asyncq_worker: WorkerFactory,
        asyncq_client: Client) -> None:
    flow = chord(group(*(Task("wf:noop", i) for i in range(10_000))), Task("wf:count"))
    async with asyncq_worker(mux, concurrency=50, **FAST):
        started = time.monotonic()
        handle = await asyncq_client.enqueue_workflow(flow)
        assert await asyncq_client.result(handle.id, timeout=60) == 10_000
        elapsed = time.monotonic() - started
    # the callback ran once; no key of the workflow holds more than the group's results
    assert await wf_redis.lrange(LEDGER, 0, -1) == [f"{handle.id}.10000".encode()]
    wk = K.workflow_keys(handle.id)
    assert await wf_redis.hlen(wk.results) == 10_001
    assert await wf_redis.scard(wk.ready) == 0
    assert elapsed < 60


async def test_steps_wait_in_their_queue_until_released(
        wf_redis: redis.asyncio.Redis, asyncq_worker: WorkerFactory,
        asyncq_client: Client, asyncq_inspector: Inspector) -> None:
    handle = await asyncq_client.enqueue_workflow(chain(add.s(1, 1), mul.pipe(3)))
    first = await asyncq_inspector.task_info("default", f"{handle.id}.0")
    second = await asyncq_inspector.task_info("default", f"{handle.id}.1")
    assert first.state is TaskState.PENDING
    assert second.state is TaskState.WAITING
    assert first.headers["asyncq-workflow"] == handle.id
    # a waiting step is neither run nor archived by hand: its workflow releases it
    with pytest.raises(Exception, match="waiting for the steps before it"):
        await asyncq_inspector.run_task("default", second.id)
    info = await asyncq_inspector.workflow(handle.id)
    assert info.state is WorkflowState.RUNNING
    assert [(s.node, s.state) for s in info.nodes] == [("0", "pending"), ("1", "waiting")]
    async with asyncq_worker(mux, **FAST):
        assert await handle.result(asyncq_client, timeout=30) == 6
    info = await asyncq_inspector.workflow(handle.id)
    assert info.state is WorkflowState.SUCCEEDED and info.done == 2
    assert [w.id for w in await asyncq_inspector.workflows()] == [handle.id]


async def test_after_runs_a_task_once_its_dependencies_succeeded(
        wf_redis: redis.asyncio.Redis, asyncq_worker: WorkerFactory,
        asyncq_client: Client) -> None:
    done_before = await asyncq_client.enqueue("wf:ledger", "early", retention=60)
    async with asyncq_worker(mux, **FAST):
        await asyncq_client.wait(done_before, timeout=30)
        later = await asyncq_client.enqueue("wf:sleep", 0.3)
        dependent = await asyncq_client.enqueue("wf:ledger", "after",
                                                after=[done_before, later.id])
        assert dependent.state is TaskState.WAITING
        assert await asyncq_client.result(dependent, timeout=30) == "after"
    runs = [r.decode() for r in await wf_redis.lrange(LEDGER, 0, -1)]
    assert runs == [done_before.id, later.id, dependent.id]


async def test_after_a_missing_task_fails_before_anything_runs(
        wf_redis: redis.asyncio.Redis, asyncq_client: Client) -> None:
    with pytest.raises(TaskNotFoundError, match="does not exist"):
        await asyncq_client.enqueue("wf:ledger", "x", task_id="dependent",
                                    after=[("default", "nope")])
    assert not await wf_redis.exists(K.queue_keys("default").task("dependent"))


async def test_bad_input_is_refused_before_anything_is_written(
        wf_redis: redis.asyncio.Redis, asyncq_client: Client) -> None:
    with pytest.raises(TypeError, match="'y'"):
        add.s(1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="too many"):
        mul.pipe(1, 2)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="at least one step"):
        group()
    with pytest.raises(ValueError, match="process_at/process_in"):
        await asyncq_client.enqueue_workflow(chain(Task("wf:noop", process_in=60)))
    with pytest.raises(ValueError, match="must start with 'wf-'"):
        await asyncq_client.enqueue_workflow(add.s(1, 1), workflow_id="mine")
    with pytest.raises(ValueError, match="reserved for workflows"):
        Task("wf:noop", queue="wf:x")
    assert await wf_redis.dbsize() == 0


async def test_tasks_outside_workflows_leave_no_outbox_record(
        wf_redis: redis.asyncio.Redis, asyncq_worker: WorkerFactory,
        asyncq_client: Client) -> None:
    async with asyncq_worker(mux, **FAST) as w:
        for i in range(20):
            await asyncq_client.enqueue("wf:noop", i)
        await asyncq_client.enqueue("wf:maybe_fail", max_retry=0)
        await w.wait_drained()
    assert not await wf_redis.exists(K.queue_keys("default").wf_outbox)
    assert not [k async for k in wf_redis.scan_iter("asyncq:{wf:*")]


async def test_a_workflow_id_of_yours_and_an_existing_one(
        wf_redis: redis.asyncio.Redis, asyncq_worker: WorkerFactory,
        asyncq_client: Client) -> None:
    handle = await asyncq_client.enqueue_workflow(add.s(2, 3), workflow_id="wf-order-17")
    assert handle.id == "wf-order-17"
    with pytest.raises(Exception, match="already exists"):
        await asyncq_client.enqueue_workflow(add.s(2, 3), workflow_id="wf-order-17")
    async with asyncq_worker(mux, **FAST):
        assert await asyncq_client.result("wf-order-17", timeout=10) == 5
    await wait_until(lambda: True)
