"""Fixtures of the tracing tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import asyncq.otel
from asyncq import _tracing


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """asyncq traced in this process into an in-memory exporter; tracing off afterwards."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    asyncq.otel.instrument(provider)
    try:
        yield exporter
    finally:
        asyncq.otel.uninstrument()
        assert _tracing.active is None
