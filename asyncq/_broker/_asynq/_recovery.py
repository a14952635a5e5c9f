"""Recovery, cleanup and aggregation in Go asynq's layout: what the worker's recoverer, janitor
and aggregator call, each step as Go's (``recoverer.go``, ``janitor.go``, ``aggregator.go`` and
the ``rdb.go`` scripts behind them), so asyncq workers and Go servers can share queues.

Recovery has two cutoffs. A run an asyncq worker holds (its ``owner`` and ``lease_until``
fields match the lease entry) is recovered by asyncq's own rule, the caller's cutoff: such a
run's outcome is written only while its lease entry is the one it wrote, so a recovered run can
never write over a later one. Any other run is a Go server's, whose outcome writes check
nothing in Redis: it is recovered only once its lease ended 30 s ago or earlier, as Go's own
recoverer does, so a live Go run (renewed every 5 s to now + 30 s) is never taken, whatever the
asyncq worker's ``recover_grace``.

asynq has no orphan scan nor repair of task records found in no list (``scan_task_keys``,
``repair_tasks``): both answer "nothing" here.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..._clock import Clock
from .._replies import text
from .._runner import ScriptRunner
from .._values import Outcome, RawTask
from . import _codec
from . import _keys as K

GO_RECOVER_GRACE_MS = 30_000
"""Go's recoverer takes the runs whose lease ended this long ago or earlier (clock skew)."""
STATS_TTL_S = 90 * 86_400  # daily counters expire 90 days after their first count
ARCHIVE_MAX_SIZE = 10_000  # Go's maxArchiveSize
ARCHIVE_MAX_AGE_S = 90 * 86_400  # Go's archivedExpirationInDays


def _raw_tasks(flat: Sequence[bytes]) -> list[RawTask]:
    """``{id, msg, asyncq_msg, ...}`` replies as RawTasks (an id that is not UTF-8 is left out:
    no asyncq message can name it)."""
    out = []
    for i in range(0, len(flat), 3):
        try:
            task_id = text(flat[i])
        except UnicodeDecodeError:
            continue
        out.append(_codec.raw_task(task_id, flat[i + 1], flat[i + 2], 0))
    return out


class AsynqRecovery:
    """The Broker protocol's recovery, janitor and group methods over asynq's keys."""

    def __init__(self, runner: ScriptRunner, clock: Clock) -> None:
        self.runner = runner
        self.clock = clock

    def _cutoffs(self, cutoff_ms: int) -> tuple[int, int]:
        """(asyncq cutoff, Go cutoff), Unix s: a lease score at or before one has ended."""
        go_ms = min(cutoff_ms, self.clock.now_ms() - GO_RECOVER_GRACE_MS)
        return cutoff_ms // 1000, go_ms // 1000

    async def list_lease_expired(self, queue: str, cutoff_ms: int,
                                 limit: int) -> list[RawTask]:
        qk = K.queue_keys(queue)
        mine, go = self._cutoffs(cutoff_ms)
        flat = await self.runner.run("asynq_list_lease_expired", [qk.lease, qk.active],
                                     [mine, go, qk.task_prefix, limit])
        return _raw_tasks(flat)

    async def recover(self, outcome: Outcome, lease_cutoff_ms: int) -> bool:
        """Retry or archive a task whose lease ended, as Go's recoverer (Retry/Archive)."""
        if outcome.kind not in ("retry", "archive"):
            raise ValueError(f"a lease-expired task is retried or archived, not {outcome.kind!r}")
        qk = K.queue_keys(outcome.queue)
        now_ms = self.clock.now_ms()
        now_s = now_ms // 1000
        day = K.day_string(now_ms)
        mine, go = self._cutoffs(lease_cutoff_ms)
        return bool(await self.runner.run(
            "asynq_recover",
            [qk.task(outcome.task_id), qk.active, qk.lease, qk.retry, qk.archived,
             qk.processed_day(day), qk.failed_day(day), qk.processed, qk.failed],
            [outcome.task_id, outcome.kind, mine, go, -(-outcome.retry_at_ms // 1000),
             outcome.error, now_s, "1" if outcome.is_failure else "0", now_s + STATS_TTL_S,
             now_s - ARCHIVE_MAX_AGE_S, ARCHIVE_MAX_SIZE, qk.task_prefix, outcome.traceback,
             _codec.go_error(outcome.error)]))

    async def reclaim_orphans(self, queue: str, limit: int) -> int:
        qk = K.queue_keys(queue)
        return int(await self.runner.run("asynq_reclaim_orphans", [qk.active, qk.lease],
                                         [self.clock.now_ms() // 1000, limit]))

    async def scan_task_keys(self, cursor: int,
                             count: int) -> tuple[int, list[tuple[str, str]]]:
        """Nothing to walk: asynq has no repair of orphaned task records (a whole pass)."""
        return 0, []

    async def repair_tasks(self, queue: str, task_ids: Sequence[str],
                           pending_search: int) -> list[str]:
        """Nothing done (see ``scan_task_keys``)."""
        return ["" for _ in task_ids]

    async def delete_expired_completed(self, queue: str, limit: int) -> int:
        """One batch of Go's DeleteExpiredCompletedTasks (the janitor repeats while a batch is
        full, as Go repeats until one deletes nothing)."""
        qk = K.queue_keys(queue)
        return int(await self.runner.run("asynq_delete_expired_completed", [qk.completed],
                                         [self.clock.now_ms() // 1000, qk.task_prefix, limit]))

    # -- groups

    async def aggregation_check(self, queue: str, group: str, set_id: str, grace_ms: int,
                                max_delay_ms: int, max_size: int, set_deadline_ms: int) -> int:
        """As Go's AggregationCheck (durations in whole seconds, as Go passes them)."""
        qk = K.queue_keys(queue)
        return int(await self.runner.run(
            "asynq_aggregation_check",
            [qk.group(group), qk.aggregation_set(group, set_id), qk.aggregation_sets, qk.groups],
            [self.clock.now_ms() // 1000, grace_ms // 1000, max_delay_ms // 1000, max_size,
             set_deadline_ms // 1000, group]))

    async def read_aggregation_set(self, queue: str, group: str,
                                   set_id: str) -> list[RawTask]:
        qk = K.queue_keys(queue)
        flat = await self.runner.run("asynq_read_aggregation_set",
                                     [qk.aggregation_set(group, set_id)], [qk.task_prefix])
        return _raw_tasks(flat)

    async def delete_aggregation_set(self, queue: str, group: str, set_id: str) -> int:
        qk = K.queue_keys(queue)
        return int(await self.runner.run(
            "asynq_delete_aggregation_set",
            [qk.aggregation_set(group, set_id), qk.aggregation_sets], [qk.task_prefix]))

    async def return_aggregation_set(self, queue: str, group: str, set_id: str) -> int:
        qk = K.queue_keys(queue)
        return int(await self.runner.run(
            "asynq_return_aggregation_set",
            [qk.aggregation_set(group, set_id), qk.group(group), qk.groups,
             qk.aggregation_sets], [group]))

    async def reclaim_stale_aggregation_sets(self, queue: str) -> int:
        qk = K.queue_keys(queue)
        return int(await self.runner.run(
            "asynq_reclaim_stale_aggregation_sets", [qk.aggregation_sets, qk.groups],
            [self.clock.now_ms() // 1000, qk.group_prefix]))
