"""A real Prometheus (Debian's package) scrapes a worker process, a supervised worker (two
processes) and the `asyncq metrics` exporter, and evaluates the shipped alert rules (their
`for:` shortened): every series the rules read exists before any failure, every rule evaluates
without error, an operator's archive-all fires nothing, and the alerts fire when a known fault
is made (failing tasks, a blocked event loop, a frozen process, a killed worker, Redis stopped
— through which an alert already firing keeps firing —, the exporter stopped)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from anyio.abc import Process

import asyncq
from asyncq._testing.redis_server import RedisServer
from asyncq.testing import wait_until
from tests.helpers.ports import free_port
from tests.helpers.processes import spawn, worker_command

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "asyncq" / "metrics" / "alerts.yml"
DASHBOARD = ROOT / "examples" / "observability" / "grafana" / "dashboards" / "asyncq.json"
QUEUE = "alerts"
STALLS = "alerts-stalls"
HELD = "alerts-held"  # a queue no worker serves: the operator archives its tasks
NEVER = ("AsyncqBacklogGrowing", "AsyncqOldestPendingTooOld", "AsyncqWorkerRedisErrors")


def shortened(rules: str) -> str:
    """The shipped rules with every `for:` at 3 s (a rule needs two 1-s evaluations to fire,
    so a target merely slow to be scraped at start does not)."""
    text, n = re.subn(r"^(\s+)for: \S+$", r"\1for: 3s", rules, flags=re.MULTILINE)
    assert n == rules.count("- alert:")
    return text


class Prom:
    """The HTTP API of the Prometheus under test."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http

    async def query(self, expr: str) -> list[dict[str, Any]]:
        reply = (await self.http.get("/api/v1/query", params={"query": expr})).json()
        assert reply["status"] == "success", reply
        return list(reply["data"]["result"])

    async def rules(self) -> list[dict[str, Any]]:
        reply = (await self.http.get("/api/v1/rules")).json()
        return [r for g in reply["data"]["groups"] for r in g["rules"]]

    async def firing(self) -> dict[str, list[dict[str, str]]]:
        """The labels of each firing alert, by name."""
        out: dict[str, list[dict[str, str]]] = {}
        for alert in (await self.http.get("/api/v1/alerts")).json()["data"]["alerts"]:
            if alert["state"] == "firing":
                out.setdefault(alert["labels"]["alertname"], []).append(alert["labels"])
        return out

    async def fires(self, name: str, **labels: str) -> None:
        async def firing() -> bool:
            return any(labels.items() <= a.items() for a in (await self.firing()).get(name, []))
        await wait_until(firing, timeout=45, message=f"{name} {labels} firing")


@asynccontextmanager
async def prometheus(tmp: Path, exporter: int, worker: int, pod: int) -> AsyncIterator[Prom]:
    port = free_port()
    (tmp / "rules.yml").write_text(shortened(RULES.read_text()))
    (tmp / "prometheus.yml").write_text(f"""
global: {{scrape_interval: 1s, evaluation_interval: 1s, scrape_timeout: 1s}}
rule_files: [rules.yml]
scrape_configs:
  - job_name: asyncq-queues
    static_configs: [{{targets: ["127.0.0.1:{exporter}"]}}]
  - job_name: asyncq-workers
    static_configs: [{{targets: ["127.0.0.1:{worker}"]}}]
  # a supervisor waits up to 5 s for a process that does not answer: scraped at that pace
  - job_name: asyncq-pods
    scrape_interval: 6s
    scrape_timeout: 6s
    static_configs: [{{targets: ["127.0.0.1:{pod}"]}}]
""")
    command = [str(shutil.which("prometheus")), f"--config.file={tmp / 'prometheus.yml'}",
               f"--storage.tsdb.path={tmp / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
               "--log.level=warn"]
    async with spawn(command, tmp / "prometheus.log"), \
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
        async def ready() -> bool:
            try:
                return (await http.get("/-/ready")).status_code == 200
            except httpx.TransportError:
                return False
        await wait_until(ready, timeout=30, message="prometheus ready")
        yield Prom(http)


async def serving(url: str) -> None:
    async with httpx.AsyncClient() as http:
        async def up() -> bool:
            try:
                return (await http.get(url)).status_code == 200
            except httpx.TransportError:
                return False
        await wait_until(up, timeout=30, message=f"{url} serving")


