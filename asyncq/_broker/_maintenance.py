"""The operation groups of the worker's background components (see the Broker protocol):
``maintenance`` (forwarding, recovery, repair, cleanup, samples, backlog), ``aggregation``
(groups and their aggregation sets) and ``workers`` (a worker's published state), with the
reads and pause the broker keeps as its own methods."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from .._clock import Clock
from .._defaults import COMPLETION_MARK
from .._errors import DecodeError
from .._model._message import TaskMessage, read_message
from . import _keys as K
from ._calls import ARCHIVE_CAPS, finish_call
from ._records import encode_running, encode_server
from ._replies import quarantine_id, raw_tasks, text
from ._runner import ScriptRunner
from ._values import Backlog, Outcome, RawTask, WorkerRecord

MINUTE_SAMPLES = 61
"""Samples a queue keeps for the last hour's charts: 61 give 60 one-minute differences."""


class RedisMaintenanceOps:
    """``MaintenanceOps`` run with a ScriptRunner (and the reads and pause ``RedisBroker``
    offers as its own methods)."""

    def __init__(self, runner: ScriptRunner, clock: Clock) -> None:
        self.runner = runner
        self.clock = clock

    async def forward(self, queue: str, source: Literal["scheduled", "retry"],
                      limit: int) -> tuple[int, int]:
        qk = K.queue_keys(queue)
        moved, next_due = await self.runner.run(
            "forward",
            [qk.scheduled if source == "scheduled" else qk.retry, qk.pending, qk.groups,
             qk.waiters],
            [self.clock.now_ms(), limit, qk.task_prefix, qk.group_prefix, K.WAKE_CHANNEL, queue,
             *ARCHIVE_CAPS],
        )
        return int(moved), int(next_due)

    async def list_lease_expired(self, queue: str, cutoff_ms: int, limit: int) -> list[RawTask]:
        qk = K.queue_keys(queue)
        flat = await self.runner.run("list_lease_expired", [qk.lease, qk.active],
                                     [cutoff_ms, qk.task_prefix, limit])
        tasks, bad = raw_tasks(flat)
        await self.quarantine(queue, bad)
        return tasks

    async def quarantine(self, queue: str, raw_ids: Sequence[bytes]) -> list[str]:
        """Archive the records whose ids are not UTF-8 under readable ids (see
        ``quarantine_id``), with the reason; returns those ids."""
        qk = K.queue_keys(queue)
        now = self.clock.now_ms()
        out = []
        for raw_id in raw_ids:
            new_id = quarantine_id(raw_id)
            reason = (f"InvalidTaskIDError: the task id {raw_id!r} is not UTF-8; the record was "
                      f"archived as {new_id}")
            await self.runner.run(
                "quarantine",
                [qk.pending, qk.active, qk.lease, qk.scheduled, qk.retry, qk.archived],
                [qk.task_prefix, raw_id, new_id, reason, now])
            out.append(new_id)
        return out

    async def recover(self, outcome: Outcome, lease_cutoff_ms: int) -> bool:
        call = finish_call(outcome, "", self.clock.now_ms(), lease_cutoff_ms)
        return bool(await self.runner.run_call(call))

    async def reclaim_orphans(self, queue: str, limit: int) -> int:
        qk = K.queue_keys(queue)
        return int(await self.runner.run("reclaim_orphans", [qk.active, qk.lease],
                                         [self.clock.now_ms(), limit]))

    async def scan_task_keys(self, cursor: int, count: int) -> tuple[int, list[tuple[str, str]]]:
        nxt, keys = await self.runner.scan(cursor, K.TASK_KEY_PATTERN, count)
        found = []
        for key in keys:
            try:
                parts = K.parse_task_key(text(key))
            except UnicodeDecodeError:
                if isinstance(key, bytes):
                    await self._quarantine_key(key)
                continue
            if parts is not None:
                found.append(parts)
        return nxt, found

    async def _quarantine_key(self, key: bytes) -> None:
        """A task key whose id is not UTF-8: quarantine it (whichever worker meets it first:
        such a record can never run). A queue name that is not UTF-8 is left alone."""
        parts = K.parse_task_key_bytes(key)
        if parts is not None:
            await self.quarantine(*parts)

    async def repair_tasks(self, queue: str, task_ids: Sequence[str],
                           pending_search: int) -> list[str]:
        if not task_ids:
            return []
        qk = K.queue_keys(queue)
        out = await self.runner.run(
            "repair_tasks",
            [qk.pending, qk.active, qk.lease, qk.scheduled, qk.retry, qk.archived,
             qk.completed, qk.groups, qk.aggregation_sets, qk.waiters],
            [qk.task_prefix, qk.group_prefix, self.clock.now_ms(), pending_search,
             K.WAKE_CHANNEL, queue, *task_ids])
        return [text(a) for a in out]

    async def read_tasks(self, queue: str,
                         task_ids: Sequence[str]
                         ) -> list[tuple[TaskMessage | DecodeError, bytes] | None]:
        qk = K.queue_keys(queue)
        replies = await self.runner.commands(
            "reading tasks", [("HMGET", qk.task(task_id), "msg", "payload")
                              for task_id in task_ids])
        return [None if msg is None else (read_message(msg), payload or b"")
                for msg, payload in replies]

    async def delete_expired_completed(self, queue: str, limit: int) -> int:
        qk = K.queue_keys(queue)
        now = self.clock.now_ms()
        marks_until = now - round(COMPLETION_MARK * 1000)
        return int(await self.runner.run("delete_expired_completed", [qk.completed, qk.marks],
                                         [now, qk.task_prefix, limit, marks_until]))

    async def record_minute(self, queue: str) -> bool:
        qk = K.queue_keys(queue)
        return bool(await self.runner.run(
            "record_minute", [qk.minutes, qk.processed, qk.failed, qk.pending, qk.active,
                              qk.scheduled, qk.retry],
            [self.clock.now_ms() // 60_000, MINUTE_SAMPLES]))

    async def backlog(self, queue: str, horizon_ms: int) -> Backlog:
        qk = K.queue_keys(queue)
        pending, due, groups, paused = await self.runner.run(
            "backlog", [qk.pending, qk.scheduled, qk.retry, qk.groups, qk.paused], [horizon_ms])
        return Backlog(int(pending), int(due), int(groups), bool(paused))

    async def pause(self, queue: str) -> bool:
        qk = K.queue_keys(queue)
        return bool(await self.runner.run("pause", [qk.paused], [self.clock.now_ms()]))

    async def unpause(self, queue: str) -> bool:
        qk = K.queue_keys(queue)
        return bool(await self.runner.run("unpause", [qk.paused], [K.WAKE_CHANNEL, queue]))


class RedisAggregationOps:
    """``AggregationOps`` run with a ScriptRunner (records with unreadable ids met in a set
    are quarantined by ``maintenance``)."""

    def __init__(self, runner: ScriptRunner, clock: Clock,
                 maintenance: RedisMaintenanceOps) -> None:
        self.runner = runner
        self.clock = clock
        self._maintenance = maintenance

    async def list_groups(self, queue: str) -> list[str]:
        members = await self.runner.command("listing groups", "SMEMBERS",
                                            K.queue_keys(queue).groups)
        return sorted(text(m) for m in members)

    async def check(self, queue: str, group: str, set_id: str, grace_ms: int,
                    max_delay_ms: int, max_size: int, set_deadline_ms: int) -> int:
        qk = K.queue_keys(queue)
        return int(await self.runner.run(
            "aggregation_check",
            [qk.group(group), qk.aggregation_set(group, set_id), qk.aggregation_sets, qk.groups],
            [self.clock.now_ms(), grace_ms, max_delay_ms, max_size, set_deadline_ms, group,
             qk.task_prefix, *ARCHIVE_CAPS]))

    async def read_set(self, queue: str, group: str, set_id: str) -> list[RawTask]:
        qk = K.queue_keys(queue)
        flat = await self.runner.run("read_aggregation_set", [qk.aggregation_set(group, set_id)],
                                     [qk.task_prefix])
        tasks, bad = raw_tasks(flat)
        await self._maintenance.quarantine(queue, bad)
        return tasks

    async def delete_set(self, queue: str, group: str, set_id: str) -> int:
        qk = K.queue_keys(queue)
        return int(await self.runner.run(
            "delete_aggregation_set", [qk.aggregation_set(group, set_id), qk.aggregation_sets],
            [qk.task_prefix]))

    async def return_set(self, queue: str, group: str, set_id: str) -> int:
        qk = K.queue_keys(queue)
        return int(await self.runner.run(
            "return_aggregation_set",
            [qk.aggregation_set(group, set_id), qk.group(group), qk.groups, qk.aggregation_sets],
            [group]))

    async def reclaim_stale_sets(self, queue: str) -> int:
        qk = K.queue_keys(queue)
        return int(await self.runner.run("reclaim_stale_aggregation_sets",
                                         [qk.aggregation_sets, qk.groups],
                                         [self.clock.now_ms(), qk.group_prefix]))


class RedisWorkerOps:
    """``WorkerOps`` run with a ScriptRunner."""

    def __init__(self, runner: ScriptRunner, clock: Clock) -> None:
        self.runner = runner
        self.clock = clock

    async def write(self, record: WorkerRecord, ttl_ms: int) -> None:
        skey, wkey = K.server_key(record.server_id), K.workers_key(record.server_id)
        pairs: list[Any] = []
        for run in record.running:
            pairs += [run.task_id, encode_running(run)]
        await self.runner.run("write_server_state", [skey, wkey],
                              [ttl_ms, encode_server(record), *pairs])
        expiry = self.clock.now_ms() + ttl_ms
        await self.runner.commands("writing server state", [
            ("ZADD", K.SERVERS, expiry, skey), ("ZADD", K.WORKERS, expiry, wkey)])

    async def clear(self, server_id: str) -> None:
        skey, wkey = K.server_key(server_id), K.workers_key(server_id)
        await self.runner.run("clear_server_state", [skey, wkey], [])
        await self.runner.commands("clearing server state", [
            ("ZREM", K.SERVERS, skey), ("ZREM", K.WORKERS, wkey)])
