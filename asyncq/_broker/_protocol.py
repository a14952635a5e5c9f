"""The Broker protocol: every Redis interaction of asyncq goes through one of these methods.

Components (client, worker parts) depend on this protocol, never on redis-py, so a
cluster-aware or fault-injecting broker can stand in for ``RedisBroker``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple, Protocol, runtime_checkable

from .._message import TaskMessage


class RawTask(NamedTuple):
    """A task as read from Redis, before its message is decoded."""

    id: str
    msg: bytes
    payload: bytes
    retried: int


class NewTask(NamedTuple):
    """Everything needed to store a new task."""

    msg: TaskMessage
    payload: bytes
    process_at_ms: int  # 0 or <= now: ready now
    unique_key: str | None  # lock key name, None when not unique
    unique_ttl_ms: int


EnqueueCode = Literal[1, 0, -1]  # 1 stored, 0 id conflict, -1 unique duplicate


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a leased task ended, written back by the worker (one script per outcome)."""

    kind: Literal["done", "complete", "retry", "archive", "requeue"]
    queue: str
    task_id: str
    retention_ms: int = 0
    retry_at_ms: int = 0
    error: str = ""
    is_failure: bool = True
    result: bytes | None = None  # stored with a completed task (retention > 0)


@runtime_checkable
class Broker(Protocol):
    """Atomic task-state transitions and the few plain reads/writes around them."""

    async def ping(self) -> None: ...
    async def close(self) -> None: ...

    # -- producing
    async def register_queues(self, queues: Sequence[str]) -> None: ...
    async def store(self, task: NewTask) -> EnqueueCode: ...
    async def store_many(self, tasks: Sequence[NewTask]) -> list[EnqueueCode | Exception]: ...
    async def publish_cancel(self, task_id: str) -> None: ...

    # -- running
    async def dequeue(
        self, queue: str, count: int, owner: str, lease_ms: int, waiter_ttl_ms: int,
        request_id: str = "",
    ) -> tuple[list[RawTask], int]: ...
    async def finish(self, outcomes: Sequence[Outcome], owner: str) -> list[bool | Exception]: ...
    async def extend_leases(
        self, queue: str, task_ids: Sequence[str], owner: str, lease_ms: int
    ) -> list[bool]: ...
    async def write_result(self, queue: str, task_id: str, data: bytes) -> int: ...
    def listen(
        self, channels: Sequence[str]
    ) -> AsyncIterator[tuple[str, str] | None]: ...

    # -- maintenance
    async def forward(self, queue: str, source: Literal["scheduled", "retry"],
                      limit: int) -> tuple[int, int]: ...
    async def list_lease_expired(self, queue: str, cutoff_ms: int,
                                 limit: int) -> list[RawTask]: ...
    async def recover(self, outcome: Outcome, lease_cutoff_ms: int) -> bool: ...
    async def reclaim_orphans(self, queue: str, limit: int) -> int: ...
    async def scan_task_keys(
        self, cursor: int, count: int
    ) -> tuple[int, list[tuple[str, str]]]: ...
    async def repair_tasks(self, queue: str, task_ids: Sequence[str],
                           pending_search: int) -> list[str]: ...
    async def read_tasks(self, queue: str,
                         task_ids: Sequence[str]) -> list[tuple[bytes, bytes] | None]: ...
    async def delete_expired_completed(self, queue: str, limit: int) -> int: ...
    async def write_server_state(self, server_id: str, info: bytes,
                                 workers: dict[str, bytes], ttl_ms: int) -> None: ...
    async def clear_server_state(self, server_id: str) -> None: ...
    async def list_groups(self, queue: str) -> list[str]: ...
    async def aggregation_check(self, queue: str, group: str, set_id: str, grace_ms: int,
                                max_delay_ms: int, max_size: int,
                                set_deadline_ms: int) -> int: ...
    async def read_aggregation_set(self, queue: str, group: str,
                                   set_id: str) -> list[RawTask]: ...
    async def delete_aggregation_set(self, queue: str, group: str, set_id: str) -> int: ...
    async def reclaim_stale_aggregation_sets(self, queue: str) -> int: ...
    async def pause(self, queue: str) -> bool: ...
    async def unpause(self, queue: str) -> bool: ...


def is_broker(obj: object) -> bool:
    """The one rule that tells a Broker from a Redis URL or client: it has the protocol's
    methods (a RedisBroker, or any object standing in for one, e.g. a fault-injecting wrapper)."""
    return isinstance(obj, Broker)
