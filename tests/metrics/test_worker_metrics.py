"""Worker metrics after a known workload, against a real Redis and worker."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry, generate_latest

import asyncq
from asyncq._testing.redis_server import RedisServer
from asyncq.metrics import WorkerMetrics
from asyncq.testing import WorkerFactory, wait_until
from tests.helpers.prom import Key, key, outcome_mux, samples

pytestmark = pytest.mark.anyio


def registry_samples(registry: CollectorRegistry) -> dict[Key, float]:
    return samples(generate_latest(registry).decode())


async def test_outcomes_run_times_waits_and_gauges_after_a_known_workload(
    asyncq_client: asyncq.Client, asyncq_queue: str, asyncq_worker: WorkerFactory,
) -> None:
    registry = CollectorRegistry()
    metrics = WorkerMetrics(registry)
    gate, started = asyncio.Event(), asyncio.Event()
    q = asyncq_queue
    await asyncq_client.enqueue_many(
        [asyncq.Task("ok", i, queue=q) for i in range(4)]
        + [asyncq.Task("bad", 1, queue=q, max_retry=0),
           asyncq.Task("bad", 2, queue=q, max_retry=3),
           asyncq.Task("gone", queue=q)])
    async with asyncq_worker(outcome_mux(gate, started), queues={q: 1}, concurrency=4,
                             metrics=metrics) as w:
        await w.wait_drained(q)
        m = registry_samples(registry)
        hold = await asyncq_client.enqueue("hold", queue=q)
        async with asyncio.timeout(10):
            await started.wait()
        during = registry_samples(registry)
        gate.set()
        await w.wait_drained(q)
    assert hold.id
    assert m[key("asyncq_worker_task_outcomes_total", queue=q, type="ok",
                 outcome="succeeded")] == 4
    assert m[key("asyncq_worker_task_outcomes_total", queue=q, type="bad",
                 outcome="archived")] == 1
    assert m[key("asyncq_worker_task_outcomes_total", queue=q, type="bad",
                 outcome="retried")] == 1
    assert m[key("asyncq_worker_task_outcomes_total", queue=q, type="gone",
                 outcome="revoked")] == 1
    assert m[key("asyncq_worker_task_failures_total", queue=q, type="bad")] == 2
    assert m[key("asyncq_worker_task_run_seconds_count", queue=q, type="ok")] == 4
    assert m[key("asyncq_worker_task_queue_wait_seconds_count", queue=q, type="ok")] == 4
    assert m[key("asyncq_worker_task_queue_wait_seconds_sum", queue=q, type="ok")] >= 0
    assert m[key("asyncq_worker_concurrency")] == 4
    assert during[key("asyncq_worker_tasks_in_flight")] == 1


async def test_the_type_label_can_be_limited_or_turned_off(
    asyncq_client: asyncq.Client, asyncq_queue: str, asyncq_worker: WorkerFactory,
) -> None:
    limited, off = CollectorRegistry(), CollectorRegistry()
    q = asyncq_queue
    await asyncq_client.enqueue_many([asyncq.Task("ok", queue=q), asyncq.Task("gone", queue=q)])
    async with asyncq_worker(outcome_mux(), queues={q: 1},
                             metrics=WorkerMetrics(limited, task_types=["ok"])) as w:
        await w.wait_drained(q)
    await asyncq_client.enqueue("ok", queue=q)
    async with asyncq_worker(outcome_mux(), queues={q: 1},
                             metrics=WorkerMetrics(off, task_types="none")) as w:
        await w.wait_drained(q)
    types = {dict(labels).get("type") for (name, labels) in registry_samples(limited)
             if name == "asyncq_worker_task_outcomes_total"}
    assert types == {"ok", "other"}
    types = {dict(labels).get("type") for (name, labels) in registry_samples(off)
             if name == "asyncq_worker_task_outcomes_total"}
    assert types == {""}
    with pytest.raises(ValueError, match="task_types"):
        WorkerMetrics(CollectorRegistry(), task_types="some")


def test_redis_errors_and_lease_failures_are_present_at_0_before_any_error() -> None:
    # A rule like rate(asyncq_worker_redis_errors_total[5m]) > 0 sees the first failure only
    # if the series existed before it (no `or vector(0)` needed).
    registry = CollectorRegistry()
    WorkerMetrics(registry)
    m = registry_samples(registry)
    for operation in ("dequeue", "write outcomes", "renew leases"):
        assert m[key("asyncq_worker_redis_errors_total", operation=operation)] == 0
    assert m[key("asyncq_worker_lease_renewals_failed_total")] == 0


async def test_a_types_outcome_and_failure_counters_exist_at_0_from_its_first_run(
    asyncq_client: asyncq.Client, asyncq_queue: str, asyncq_worker: WorkerFactory,
) -> None:
    # The first failure of a type is then an increase from 0 that rate() and increase() see.
    registry = CollectorRegistry()
    gate, started = asyncio.Event(), asyncio.Event()
    async with asyncq_worker(outcome_mux(gate, started), queues={asyncq_queue: 1},
                             metrics=WorkerMetrics(registry)) as w:
        await asyncq_client.enqueue("hold", queue=asyncq_queue)
        async with asyncio.timeout(10):
            await started.wait()
        running = registry_samples(registry)
        gate.set()
        await w.wait_drained(asyncq_queue)
    assert running[key("asyncq_worker_task_failures_total", queue=asyncq_queue,
                       type="hold")] == 0
    for outcome in ("succeeded", "retried", "archived", "cancelled", "revoked", "lease_lost",
                    "requeued"):
        assert running[key("asyncq_worker_task_outcomes_total", queue=asyncq_queue,
                           type="hold", outcome=outcome)] == 0


async def test_the_redis_errors_a_worker_counts_are_series_it_had_from_the_start(
    aof_server: RedisServer,
) -> None:
    registry = CollectorRegistry()
    factory = WorkerFactory(aof_server.url)
    try:
        async with factory(outcome_mux(), queues={"q": 1}, metrics=WorkerMetrics(registry),
                           heartbeat_interval=0.2, idle_poll_interval=0.1):
            before = errors(registry)
            aof_server.stop()
            try:
                await wait_until(lambda: sum(errors(registry).values()) > 0, timeout=20,
                                 message="the worker counts failed Redis calls")
                during = errors(registry)
            finally:
                aof_server.start()
    finally:
        await factory.aclose()
    assert set(during) == set(before)


def errors(registry: CollectorRegistry) -> dict[Key, float]:
    return {k: v for k, v in registry_samples(registry).items()
            if k[0] == "asyncq_worker_redis_errors_total"}
