"""The Grafana dashboard in examples/observability queries only metrics asyncq exports, and
shows the backlog and the shipped alerts."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import asyncq
from asyncq.metrics import WorkerMetrics, queue_metrics_app

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "examples" / "observability" / "grafana" / "dashboards" / "asyncq.json"
RULES = ROOT / "asyncq" / "metrics" / "alerts.yml"


def exported(text: str) -> set[str]:
    return {s.name for f in text_string_to_metric_families(text) for s in f.samples}


@pytest.mark.anyio
async def test_every_metric_the_dashboard_queries_is_exported(
    asyncq_client: asyncq.Client, asyncq_queue: str, asyncq_redis_url: str,
) -> None:
    await asyncq_client.enqueue("t", queue=asyncq_queue)
    app = queue_metrics_app(asyncq_redis_url)
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://m") as http:
            names = exported((await http.get("/metrics")).text)
    finally:
        await app.aclose()
    registry = CollectorRegistry()
    worker = WorkerMetrics(registry)
    worker.bind(concurrency=4, in_flight=lambda: 1, prefetched=lambda: 0)
    worker.started(asyncq_queue, "t", 0.01)
    worker.finished(asyncq_queue, "t", "succeeded", False, 0.002)
    worker.redis_error("ack")
    worker.lease_renewals_failed(1)
    names |= exported(generate_latest(registry).decode())

    doc = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in doc["panels"] for t in p["targets"]]
    queried = {m for e in exprs for m in re.findall(r"\basyncq_[a-z_]+", e)}
    assert len(queried) >= 12
    assert queried <= names, sorted(queried - names)


def test_the_dashboard_shows_the_backlog_and_every_shipped_alert() -> None:
    doc = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in doc["panels"] for t in p["targets"]]
    assert any("asyncq_queue_backlog" in e for e in exprs)
    alerts = re.findall(r"^\s+- alert: (\w+)$", RULES.read_text(), re.MULTILINE)
    assert len(alerts) >= 7
    shown = [re.compile(m) for e in exprs
             for m in re.findall(r'ALERTS\{alertname=~"([^"]+)"', e)]
    assert shown
    for pattern in shown:  # each alerts panel lists every shipped alert
        assert [a for a in alerts if not pattern.fullmatch(a)] == []
