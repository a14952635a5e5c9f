"""Metrics from inside a worker: run time and queue wait histograms, outcomes, in-flight and
prefetched gauges, Redis errors, failed lease renewals and limit deferrals.

Their labels are bounded by default, so one worker's exposition stays small whatever the
number of queues and task types it serves: a queue a pattern (``tenant:*``) serves is
labelled by the pattern, task types past the first ``TASK_TYPES`` fold into ``other``, and no
``_created`` series is written. Labels are decided once per (queue, type) and kept."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, get_args

import prometheus_client
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from .._observe import RunOutcome
from .._validate import is_queue_pattern, match_queue_patterns

# -- counters present at 0 (H-METRICS, issue 28): an alert rule's rate() sees the first
# increase only if the series existed before it, so these label sets are created up front.
#: The operations whose failed Redis calls a worker counts (its dequeue, acker, heartbeat).
REDIS_OPERATIONS = ("dequeue", "write outcomes", "renew leases")
#: Every outcome a run can have, created at 0 for a (queue, type) when it is first seen.
OUTCOMES: tuple[RunOutcome, ...] = get_args(RunOutcome)
#: By default the first this many task types a worker process runs keep their name as the
#: ``type`` label; later ones are labelled ``other``.
TASK_TYPES = 30
#: The label of the task types past the bound (or outside the names given).
OTHER = "other"
QueueLabel = Literal["pattern", "name"]

RUN_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
               60, 300, 900, 3600)
LAG_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
WAIT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
                60, 300, 900, 3600, 21600, 86400)


class WorkerMetrics:
    """Prometheus metrics of one worker process, registered in ``registry`` (prometheus_client's
    default unless given).

    ``task_types``: a number N (default ``TASK_TYPES``) keeps the name of the first N task
    types this process runs and labels later ones ``"other"``; a collection of names keeps
    those and labels the rest ``"other"``; ``"all"`` labels each task type (unbounded);
    ``"none"`` leaves the type label empty. ``queues``: ``"pattern"`` (default) labels a queue
    that a pattern of the worker serves (``tenant:*``) by the pattern, ``"name"`` by its own
    name (one series per matched queue). ``created_series=False`` (default) turns off
    prometheus_client's ``_created`` samples, process-wide: they double no rule's use and add
    a sample per counter and histogram."""

    def __init__(self, registry: CollectorRegistry | None = REGISTRY, *,
                 task_types: Literal["all", "none"] | Iterable[str] | int = TASK_TYPES,
                 queues: QueueLabel = "pattern", namespace: str = "asyncq_worker",
                 created_series: bool = False) -> None:
        self._type: Callable[[str], str] = _type_labeller(task_types)
        if queues not in ("pattern", "name"):
            raise ValueError(f"queues must be 'pattern' (label a queue a pattern serves by "
                             f"the pattern) or 'name', got {queues!r}")
        self.queue_label: QueueLabel = queues
        """How a queue served through a pattern is labelled: by the pattern or its name."""
        if not created_series:
            prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]
        self._served: list[str] = []
        """The worker's configured queues (names and patterns), told by ``bind_queues``."""
        self._queue_labels: dict[str, str] = {}
        self._series: dict[tuple[str, str], _Series] = {}
        """(queue, type) -> its labels and labelled children, decided once (the per-task
        path is then one dict lookup)."""
        self._by_labels: dict[tuple[str, str], _Series] = {}
        self._lock = threading.Lock()
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

    def bind_queues(self, served: Iterable[str]) -> None:
        """The queues the worker was configured with, patterns included (called once as it
        starts): what a queue's label is decided from."""
        with self._lock:
            self._served = list(served)
            self._queue_labels.clear()
            self._series.clear()

    def started(self, queue: str, task_type: str, wait_s: float | None) -> None:
        series = self._series.get((queue, task_type)) or self._resolve(queue, task_type)
        if wait_s is not None:
            series.queue_wait.observe(max(wait_s, 0.0))

    def finished(self, queue: str, task_type: str, outcome: RunOutcome, failed: bool,
                 run_s: float) -> None:
        series = self._series.get((queue, task_type)) or self._resolve(queue, task_type)
        series.run_time.observe(run_s)
        series.outcomes[outcome].inc()
        if failed:
            series.failures.inc()

    def labels(self, queue: str, task_type: str) -> tuple[str, str]:
        """The (queue, type) labels of a run of ``task_type`` from ``queue``."""
        series = self._series.get((queue, task_type)) or self._resolve(queue, task_type)
        return series.labels

    def _resolve(self, queue: str, task_type: str) -> _Series:
        """Decide a (queue, type)'s labels, once: its series are created then (the outcome
        and failure counters at 0, so a rate() sees the first increase)."""
        with self._lock:
            found = self._series.get((queue, task_type))
            if found is not None:
                return found
            labels = (self._queue_label(queue), self._type(task_type))
            series = self._by_labels.get(labels)
            if series is None:
                series = self._by_labels[labels] = _Series(self, labels)
            self._series[(queue, task_type)] = series
            return series

    def _queue_label(self, queue: str) -> str:
        label = self._queue_labels.get(queue)
        if label is None:
            label = queue
            if self.queue_label == "pattern" and any(map(is_queue_pattern, self._served)):
                for pattern, names in match_queue_patterns(self._served, [queue]).items():
                    if names:
                        label = pattern
                        break
            self._queue_labels[queue] = label
        return label

    def redis_error(self, operation: str) -> None:
        self.redis_errors.labels(operation).inc()

    def lease_renewals_failed(self, count: int) -> None:
        self.lease_failures.inc(count)

    def limit_deferred(self, queue: str, task_type: str) -> None:
        self.limit_deferrals.labels(*self.labels(queue, task_type)).inc()

    def thread_left_behind(self, queue: str, task_type: str) -> None:
        labels = self.labels(queue, task_type)
        self.threads_left_behind.labels(*labels).inc()
        self.threads_still_running.labels(*labels).inc()

    def thread_returned(self, queue: str, task_type: str) -> None:
        """A thread left behind returned: it no longer runs."""
        self.threads_still_running.labels(*self.labels(queue, task_type)).dec()

    def progress_written(self, queue: str, stored: bool) -> None:
        label = self._queue_labels.get(queue)
        if label is None:
            with self._lock:
                label = self._queue_label(queue)
        self.progress_writes.labels(label, "stored" if stored else "refused").inc()

    def process_over_memory(self, queue: str, task_type: str) -> None:
        self.memory_recycles.labels(*self.labels(queue, task_type)).inc()


