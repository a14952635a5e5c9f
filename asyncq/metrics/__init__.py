"""Prometheus metrics (``pip install 'asyncq[prometheus]'``).

``queue_metrics_app(redis)`` is an ASGI app exporting every queue's state, read from Redis when
scraped; ``asyncq metrics`` serves it stand-alone. ``WorkerMetrics`` is what a worker measures
from inside (``Worker(metrics=WorkerMetrics())``, ``asyncq worker --metrics-port N``).
"""

from __future__ import annotations

try:
    import prometheus_client  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "asyncq.metrics needs prometheus_client: pip install 'asyncq[prometheus]'") from exc

from ._queue_exporter import QueueExporter, QueueMetricsApp, queue_metrics_app
from ._worker_metrics import WorkerMetrics

__all__ = ["QueueExporter", "QueueMetricsApp", "WorkerMetrics", "queue_metrics_app"]
