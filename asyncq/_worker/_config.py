"""WorkerConfig: every worker setting, with its default, validated when the worker is built."""

from __future__ import annotations

import dataclasses
import difflib
import importlib.util
import os
import socket
import uuid
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from .._defaults import (
    HEALTH_HOST,
    WORKER_CANCEL_GRACE,
    WORKER_CONCURRENCY,
    WORKER_DEQUEUE_BATCH,
    WORKER_FORWARD_INTERVAL,
    WORKER_GROUP_GRACE_PERIOD,
    WORKER_GROUP_MAX_DELAY,
    WORKER_GROUP_MAX_SIZE,
    WORKER_HEALTH_CHECK_INTERVAL,
    WORKER_HEARTBEAT_INTERVAL,
    WORKER_IDLE_POLL_INTERVAL,
    WORKER_JANITOR_BATCH,
    WORKER_JANITOR_INTERVAL,
    WORKER_LEASE_DURATION,
    WORKER_MAX_MEMORY_PER_CHILD,
    WORKER_MAX_TASKS_PER_CHILD,
    WORKER_ORPHAN_SCAN_COUNT,
    WORKER_PROCESS_KILL_GRACE,
    WORKER_QUEUE_SCAN_INTERVAL,
    WORKER_QUEUES,
    WORKER_RECOVER_GRACE,
    WORKER_RECOVER_INTERVAL,
    WORKER_SHUTDOWN_TIMEOUT,
    WORKER_STALL_TIMEOUT,
    WORKER_STALL_WARNING,
    WORKER_SYNC_HANDLERS,
    WORKER_TASK_LOGS,
    WORKER_TRACEBACK_ON,
    WORKER_UNKNOWN_TYPE,
    WORKER_WORKFLOW_INTERVAL,
)
from .._model._events import TaskEvent
from .._model._task import Task
from .._observe import RunObserver
from .._validate import NONZERO, check_fields, to_int, to_seconds, validate_served_queue
from ._retry import default_retry_delay

RetryDelay = Callable[[int, BaseException, Task], float | timedelta]
ErrorHandler = Callable[[Task, BaseException], Awaitable[None] | None]
StateChangeCallback = Callable[[TaskEvent], Awaitable[object] | object]
HealthCheck = Callable[[BaseException | None], Awaitable[None] | None]
GroupAggregator = Callable[[str, list[Task]], Task | Awaitable[Task]]
Lifespan = Callable[[], AbstractAsyncContextManager[Any]]
"""A function without arguments returning an async context manager, e.g. an
``@contextlib.asynccontextmanager`` function; what it yields is every task's ``state``."""

DEFAULT_HEARTBEAT_INTERVAL = WORKER_HEARTBEAT_INTERVAL
_DERIVED: Any = None  # a field computed from others unless given


def _always_failure(exc: BaseException) -> bool:
    return True


