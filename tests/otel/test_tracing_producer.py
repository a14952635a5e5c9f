"""Tracing the producer side: a PRODUCER span per enqueue, its context in the task headers."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

import asyncq
import asyncq._model._message
import asyncq.otel
from asyncq import _tracing

pytestmark = pytest.mark.anyio


async def test_enqueue_is_a_producer_span_whose_context_travels_in_the_headers(
    asyncq_client: asyncq.Client, asyncq_inspector: asyncq.Inspector, asyncq_queue: str,
    spans: InMemorySpanExporter,
) -> None:
    info = await asyncq_client.enqueue("email:send", {"to": "a"}, queue=asyncq_queue,
                                       headers={"tenant": "t1"})
    [span] = spans.get_finished_spans()
    assert span.kind is SpanKind.PRODUCER
    assert span.name == f"send {asyncq_queue}"
    attrs = dict(span.attributes or {})
    assert attrs["messaging.system"] == "asyncq"
    assert attrs["messaging.operation.type"] == "send"
    assert attrs["messaging.destination.name"] == asyncq_queue
    assert attrs["messaging.message.id"] == info.id
    assert attrs["asyncq.task.type"] == "email:send"
    stored = await asyncq_inspector.task_info(asyncq_queue, info.id)
    trace_id, span_id = format(span.context.trace_id, "032x"), format(span.context.span_id, "016x")
    assert stored.headers["traceparent"].startswith(f"00-{trace_id}-{span_id}-")
    assert stored.headers["tenant"] == "t1"  # the caller's headers are kept


async def test_enqueue_many_is_one_producer_span_for_the_batch(
    asyncq_client: asyncq.Client, asyncq_inspector: asyncq.Inspector, asyncq_queue: str,
    spans: InMemorySpanExporter,
) -> None:
    infos = await asyncq_client.enqueue_many(
        [asyncq.Task("t", i, queue=asyncq_queue) for i in range(5)])
    [span] = spans.get_finished_spans()
    assert dict(span.attributes or {})["messaging.batch.message_count"] == 5
    for info in infos:
        assert isinstance(info, asyncq.TaskInfo)
        stored = await asyncq_inspector.task_info(asyncq_queue, info.id)
        assert format(span.context.trace_id, "032x") in stored.headers["traceparent"]


async def test_a_failed_enqueue_records_the_error_on_its_span(
    asyncq_client: asyncq.Client, asyncq_queue: str, spans: InMemorySpanExporter,
) -> None:
    await asyncq_client.enqueue("t", queue=asyncq_queue, task_id="same")
    with pytest.raises(asyncq.TaskIDConflictError):
        await asyncq_client.enqueue("t", queue=asyncq_queue, task_id="same")
    failed = spans.get_finished_spans()[-1]
    assert not failed.status.is_ok
    assert any(e.name == "exception" for e in failed.events)


async def test_without_instrument_nothing_is_added_to_the_headers(
    asyncq_client: asyncq.Client, asyncq_inspector: asyncq.Inspector, asyncq_queue: str,
) -> None:
    assert _tracing.active is None
    info = await asyncq_client.enqueue("t", queue=asyncq_queue)
    assert (await asyncq_inspector.task_info(asyncq_queue, info.id)).headers == {}


def test_log_lines_written_inside_a_traced_run_carry_its_ids(
    spans: InMemorySpanExporter,
) -> None:
    from asyncq._log_setup import add_trace_ids

    assert add_trace_ids(None, "info", {"event": "outside"}) == {"event": "outside"}
    tracer = _tracing.active
    assert tracer is not None
    with tracer.consuming(asyncq._model._message.TaskMessage(id="t1", type="x", queue="q"),
                          asyncq.Task("x")) as span:
        line = add_trace_ids(None, "info", {"event": "inside"})
    ctx = span.get_span_context()  # type: ignore[attr-defined]
    assert line == {"event": "inside", "trace_id": f"{ctx.trace_id:032x}",
                    "span_id": f"{ctx.span_id:016x}"}