@pytest.mark.timeout(240)
async def test_prometheus_scrapes_a_worker_and_the_exporter_and_the_rules_fire(
    tmp_path: Path,
) -> None:
    if shutil.which("prometheus") is None:
        pytest.skip("prometheus not found: `make prometheus-bin` installs Debian's prometheus")
    worker_port, exporter_port, pod_port = free_port(), free_port(), free_port()
    with RedisServer() as redis:
        worker_cmd = worker_command(
            redis.url, QUEUE, "--metrics-port", str(worker_port), "--lease-duration", "2",
            "--heartbeat-interval", "0.5", target="tests.apps.alerting:mux")
        pod_cmd = worker_command(
            redis.url, STALLS, "--metrics-port", str(pod_port), "--processes", "2",
            target="tests.apps.alerting:mux")
        exporter_cmd = [sys.executable, "-m", "asyncq", "metrics", "--port",
                        str(exporter_port), "--redis-url", redis.url]
        async with spawn(worker_cmd, tmp_path / "worker.log") as worker, \
                spawn(pod_cmd, tmp_path / "pod.log") as pod, \
                spawn(exporter_cmd, tmp_path / "exporter.log") as exporter, \
                asyncq.Client(redis.url) as client:
            await serving(f"http://127.0.0.1:{worker_port}/metrics")
            await serving(f"http://127.0.0.1:{pod_port}/metrics")
            await serving(f"http://127.0.0.1:{exporter_port}/metrics")
            await client.enqueue("alert:ok", queue=QUEUE)  # the queue is known from here
            await client.enqueue("alert:ok", queue=STALLS)
            async with prometheus(tmp_path, exporter_port, worker_port, pod_port) as prom:
                await steady_state(prom)
                await operator_archives(prom, client, redis)
                await pod_faults(prom, client, pod)
                await faults(prom, client, worker, exporter, redis)


