"""A worker's metrics stay bounded by default whatever it serves: a pattern's queues share its
label, task types past a bound share ``other``, no ``_created`` series; each bound can be
changed (WorkerMetrics arguments, ``asyncq worker`` flags)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest

import asyncq
from asyncq._testing.redis_server import RedisServer
from asyncq.metrics import WorkerMetrics
from asyncq.testing import WorkerFactory, wait_until
from tests.helpers.ports import free_port
from tests.helpers.processes import spawn, worker_command
from tests.helpers.prom import samples

QUEUES, TYPES = 1000, 50
#: The documented bound (docs/how-to/observability.md) of one worker's exposition with the
#: default labels, however many queues its patterns serve and task types it runs.
MAX_SAMPLES, MAX_BYTES = 2000, 256 * 1024


def many_types() -> asyncq.ServeMux:
    mux = asyncq.ServeMux()
    for n in range(TYPES):
        @mux.handler(f"kind{n}")
        async def run(task: asyncq.Task) -> None:
            pass
    return mux


def runs(registry: CollectorRegistry) -> float:
    return sum(v for (name, _), v in samples(generate_latest(registry).decode()).items()
               if name == "asyncq_worker_task_outcomes_total")


@pytest.mark.anyio
@pytest.mark.timeout(300)
async def test_a_thousand_queues_by_fifty_types_stay_under_the_documented_size(
    asyncq_client: asyncq.Client, asyncq_queue: str, asyncq_worker: WorkerFactory,
) -> None:
    registry = CollectorRegistry()
    # every queue gets two task types, every type runs from 40 queues: what the labels see
    # is the 1 000 queues and the 50 types (a run per pair would take minutes, not change it)
    tasks = [asyncq.Task(f"kind{(q + shift) % TYPES}", queue=f"{asyncq_queue}:{q}")
             for q in range(QUEUES) for shift in (0, TYPES // 2)]
    await asyncq_client.enqueue_many(tasks)
    async with asyncq_worker(many_types(), queues={f"{asyncq_queue}:*": 1}, concurrency=50,
                             metrics=WorkerMetrics(registry)):
        await wait_until(lambda: runs(registry) == len(tasks), timeout=240, interval=0.5,
                         message="every task run")  # (each poll renders the exposition)
    text = generate_latest(registry)
    found = samples(text.decode())
    assert len(found) < MAX_SAMPLES and len(text) < MAX_BYTES, (len(found), len(text))
    labels = {dict(lbl).get("queue") for (name, lbl) in found
              if name == "asyncq_worker_task_outcomes_total"}
    assert labels == {f"{asyncq_queue}:*"}
    types = {dict(lbl)["type"] for (name, lbl) in found
             if name == "asyncq_worker_task_outcomes_total"}
    assert len(types) == 31 and "other" in types
    assert not [name for name, _ in found if name.endswith("_created")]
    # every run is counted, the folded ones included
    assert runs(registry) == 2 * QUEUES


@pytest.mark.anyio
async def test_queues_can_be_labelled_by_name_and_types_by_a_bound(
    asyncq_client: asyncq.Client, asyncq_queue: str, asyncq_worker: WorkerFactory,
) -> None:
    registry = CollectorRegistry()
    q = asyncq_queue
    await asyncq_client.enqueue_many(
        [asyncq.Task(f"kind{t}", queue=f"{q}:{n}") for n in range(3) for t in range(4)]
        + [asyncq.Task("kind0", queue=f"{q}:vip")])
    metrics = WorkerMetrics(registry, queues="name", task_types=2)
    async with asyncq_worker(many_types(), queues={f"{q}:*": 1, f"{q}:vip": 5},
                             metrics=metrics):
        await wait_until(lambda: runs(registry) == 13, message="every task run")
    found = samples(generate_latest(registry).decode())
    pairs = {(dict(lbl)["queue"], dict(lbl)["type"]) for (name, lbl), v in found.items()
             if name == "asyncq_worker_task_outcomes_total" and v}
    assert {queue for queue, _ in pairs} == {f"{q}:0", f"{q}:1", f"{q}:2", f"{q}:vip"}
    assert len({kind for _, kind in pairs} - {"other"}) == 2
    assert "other" in {kind for _, kind in pairs}


def test_a_queue_named_in_the_worker_keeps_its_name_beside_a_pattern() -> None:
    metrics = WorkerMetrics(CollectorRegistry())
    metrics.bind_queues(["tenant:vip", "tenant:*", "mail"])
    assert metrics.labels("tenant:vip", "t") == ("tenant:vip", "t")
    assert metrics.labels("tenant:42", "t") == ("tenant:*", "t")
    assert metrics.labels("mail", "t") == ("mail", "t")


def test_bad_bounds_say_what_is_accepted() -> None:
    with pytest.raises(ValueError, match="queues must be 'pattern'"):
        WorkerMetrics(CollectorRegistry(), queues="all")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="0 or more"):
        WorkerMetrics(CollectorRegistry(), task_types=-1)
    with pytest.raises(ValueError, match="task_types"):
        WorkerMetrics(CollectorRegistry(), task_types=True)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="task_types"):
        WorkerMetrics(CollectorRegistry(), task_types=3.5)  # type: ignore[arg-type]


@pytest.mark.anyio
@pytest.mark.timeout(120)
async def test_the_worker_command_sets_both_bounds(tmp_path: Path) -> None:
    port = free_port()
    with RedisServer() as redis:
        async with asyncq.Client(redis.url) as client:
            await client.enqueue_many([asyncq.Task(f"alert:{kind}", queue=f"t:{n}", max_retry=0)
                                       for n in range(2) for kind in ("ok", "fail")])
        command = worker_command(redis.url, "t:*", "--metrics-port", str(port),
                                 "--metrics-queue-label", "name", "--metrics-task-types", "1",
                                 target="tests.apps.alerting:mux")
        async with spawn(command, tmp_path / "worker.log"), httpx.AsyncClient() as http:
            async def scraped() -> dict[tuple[str, str], float] | None:
                try:
                    text = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
                except httpx.TransportError:
                    return None
                found = {(dict(lbl)["queue"], dict(lbl)["type"]): v
                         for (name, lbl), v in samples(text).items()
                         if name == "asyncq_worker_task_run_seconds_count"}
                return found if sum(found.values()) == 4 else None
            found = await wait_until(scraped, timeout=60, message="4 runs scraped")
    assert {queue for queue, _ in found} == {"t:0", "t:1"}
    assert len({kind for _, kind in found}) == 2 and "other" in {kind for _, kind in found}


def test_the_worker_command_rejects_a_bad_type_bound(tmp_path: Path) -> None:
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-m", "asyncq", "worker", "tests.apps.alerting:mux",
                          "--metrics-task-types", "many"], capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode == 2
    assert "expected a number of task types or 'all'" in out.stderr