def _default_server_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True, kw_only=True)
class WorkerConfig:
    """How a worker runs. Durations are seconds (float) or timedelta; stored as float seconds.

    Every ``float`` field is a duration and every ``int`` field a count, validated by
    ``check_fields`` (``NONZERO`` marks those that must not be 0).
    """

    concurrency: int = field(default=WORKER_CONCURRENCY, metadata=NONZERO)
    """Most handlers running at once in this process."""
    queues: Mapping[str, int] = field(default_factory=lambda: dict(WORKER_QUEUES))
    """Queues to serve and their priorities (weights, or order with strict_priority). A name
    with ``*`` is a pattern (``"tenant:*"``, ``*`` standing for any run of characters, ``:``
    included): every registered queue it matches is served, also one created later, the
    pattern's priority shared in turn among them."""
    strict_priority: bool = False
    """Always drain higher-priority queues first instead of weighting them."""
    queue_scan_interval: float = field(default=WORKER_QUEUE_SCAN_INTERVAL, metadata=NONZERO)
    """With a pattern in ``queues``: how often the queue registry is read for queues it
    matches. A queue is announced when it is created, so this is the bound only when the
    announcement was missed (a Go producer, a pub/sub outage); unused without a pattern."""
    shutdown_timeout: float = WORKER_SHUTDOWN_TIMEOUT
    """On shutdown, how long running handlers may finish before they are cancelled and requeued."""
    lease_duration: float = field(default=WORKER_LEASE_DURATION, metadata=NONZERO)
    """How long a task's lease lasts without renewal; renewed every heartbeat_interval."""
    heartbeat_interval: float = field(default=_DERIVED, metadata=NONZERO)
    """How often leases are renewed and the worker's state is published (default: the smaller
    of 5 s and a third of lease_duration); at most half of lease_duration."""
    forward_interval: float = field(default=WORKER_FORWARD_INTERVAL, metadata=NONZERO)
    """Longest wait between checks for due scheduled/retry tasks (sooner when one is known due)."""
    recover_interval: float = field(default=WORKER_RECOVER_INTERVAL, metadata=NONZERO)
    """How often expired leases of dead workers are looked for."""
    recover_grace: float = WORKER_RECOVER_GRACE
    workflow_interval: float = field(default=WORKER_WORKFLOW_INTERVAL, metadata=NONZERO)
    """Safety net of the workflow advancer (woken by pub/sub when a step ends): how often it
    looks at the outboxes anyway, and about how long a dead advancer's lock outlives it."""
    """How long after a lease expired it is recovered (tolerance for clock skew between hosts)."""
    janitor_interval: float = field(default=WORKER_JANITOR_INTERVAL, metadata=NONZERO)
    """How often completed tasks past their retention are deleted."""
    janitor_batch: int = field(default=WORKER_JANITOR_BATCH, metadata=NONZERO)
    """Most completed tasks deleted per script call."""
    orphan_scan_count: int = WORKER_ORPHAN_SCAN_COUNT
    """Keys the janitor examines per round (one SCAN step) looking for orphaned task records,
    i.e. task hashes in no list of their state, to repair them; 0 disables the scan."""
    idle_poll_interval: float = field(default=WORKER_IDLE_POLL_INTERVAL, metadata=NONZERO)
    """Safety net only: an idle worker is woken by pub/sub, and re-checks at least this often."""
    dequeue_batch: int = field(default=WORKER_DEQUEUE_BATCH, metadata=NONZERO)
    """Most tasks leased per script call when slots are free."""
    prefetch: int | None = None
    """Tasks leased ahead of free slots, so a finishing handler's slot is refilled without
    waiting for Redis (default: concurrency // 4; 0 disables). Prefetched tasks hold a renewed
    lease; on shutdown or SIGTSTP they are requeued at once."""
    cancel_grace: float = WORKER_CANCEL_GRACE
    """How long a cancelled handler may take to stop before the worker stops waiting for it."""
    retry_delay: RetryDelay = default_retry_delay
    """Delay before retry n (n = retries so far): ``retry_delay(n, exc, task)``."""
    is_failure: Callable[[BaseException], bool] = _always_failure
    """Whether an error counts as a failure (False: retried without using up a retry)."""
    error_handler: ErrorHandler | None = None
    """Called (sync or async) with the task and the error after every failed run."""
    task_logs: Literal["off", "debug", "info"] = WORKER_TASK_LOGS
    """Per-task log lines: "debug" logs each start and finish (type, id, queue, duration,
    outcome) at debug level; "info" logs each finish at info; "off" (the default) costs
    nothing per task. Failures are logged as warnings whatever this says."""
    unknown_type: Literal["retry", "archive"] = WORKER_UNKNOWN_TYPE
    """A task whose type has no handler: "retry" (it may reach a worker that knows it, as in a
    rolling deploy) or "archive" at once. Either way it is logged once per type."""
    traceback_on: Literal["archive", "failure", "off"] = WORKER_TRACEBACK_ON
    """When a failed run's log line carries the traceback: "archive" (the default) only when
    the task is archived, so a task retried 25 times logs it once, with one short line per
    retry (error, retries so far, when the next attempt runs); "failure" on every failed run;
    "off" never (the error text is always logged)."""
    on_state_change: StateChangeCallback | None = None
    """Called (sync or async) with a TaskEvent for every transition this worker makes: a task
    starts (pending -> active) and its outcome is written (completed, retry, archived,
    deleted when revoked, pending when requeued at shutdown). Delivered in order from a
    bounded queue by one task; it can never stop or slow the worker."""
    health_check: HealthCheck | None = None
    """Called every health_check_interval with None when Redis answers, else the error."""
    health_check_interval: float = field(default=WORKER_HEALTH_CHECK_INTERVAL, metadata=NONZERO)
    health_port: int | None = None
    """Serve HTTP probes on this port (0: a free one, see ``Worker.health_port``): GET /livez
    is 200 while the event loop turns, 503 once it has not turned for stall_timeout; GET
    /readyz is 200 while Redis answers and the worker fetches tasks, else 503 (Redis
    unreachable, starting, shutting down, after SIGTSTP). Answered from a thread, so a
    blocked loop shows. None (the default) serves nothing."""
    health_host: str = HEALTH_HOST
    """Address the probes are served on (loopback by default)."""
    stall_timeout: float = field(default=WORKER_STALL_TIMEOUT, metadata=NONZERO)
    """/livez fails once the event loop has not turned for this long."""
    stall_warning: float = WORKER_STALL_WARNING
    """A loop turn at least this long is logged once, naming the task that blocked it and the
    running ones (and counted in the metrics); 0 logs none."""
    group_aggregator: GroupAggregator | None = None
    """Combines a group's tasks into one task; the aggregator runs only when this is set."""
    group_grace_period: float = WORKER_GROUP_GRACE_PERIOD
    """A group is aggregated once no task was added to it for this long."""
    group_max_delay: float = WORKER_GROUP_MAX_DELAY
    """A group is aggregated once its oldest task waited this long (0: no limit)."""
    group_max_size: int = WORKER_GROUP_MAX_SIZE
    """A group is aggregated once it holds this many tasks (0: no limit)."""
    lifespan: Lifespan | None = None
    """Entered before the first task is fetched, exited after the last outcome is written at
    shutdown; what it yields is ``task.state`` for every task (a DB pool, an HTTP client).
    A lifespan that fails to start stops the worker: ``run`` raises WorkerStartupError."""
    metrics: RunObserver | None = None
    """Worker metrics (``asyncq.metrics.WorkerMetrics()``): run times, queue waits, outcomes,
    Redis errors; None measures nothing and costs nothing."""
    sync_threads: int | None = field(default=None, metadata=NONZERO)
    """Most threads running sync (plain ``def``) handlers at once (default: concurrency). A
    thread whose task timed out or was cancelled keeps its slot until it returns."""
    sync_handlers: Literal["thread", "process"] = WORKER_SYNC_HANDLERS
    """Where a sync (plain ``def``) handler registered without ``isolate=`` runs: "thread"
    (the default) or "process", the worker's pool of child processes (see ``isolate=`` on
    ``ServeMux.handle``; a handler a child cannot import by name stays in a thread)."""
    process_pool_size: int | None = field(default=None, metadata=NONZERO)
    """Most child processes running handlers at once (default: the number of cores). They
    are started when a task first needs one."""
    max_tasks_per_child: int = WORKER_MAX_TASKS_PER_CHILD
    """A handler process is replaced by a fresh one after this many tasks (0: never), so
    memory a handler leaks is given back."""
    max_memory_per_child: int = WORKER_MAX_MEMORY_PER_CHILD
    """KiB (as Celery's worker_max_memory_per_child): a handler process whose resident memory
    exceeds this after a task is replaced by a fresh one — after the task, whose outcome
    stands, never during it (0: no cap). Checked with one read of the child's /proc entry per
    task (elsewhere: its peak memory)."""
    process_kill_grace: float = WORKER_PROCESS_KILL_GRACE
    """A handler process whose task passed its time limit (or was cancelled) gets SIGTERM,
    then SIGKILL once it has not exited for this long; a fresh process takes its slot."""
    preload: tuple[str, ...] = ()
    """Modules (dotted names) the pool of handler processes imports once, before it starts
    its children: the fork server imports them, so every child has them when it starts and
    no task's time limit pays for them (a module that calls ``django.setup()``, a heavy
    library). Each must be importable; only process-run handlers see them."""
    burst: bool = False
    """Return from ``run`` (after a graceful shutdown) once the served queues have no pending
    task, none due within max(1 s, forward_interval), and this worker runs nothing."""
    server_id: str = field(default_factory=_default_server_id)
    """Identity of this worker process in Redis (host:pid:random by default)."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Free-form labels published with the server state."""

    def __post_init__(self) -> None:
        if not isinstance(self.server_id, str) or not self.server_id.strip():
            raise ValueError("server_id must be a non-blank string")
        if self.heartbeat_interval is None:
            lease = to_seconds(self.lease_duration, "lease_duration", allow_zero=False)
            object.__setattr__(self, "heartbeat_interval",
                               min(DEFAULT_HEARTBEAT_INTERVAL, lease / 3))
        if self.prefetch is None and isinstance(self.concurrency, int):
            object.__setattr__(self, "prefetch", self.concurrency // 4)
        check_fields(self)
        if not isinstance(self.queues, Mapping) or not self.queues:
            raise ValueError("queues must be a non-empty mapping of queue name to priority")
        for name, priority in self.queues.items():
            validate_served_queue(name)
            to_int(priority, f"priority of queue {name!r}", minimum=1)
        object.__setattr__(self, "queues", dict(self.queues))
        if self.heartbeat_interval > self.lease_duration / 2:
            raise ValueError(
                f"heartbeat_interval ({self.heartbeat_interval}s) must be at most half of "
                f"lease_duration ({self.lease_duration}s) so leases are renewed in time")
        if self.health_port is not None and self.health_port > 65535:
            raise ValueError(f"health_port must be a TCP port (0 to 65535; 0 picks a free "
                             f"one), got {self.health_port}")
        if self.group_aggregator is not None and self.group_grace_period < 1:
            raise ValueError("group_grace_period must be at least 1 second")
        for name in ("retry_delay", "is_failure"):
            if not callable(getattr(self, name)):
                raise TypeError(f"{name} must be callable")
        check_lifespan(self.lifespan)
        object.__setattr__(self, "preload", check_preload(self.preload))

    @property
    def burst_horizon(self) -> float:
        """Burst mode: tasks due within this many seconds still count as waiting."""
        return max(1.0, self.forward_interval)

    @property
    def lease_ms(self) -> int:
        """lease_duration in whole milliseconds, rounded as every stored duration is."""
        return round(self.lease_duration * 1000)


def check_preload(names: object) -> tuple[str, ...]:
    """``preload`` as a tuple of module names, each one found (not imported: the worker's own
    process need not import what its handler processes do)."""
    if isinstance(names, str) or not isinstance(names, tuple | list):
        raise TypeError(f"preload must be a tuple of module names, got {names!r} (one module: "
                        f"preload=({names!r},))")
    for name in names:
        if not isinstance(name, str) or not all(part.isidentifier()
                                                for part in name.split(".")):
            raise ValueError(f"preload: {name!r} is not a module name (dotted, as in import)")
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise ValueError(f"preload: no module named {name!r} can be imported (is it on "
                             f"the Python path of the worker?)")
    return tuple(names)


def check_lifespan(lifespan: object) -> None:
    """A lifespan is a function returning an async context manager, not the manager itself."""
    if lifespan is None:
        return
    if hasattr(lifespan, "__aenter__"):
        raise TypeError("lifespan must be a function returning an async context manager, got "
                        "the context manager itself: pass the function (lifespan=my_lifespan, "
                        "not lifespan=my_lifespan())")
    if not callable(lifespan):
        raise TypeError(f"lifespan must be a function returning an async context manager "
                        f"(an @contextlib.asynccontextmanager function), got {lifespan!r}")


def check_option_names(options: Mapping[str, Any]) -> None:
    """A misspelt worker option is a TypeError naming the close matches and the valid ones,
    as for enqueue options."""
    valid = sorted(f.name for f in dataclasses.fields(WorkerConfig))
    unknown = sorted(set(options) - set(valid))
    if not unknown:
        return
    hints = [f"{name!r} (did you mean {', '.join(map(repr, close))}?)"
             if (close := difflib.get_close_matches(name, valid, n=2)) else repr(name)
             for name in unknown]
    raise TypeError(f"unknown worker option(s): {', '.join(hints)}; valid options are "
                    f"{', '.join(valid)}")
