"""WorkerConfig: every worker setting, with its default, validated when the worker is built."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from .._keys import validate_queue_name
from .._task import Task
from ._retry import default_retry_delay

RetryDelay = Callable[[int, BaseException, Task], float | timedelta]
ErrorHandler = Callable[[Task, BaseException], Awaitable[None] | None]
HealthCheck = Callable[[BaseException | None], Awaitable[None] | None]
GroupAggregator = Callable[[str, list[Task]], Task | Awaitable[Task]]

_DURATIONS = (
    "shutdown_timeout", "lease_duration", "heartbeat_interval", "forward_interval",
    "recover_interval", "recover_grace", "janitor_interval", "idle_poll_interval",
    "health_check_interval", "group_grace_period", "group_max_delay", "cancel_grace",
)


def _always_failure(exc: BaseException) -> bool:
    return True


def _seconds(value: object, name: str) -> float:
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise TypeError(f"{name} must be seconds (int/float) or a timedelta, got {value!r}")


def _default_server_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True, kw_only=True)
class WorkerConfig:
    """How a worker runs. Durations are seconds (float) or timedelta; stored as float seconds."""

    concurrency: int = 10
    """Most handlers running at once in this process."""
    queues: Mapping[str, int] = field(default_factory=lambda: {"default": 1})
    """Queues to serve and their priorities (weights, or order with strict_priority)."""
    strict_priority: bool = False
    """Always drain higher-priority queues first instead of weighting them."""
    shutdown_timeout: float = 8.0
    """On shutdown, how long running handlers may finish before they are cancelled and requeued."""
    lease_duration: float = 30.0
    """How long a task's lease lasts without renewal; renewed every heartbeat_interval."""
    heartbeat_interval: float = 5.0
    """How often leases are renewed and the worker's state is published."""
    forward_interval: float = 1.0
    """Longest wait between checks for due scheduled/retry tasks (sooner when one is known due)."""
    recover_interval: float = 10.0
    """How often expired leases of dead workers are looked for."""
    recover_grace: float = 5.0
    """How long after a lease expired it is recovered (tolerance for clock skew between hosts)."""
    janitor_interval: float = 8.0
    """How often completed tasks past their retention are deleted."""
    janitor_batch: int = 100
    """Most completed tasks deleted per script call."""
    orphan_scan_count: int = 500
    """Keys the janitor examines per round (one SCAN step) looking for orphaned task records,
    i.e. task hashes in no list of their state, to repair them; 0 disables the scan."""
    idle_poll_interval: float = 2.0
    """Safety net only: an idle worker is woken by pub/sub, and re-checks at least this often."""
    dequeue_batch: int = 100
    """Most tasks leased per script call when slots are free."""
    prefetch: int | None = None
    """Tasks leased ahead of free slots, so a finishing handler's slot is refilled without
    waiting for Redis (default: concurrency // 4; 0 disables). Prefetched tasks hold a renewed
    lease; on shutdown or SIGTSTP they are requeued at once."""
    cancel_grace: float = 5.0
    """How long a cancelled handler may take to stop before the worker stops waiting for it."""
    retry_delay: RetryDelay = default_retry_delay
    """Delay before retry n (n = retries so far): ``retry_delay(n, exc, task)``."""
    is_failure: Callable[[BaseException], bool] = _always_failure
    """Whether an error counts as a failure (False: retried without using up a retry)."""
    error_handler: ErrorHandler | None = None
    """Called (sync or async) with the task and the error after every failed run."""
    health_check: HealthCheck | None = None
    """Called every health_check_interval with None when Redis answers, else the error."""
    health_check_interval: float = 15.0
    group_aggregator: GroupAggregator | None = None
    """Combines a group's tasks into one task; the aggregator runs only when this is set."""
    group_grace_period: float = 60.0
    """A group is aggregated once no task was added to it for this long."""
    group_max_delay: float = 0.0
    """A group is aggregated once its oldest task waited this long (0: no limit)."""
    group_max_size: int = 0
    """A group is aggregated once it holds this many tasks (0: no limit)."""
    server_id: str = field(default_factory=_default_server_id)
    """Identity of this worker process in Redis (host:pid:random by default)."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Free-form labels published with the server state."""

    def __post_init__(self) -> None:
        for name in _DURATIONS:
            value = _seconds(getattr(self, name), name)
            if value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")
            object.__setattr__(self, name, value)
        if self.prefetch is None:
            object.__setattr__(self, "prefetch", self.concurrency // 4
                               if isinstance(self.concurrency, int) else 0)
        if not isinstance(self.prefetch, int) or isinstance(self.prefetch, bool) \
                or self.prefetch < 0:
            raise ValueError(f"prefetch must be an int >= 0, got {self.prefetch!r}")
        for name in ("concurrency", "dequeue_batch", "janitor_batch"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if (not isinstance(self.orphan_scan_count, int) or isinstance(self.orphan_scan_count, bool)
                or self.orphan_scan_count < 0):
            raise ValueError(f"orphan_scan_count must be an int >= 0, "
                             f"got {self.orphan_scan_count!r}")
        if not isinstance(self.group_max_size, int) or self.group_max_size < 0:
            raise ValueError(f"group_max_size must be an int >= 0, got {self.group_max_size!r}")
        if not isinstance(self.queues, Mapping) or not self.queues:
            raise ValueError("queues must be a non-empty mapping of queue name to priority")
        for name, priority in self.queues.items():
            validate_queue_name(name)
            if not isinstance(priority, int) or isinstance(priority, bool) or priority < 1:
                raise ValueError(f"priority of queue {name!r} must be an int >= 1, "
                                 f"got {priority!r}")
        object.__setattr__(self, "queues", dict(self.queues))
        if self.lease_duration <= 0:
            raise ValueError("lease_duration must be > 0")
        if not 0 < self.heartbeat_interval <= self.lease_duration / 2:
            raise ValueError(
                f"heartbeat_interval ({self.heartbeat_interval}s) must be > 0 and at most half "
                f"of lease_duration ({self.lease_duration}s) so leases are renewed in time")
        for name in ("forward_interval", "recover_interval", "janitor_interval",
                     "idle_poll_interval", "health_check_interval"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0")
        if self.group_aggregator is not None and self.group_grace_period < 1:
            raise ValueError("group_grace_period must be at least 1 second")
        for name in ("retry_delay", "is_failure"):
            if not callable(getattr(self, name)):
                raise TypeError(f"{name} must be callable")
        if not isinstance(self.server_id, str) or not self.server_id.strip():
            raise ValueError("server_id must be a non-blank string")

    @property
    def lease_ms(self) -> int:
        return int(self.lease_duration * 1000)
