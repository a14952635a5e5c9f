"""Worker metrics after a known workload, against a real Redis and worker."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry, generate_latest

import asyncq
from asyncq.metrics import WorkerMetrics
from asyncq.testing import WorkerFactory
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
