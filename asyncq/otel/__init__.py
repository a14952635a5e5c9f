"""OpenTelemetry tracing (``pip install 'asyncq[otel]'``): ``asyncq.otel.instrument()``.

A PRODUCER span around every ``enqueue``/``enqueue_many``, the W3C trace context carried in
the task's headers, and a CONSUMER span, its child, around every run of the handler (retries
and scheduled runs included, so they all sit in the producer's trace).
"""

from __future__ import annotations

try:
    import opentelemetry.trace  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "asyncq.otel needs opentelemetry-api: pip install 'asyncq[otel]'") from exc

from ._tracer import OtelTracer, instrument, uninstrument

__all__ = ["OtelTracer", "instrument", "uninstrument"]
