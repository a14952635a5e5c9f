"""``asyncq worker --processes N --metrics-port --health-port``: one scrape counts every worker
process (labelled by its stable index), one /livez covers them all and fails when one is
stalled; a restarted process continues its index's series."""

from __future__ import annotations

import os
import signal
import sys
import urllib.error
import urllib.request
from pathlib import Path

import anyio
import orjson
import psutil
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from asyncq import Client
from asyncq._cli._supervisor import POLICY_ENV
from asyncq.metrics import WorkerMetrics
from asyncq.metrics._worker_metrics import merge_processes
from asyncq.testing import wait_until
from tests.helpers.processes import log_events, spawn
from tests.helpers.prom import key, samples

# Each test starts several processes, which a loaded machine starts slowly: more than the
# default 60 s before a test counts as hung.
pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]

APP = "tests.apps.blocking:mux"


def _get(port: int, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=15) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


async def get(port: int, path: str) -> tuple[int, bytes]:
    return await anyio.to_thread.run_sync(_get, port, path)


async def ports(log: Path) -> dict[str, int]:
    """What the supervisor serves where: "health probes" / "metrics" -> port."""
    def logged() -> dict[str, int] | None:
        found = {e["event"].removeprefix("serving ").removesuffix(" of every worker process"):
                 e["port"] for e in log_events(log) if e["event"].startswith("serving ")
                 and e.get("component") == "supervisor"}
        return found if len(found) == 2 else None
    served: dict[str, int] = await wait_until(logged, timeout=30, message="ports logged")
    return served


async def test_one_scrape_and_one_probe_cover_every_worker_process(
    asyncq_redis_url: str, asyncq_client: Client, asyncq_queue: str, tmp_path: Path,
) -> None:
    log = tmp_path / "supervisor.log"
    command = [sys.executable, "-m", "asyncq", "worker", APP, "--redis-url", asyncq_redis_url,
               "--queue", f"{asyncq_queue}=1", "--log-format", "json", "--processes", "2",
               "--metrics-port", "0", "--health-port", "0", "--stall-timeout", "1",
               "--concurrency", "1", "--prefetch", "0"]
    env = {**os.environ, POLICY_ENV: "first_delay=0.05,max_delay=0.2"}
    async with spawn(command, log, env=env) as proc:
        served = await ports(log)
        health, metrics = served["health probes"], served["metrics"]

        async def live_both() -> dict[str, object] | None:
            status, body = await get(health, "/livez")
            doc = orjson.loads(body)
            return doc if status == 200 and all(
                p["status"] == "ok" for p in doc["processes"].values()) else None
        live = await wait_until(live_both, timeout=30, message="both processes live")
        assert set(live["processes"]) == {"1", "2"}  # type: ignore[arg-type]
        async def ready() -> bool:
            return (await get(health, "/readyz"))[0] == 200
        await wait_until(ready, timeout=30, message="/readyz 200")

        # Tasks run by both processes: one scrape has each one's counter.
        for _ in range(20):
            await asyncq_client.enqueue("blocking:nap", {"s": 0.05}, queue=asyncq_queue)

        async def counted() -> dict[str, float] | None:
            found = samples((await get(metrics, "/metrics"))[1].decode())
            by_process = {p: found.get(key("asyncq_worker_task_outcomes_total", queue=asyncq_queue,
                                           type="blocking:nap", outcome="succeeded",
                                           process=p), 0) for p in ("1", "2")}
            return by_process if sum(by_process.values()) == 20 else None
        by_process = await wait_until(counted, timeout=30, message="20 runs scraped")
        assert all(by_process.values()), by_process  # both processes ran some
        found = samples((await get(metrics, "/metrics"))[1].decode())
        assert found[key("asyncq_worker_process_up", process="1")] == 1
        assert found[key("asyncq_worker_process_up", process="2")] == 1

        # One process blocked: the pod's /livez fails, naming it.
        await asyncq_client.enqueue("blocking:sleep", {"s": 4}, queue=asyncq_queue)

        async def stalled() -> dict[str, dict[str, object]] | None:
            status, body = await get(health, "/livez")
            return orjson.loads(body)["processes"] if status == 503 else None
        processes = await wait_until(stalled, timeout=15, message="/livez 503")
        assert sorted(p["status"] for p in processes.values()) == ["ok", "stalled"]
        await wait_until(live_both, timeout=15, message="live again")

        # A worker process killed and restarted keeps its index: no new series.
        children = psutil.Process(proc.pid).children()
        victim = children[0].pid
        os.kill(victim, signal.SIGKILL)
        await wait_until(lambda: any(e["event"] == "worker process started" and e["pid"]
                                     not in {c.pid for c in children}
                                     for e in log_events(log)), timeout=15,
                         message="a replacement process")
        await wait_until(live_both, timeout=30, message="the replacement is live")
        found = samples((await get(metrics, "/metrics"))[1].decode())
        indexes = {dict(labels).get("process") for _, labels in found}
        assert indexes == {"1", "2"}, indexes
        proc.send_signal(signal.SIGTERM)
        with anyio.fail_after(20):
            assert await proc.wait() == 0, log.read_text()[-2000:]


def test_the_merged_exposition_keeps_every_sample_of_every_process_once_per_family() -> None:
    registry = CollectorRegistry()
    metrics = WorkerMetrics(registry)
    metrics.finished("q", 'odd "type" {x} y', "succeeded", False, 0.1)
    metrics.redis_error("a b")
    text = generate_latest(registry)
    merged = merge_processes({"1": text, "2": text}, {"1": True, "2": True, "3": False})
    families = list(text_string_to_metric_families(merged.decode()))
    assert len({f.name for f in families}) == len(families)  # each family written once
    want = {(name, (*labels, ("process", p))): value
            for (name, labels), value in samples(text.decode()).items() for p in "12"}
    got = samples(merged.decode())
    assert {k: v for k, v in got.items() if not k[0].endswith("_up")} == {
        (name, tuple(sorted(labels))): value for (name, labels), value in want.items()}
    assert got[key("asyncq_worker_process_up", process="3")] == 0
    assert got[key("asyncq_worker_process_up", process="1")] == 1