async def steady_state(prom: Prom) -> None:
    """Both targets up; every series the rules read exists (at 0 where nothing happened);
    every rule evaluated without error; nothing fires."""
    async def both_up() -> bool:
        return len(await prom.query("up == 1")) == 3
    await wait_until(both_up, timeout=30, message="both targets scraped")
    queried = sorted({m for e in re.findall(r"expr: (?:>-\n)?((?:.*\n)+?)\s+for:",
                                            RULES.read_text())
                      for m in re.findall(r"\basyncq_[a-z_]+", e)})
    assert "asyncq_worker_redis_errors_total" in queried
    for name in queried:
        async def present(name: str = name) -> bool:
            return bool(await prom.query(f'count({{__name__="{name}"}})'))
        await wait_until(present, timeout=15, message=f"{name} scraped")
    errors = await prom.query("asyncq_worker_redis_errors_total")
    assert {r["metric"]["operation"] for r in errors} == {"dequeue", "write outcomes",
                                                          "renew leases"}
    assert all(float(r["value"][1]) == 0 for r in errors)

    async def evaluated() -> list[dict[str, Any]] | None:
        rules = await prom.rules()
        return rules if all(r["health"] != "unknown" for r in rules) else None
    rules = await wait_until(evaluated, timeout=15, message="every rule evaluated")
    assert len(rules) == 12
    assert [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"] == []

    async def quiet() -> bool:  # (an alert of Prometheus's first seconds, before any scrape,
        return await prom.firing() == {}  # resolves at the next evaluation)
    await wait_until(quiet, timeout=15, message="no alert firing")
    # every query of the Grafana dashboard is one this Prometheus answers
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        for target in panel["targets"]:
            await prom.query(target["expr"])


async def evaluations(prom: Prom, count: int) -> None:
    """Wait until every rule has been evaluated ``count`` more times (1 s apart)."""
    async def last() -> float:
        reply = (await prom.http.get("/api/v1/rules")).json()
        return min(_stamp(g["lastEvaluation"]) for g in reply["data"]["groups"])
    start = await last()

    async def done() -> bool:
        return await last() >= start + count
    await wait_until(done, timeout=count * 5 + 30, message=f"{count} rule evaluations")


def _stamp(text: str) -> float:
    """Seconds of an RFC 3339 time as Prometheus writes it (nanoseconds cut to micro)."""
    return datetime.fromisoformat(re.sub(r"(\.\d{6})\d+", r"\1", text)).timestamp()


async def operator_archives(prom: Prom, client: asyncq.Client, redis: RedisServer) -> None:
    """An operator archiving a queue's pending tasks is no failure: nothing fires."""
    await client.enqueue_many([asyncq.Task("alert:ok", i, queue=HELD) for i in range(5)])

    async def pending() -> bool:  # (Prometheus has seen the archive empty: it sees it grow)
        return bool(await prom.query(f'asyncq_tasks{{queue="{HELD}",state="pending"}} == 5'))
    await wait_until(pending, timeout=30, message="the pending tasks scraped")
    async with asyncq.Inspector(redis.url) as inspector:
        assert await inspector.archive_all(HELD, "pending") == 5

    async def scraped() -> bool:
        return bool(await prom.query(f'asyncq_tasks{{queue="{HELD}",state="archived"}} == 5'))
    await wait_until(scraped, timeout=30, message="the archived tasks scraped")
    await evaluations(prom, 8)  # (over twice the shortened for:)
    assert await prom.query('max_over_time(ALERTS{alertname="AsyncqArchiveGrowing"}[1h])') == []


async def pod_faults(prom: Prom, client: asyncq.Client, pod: Process) -> None:
    """A handler blocking its process's loop for 15 s, then a frozen process (SIGSTOP)."""
    await client.enqueue("alert:stall", queue=STALLS)
    await prom.fires("AsyncqWorkerLoopStalled", job="asyncq-pods")
    children = children_of(pod.pid)
    assert len(children) == 2, children
    frozen = int(children[0])
    os.kill(frozen, signal.SIGSTOP)
    try:
        await prom.fires("AsyncqWorkerProcessDown", job="asyncq-pods")
    finally:
        os.kill(frozen, signal.SIGCONT)
    pod.terminate()
    await pod.wait()
    await prom.fires("AsyncqWorkerTargetDown", job="asyncq-pods")


async def faults(prom: Prom, client: asyncq.Client, worker: Process, exporter: Process,
                 redis: RedisServer) -> None:
    # runs failing for good: the failure ratio and the archive grow
    await client.enqueue_many([asyncq.Task("alert:fail", i, queue=QUEUE, max_retry=0)
                               for i in range(4)])
    await prom.fires("AsyncqHighFailureRatio", queue=QUEUE)
    await prom.fires("AsyncqArchiveGrowing", queue=QUEUE)

    # a worker killed while it runs a task: no live worker, an expired lease nobody recovers
    await client.enqueue("alert:block", queue=QUEUE)

    async def running() -> bool:
        return bool(await prom.query(f'asyncq_tasks{{queue="{QUEUE}",state="active"}} == 1'))
    await wait_until(running, timeout=30, message="the blocking task active")
    worker.kill()
    await worker.wait()
    await prom.fires("AsyncqNoLiveWorkers")
    await prom.fires("AsyncqExpiredLeases", queue=QUEUE)
    await prom.fires("AsyncqWorkerTargetDown", job="asyncq-workers")
    since = await active_since(prom, "AsyncqExpiredLeases")

    # Redis stopped: the exporter answers asyncq_up 0 and no queue series; the alerts on the
    # queues keep firing through the gap (the same alert, active since before it); then the
    # exporter itself stops
    redis.stop()
    await prom.fires("AsyncqRedisUnreachable")
    await evaluations(prom, 4)
    assert not await prom.query(f'asyncq_tasks{{queue="{QUEUE}"}}')  # (the gap is real)
    assert await active_since(prom, "AsyncqExpiredLeases") == since
    exporter.terminate()
    await exporter.wait()
    await prom.fires("AsyncqExporterDown")

    ever = await prom.query(f'max_over_time(ALERTS{{alertname=~"{"|".join(NEVER)}"}}[1h])')
    assert ever == []


async def active_since(prom: Prom, name: str) -> str:
    """When the firing alert ``name`` became active (a new activeAt: it resolved meanwhile)."""
    alerts = [a for a in (await prom.http.get("/api/v1/alerts")).json()["data"]["alerts"]
              if a["labels"]["alertname"] == name and a["state"] == "firing"]
    assert len(alerts) == 1, alerts
    return str(alerts[0]["activeAt"])


def children_of(pid: int) -> list[str]:
    """The pids of a process's children (Linux)."""
    return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
