"""The inspector's Redis side: reads of queue state and the batched bulk operations.

Every operation that changes tasks is one of the ``lua/inspect_*.lua`` scripts. Bulk operations
(delete/run/archive all tasks in a state) take at most ``batch_size`` tasks per script call and
are looped from here, so that a queue of a million tasks never blocks Redis for long: each call
is atomic, the whole operation is not (tasks enqueued meanwhile may or may not be included).
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Any, Literal, NamedTuple, TypeVar

from redis.exceptions import RedisError

from .. import _keys as K
from .._errors import BrokerError
from ._cluster import server_infos
from ._redis import ARCHIVE_MAX_AGE_MS, ARCHIVE_MAX_SIZE, RedisBroker

BATCH_SIZE = 1000
MEMORY_SAMPLE = 20  # task hashes sampled per list/zset for the memory estimate
MEMORY_GROUP_SAMPLE = 5  # groups sampled for the memory estimate

BulkOp = Literal["delete", "run", "archive"]
RemoveMode = Literal["check", "remove", "force"]
T = TypeVar("T")


def _s(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _int(value: Any) -> int:
    if value is None or value == b"" or value == "":
        return 0
    return int(float(value))


class TaskRecord(NamedTuple):
    """A task hash as read by the inspector, before its message is decoded."""

    id: str
    msg: bytes
    payload: bytes
    state: str
    retried: int
    error: str
    failed_at_ms: int
    completed_at_ms: int
    result: bytes | None
    score: int | None  # zset score; lease expiry for active tasks; None when there is none


class QueueStats(NamedTuple):
    """What ``inspect_queue_info.lua`` returns, named."""

    pending: int
    active: int
    scheduled: int
    retry: int
    archived: int
    completed: int
    aggregating: int
    groups: int
    processed: int
    failed: int
    processed_total: int
    failed_total: int
    paused: bool
    oldest_pending_since_ms: int
    expired_leases: int


def _record(task_id: bytes | str, fields: Sequence[Any]) -> TaskRecord:
    msg, payload, state, retried, error, failed_at, completed_at, result, score = fields
    return TaskRecord(
        id=_s(task_id), msg=msg, payload=payload or b"", state=_s(state or b""),
        retried=_int(retried), error=_s(error or b""), failed_at_ms=_int(failed_at),
        completed_at_ms=_int(completed_at), result=result,
        score=None if score is None else _int(score),
    )


class InspectOps:
    """Inspector operations over a RedisBroker, run with its script runner."""

    def __init__(self, broker: RedisBroker, *, batch_size: int = BATCH_SIZE) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.broker = broker
        self.redis = broker.redis
        self.batch_size = batch_size

    async def _call(self, what: str, aw: Awaitable[T]) -> T:
        try:
            return await aw
        except RedisError as exc:
            raise BrokerError(f"{what} failed: {exc}") from exc

    def _now(self) -> int:
        return self.broker.clock.now_ms()

    # -- queues

    async def queue_names(self) -> list[str]:
        members = await self._call("listing queues", self.redis.smembers(K.QUEUES))
        return sorted(_s(m) for m in members)

    async def queue_exists(self, queue: str) -> bool:
        return bool(await self._call("reading queues",
                                     self.redis.sismember(K.QUEUES, queue)))

    async def unregister_queue(self, queue: str) -> None:
        await self._call("removing queue", self.redis.srem(K.QUEUES, queue))
        self.broker.forget_queue(queue)

    async def queue_stats(self, queue: str, now_ms: int) -> QueueStats:
        qk = K.queue_keys(queue)
        day = K.day_string(now_ms)
        v = await self.broker._eval(
            "inspect_queue_info",
            [qk.pending, qk.active, qk.scheduled, qk.retry, qk.archived, qk.completed, qk.paused,
             qk.processed, qk.failed, qk.processed_day(day), qk.failed_day(day), qk.groups,
             qk.aggregation_sets, qk.lease],
            [qk.task_prefix, qk.base + "g:", now_ms],
        )
        n = [_int(x) for x in v]
        return QueueStats(
            pending=n[0], active=n[1], scheduled=n[2], retry=n[3], archived=n[4],
            completed=n[5], aggregating=n[6], groups=n[7], processed=n[8], failed=n[9],
            processed_total=n[10], failed_total=n[11], paused=bool(n[12]),
            oldest_pending_since_ms=n[13], expired_leases=n[14])

    async def memory_usage(self, queue: str) -> int:
        qk = K.queue_keys(queue)
        return _int(await self.broker._eval(
            "inspect_memory_usage",
            [qk.pending, qk.active, qk.scheduled, qk.retry, qk.archived, qk.completed, qk.groups,
             qk.lease],
            [qk.task_prefix, qk.base + "g:", MEMORY_SAMPLE, MEMORY_GROUP_SAMPLE],
        ))

    async def daily_counts(self, queue: str, days: Sequence[str]) -> list[tuple[int, int]]:
        """(processed, failed) for each UTC date in ``days`` (one MGET: same slot)."""
        if not days:
            return []
        qk = K.queue_keys(queue)
        keys = [qk.processed_day(d) for d in days] + [qk.failed_day(d) for d in days]
        values = await self._call("reading history", self.redis.mget(keys))
        n = len(days)
        return [(_int(values[i]), _int(values[n + i])) for i in range(n)]

    async def groups(self, queue: str) -> list[tuple[str, int]]:
        qk = K.queue_keys(queue)
        flat = await self.broker._eval("inspect_groups", [qk.groups], [qk.base + "g:"])
        return sorted((_s(flat[i]), _int(flat[i + 1])) for i in range(0, len(flat), 2))

    async def remove_queue(self, queue: str, mode: RemoveMode,
                           days: Sequence[str]) -> tuple[int, int, int]:
        """Run ``inspect_remove_queue.lua``: (code, active, queued)."""
        qk = K.queue_keys(queue)
        code, active, queued = await self.broker._eval(
            "inspect_remove_queue",
            [qk.pending, qk.active, qk.scheduled, qk.retry, qk.archived, qk.completed, qk.lease,
             qk.paused, qk.waiters, qk.processed, qk.failed, qk.groups, qk.aggregation_sets],
            [mode, qk.task_prefix, *days],
        )
        return _int(code), _int(active), _int(queued)

    # -- tasks

    def _source(self, queue: str, state: str, group: str | None) -> str:
        qk = K.queue_keys(queue)
        if state == "aggregating":
            if not group:
                raise ValueError("aggregating tasks are kept per group: pass a group")
            return qk.group(group)
        return qk.state_key(state)

    async def list_tasks(self, queue: str, state: str, group: str | None, offset: int,
                         count: int) -> list[TaskRecord]:
        """``count`` tasks from ``offset`` in processing order (lists: oldest first, i.e. from
        the tail; zsets: ascending score)."""
        qk = K.queue_keys(queue)
        source = self._source(queue, state, group)
        if state in ("pending", "active"):
            kind, start, stop = "list", -(offset + count), -(offset + 1)
        else:
            kind, start, stop = "zset", offset, offset + count - 1
        rows = await self.broker._eval("inspect_list_tasks", [source, qk.lease],
                                       [kind, start, stop, qk.task_prefix])
        records = [_record(row[0], row[1:]) for row in rows]
        if kind == "list":
            records.reverse()
        return records

    async def task(self, queue: str, task_id: str) -> TaskRecord | None:
        qk = K.queue_keys(queue)
        row = await self.broker._eval("inspect_task_info",
                                      [qk.task(task_id), qk.lease, qk.scheduled, qk.retry],
                                      [task_id])
        return None if row is None else _record(task_id, row)

    def _task_keys(self, queue: str, task_id: str) -> list[str]:
        qk = K.queue_keys(queue)
        return [qk.task(task_id), qk.pending, qk.scheduled, qk.retry, qk.archived, qk.completed,
                qk.groups, qk.aggregation_sets]

    async def delete_task(self, queue: str, task_id: str) -> int:
        """1 deleted, 0 not found, -1 active."""
        qk = K.queue_keys(queue)
        return _int(await self.broker._eval("inspect_delete_task", self._task_keys(queue, task_id),
                                            [task_id, qk.base + "g:"]))

    async def run_task(self, queue: str, task_id: str) -> int:
        """1 now pending, 0 not found, -1 active, -2 already pending."""
        qk = K.queue_keys(queue)
        return _int(await self.broker._eval(
            "inspect_run_task", [*self._task_keys(queue, task_id), qk.waiters],
            [task_id, qk.base + "g:", self._now(), K.WAKE_CHANNEL, queue]))

    async def archive_task(self, queue: str, task_id: str) -> int:
        """1 archived, 0 not found, -1 active, -2 already archived."""
        qk = K.queue_keys(queue)
        now = self._now()
        return _int(await self.broker._eval(
            "inspect_archive_task", self._task_keys(queue, task_id),
            [task_id, qk.base + "g:", now, ARCHIVE_MAX_SIZE, now - ARCHIVE_MAX_AGE_MS,
             qk.task_prefix]))

    async def update_payload(self, queue: str, task_id: str, old_msg: bytes, new_msg: bytes,
                             payload: bytes) -> int:
        """1 updated, 0 not found, -1 not scheduled, -2 changed since read."""
        qk = K.queue_keys(queue)
        return _int(await self.broker._eval("inspect_update_payload", [qk.task(task_id)],
                                            [old_msg, new_msg, payload]))

    async def bulk(self, op: BulkOp, queue: str, state: str, group: str | None = None) -> int:
        """Apply ``op`` to every task of ``state`` (of ``group`` for aggregating), batch by batch;
        returns how many tasks it applied to."""
        qk = K.queue_keys(queue)
        source = self._source(queue, state, group)
        gname = group if state == "aggregating" and group else ""
        total = 0
        while True:
            now = self._now()
            if op == "delete":
                taken, done = await self.broker._eval(
                    "inspect_delete_all", [source, qk.groups],
                    [state, self.batch_size, qk.task_prefix, gname])
            elif op == "run":
                taken, done = await self.broker._eval(
                    "inspect_run_all", [source, qk.pending, qk.groups, qk.waiters],
                    [state, self.batch_size, qk.task_prefix, gname, now, K.WAKE_CHANNEL, queue])
            else:
                taken, done = await self.broker._eval(
                    "inspect_archive_all", [source, qk.archived, qk.groups],
                    [state, self.batch_size, qk.task_prefix, gname, now, ARCHIVE_MAX_SIZE,
                     now - ARCHIVE_MAX_AGE_MS])
            total += _int(done)
            if _int(taken) < self.batch_size:
                return total

    async def redis_info(self) -> dict[str, Any]:
        """The Redis server's INFO fields. On a cluster: the first master's, with clients and
        memory summed over every master and ``cluster_masters`` set to their number."""
        infos = await self._call("INFO", server_infos(self.redis))
        info = dict(infos[0])
        if len(infos) > 1:
            for field in ("connected_clients", "used_memory", "used_memory_peak"):
                info[field] = sum(_int(i.get(field)) for i in infos)
            for field in ("used_memory", "used_memory_peak"):
                info[field + "_human"] = f"{info[field] / 2**20:.2f}M"
            info["cluster_masters"] = len(infos)
        return info

    # -- servers

    async def servers(self, now_ms: int) -> list[tuple[bytes, dict[bytes, bytes]]]:
        """Live servers' state documents with their workers hashes; stale entries are pruned."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.zremrangebyscore(K.SERVERS, "-inf", now_ms)
        pipe.zremrangebyscore(K.WORKERS, "-inf", now_ms)
        pipe.zrange(K.SERVERS, 0, -1)
        _, _, keys = await self._call("listing servers", pipe.execute())
        if not keys:
            return []
        pipe = self.redis.pipeline(transaction=False)
        for key in keys:
            pipe.get(key)
        docs = await self._call("reading servers", pipe.execute())
        live = [(key, doc) for key, doc in zip(keys, docs, strict=True) if doc is not None]
        gone = [key for key, doc in zip(keys, docs, strict=True) if doc is None]
        pipe = self.redis.pipeline(transaction=False)
        if gone:
            pipe.zrem(K.SERVERS, *gone)
        for key, _ in live:
            server_id = _s(key).removeprefix(f"{K.PREFIX}:servers:")[1:-1]
            pipe.hgetall(K.workers_key(server_id))
        out = await self._call("reading workers", pipe.execute())
        workers = out[1:] if gone else out
        return [(doc, w) for (_, doc), w in zip(live, workers, strict=True)]
