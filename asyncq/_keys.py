"""Every Redis key and channel name asyncq uses.

Per-queue keys carry the queue name as a Redis Cluster hash tag (``asyncq:{queue}:...``) so that
every key a Lua script touches for one queue lives in the same slot.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache

PREFIX = "asyncq"
QUEUES = f"{PREFIX}:queues"  # SET of known queue names
SERVERS = f"{PREFIX}:servers"  # ZSET server key -> expiry ms
WORKERS = f"{PREFIX}:workers"  # ZSET workers key -> expiry ms
SCHEDULERS = f"{PREFIX}:schedulers"  # ZSET scheduler entries key -> expiry ms
CANCEL_CHANNEL = f"{PREFIX}:cancel"  # pub/sub: message = task id to cancel
WAKE_CHANNEL = f"{PREFIX}:wake"  # pub/sub: message = queue name that has new pending work

_FORBIDDEN_QUEUE_CHARS = frozenset("{}")


def validate_queue_name(name: object) -> str:
    """Return ``name`` if it is a usable queue name, else raise ValueError saying why."""
    if not isinstance(name, str):
        raise TypeError(f"queue name must be a str, got {type(name).__name__}")
    if not name.strip():
        raise ValueError("queue name must not be blank")
    if any(c in _FORBIDDEN_QUEUE_CHARS or c.isspace() for c in name):
        raise ValueError(
            f"queue name {name!r} must not contain '{{', '}}' or whitespace "
            "(it is used as a Redis Cluster hash tag)"
        )
    return name


@dataclass(frozen=True, slots=True)
class QueueKeys:
    """Key names of one queue; all share the hash tag ``{queue}``."""

    queue: str
    base: str
    task_prefix: str
    pending: str
    active: str
    lease: str
    scheduled: str
    retry: str
    archived: str
    completed: str
    paused: str
    waiters: str
    processed: str
    failed: str
    groups: str
    aggregation_sets: str

    def task(self, task_id: str) -> str:
        return self.task_prefix + task_id

    def processed_day(self, day: str) -> str:
        return f"{self.processed}:{day}"

    def failed_day(self, day: str) -> str:
        return f"{self.failed}:{day}"

    def group(self, group: str) -> str:
        return f"{self.base}g:{group}"

    def unique(self, task_type: str, payload: bytes | None, key: str | None = None) -> str:
        """The uniqueness lock key: an explicit key, or one derived from type and payload."""
        if key is not None:
            return f"{self.base}unique:k:{key}"
        digest = "" if payload is None else hashlib.md5(payload, usedforsecurity=False).hexdigest()
        return f"{self.base}unique:{task_type}:{digest}"

    def state_key(self, state: str) -> str:
        """The list or sorted set holding tasks of ``state`` (not aggregating)."""
        return {
            "pending": self.pending,
            "active": self.active,
            "scheduled": self.scheduled,
            "retry": self.retry,
            "archived": self.archived,
            "completed": self.completed,
        }[state]


@lru_cache(maxsize=4096)
def queue_keys(queue: str) -> QueueKeys:
    """Key names of ``queue`` (cached: computed once per queue per process)."""
    base = f"{PREFIX}:{{{queue}}}:"
    return QueueKeys(
        queue=queue,
        base=base,
        task_prefix=base + "t:",
        pending=base + "pending",
        active=base + "active",
        lease=base + "lease",
        scheduled=base + "scheduled",
        retry=base + "retry",
        archived=base + "archived",
        completed=base + "completed",
        paused=base + "paused",
        waiters=base + "waiters",
        processed=base + "processed",
        failed=base + "failed",
        groups=base + "groups",
        aggregation_sets=base + "aggregation_sets",
    )


def day_string(now_ms: int) -> str:
    """UTC date (YYYY-MM-DD) of a Unix-millisecond time, as used by the daily counters."""
    return _day_string(now_ms // 86_400_000)


@lru_cache(maxsize=64)
def _day_string(day: int) -> str:
    """Formatted once per UTC day: every outcome the worker writes needs it."""
    return datetime.fromtimestamp(day * 86_400, tz=UTC).strftime("%Y-%m-%d")


def server_key(server_id: str) -> str:
    return f"{PREFIX}:servers:{{{server_id}}}"


def workers_key(server_id: str) -> str:
    return f"{PREFIX}:workers:{{{server_id}}}"


def scheduler_entries_key(scheduler_id: str) -> str:
    return f"{PREFIX}:schedulers:{{{scheduler_id}}}"


def scheduler_history_key(entry_id: str) -> str:
    return f"{PREFIX}:scheduler_history:{{{entry_id}}}"


def scheduler_ticks_key(queue: str) -> str:
    """ZSET entry id -> last tick (Unix ms) enqueued into ``queue`` by any scheduler.

    It lives in the queue's hash slot so one script can claim the tick and store the task.
    """
    return queue_keys(queue).base + "scheduler_ticks"
