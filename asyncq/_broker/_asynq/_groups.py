"""The worker's operation groups over Go asynq's layout: ``maintenance`` (forwarding here;
recovery, repair and cleanup in ``_recovery``; samples and the backlog in ``_inspect``) and
``aggregation`` (groups and their staged sets, ``_recovery``), tied together as the Broker
protocol's ``MaintenanceOps`` and ``AggregationOps``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from ..._clock import Clock
from .._runner import ScriptRunner
from .._values import Backlog, Outcome, RawTask
from . import _keys as K
from ._inspect import AsynqInspectOps
from ._recovery import AsynqRecovery


class AsynqMaintenance:
    """``MaintenanceOps`` over asynq's layout."""

    def __init__(self, runner: ScriptRunner, clock: Clock, recovery: AsynqRecovery,
                 inspect: AsynqInspectOps) -> None:
        self.runner = runner
        self.clock = clock
        self._recovery = recovery
        self._inspect = inspect

    async def forward(self, queue: str, source: Literal["scheduled", "retry"],
                      limit: int) -> tuple[int, int]:
        qk = K.queue_keys(queue)
        now = self.clock.now_ms()
        moved, due = await self.runner.run(
            "asynq_forward", [qk.state_key(source), qk.pending, qk.groups],
            [now // 1000, qk.task_prefix, now * 1_000_000, qk.group_prefix, limit,
             K.WAKE_CHANNEL, queue])
        return int(moved), (-1 if int(due) < 0 else int(due) * 1000)

    async def list_lease_expired(self, queue: str, cutoff_ms: int,
                                 limit: int) -> list[RawTask]:
        return await self._recovery.list_lease_expired(queue, cutoff_ms, limit)

    async def recover(self, outcome: Outcome, lease_cutoff_ms: int) -> bool:
        return await self._recovery.recover(outcome, lease_cutoff_ms)

    async def reclaim_orphans(self, queue: str, limit: int) -> int:
        return await self._recovery.reclaim_orphans(queue, limit)

    async def scan_task_keys(self, cursor: int,
                             count: int) -> tuple[int, list[tuple[str, str]]]:
        return await self._recovery.scan_task_keys(cursor, count)

    async def repair_tasks(self, queue: str, task_ids: Sequence[str],
                           pending_search: int) -> list[str]:
        return await self._recovery.repair_tasks(queue, task_ids, pending_search)

    async def delete_expired_completed(self, queue: str, limit: int) -> int:
        return await self._recovery.delete_expired_completed(queue, limit)

    async def record_minute(self, queue: str) -> bool:
        return await self._inspect.record_minute(queue)

    async def backlog(self, queue: str, horizon_ms: int) -> Backlog:
        return await self._inspect.backlog(queue, horizon_ms)


class AsynqAggregation:
    """``AggregationOps`` over asynq's layout."""

    def __init__(self, recovery: AsynqRecovery, inspect: AsynqInspectOps) -> None:
        self._recovery = recovery
        self._inspect = inspect

    async def list_groups(self, queue: str) -> list[str]:
        return await self._inspect.list_groups(queue)

    async def check(self, queue: str, group: str, set_id: str, grace_ms: int,
                    max_delay_ms: int, max_size: int, set_deadline_ms: int) -> int:
        return await self._recovery.aggregation_check(queue, group, set_id, grace_ms,
                                                      max_delay_ms, max_size, set_deadline_ms)

    async def read_set(self, queue: str, group: str, set_id: str) -> list[RawTask]:
        return await self._recovery.read_aggregation_set(queue, group, set_id)

    async def delete_set(self, queue: str, group: str, set_id: str) -> int:
        return await self._recovery.delete_aggregation_set(queue, group, set_id)

    async def return_set(self, queue: str, group: str, set_id: str) -> int:
        return await self._recovery.return_aggregation_set(queue, group, set_id)

    async def reclaim_stale_sets(self, queue: str) -> int:
        return await self._recovery.reclaim_stale_aggregation_sets(queue)