class _Series:
    """The labelled children one (queue, type) label pair updates per run."""

    __slots__ = ("failures", "labels", "outcomes", "queue_wait", "run_time")

    def __init__(self, metrics: WorkerMetrics, labels: tuple[str, str]) -> None:
        self.labels = labels
        self.run_time: Any = metrics.run_time.labels(*labels)
        self.queue_wait: Any = metrics.queue_wait.labels(*labels)
        self.failures: Any = metrics.failures.labels(*labels)
        self.outcomes: dict[str, Any] = {o: metrics.outcomes.labels(*labels, o)
                                         for o in OUTCOMES}


def _type_labeller(task_types: object) -> Callable[[str], str]:
    """What labels a task type, from WorkerMetrics's ``task_types`` (ValueError/TypeError
    saying what is accepted)."""
    if task_types == "all":
        return _same
    if task_types == "none":
        return _blank
    if isinstance(task_types, (bool, str)):
        raise ValueError(f"task_types must be a number of task types to label, 'all', 'none' "
                         f"or a collection of task types, got {task_types!r}")
    if isinstance(task_types, int):
        if task_types < 0:
            raise ValueError(f"task_types must be 0 or more task types to label by name, got "
                             f"{task_types}")
        return _FirstTypes(task_types)
    if not isinstance(task_types, Iterable):
        raise TypeError(f"task_types must be a number, 'all', 'none' or a collection of task "
                        f"types, got {type(task_types).__name__}")
    allowed = frozenset(task_types)
    return lambda t: t if t in allowed else OTHER


class _FirstTypes:
    """Labels the first ``bound`` task types seen by name, the later ones ``other``."""

    def __init__(self, bound: int) -> None:
        self._bound = bound
        self._kept: set[str] = set()

    def __call__(self, task_type: str) -> str:
        if task_type in self._kept:
            return task_type
        if len(self._kept) < self._bound:
            self._kept.add(task_type)
            return task_type
        return OTHER


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
