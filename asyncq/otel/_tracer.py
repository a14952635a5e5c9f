"""asyncq's Tracer on the OpenTelemetry API, following the messaging semantic conventions."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind

from .. import __version__, _tracing
from .._broker import NewTask
from .._model._message import TaskMessage
from .._model._task import Task

SYSTEM = "asyncq"


class OtelTracer:
    """Producer and consumer spans, the trace context in the task headers."""

    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        self._tracer = trace.get_tracer("asyncq", __version__, tracer_provider=tracer_provider)

    @contextmanager
    def producing(self, tasks: list[NewTask]) -> Iterator[object]:
        first = tasks[0].msg
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM, "messaging.operation.type": "send",
            "messaging.operation.name": "enqueue" if len(tasks) == 1 else "enqueue_many",
            "messaging.destination.name": first.queue,
        }
        if len(tasks) == 1:
            attributes["messaging.message.id"] = first.id
            attributes["asyncq.task.type"] = first.type
        else:
            attributes["messaging.batch.message_count"] = len(tasks)
        name = f"send {first.queue}" if all(t.msg.queue == first.queue for t in tasks) \
            else "send"
        with self._tracer.start_as_current_span(name, kind=SpanKind.PRODUCER,
                                                attributes=attributes) as span:
            carrier: dict[str, str] = {}
            propagate.inject(carrier)
            if carrier:
                for new in tasks:
                    new.msg.headers = {**new.msg.headers, **carrier}
            yield span

    @contextmanager
    def consuming(self, msg: TaskMessage, task: Task) -> Iterator[object]:
        parent = propagate.extract(msg.headers) if msg.headers else None
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM, "messaging.operation.type": "process",
            "messaging.operation.name": "process", "messaging.destination.name": msg.queue,
            "messaging.message.id": msg.id, "asyncq.task.type": msg.type,
            "asyncq.task.retried": task.retried,
        }
        with self._tracer.start_as_current_span(
                f"process {msg.queue}", context=parent, kind=SpanKind.CONSUMER,
                attributes=attributes, record_exception=True,
                set_status_on_exception=True) as span:
            yield span

    def log_context(self) -> dict[str, Any]:
        ctx = trace.get_current_span().get_span_context()
        if not ctx.is_valid:
            return {}
        return {"trace_id": format(ctx.trace_id, "032x"), "span_id": format(ctx.span_id, "016x")}


def instrument(tracer_provider: trace.TracerProvider | None = None) -> OtelTracer:
    """Trace every enqueue and handler run of this process (the global tracer provider
    unless one is given); returns the installed tracer."""
    tracer = OtelTracer(tracer_provider)
    _tracing.install(tracer)
    return tracer


def uninstrument() -> None:
    """Stop tracing: asyncq is back to paying nothing for it."""
    _tracing.install(None)


__all__ = ["OtelTracer", "instrument", "uninstrument"]
