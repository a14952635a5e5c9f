"""Logging handlers with OpenTelemetry tracing on, for the log tests:
``asyncq worker tests.logging.tracedapp:mux`` (spans are made, not exported)."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider

import asyncq.otel
from tests.logging.logapp import mux

asyncq.otel.instrument(TracerProvider())

__all__ = ["mux"]
