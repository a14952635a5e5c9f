"""A worker target that traces with OpenTelemetry, writing finished spans as JSON lines to
$ASYNCQ_TEST_SPANS (tests/otel/test_tracing_worker.py)."""

from __future__ import annotations

import os

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

import asyncq
import asyncq.otel

_out = open(os.environ["ASYNCQ_TEST_SPANS"], "a", buffering=1)  # noqa: SIM115 (process-long)


def _line(span: ReadableSpan) -> str:
    return span.to_json(indent=None) + "\n"


provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=_out, formatter=_line)))
asyncq.otel.instrument(provider)

mux = asyncq.ServeMux()


@mux.handler("traced:ok")
async def ok(task: asyncq.Task) -> str:
    return "fine"


@mux.handler("traced:fail")
async def fail(task: asyncq.Task) -> None:
    raise ValueError("broken on purpose")
