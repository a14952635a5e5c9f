"""What the Inspector returns about queues, groups, days and servers (tasks are ``TaskInfo``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from .._clock import ms_to_datetime, stored_datetime
from .._model._info import TaskInfo
from .._model._rules import HandlerRules
from .._validate import is_queue_pattern, queue_matcher
from ._values import RunningTaskRecord, WorkerRecord


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """A snapshot of one queue: task counts per state, counters, pause flag, latency, memory."""

    queue: str
    #: every task of the queue: pending + active + scheduled + retry + archived + completed
    #: + aggregating
    size: int
    pending: int
    active: int
    scheduled: int
    retry: int
    archived: int
    completed: int
    aggregating: int
    #: number of groups holding aggregating tasks
    groups: int
    #: tasks processed (succeeded or failed) and failed today (UTC)
    processed: int
    failed: int
    #: all-time counters
    processed_total: int
    failed_total: int
    paused: bool
    #: how long the oldest pending task has waited (zero when nothing is pending)
    latency: timedelta
    #: estimated bytes used by the queue's tasks and keys (sampled)
    memory_usage: int
    #: active tasks whose lease has run out (their worker is gone or stuck)
    expired_leases: int
    #: when the snapshot was taken
    timestamp: datetime
    #: all-time count of tasks archived unrun because they expired (``expires_in``)
    expired_total: int = 0
    #: the queue's concurrency cap: at most this many of its tasks run at once across every
    #: worker (``Inspector.set_queue_concurrency``); None: no cap
    concurrency_limit: int | None = None
    #: its tasks running under the cap now, and waiting for a slot of it
    concurrency_in_use: int = 0
    concurrency_waiting: int = 0


@dataclass(frozen=True, slots=True)
class MinuteStats:
    """What a queue did in one stretch of the last hour (``Inspector.minute_stats``): usually
    one minute; longer (``span``) where no worker of the queue recorded a minute."""

    #: the end of the stretch (the start of the minute whose sample closed it)
    at: datetime
    span: timedelta
    processed: int
    failed: int
    #: tasks pending, running, scheduled or to be retried at ``at``
    backlog: int


@dataclass(frozen=True, slots=True)
class ArchiveLimits:
    """The caps of a queue's archive in force (``Inspector.archive_limits``): archiving beyond
    them deletes the oldest archived tasks."""

    #: most archived tasks kept
    max_size: int
    #: archived tasks older than this are deleted
    max_age: timedelta
    #: False: the defaults (10 000 tasks, 90 days); True: set for this queue
    custom: bool


@dataclass(frozen=True, slots=True)
class TaskMatches:
    """What ``Inspector.find_tasks`` found: the matching tasks, in listing order, and where
    the search stopped, to resume it there."""

    tasks: list[TaskInfo]
    #: the ``start`` that continues the search; None when it reached the last task
    next_start: int | None
    #: how many tasks the search examined (matching or not)
    scanned: int


@dataclass(frozen=True, slots=True)
class DailyStats:
    """Tasks processed and failed in one queue on one UTC day."""

    queue: str
    date: date
    processed: int
    failed: int


@dataclass(frozen=True, slots=True)
class GroupInfo:
    """A group of tasks waiting to be aggregated, and how many it holds."""

    group: str
    size: int


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """A task a live server is running."""

    task_id: str
    task_type: str
    queue: str
    started: datetime
    deadline: datetime | None
    payload_size: int


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """A live worker process, as its last heartbeat described it."""

    id: str
    host: str
    pid: int
    concurrency: int
    queues: Mapping[str, int]
    strict_priority: bool
    status: str
    started: datetime
    active_workers: tuple[WorkerInfo, ...] = ()
    processed: int = 0
    failed: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)
    task_options: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    """The task options its handlers were registered with, by pattern (a task type or a
    prefix): ``max_retry``, ``timeout_ms``, ``retention_ms`` as set there."""


def worker_info(run: RunningTaskRecord) -> WorkerInfo:
    """What the Inspector shows of a running task."""
    return WorkerInfo(
        task_id=run.task_id, task_type=run.task_type, queue=run.queue,
        started=ms_to_datetime(run.started_ms),
        deadline=stored_datetime(run.deadline_ms) if run.deadline_ms else None,
        payload_size=run.payload_size)


def server_info(record: WorkerRecord) -> ServerInfo:
    """What the Inspector shows of a live worker process: its running tasks by start."""
    active = sorted(map(worker_info, record.running), key=lambda w: (w.started, w.task_id))
    return ServerInfo(
        id=record.server_id, host=record.host, pid=record.pid, concurrency=record.concurrency,
        queues=dict(record.queues), strict_priority=record.strict_priority,
        status=record.status, started=ms_to_datetime(record.started_ms),
        active_workers=tuple(active), processed=record.processed, failed=record.failed,
        extra=dict(record.extra),
        task_options={p: dict(o) for p, o in record.task_options.items()})


class PublishedRules:
    """The handler registrations the live workers published, by queue: what ``rules(queue,
    task_type)`` finds for a task (its type exactly, else the longest matching prefix, as a
    ServeMux routes it). Where workers of one queue disagree (a rolling deploy), the first
    worker by id that has the type wins."""

    def __init__(self, servers: Sequence[ServerInfo]) -> None:
        self._by_queue: dict[str, dict[str, HandlerRules]] = {}
        for server in sorted(servers, key=lambda s: s.id):
            for queue in server.queues:
                known = self._by_queue.setdefault(queue, {})
                for pattern, options in server.task_options.items():
                    known.setdefault(pattern, HandlerRules.from_published(options))

    def __call__(self, queue: str, task_type: str) -> HandlerRules | None:
        known = self._by_queue.get(queue)
        if not known:  # a queue a worker serves through a pattern ("tenant:*")
            known = next((rules for served, rules in self._by_queue.items()
                          if is_queue_pattern(served) and queue_matcher(served).fullmatch(queue)),
                         None)
        if not known:
            return None
        if task_type in known:
            return known[task_type]
        best = max((p for p in known if task_type.startswith(p)), key=len, default=None)
        return None if best is None else known[best]
