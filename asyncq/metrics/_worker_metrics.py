"""Metrics from inside a worker: run time and queue wait histograms, outcomes, in-flight and
prefetched gauges, Redis errors, failed lease renewals and limit deferrals."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Literal

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Metric,
    generate_latest,
)
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from .._observe import RunOutcome

RUN_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
               60, 300, 900, 3600)
LAG_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
WAIT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
                60, 300, 900, 3600, 21600, 86400)


class WorkerMetrics:
    """Prometheus metrics of one worker process, registered in ``registry`` (prometheus_client's
    default unless given). ``task_types``: ``"all"`` labels each task type, ``"none"`` leaves
    the type label empty, an iterable of names keeps those and labels the rest ``"other"`` —
    so unbounded task types cannot blow up a Prometheus server."""

    def __init__(self, registry: CollectorRegistry | None = REGISTRY, *,
                 task_types: Literal["all", "none"] | Iterable[str] = "all",
                 namespace: str = "asyncq_worker") -> None:
        if task_types == "all":
            self._type: Callable[[str], str] = _same
        elif task_types == "none":
            self._type = _blank
        elif isinstance(task_types, str):
            raise ValueError(f"task_types must be 'all', 'none' or a collection of task "
                             f"types, got {task_types!r}")
        else:
            allowed = frozenset(task_types)
            self._type = lambda t: t if t in allowed else "other"
        labels = ["queue", "type"]
        kw = {"registry": registry, "namespace": namespace}
        self.run_time = Histogram("task_run_seconds", "Time a handler ran", labels,
                                  buckets=RUN_BUCKETS, **kw)  # type: ignore[arg-type]
        self.queue_wait = Histogram(
            "task_queue_wait_seconds", "Time a task waited pending before it started",
            labels, buckets=WAIT_BUCKETS, **kw)  # type: ignore[arg-type]
        self.outcomes = Counter("task_outcomes", "Runs by how they ended",
                                [*labels, "outcome"], **kw)  # type: ignore[arg-type]
        self.failures = Counter("task_failures", "Runs whose handler failed", labels,
                                **kw)  # type: ignore[arg-type]
        self.in_flight = Gauge("tasks_in_flight", "Handlers running now",
                               **kw)  # type: ignore[arg-type]
        self.prefetched = Gauge("tasks_prefetched", "Tasks leased and waiting for a slot",
                                **kw)  # type: ignore[arg-type]
        self.concurrency = Gauge("concurrency", "Most handlers at once",
                                 **kw)  # type: ignore[arg-type]
        self.redis_errors = Counter("redis_errors", "Failed Redis calls by operation",
                                    ["operation"], **kw)  # type: ignore[arg-type]
        self.limit_deferrals = Counter(
            "task_limit_deferrals", "Tasks deferred instead of run: a rate or concurrency "
            "limit refused them", labels, **kw)  # type: ignore[arg-type]
        self.loop_lag = Histogram(
            "event_loop_lag_seconds", "How late the worker's event loop ran a callback due "
            "now (sampled every 0.25 s): high when something blocks the loop",
            buckets=LAG_BUCKETS, **kw)  # type: ignore[arg-type]
        self.loop_blocked = Gauge(
            "event_loop_blocked_seconds", "Seconds since the worker's event loop last turned "
            "(read from another thread: it grows while the loop is blocked)",
            **kw)  # type: ignore[arg-type]
        self.loop_stalls = Counter(
            "event_loop_stalls", "Loop turns longer than stall_warning (each one logged, "
            "rate-limited)", **kw)  # type: ignore[arg-type]
        self.lease_failures = Counter("lease_renewals_failed", "Leases that could not be "
                                      "renewed", **kw)  # type: ignore[arg-type]

    def bind(self, *, concurrency: int, in_flight: Callable[[], int],
             prefetched: Callable[[], int]) -> None:
        self.concurrency.set(concurrency)
        self.in_flight.set_function(in_flight)
        self.prefetched.set_function(prefetched)

    def bind_loop(self, blocked: Callable[[], float]) -> None:
        """The worker's loop watch: seconds since its loop last turned."""
        self.loop_blocked.set_function(blocked)

    def loop_lagged(self, lag_s: float) -> None:
        """One sample of the loop's lag (every tick of the loop watch)."""
        self.loop_lag.observe(lag_s)

    def loop_stalled(self) -> None:
        """A loop turn longer than stall_warning (called from the watch thread)."""
        self.loop_stalls.inc()

    def started(self, queue: str, task_type: str, wait_s: float | None) -> None:
        if wait_s is not None:
            self.queue_wait.labels(queue, self._type(task_type)).observe(max(wait_s, 0.0))

    def finished(self, queue: str, task_type: str, outcome: RunOutcome, failed: bool,
                 run_s: float) -> None:
        kind = self._type(task_type)
        self.run_time.labels(queue, kind).observe(run_s)
        self.outcomes.labels(queue, kind, outcome).inc()
        if failed:
            self.failures.labels(queue, kind).inc()

    def redis_error(self, operation: str) -> None:
        self.redis_errors.labels(operation).inc()

    def lease_renewals_failed(self, count: int) -> None:
        self.lease_failures.inc(count)

    def limit_deferred(self, queue: str, task_type: str) -> None:
        self.limit_deferrals.labels(queue, self._type(task_type)).inc()


def _same(task_type: str) -> str:
    return task_type


def _blank(task_type: str) -> str:
    return ""


def merge_processes(expositions: Mapping[str, bytes], up: Mapping[str, bool], *,
                    label: str = "process") -> bytes:
    """One exposition of several worker processes' metrics: each process's samples get
    ``label`` (its stable index, not its pid, so a restarted process continues the same
    series), plus ``asyncq_worker_process_up`` per process (0 while it is down)."""
    families: dict[str, Metric] = {}
    for index, text in expositions.items():
        for family in text_string_to_metric_families(text.decode()):
            merged = families.get(family.name)
            if merged is None:
                merged = families[family.name] = Metric(family.name, family.documentation,
                                                        family.type, family.unit)
            merged.samples.extend(
                Sample(s.name, {**s.labels, label: index}, s.value, s.timestamp, s.exemplar)
                for s in family.samples)
    alive = Metric("asyncq_worker_process_up", "Whether the supervised worker process "
                   "answered this scrape (1) or is down/restarting (0)", "gauge")
    alive.samples.extend(Sample("asyncq_worker_process_up", {label: index}, float(ok))
                         for index, ok in up.items())
    families[alive.name] = alive
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(list(families.values())))
    return generate_latest(registry)


class _Fixed(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return self._families
