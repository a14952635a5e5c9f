"""The maintenance side of RedisBroker: forwarding, recovery, repair, cleanup, server state,
groups and pause — what the worker's background components call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from redis.asyncio import Redis, RedisCluster
from redis.exceptions import RedisError

from .. import _keys as K
from .._clock import Clock
from .._errors import BrokerError
from . import _cluster
from ._protocol import Outcome, RawTask
from ._replies import _raw_tasks, _s, _task_key_parts

if TYPE_CHECKING:
    from ._scripts import Script


class MaintenanceOps:
    """Mixed into RedisBroker; relies on its ``redis``, ``clock``, ``_eval`` and
    ``_finish_call``."""

    redis: Redis | RedisCluster
    clock: Clock

    if TYPE_CHECKING:
        async def _eval(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> Any: ...

        def _finish_call(self, o: Outcome, owner: str, now: int,
                         lease_cutoff: int | str = "") -> tuple[Script, list[str],
                                                                 list[Any]]: ...

    # -- maintenance

    async def forward(self, queue: str, source: Literal["scheduled", "retry"],
                      limit: int) -> tuple[int, int]:
        qk = K.queue_keys(queue)
        moved, next_due = await self._eval(
            "forward",
            [qk.scheduled if source == "scheduled" else qk.retry, qk.pending, qk.groups,
             qk.waiters],
            [self.clock.now_ms(), limit, qk.task_prefix, qk.base + "g:", K.WAKE_CHANNEL, queue],
        )
        return int(moved), int(next_due)

    async def list_lease_expired(self, queue: str, cutoff_ms: int, limit: int) -> list[RawTask]:
        qk = K.queue_keys(queue)
        flat = await self._eval("list_lease_expired", [qk.lease, qk.active],
                                [cutoff_ms, qk.task_prefix, limit])
        return _raw_tasks(flat)

    async def recover(self, outcome: Outcome, lease_cutoff_ms: int) -> bool:
        """Retry or archive a task whose lease ended by ``lease_cutoff_ms`` (any owner)."""
        script, keys, args = self._finish_call(outcome, "", self.clock.now_ms(), lease_cutoff_ms)
        return bool(await self._eval(script.name, keys, args))

    async def reclaim_orphans(self, queue: str, limit: int) -> int:
        qk = K.queue_keys(queue)
        return int(await self._eval("reclaim_orphans", [qk.active, qk.lease],
                                    [self.clock.now_ms(), limit]))

    async def scan_task_keys(self, cursor: int, count: int) -> tuple[int, list[tuple[str, str]]]:
        """One ``SCAN`` step over task keys: (next cursor, [(queue, task id), ...]); the
        cursor is 0 again once the whole keyspace was walked."""
        try:
            nxt, keys = await _cluster.scan(self.redis, cursor, K.PREFIX + ":{*}:t:*", count)
        except RedisError as exc:
            raise BrokerError(f"scanning task keys failed: {exc}") from exc
        found = [parts for key in keys if (parts := _task_key_parts(key)) is not None]
        return nxt, found

    async def repair_tasks(self, queue: str, task_ids: Sequence[str],
                           pending_search: int) -> list[str]:
        """Put task records found in no list or sorted set back (see repair_tasks.lua); one
        action per id ('' nothing done, '?' undecided)."""
        if not task_ids:
            return []
        qk = K.queue_keys(queue)
        out = await self._eval(
            "repair_tasks",
            [qk.pending, qk.active, qk.lease, qk.scheduled, qk.retry, qk.archived,
             qk.completed, qk.groups, qk.aggregation_sets, qk.waiters],
            [qk.task_prefix, qk.base + "g:", self.clock.now_ms(), pending_search,
             K.WAKE_CHANNEL, queue, *task_ids])
        return [_s(a) for a in out]

    async def read_tasks(self, queue: str,
                         task_ids: Sequence[str]) -> list[tuple[bytes, bytes] | None]:
        """The stored (message, payload) of each task, None where there is no such task."""
        qk = K.queue_keys(queue)
        try:
            pipe = self.redis.pipeline(transaction=False)
            for task_id in task_ids:
                pipe.hmget(qk.task(task_id), "msg", "payload")
            replies = await pipe.execute()
        except RedisError as exc:
            raise BrokerError(f"reading tasks failed: {exc}") from exc
        return [None if msg is None else (msg, payload or b"") for msg, payload in replies]

    async def delete_expired_completed(self, queue: str, limit: int) -> int:
        qk = K.queue_keys(queue)
        return int(await self._eval("delete_expired_completed", [qk.completed],
                                    [self.clock.now_ms(), qk.task_prefix, limit]))

    async def write_server_state(self, server_id: str, info: bytes,
                                 workers: dict[str, bytes], ttl_ms: int) -> None:
        skey, wkey = K.server_key(server_id), K.workers_key(server_id)
        pairs: list[Any] = []
        for task_id, winfo in workers.items():
            pairs += [task_id, winfo]
        await self._eval("write_server_state", [skey, wkey], [ttl_ms, info, *pairs])
        expiry = self.clock.now_ms() + ttl_ms
        try:
            pipe = self.redis.pipeline(transaction=False)
            pipe.zadd(K.SERVERS, {skey: expiry})
            pipe.zadd(K.WORKERS, {wkey: expiry})
            await pipe.execute()
        except RedisError as exc:
            raise BrokerError(f"writing server state failed: {exc}") from exc

    async def clear_server_state(self, server_id: str) -> None:
        skey, wkey = K.server_key(server_id), K.workers_key(server_id)
        await self._eval("clear_server_state", [skey, wkey], [])
        try:
            pipe = self.redis.pipeline(transaction=False)
            pipe.zrem(K.SERVERS, skey)
            pipe.zrem(K.WORKERS, wkey)
            await pipe.execute()
        except RedisError as exc:
            raise BrokerError(f"clearing server state failed: {exc}") from exc

    # -- groups

    async def list_groups(self, queue: str) -> list[str]:
        try:
            members = await self.redis.smembers(K.queue_keys(queue).groups)
        except RedisError as exc:
            raise BrokerError(f"listing groups failed: {exc}") from exc
        return sorted(_s(m) for m in members)

    async def aggregation_check(self, queue: str, group: str, set_id: str, grace_ms: int,
                                max_delay_ms: int, max_size: int, set_deadline_ms: int) -> int:
        qk = K.queue_keys(queue)
        return int(await self._eval(
            "aggregation_check",
            [qk.group(group), f"{qk.group(group)}:{set_id}", qk.aggregation_sets, qk.groups],
            [self.clock.now_ms(), grace_ms, max_delay_ms, max_size, set_deadline_ms, group]))

    async def read_aggregation_set(self, queue: str, group: str, set_id: str) -> list[RawTask]:
        qk = K.queue_keys(queue)
        flat = await self._eval("read_aggregation_set", [f"{qk.group(group)}:{set_id}"],
                                [qk.task_prefix])
        return _raw_tasks(flat)

    async def delete_aggregation_set(self, queue: str, group: str, set_id: str) -> int:
        qk = K.queue_keys(queue)
        return int(await self._eval("delete_aggregation_set",
                                    [f"{qk.group(group)}:{set_id}", qk.aggregation_sets],
                                    [qk.task_prefix]))

    async def reclaim_stale_aggregation_sets(self, queue: str) -> int:
        qk = K.queue_keys(queue)
        return int(await self._eval("reclaim_stale_aggregation_sets",
                                    [qk.aggregation_sets, qk.groups],
                                    [self.clock.now_ms(), qk.base + "g:"]))

    async def pause(self, queue: str) -> bool:
        qk = K.queue_keys(queue)
        return bool(await self._eval("pause", [qk.paused], [self.clock.now_ms()]))

    async def unpause(self, queue: str) -> bool:
        qk = K.queue_keys(queue)
        return bool(await self._eval("unpause", [qk.paused], [K.WAKE_CHANNEL, queue]))
