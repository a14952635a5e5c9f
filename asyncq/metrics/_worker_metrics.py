"""Metrics from inside a worker: run time and queue wait histograms, outcomes, in-flight and
prefetched gauges, Redis errors, failed lease renewals and limit deferrals."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Literal, get_args

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from .._observe import RunOutcome

# -- counters present at 0 (H-METRICS, issue 28): an alert rule's rate() sees the first
# increase only if the series existed before it, so these label sets are created up front.
#: The operations whose failed Redis calls a worker counts (its dequeue, acker, heartbeat).
REDIS_OPERATIONS = ("dequeue", "write outcomes", "renew leases")
#: Every outcome a run can have, created at 0 for a (queue, type) when it is first seen.
OUTCOMES: tuple[RunOutcome, ...] = get_args(RunOutcome)

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
        self.registry = registry
        """Where the metrics are registered (None: nowhere)."""
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
        self.threads_left_behind = Counter(
            "sync_threads_left_behind", "Sync handler threads still running after their task "
            "ended (timed out, cancelled): each holds a sync_threads slot until it returns",
            labels, **kw)  # type: ignore[arg-type]
        self.threads_still_running = Gauge(
            "sync_threads_still_running", "Sync handler threads left behind that still run: "
            "their task ended (timed out, cancelled), the thread has not returned yet", labels,
            **kw)  # type: ignore[arg-type]
        self.memory_recycles = Counter(
            "process_memory_recycles", "Handler child processes replaced after a task because "
            "their resident memory passed max_memory_per_child", labels,
            **kw)  # type: ignore[arg-type]
        self.progress_writes = Counter(
            "progress_writes", "Progress reports written (stored) or refused (the task was no "
            "longer leased to this worker), after coalescing", ["queue", "result"],
            **kw)  # type: ignore[arg-type]
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
        for operation in REDIS_OPERATIONS:
            self.redis_errors.labels(operation)
        self._seen: set[tuple[str, str]] = set()

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
        kind = self._type(task_type)
        self._first_seen(queue, kind)
        if wait_s is not None:
            self.queue_wait.labels(queue, kind).observe(max(wait_s, 0.0))

    def _first_seen(self, queue: str, kind: str) -> None:
        """Create a (queue, type)'s outcome and failure counters at 0 when it first runs."""
        if (queue, kind) in self._seen:
            return
        self._seen.add((queue, kind))
        self.failures.labels(queue, kind)
        for outcome in OUTCOMES:
            self.outcomes.labels(queue, kind, outcome)

    def finished(self, queue: str, task_type: str, outcome: RunOutcome, failed: bool,
                 run_s: float) -> None:
        kind = self._type(task_type)
        self._first_seen(queue, kind)
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

    def thread_left_behind(self, queue: str, task_type: str) -> None:
        kind = self._type(task_type)
        self.threads_left_behind.labels(queue, kind).inc()
        self.threads_still_running.labels(queue, kind).inc()

    def thread_returned(self, queue: str, task_type: str) -> None:
        """A thread left behind returned: it no longer runs."""
        self.threads_still_running.labels(queue, self._type(task_type)).dec()

    def progress_written(self, queue: str, stored: bool) -> None:
        self.progress_writes.labels(queue, "stored" if stored else "refused").inc()

    def process_over_memory(self, queue: str, task_type: str) -> None:
        self.memory_recycles.labels(queue, self._type(task_type)).inc()


def _same(task_type: str) -> str:
    return task_type


def _blank(task_type: str) -> str:
    return ""


def merge_processes(expositions: Mapping[str, bytes], up: Mapping[str, bool], *,
                    label: str = "process") -> bytes:
    """One exposition (text format 0.0.4) of several worker processes' metrics: each sample
    gets ``label`` (the process's stable index, not its pid, so a restarted process continues
    the same series), each family is written once with every process's samples, and
    ``asyncq_worker_process_up`` says which processes answered (0: down or restarting).

    Done on the text, line by line (a sample's name never holds a space or a brace), which is
    about 20 times cheaper than parsing the samples and writing them again."""
    families: dict[str, tuple[list[bytes], list[bytes]]] = {}  # name -> (comments, samples)
    for index, text in expositions.items():
        tag = b'%s="%s"' % (label.encode(), index.encode())
        current: list[bytes] | None = None
        for line in text.splitlines():
            if not line:
                continue
            if line.startswith(b"#"):
                parts = line.split(b" ", 3)
                if len(parts) >= 3 and parts[1] in (b"HELP", b"TYPE"):
                    family = families.setdefault(parts[2].decode(), ([], []))
                    if line not in family[0]:
                        family[0].append(line)
                    current = family[1]
                continue
            if current is None:  # (a sample before any HELP/TYPE: a family of its own)
                current = families.setdefault("", ([], []))[1]
            cut = min(i for i in (line.find(b"{"), line.find(b" ")) if i >= 0)
            if line[cut:cut + 2] == b"{}":
                current.append(line[:cut + 1] + tag + line[cut + 1:])
            elif line[cut:cut + 1] == b"{":
                current.append(line[:cut + 1] + tag + b"," + line[cut + 1:])
            else:
                current.append(line[:cut] + b"{" + tag + b"}" + line[cut:])
    out: list[bytes] = []
    for comments, lines in families.values():
        out += comments
        out += lines
    out.append(b"# HELP asyncq_worker_process_up Whether the supervised worker process "
               b"answered this scrape (1) or is down or restarting (0)")
    out.append(b"# TYPE asyncq_worker_process_up gauge")
    out += [b'asyncq_worker_process_up{%s="%s"} %d' % (label.encode(), index.encode(), ok)
            for index, ok in up.items()]
    return b"\n".join(out) + b"\n"
