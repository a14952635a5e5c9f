"""The deployment-wide exporter: every queue's sizes, counters, latency and memory, every
live worker, read from Redis when Prometheus scrapes (one pipeline for all queues).

A scrape while Redis is unreachable still answers 200: ``asyncq_up`` is 0 and the queue
metrics are absent (stale numbers would mislead), so an alert can fire on ``asyncq_up == 0``
instead of on a storm of failed scrapes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from typing import Any

from prometheus_client import CollectorRegistry, make_asgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from .._broker import QueueInfo, ServerInfo
from .._errors import AsyncqError
from .._inspector._inspector import Inspector
from .._log import get_logger

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

_STATES = ("pending", "active", "scheduled", "retry", "archived", "completed", "aggregating")


class QueueExporter(Collector):
    """A prometheus_client collector of queue metrics. ``await refresh()`` reads Redis;
    ``collect()`` (called by the registry) reports what the last refresh read."""

    def __init__(self, inspector: Inspector, *, timeout: float = 10.0,
                 max_age: float = 1.0, per_host: bool = False) -> None:
        self._inspector = inspector
        self._per_host = per_host
        self._timeout = timeout
        self._max_age = max_age
        self._queues: list[QueueInfo] = []
        self._servers: list[ServerInfo] = []
        self._up = False
        self._duration = 0.0
        self._read_at = float("-inf")
        self._failures = 0
        self._lock = asyncio.Lock()
        self._log = get_logger("metrics")

    async def refresh(self) -> None:
        """Read every queue and live worker; concurrent scrapes share one read, and a read
        younger than ``max_age`` seconds is reused."""
        async with self._lock:
            if time.monotonic() - self._read_at < self._max_age:
                return
            started = time.perf_counter()
            try:
                async with asyncio.timeout(self._timeout):
                    queues = await self._inspector.queue_infos()
                    servers = await self._inspector.workers()
            except (AsyncqError, TimeoutError) as exc:
                if self._up or self._failures == 0:
                    self._log.warning("metrics scrape could not read Redis",
                                      error=str(exc) or type(exc).__name__)
                self._up, self._queues, self._servers = False, [], []
                self._failures += 1
            else:
                self._up, self._queues, self._servers = True, queues, servers
            self._duration = time.perf_counter() - started
            self._read_at = time.monotonic()

    def expire(self) -> None:
        """Make the next ``refresh`` read Redis, however recent the last read."""
        self._read_at = float("-inf")

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("asyncq_up", "1 when the last scrape read Redis, else 0")
        up.add_metric([], 1.0 if self._up else 0.0)
        yield up
        took = GaugeMetricFamily("asyncq_scrape_duration_seconds",
                                 "Time the last scrape spent reading Redis")
        took.add_metric([], self._duration)
        yield took
        failures = CounterMetricFamily("asyncq_scrape_failures",
                                       "Scrapes that could not read Redis")
        failures.add_metric([], self._failures)
        yield failures
        if not self._up:
            return
        yield from _queue_metrics(self._queues)
        yield from _server_metrics(self._servers, self._per_host)


def _gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=labels)


def _queue_metrics(queues: list[QueueInfo]) -> Iterator[Metric]:
    tasks = _gauge("asyncq_tasks", "Tasks in the queue by state (completed: results kept "
                   "for their retention; completion marks are not counted)", ["queue", "state"])
    size = _gauge("asyncq_queue_size", "Tasks stored in the queue, every state: the backlog "
                  "plus archived and completed", ["queue"])
    backlog = _gauge("asyncq_queue_backlog", "Tasks not finished yet: pending, active, "
                     "scheduled, retry and aggregating (neither archived nor completed)",
                     ["queue"])
    latency = _gauge("asyncq_queue_latency_seconds",
                     "How long the oldest pending task has waited", ["queue"])
    memory = _gauge("asyncq_queue_memory_usage_bytes",
                    "Approximate memory used by the queue's tasks and keys (sampled)",
                    ["queue"])
    paused = _gauge("asyncq_queue_paused", "1 when the queue is paused", ["queue"])
    groups = _gauge("asyncq_queue_groups", "Groups holding aggregating tasks", ["queue"])
    expired = _gauge("asyncq_queue_expired_leases",
                     "Active tasks whose lease ran out (worker gone or stuck)", ["queue"])
    processed_today = _gauge("asyncq_tasks_processed_today",
                             "Runs finished today (UTC), succeeded or failed", ["queue"])
    failed_today = _gauge("asyncq_tasks_failed_today", "Failed runs today (UTC)", ["queue"])
    processed = CounterMetricFamily("asyncq_tasks_processed",
                                    "Runs finished, succeeded or failed", labels=["queue"])
    failed = CounterMetricFamily("asyncq_tasks_failed", "Failed runs", labels=["queue"])
    expired_tasks = CounterMetricFamily("asyncq_tasks_expired", "Tasks archived unrun because "
                                        "they were not started by their expiry", labels=["queue"])
    cap = _gauge("asyncq_queue_concurrency_limit", "The queue's concurrency limit: most of "
                 "its tasks running at once across every worker (absent: no limit)", ["queue"])
    capped = _gauge("asyncq_queue_concurrency_in_use", "Tasks of a queue with a concurrency "
                    "limit running under it (slots held by live leases)", ["queue"])
    waiting = _gauge("asyncq_queue_concurrency_waiting", "Tasks of a queue with a concurrency "
                     "limit waiting for a slot", ["queue"])
    count = GaugeMetricFamily("asyncq_queues", "Known queues")
    count.add_metric([], len(queues))
    for q in queues:
        name = [q.queue]
        for state in _STATES:
            tasks.add_metric([q.queue, state], getattr(q, state))
        size.add_metric(name, q.size)
        backlog.add_metric(name, _backlog(q))
        latency.add_metric(name, q.latency.total_seconds())
        memory.add_metric(name, q.memory_usage)
        paused.add_metric(name, 1.0 if q.paused else 0.0)
        groups.add_metric(name, q.groups)
        expired.add_metric(name, q.expired_leases)
        processed_today.add_metric(name, q.processed)
        failed_today.add_metric(name, q.failed)
        processed.add_metric(name, q.processed_total)
        failed.add_metric(name, q.failed_total)
        expired_tasks.add_metric(name, q.expired_total)
        if q.concurrency_limit is not None:
            cap.add_metric(name, q.concurrency_limit)
            capped.add_metric(name, q.concurrency_in_use)
            waiting.add_metric(name, q.concurrency_waiting)
    yield from (count, tasks, size, backlog, latency, memory, paused, groups, expired,
                processed_today, failed_today, processed, failed, expired_tasks, cap, capped,
                waiting)


def _backlog(q: QueueInfo) -> int:
    """The work a queue still holds: what a worker has yet to run or is running."""
    return q.pending + q.active + q.scheduled + q.retry + q.aggregating


def _server_metrics(servers: list[ServerInfo], per_host: bool) -> Iterator[Metric]:
    """Live workers, their slots and running tasks: deployment totals, or with ``per_host``
    summed per host. A worker's id (host:pid:random) changes with every restart and, under
    Kubernetes, its host with every pod: either label would start new series each time, so
    the host is opt-in (for machines that keep their name)."""
    live = GaugeMetricFamily("asyncq_servers", "Live worker processes")
    live.add_metric([], len(servers))
    yield live
    labels = ["host"] if per_host else []
    where = " of a host" if per_host else ""
    concurrency = _gauge("asyncq_server_concurrency",
                         f"Most tasks the live workers{where} run at once", labels)
    busy = _gauge("asyncq_server_active_tasks", f"Tasks the live workers{where} are running",
                  labels)
    if not per_host:
        concurrency.add_metric([], sum(s.concurrency for s in servers))
        busy.add_metric([], sum(len(s.active_workers) for s in servers))
        yield from (concurrency, busy)
        return
    per_host_live = _gauge("asyncq_host_servers", "Live worker processes on a host", ["host"])
    hosts: dict[str, list[int]] = {}
    for s in servers:
        totals = hosts.setdefault(s.host, [0, 0, 0])
        totals[0] += 1
        totals[1] += s.concurrency
        totals[2] += len(s.active_workers)
    for host, (n, slots, running) in sorted(hosts.items()):
        per_host_live.add_metric([host], n)
        concurrency.add_metric([host], slots)
        busy.add_metric([host], running)
    yield from (per_host_live, concurrency, busy)


class QueueMetricsApp:
    """An ASGI app answering every GET with the queue metrics in Prometheus's text format
    (mount it at ``/metrics``). Its Inspector is closed by the ASGI lifespan's shutdown, or
    by ``await app.aclose()`` where no lifespan runs (a mounted sub-app, tests)."""

    def __init__(self, redis: Any, *, timeout: float = 10.0, per_host: bool = False) -> None:
        self.inspector = Inspector(redis)
        self.exporter = QueueExporter(self.inspector, timeout=timeout, per_host=per_host)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self.exporter)
        self._render = make_asgi_app(registry)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] == "http":
            await self.exporter.refresh()
        await self._render(scope, receive, send)

    async def aclose(self) -> None:
        await self.inspector.close()

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return


def queue_metrics_app(redis: Any, *, timeout: float = 10.0,
                      per_host: bool = False) -> QueueMetricsApp:
    """The queue metrics exporter as an ASGI app; ``redis``: what an Inspector takes (a URL,
    a redis.asyncio client, a Broker). ``timeout`` bounds one scrape's reading of Redis;
    ``per_host`` labels the live workers' totals by host (off: a pod's name is no label)."""
    return QueueMetricsApp(redis, timeout=timeout, per_host=per_host)
