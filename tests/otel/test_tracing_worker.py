"""Producer span in this process, consumer span in a real worker process: one trace; and the
same worker's metrics scraped over HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import asyncq
import asyncq.otel
from asyncq.testing import wait_until
from tests.helpers.ports import free_port
from tests.helpers.processes import worker_process
from tests.helpers.prom import samples

pytestmark = pytest.mark.anyio


def read_spans(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def test_a_handler_run_is_a_consumer_span_in_the_producers_trace(
    asyncq_client: asyncq.Client, asyncq_queue: str, asyncq_redis_url: str,
    spans: InMemorySpanExporter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    span_file = tmp_path / "spans.jsonl"
    span_file.touch()
    monkeypatch.setenv("ASYNCQ_TEST_SPANS", str(span_file))
    port = free_port()
    async with worker_process(asyncq_redis_url, asyncq_queue, tmp_path / "worker.log",
                              "--metrics-port", str(port), target="tests.apps.traced:mux"):
        assert await asyncq_client.apply("traced:ok", queue=asyncq_queue, timeout=20) == "fine"
        with pytest.raises(asyncq.TaskFailedError):
            await asyncq_client.apply("traced:fail", queue=asyncq_queue, max_retry=0,
                                      timeout=20)
        async with httpx.AsyncClient() as http:
            text = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
        await wait_until(lambda: len(read_spans(span_file)) >= 2, timeout=10,
                         message="the worker exported its two consumer spans")
    producers = {s.name: s for s in spans.get_finished_spans()}
    assert len(producers) == 1 and f"send {asyncq_queue}" in producers
    sent = sorted(spans.get_finished_spans(), key=lambda s: s.start_time)
    consumed = sorted(read_spans(span_file), key=lambda s: s["start_time"])
    assert [c["kind"] for c in consumed] == ["SpanKind.CONSUMER"] * 2
    for producer, consumer in zip(sent, consumed, strict=True):
        assert consumer["name"] == f"process {asyncq_queue}"
        assert consumer["context"]["trace_id"] == f"0x{producer.context.trace_id:032x}"
        assert consumer["parent_id"] == f"0x{producer.context.span_id:016x}"
        assert consumer["attributes"]["messaging.system"] == "asyncq"
        assert consumer["attributes"]["messaging.operation.type"] == "process"
        assert consumer["attributes"]["messaging.destination.name"] == asyncq_queue
        assert consumer["attributes"]["messaging.message.id"] == \
            producer.attributes["messaging.message.id"]  # type: ignore[index]
    assert consumed[0]["status"]["status_code"] == "UNSET"
    assert consumed[1]["status"]["status_code"] == "ERROR"
    assert any(e["name"] == "exception" and "broken on purpose" in json.dumps(e)
               for e in consumed[1]["events"])
    # The worker's own line about the failed run carries the run's trace and span ids.
    lines = [json.loads(line) for line in (tmp_path / "worker.log").read_text().splitlines()
             if line.startswith("{")]
    [archived] = [line for line in lines if line.get("event") == "task archived"]
    assert "0x" + archived["trace_id"] == consumed[1]["context"]["trace_id"]
    assert "0x" + archived["span_id"] == consumed[1]["context"]["span_id"]
    assert archived["type"] == "traced:fail" and archived["queue"] == asyncq_queue
    metrics = samples(text)
    ok = ("asyncq_worker_task_outcomes_total",
          (("outcome", "succeeded"), ("queue", asyncq_queue), ("type", "traced:ok")))
    bad = ("asyncq_worker_task_outcomes_total",
           (("outcome", "archived"), ("queue", asyncq_queue), ("type", "traced:fail")))
    assert metrics[ok] == 1 and metrics[bad] == 1
