"""RedisBroker: the Broker protocol over redis.asyncio, one Lua script per task transition."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from redis.asyncio import Redis, RedisCluster
from redis.exceptions import BusyLoadingError, NoScriptError, RedisError
from redis.exceptions import ConnectionError as RedisConnectionError

from .. import _keys as K
from .._clock import SYSTEM_CLOCK, Clock
from .._errors import BrokerError
from . import _cluster
from ._maintenance import MaintenanceOps
from ._protocol import EnqueueCode, NewTask, Outcome, RawTask
from ._replies import _raw_tasks, _s
from ._resp import pack, raw_pipeline, supports_raw_pipeline
from ._scripts import Script, load_scripts

DAY_MS = 86_400_000
STATS_TTL_MS = 90 * DAY_MS
ARCHIVE_MAX_SIZE = 10_000
ARCHIVE_MAX_AGE_MS = 90 * DAY_MS
_PIPELINE_CHUNK = 1000
_BATCH_RUN = 250  # tasks per enqueue_batch call
_BATCH_CHUNK = 8  # enqueue_batch calls per round trip


def _code(value: Any) -> EnqueueCode:
    code = int(value)
    if code == 1:
        return 1
    return 0 if code == 0 else -1


class RedisBroker(MaintenanceOps):
    """The Redis implementation of the Broker protocol.

    ``redis`` (a single node, a Sentinel-managed master or a ``RedisCluster``) must be created
    with ``decode_responses=False``. ``owns_client`` says whether ``close()`` closes it (True
    when asyncq created it from a URL); ``also_close`` is awaited after it (the Sentinel
    connections of a client asyncq created).
    """

    def __init__(self, redis: Redis | RedisCluster, *, owns_client: bool = False,
                 clock: Clock = SYSTEM_CLOCK, ping_interval: float = 15.0,
                 reply_timeout: float | None = 5.0,
                 also_close: Callable[[], Awaitable[None]] | None = None) -> None:
        self.redis = redis
        self.clock = clock
        self.ping_interval = ping_interval
        """``listen`` pings a pub/sub connection that heard nothing for this long (0: never)."""
        self.reply_timeout = reply_timeout or 5.0
        """How long ``listen`` waits for the answer to such a ping before reconnecting."""
        self._owns_client = owns_client
        self._also_close = also_close
        self._scripts = load_scripts()
        self._known_queues: set[str] = set()
        self._raw = supports_raw_pipeline(redis)

    # -- plumbing

    async def _eval(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        script = self._scripts[name]
        try:
            try:
                return await self.redis.evalsha(script.sha, len(keys), *keys, *args)
            except NoScriptError:
                await self.redis.script_load(script.source)
                return await self.redis.evalsha(script.sha, len(keys), *keys, *args)
        except RedisError as exc:
            await self._after_error(exc)
            raise BrokerError(f"{name} failed: {exc}") from exc

    async def _after_error(self, exc: RedisError) -> None:
        """A connection that broke usually means they all did (Redis restarted, the network
        dropped): drop the idle ones too, so the next calls connect afresh instead of each
        failing once on a dead socket."""
        if isinstance(exc, RedisConnectionError) and not isinstance(exc, BusyLoadingError):
            _cluster.after_connection_error(self.redis)
            pool = getattr(self.redis, "connection_pool", None)
            if pool is not None:
                with contextlib.suppress(Exception):
                    await pool.disconnect(inuse_connections=False)

    async def _eval_many(
        self, calls: Sequence[tuple[Script, Sequence[str], Sequence[Any]]],
        *, preload: bool = False, chunk: int = _PIPELINE_CHUNK,
    ) -> list[Any]:
        """Run many scripts in pipelined chunks (not a transaction: each script is atomic).

        With ``preload``, each chunk first loads the scripts it uses, in the same pipeline, so
        no call meets NOSCRIPT: needed when calls depend on each other's order (a batch holding
        the same task id twice), as a re-sent call would otherwise run after later ones.
        """
        results: list[Any] = []
        try:
            for start in range(0, len(calls), chunk):
                part = calls[start:start + chunk]
                scripts = list({c[0].name: c[0] for c in part}.values()) if preload else []
                out = await self._pipeline(part, scripts)
                if any(isinstance(r, NoScriptError) for r in out):
                    # Redis lost its script cache (restart, SCRIPT FLUSH): NOSCRIPT means that
                    # call did not run, so loading the scripts and re-sending it is safe.
                    for script in {c[0] for c in part}:
                        await self.redis.script_load(script.source)
                    again = [i for i, r in enumerate(out) if isinstance(r, NoScriptError)]
                    redo = await self._pipeline([part[i] for i in again])
                    for i, r in zip(again, redo, strict=True):
                        out[i] = r
                results.extend(out)
        except RedisError as exc:
            await self._after_error(exc)
            raise BrokerError(f"pipeline failed: {exc}") from exc
        return results

    async def _pipeline(
        self, calls: Sequence[tuple[Script, Sequence[str], Sequence[Any]]],
        preload: Sequence[Script] = (),
    ) -> list[Any]:
        if self._raw:
            commands = [pack(("SCRIPT", "LOAD", script.source)) for script in preload]
            commands += [pack(("EVALSHA", script.sha, len(keys), *keys, *args))
                         for script, keys, args in calls]
            return (await raw_pipeline(self.redis, commands))[len(preload):]  # type: ignore[arg-type]
        return await _cluster.pipeline(self.redis, calls, preload)

    def _stats_args(self, now: int) -> tuple[str, int]:
        return K.day_string(now), now + STATS_TTL_MS

    async def ping(self) -> None:
        try:
            await self.redis.ping()
        except RedisError as exc:
            raise BrokerError(f"ping failed: {exc}") from exc

    async def close(self) -> None:
        try:
            if self._owns_client:
                await self.redis.aclose()
        finally:
            if self._also_close is not None:
                await self._also_close()

    async def load_scripts(self) -> None:
        """Load every script into Redis so pipelines never meet NOSCRIPT on a fresh server."""
        try:
            await _cluster.load_scripts(self.redis, list(self._scripts.values()))
        except RedisError as exc:
            raise BrokerError(f"loading scripts failed: {exc}") from exc

    # -- producing

    async def register_queues(self, queues: Sequence[str]) -> None:
        new = [q for q in queues if q not in self._known_queues]
        if not new:
            return
        try:
            await self.redis.sadd(K.QUEUES, *new)
        except RedisError as exc:
            raise BrokerError(f"registering queues failed: {exc}") from exc
        self._known_queues.update(new)

    def forget_queue(self, queue: str) -> None:
        """Drop a queue from the registration cache (after it was deleted)."""
        self._known_queues.discard(queue)

    def _store_call(self, task: NewTask, now: int) -> tuple[Script, list[str], list[Any]]:
        msg = task.msg
        # The producer's enqueue time decides pending vs scheduled, so the state the client
        # reports is the state stored even if time passed between the two reads of the clock.
        now = msg.enqueued_at_ms or now
        qk = K.queue_keys(msg.queue)
        lock = task.unique_key or qk.base + "unique:"
        encoded = msg.encode()
        if task.process_at_ms > now:
            return (self._scripts["schedule"],
                    [qk.task(msg.id), qk.scheduled, lock],
                    [msg.id, encoded, task.payload, task.process_at_ms, task.unique_ttl_ms,
                     msg.group, K.WAKE_CHANNEL, msg.queue])
        if msg.group:
            return (self._scripts["add_to_group"],
                    [qk.task(msg.id), qk.group(msg.group), qk.groups, lock],
                    [msg.id, encoded, task.payload, now, task.unique_ttl_ms, msg.group])
        return (self._scripts["enqueue"],
                [qk.task(msg.id), qk.pending, lock, qk.waiters],
                [msg.id, encoded, task.payload, now, task.unique_ttl_ms, K.WAKE_CHANNEL,
                 msg.queue])

    async def store(self, task: NewTask) -> EnqueueCode:
        await self.register_queues((task.msg.queue,))
        script, keys, args = self._store_call(task, self.clock.now_ms())
        return _code(await self._eval(script.name, keys, args))

    def _batch_call(self, run: Sequence[NewTask], now: int) -> tuple[Script, list[str], list[Any]]:
        queue = run[0].msg.queue
        qk = K.queue_keys(queue)
        keys: list[str] = [qk.pending, qk.waiters]
        args: list[Any] = [now, K.WAKE_CHANNEL, queue]
        placeholder = qk.base + "unique:"
        for task in run:
            msg = task.msg
            keys += (qk.task(msg.id), task.unique_key or placeholder)
            args += (msg.id, msg.encode(), task.payload, task.unique_ttl_ms)
        return self._scripts["enqueue_batch"], keys, args

    async def store_many(self, tasks: Sequence[NewTask]) -> list[EnqueueCode | Exception]:
        """Store tasks in input order: runs of ready-now tasks of one queue go through one
        ``enqueue_batch`` script call each, other tasks through their own script."""
        await self.register_queues(sorted({t.msg.queue for t in tasks}))
        now = self.clock.now_ms()
        calls: list[tuple[Script, list[str], list[Any]]] = []
        sizes: list[int] = []  # tasks per call; 0 marks a single-task (non-batch) call
        run: list[NewTask] = []

        def close_run() -> None:
            if run:
                calls.append(self._batch_call(run, now))
                sizes.append(len(run))
                run.clear()

        for task in tasks:
            ready = (not task.msg.group
                     and task.process_at_ms <= (task.msg.enqueued_at_ms or now))
            if ready and (not run or (run[0].msg.queue == task.msg.queue
                                      and len(run) < _BATCH_RUN)):
                run.append(task)
                continue
            close_run()
            if ready:
                run.append(task)
            else:
                calls.append(self._store_call(task, now))
                sizes.append(0)
        close_run()
        out = await self._eval_many(calls, preload=True, chunk=_BATCH_CHUNK)
        results: list[EnqueueCode | Exception] = []
        for reply, size in zip(out, sizes, strict=True):
            if isinstance(reply, Exception):
                results.extend([BrokerError(str(reply))] * max(size, 1))
            elif size:
                results.extend(_code(code) for code in reply)
            else:
                results.append(_code(reply))
        return results

    async def publish_cancel(self, task_id: str) -> None:
        try:
            await self.redis.publish(K.CANCEL_CHANNEL, task_id)
        except RedisError as exc:
            raise BrokerError(f"publishing cancellation failed: {exc}") from exc

    # -- running

    async def dequeue(
        self, queue: str, count: int, owner: str, lease_ms: int, waiter_ttl_ms: int,
        request_id: str = "",
    ) -> tuple[list[RawTask], int]:
        """Lease up to ``count`` tasks. Re-sending a ``request_id`` whose reply was lost returns
        the tasks that request leased (still leased to ``owner``) instead of leasing more."""
        qk = K.queue_keys(queue)
        flat = await self._eval(
            "dequeue",
            [qk.pending, qk.active, qk.lease, qk.paused, qk.waiters,
             qk.base + "dequeued:" + owner],
            [self.clock.now_ms() + lease_ms, count, qk.task_prefix, owner, waiter_ttl_ms,
             request_id, lease_ms],
        )
        return _raw_tasks(flat, 1), int(flat[0])

    def _finish_call(
        self, o: Outcome, owner: str, now: int, lease_cutoff: int | str = ""
    ) -> tuple[Script, list[str], list[Any]]:
        qk = K.queue_keys(o.queue)
        day, stats_expiry = self._stats_args(now)
        task_key = qk.task(o.task_id)
        if o.kind == "done":
            return (self._scripts["done"],
                    [task_key, qk.active, qk.lease, qk.processed, qk.processed_day(day)],
                    [o.task_id, owner, stats_expiry])
        if o.kind == "complete":
            return (self._scripts["mark_complete"],
                    [task_key, qk.active, qk.lease, qk.completed, qk.processed,
                     qk.processed_day(day)],
                    [o.task_id, owner, stats_expiry, now, now + o.retention_ms,
                     "0" if o.result is None else "1", o.result or b""])
        if o.kind == "requeue":
            return (self._scripts["requeue"],
                    [task_key, qk.active, qk.lease, qk.pending, qk.waiters],
                    [o.task_id, owner, now, K.WAKE_CHANNEL, o.queue])
        failure_keys = [qk.processed, qk.processed_day(day), qk.failed, qk.failed_day(day)]
        if o.kind == "retry":
            return (self._scripts["retry"],
                    [task_key, qk.active, qk.lease, qk.retry, *failure_keys],
                    [o.task_id, owner, o.retry_at_ms, o.error, now,
                     "1" if o.is_failure else "0", stats_expiry, lease_cutoff])
        return (self._scripts["archive"],
                [task_key, qk.active, qk.lease, qk.archived, *failure_keys],
                [o.task_id, owner, o.error, now, stats_expiry, lease_cutoff,
                 ARCHIVE_MAX_SIZE, now - ARCHIVE_MAX_AGE_MS, qk.task_prefix])

    async def finish(self, outcomes: Sequence[Outcome], owner: str) -> list[bool | Exception]:
        """Write many outcomes in one pipelined round trip; False = the lease was lost."""
        now = self.clock.now_ms()
        if len(outcomes) == 1:
            script, keys, args = self._finish_call(outcomes[0], owner, now)
            return [bool(await self._eval(script.name, keys, args))]
        out = await self._eval_many([self._finish_call(o, owner, now) for o in outcomes])
        return [BrokerError(str(r)) if isinstance(r, Exception) else bool(r) for r in out]

    async def extend_leases(
        self, queue: str, task_ids: Sequence[str], owner: str, lease_ms: int
    ) -> list[bool]:
        if not task_ids:
            return []
        qk = K.queue_keys(queue)
        flags = await self._eval(
            "extend_lease", [qk.lease],
            [self.clock.now_ms() + lease_ms, owner, qk.task_prefix, *task_ids],
        )
        return [bool(f) for f in flags]

    async def write_result(self, queue: str, task_id: str, data: bytes) -> int:
        qk = K.queue_keys(queue)
        return int(await self._eval("write_result", [qk.task(task_id)], [data]))

    async def listen(self, channels: Sequence[str]) -> AsyncIterator[tuple[str, str] | None]:
        """Subscribe; yield None once subscribed, then (channel, message) pairs until an error.

        A connection that heard nothing for ``ping_interval`` is pinged; no answer within
        ``reply_timeout`` raises BrokerError, so a silently dead connection (a peer that
        vanished without closing it, a paused server) is replaced instead of waited on forever.
        """
        pubsub = await _cluster.pubsub(self.redis)
        try:
            try:
                await pubsub.subscribe(*channels)
                confirmed = 0
                while confirmed < len(channels):
                    msg = await pubsub.get_message(timeout=self.reply_timeout)
                    if msg is None:
                        raise BrokerError("timed out waiting for the subscription")
                    if msg["type"] == "subscribe":
                        confirmed += 1
                yield None
                idle = self.ping_interval or None
                while True:
                    msg = await pubsub.get_message(ignore_subscribe_messages=True, timeout=idle)
                    if msg is None and idle is not None:
                        await pubsub.ping()
                        msg = await self._next_message(pubsub)
                        if msg is None:
                            raise BrokerError(f"no answer to a ping on the pub/sub connection "
                                              f"within {self.reply_timeout:g}s")
                    if msg is not None and msg["type"] == "message":
                        yield _s(msg["channel"]), _s(msg["data"])
            except RedisError as exc:
                if isinstance(exc, RedisConnectionError):
                    _cluster.after_connection_error(self.redis)
                raise BrokerError(f"subscription failed: {exc}") from exc
        finally:
            with contextlib.suppress(RedisError):
                await pubsub.aclose()  # type: ignore[no-untyped-call]

    async def _next_message(self, pubsub: Any) -> dict[str, Any] | None:
        """The next message of any kind (a pong included) within ``reply_timeout``, or None."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.reply_timeout
        while (left := deadline - loop.time()) > 0:
            # (None also comes back when redis-py swallowed its own health-check pong.)
            msg: dict[str, Any] | None = await pubsub.get_message(timeout=left)
            if msg is not None:
                return msg
        return None
