"""The alert rules shipped in the package: printed by `asyncq metrics --alert-rules`, querying
only metrics asyncq exports, valid for promtool with their unit tests passing."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import asyncq
from asyncq.metrics import WorkerMetrics, queue_metrics_app
from asyncq.metrics._worker_metrics import merge_processes

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "asyncq" / "metrics" / "alerts.yml"
RULE_TESTS = ROOT / "tests" / "metrics" / "alerts_test.yml"
ALERTS = {"AsyncqExporterDown", "AsyncqRedisUnreachable", "AsyncqNoLiveWorkers",
          "AsyncqOldestPendingTooOld", "AsyncqBacklogGrowing", "AsyncqHighFailureRatio",
          "AsyncqArchiveGrowing", "AsyncqExpiredLeases", "AsyncqWorkerRedisErrors",
          "AsyncqWorkerTargetDown", "AsyncqWorkerProcessDown", "AsyncqWorkerLoopStalled"}


def expressions(text: str) -> list[str]:
    """The `expr:` of every rule, folded (`>-`) ones included."""
    found = []
    for m in re.finditer(r"^(\s*)expr: (.*)\n((?:\1\s+.*\n)*)", text, re.MULTILINE):
        found.append(m.group(2) if m.group(2) != ">-" else " ".join(
            line.strip() for line in m.group(3).splitlines()))
    return found


def exported(text: str) -> set[str]:
    return {s.name for f in text_string_to_metric_families(text) for s in f.samples}


def test_the_command_prints_the_packaged_rules_without_the_prometheus_extra() -> None:
    code = ("import sys; sys.modules['prometheus_client'] = None\n"
            "from asyncq._cli import main\n"
            "sys.exit(main(['metrics', '--alert-rules']))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout == RULES.read_text()
    assert set(re.findall(r"^\s+- alert: (\w+)$", out.stdout, re.MULTILINE)) == ALERTS


@pytest.mark.anyio
async def test_every_metric_the_rules_query_is_exported_before_any_failure(
    asyncq_client: asyncq.Client, asyncq_queue: str, asyncq_redis_url: str,
) -> None:
    # A fresh exporter and a fresh worker (supervised: its processes' exposition merged) that
    # has run one task and failed none: a rule querying a series that appears only later (a
    # first Redis error, a first archived run) would need `or vector(0)`.
    await asyncq_client.enqueue("t", queue=asyncq_queue)
    app = queue_metrics_app(asyncq_redis_url)
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://m") as http:
            names = exported((await http.get("/metrics")).text)
    finally:
        await app.aclose()
    registry = CollectorRegistry()
    metrics = WorkerMetrics(registry)
    metrics.bind(concurrency=1, in_flight=lambda: 0, prefetched=lambda: 0)
    metrics.bind_loop(lambda: 0.0)
    metrics.finished(asyncq_queue, "t", "succeeded", False, 0.01)
    names |= exported(merge_processes({"1": generate_latest(registry)}, {"1": True}).decode())

    exprs = expressions(RULES.read_text())
    assert len(exprs) == len(ALERTS)
    queried = {m for e in exprs for m in re.findall(r"\basyncq_[a-z_]+", e)}
    assert queried <= names, sorted(queried - names)
    assert "asyncq_queue_backlog" in queried


def test_promtool_accepts_the_rules_their_unit_tests_and_the_example_config(
    tmp_path: Path,
) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not found: `make prometheus-bin` installs Debian's prometheus")
    check = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True,
                           text=True, timeout=60, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in check.stdout
    unit = subprocess.run([promtool, "test", "rules", str(RULE_TESTS)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert unit.returncode == 0, unit.stdout + unit.stderr
    # the docker compose example loads them (mounted at /etc/prometheus/asyncq-alerts.yml)
    example = (ROOT / "examples" / "observability" / "prometheus.yml").read_text()
    assert "/etc/prometheus/asyncq-alerts.yml" in example
    config = tmp_path / "prometheus.yml"
    config.write_text(example.replace("/etc/prometheus/asyncq-alerts.yml", str(RULES)))
    checked = subprocess.run([promtool, "check", "config", str(config)], capture_output=True,
                             text=True, timeout=60, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 1 rule files found" in checked.stdout
