"""The inspector's Redis side (``InspectOps``): reads of queue state and the bulk operations.

Every operation that changes tasks is one of the ``lua/inspect_*.lua`` scripts. Bulk operations
(delete/run/archive all tasks in a state) take at most ``batch_size`` tasks per script call and
are looped from here, so that a queue of a million tasks never blocks Redis for long: each call
is atomic, the whole operation is not (tasks enqueued meanwhile may or may not be included).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, ClassVar

from .._clock import Clock, ms_to_datetime
from . import _keys as K
from ._calls import ARCHIVE_MAX_AGE_MS, ARCHIVE_MAX_SIZE, ScriptCall, finish_call
from ._inspect_values import QueueInfo
from ._maintenance import MINUTE_SAMPLES
from ._protocol import BulkOp, DeleteMode, Outcome, TaskRecord
from ._records import UNREADABLE, decode_server
from ._replies import number, register, text
from ._runner import ScriptRunner, reply_error
from ._values import WorkerRecord

BATCH_SIZE = 1000
FIND_BATCH = 1000  # entries a task search examines per script call
MEMORY_SAMPLE = 20  # task hashes sampled per list/zset for the memory estimate
MEMORY_GROUP_SAMPLE = 5  # groups sampled for the memory estimate
READ_CHUNK = 1000  # reads of many queues sent per pipeline


def limits_named(raw: bytes | str | None) -> tuple[str, ...]:
    """The task hash's field ``limited`` (the registry fields of the limits that deferred it,
    joined by commas: ``q:``, ``c:NAME``, ``r:NAME``) as the limits' names."""
    if not raw:
        return ()
    names = []
    for field in re.split(r",(?=[cqr]:)", text(raw)):
        kind, _, name = field.partition(":")
        names.append("queue concurrency limit" if kind == "q" else
                     f"rate limit {name}" if kind == "r" else f"concurrency limit {name}")
    return tuple(names)


def _record(task_id: bytes | str, fields: Sequence[Any], queue: str = "",
            progress: bytes = b"", limited: bytes | str | None = None) -> TaskRecord:
    (msg, payload, state, retried, error, failed_at, completed_at, result, score, enc,
     started_at) = fields[:11]
    return TaskRecord(
        id=text(task_id), msg=msg, payload=payload or b"", state=text(state or b""),
        retried=number(retried), error=text(error or b""), failed_at_ms=number(failed_at),
        completed_at_ms=number(completed_at), result=result,
        score=None if score is None else number(score), result_enc=text(enc or b"") or "b",
        started_at_ms=number(started_at), queue=queue,
        traceback=text(fields[11] or b"") if len(fields) > 11 else "",
        progress=progress or b"", limited_by=limits_named(limited),
    )


def _task_record(task_id: str, row: Sequence[Any], queue: str) -> TaskRecord:
    """A task read by ``inspect_task_info``: its fields, traceback, progress report and the
    limits it waits for."""
    return _record(task_id, row[:12], queue, row[12] if len(row) > 12 else b"",
                   row[13] if len(row) > 13 else None)


class RedisInspectOps:
    """``InspectOps`` run with a ScriptRunner.

    The layout is a class attribute (its key module and the prefix of its script names), and
    what reads or changes tasks differently in a layout is a method of its own here
    (``_row_record``, ``_queue_info_calls``, ``_own_queue_keys``, ``_bulk_call``...): Go
    asynq's layout (``_asynq/_inspect.py``) is this class with those replaced, its scripts
    sharing these scripts' bodies and taking the same KEYS and ARGV where they can."""

    keys: ClassVar[Any] = K
    """The layout's key module (``queue_keys``, ``QUEUES``, ``day_string``...)."""
    script_prefix: ClassVar[str] = ""
    """Prepended to ``inspect_groups``... to name the layout's scripts."""
    since_per_ms: ClassVar[int] = 1
    """``pending_since`` units in a ms: 1 here (Unix ms)."""

    def __init__(self, runner: ScriptRunner, clock: Clock, *,
                 batch_size: int = BATCH_SIZE) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.runner = runner
        self.clock = clock
        self.batch_size = batch_size

    # -- queues

    def _script(self, name: str) -> str:
        """The layout's name of the script ``name``."""
        return self.script_prefix + name

    def _row_record(self, row: Sequence[Any], queue: str) -> TaskRecord:
        """A row of ``inspect_list_tasks``/``inspect_find_tasks`` as a TaskRecord."""
        return _record(row[0], row[1:12], queue, row[12] if len(row) > 12 else b"",
                       row[13] if len(row) > 13 else None)

    async def queue_names(self) -> list[str]:
        members = await self.runner.command("listing queues", "SMEMBERS", self.keys.QUEUES)
        return sorted(text(m) for m in members)

    async def queue_exists(self, queue: str) -> bool:
        return bool(await self.runner.command("reading queues", "SISMEMBER", K.QUEUES, queue))

    async def unregister_queue(self, queue: str) -> None:
        await self.runner.command("removing queue", "SREM", K.QUEUES, queue)
        # A task stored after the queue's keys were removed set its marker again, and its
        # producer may have registered the queue before this SREM: register it back.
        if await self.runner.command("reading queue marker", "EXISTS",
                                     K.queue_keys(queue).registered):
            await register(self.runner, (queue,))

    async def queue_info(self, queue: str, now_ms: int) -> QueueInfo:
        return (await self.queue_infos([queue], now_ms))[0]

    async def queue_infos(self, queues: Sequence[str], now_ms: int,
                          memory: bool = True) -> list[QueueInfo]:
        """Snapshots of many queues in one pipeline (one script per queue, two with the
        ``memory`` estimate, its costliest part), so their cost grows with the number of
        queues, not the round trips."""
        day = self.keys.day_string(now_ms)
        calls = [call for queue in queues
                 for call in self._queue_info_calls(queue, day, now_ms, memory)]
        replies = await self.runner.run_many(calls)
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply_error("reading a queue", reply)
        step = 2 if memory else 1
        return [_queue_info(queue, replies[step * i], replies[step * i + 1] if memory else 0,
                            now_ms, self.since_per_ms) for i, queue in enumerate(queues)]

    def _queue_info_calls(self, queue: str, day: str, now_ms: int,
                          memory: bool) -> list[ScriptCall]:
        """The calls reading one queue: its counts (``inspect_queue_info``, the day ``day``
        and leases ended by ``now_ms``), then with ``memory`` its memory estimate."""
        qk = K.queue_keys(queue)
        calls = [ScriptCall(
            "inspect_queue_info",
            [qk.pending, qk.active, qk.scheduled, qk.retry, qk.archived, qk.completed,
             qk.paused, qk.processed, qk.failed, qk.processed_day(day),
             qk.failed_day(day), qk.groups, qk.lease, qk.aggregation_sets, qk.expired],
            [qk.task_prefix, qk.group_prefix, now_ms])]
        if memory:
            calls.append(ScriptCall(
                "inspect_memory_usage",
                [qk.pending, qk.active, qk.scheduled, qk.retry, qk.archived,
                 qk.completed, qk.groups, qk.lease],
                [qk.task_prefix, qk.group_prefix, MEMORY_SAMPLE, MEMORY_GROUP_SAMPLE]))
        return calls

    async def daily_counts(self, queue: str, days: Sequence[str]) -> list[tuple[int, int]]:
        return (await self.daily_counts_of([queue], days))[0]

    async def daily_counts_of(self, queues: Sequence[str],
                              days: Sequence[str]) -> list[list[tuple[int, int]]]:
        if not days:
            return [[] for _ in queues]
        commands = []
        for queue in queues:
            qk = self.keys.queue_keys(queue)  # (one queue's keys: one slot, one MGET)
            commands.append(("MGET", *[qk.processed_day(d) for d in days],
                             *[qk.failed_day(d) for d in days]))
        n = len(days)
        return [[(number(values[i]), number(values[n + i])) for i in range(n)]
                for values in await self._pipelined("reading history", commands)]

    async def _pipelined(self, what: str, commands: Sequence[Sequence[Any]]) -> list[Any]:
        """Read-only commands, each on one queue's slot, in pipelines of ``READ_CHUNK`` (a
        cluster's pipeline sends each command to the node of its slot)."""
        replies: list[Any] = []
        for start in range(0, len(commands), READ_CHUNK):
            replies += await self.runner.commands(what, commands[start:start + READ_CHUNK])
        return replies

    async def groups(self, queue: str) -> list[tuple[str, int]]:
        qk = self.keys.queue_keys(queue)
        flat = await self.runner.run(self._script("inspect_groups"), [qk.groups],
                                     [qk.group_prefix])
        return sorted((text(flat[i]), number(flat[i + 1])) for i in range(0, len(flat), 2))

    async def remove_queue(self, queue: str, mode: DeleteMode,
                           days: Sequence[str]) -> tuple[int, int, int]:
        qk = self.keys.queue_keys(queue)
        code, active, queued = await self.runner.run(
            self._script("inspect_remove_queue"),
            [qk.pending, qk.active, qk.scheduled, qk.retry, qk.archived, qk.completed, qk.lease,
             qk.paused, qk.processed, qk.failed, qk.groups, qk.aggregation_sets, qk.minutes,
             *self._own_queue_keys(queue)],
            [mode, qk.task_prefix, *days],
        )
        return number(code), number(active), number(queued)

    def _own_queue_keys(self, queue: str) -> list[str]:
        """The keys of ``queue`` this layout has beyond those every layout has (removed with
        the queue)."""
        qk = K.queue_keys(queue)
        return [qk.waiters, qk.registered, qk.marks, qk.archive_limits, qk.expired]

    # -- tasks

    def _source(self, queue: str, state: str, group: str | None) -> str:
        qk = self.keys.queue_keys(queue)
        if state == "aggregating":
            if not group:
                raise ValueError("aggregating tasks are kept per group: pass a group")
            key: str = qk.group(group)
        else:
            key = qk.state_key(state)
        return key

    async def list_tasks(self, queue: str, state: str, group: str | None, offset: int,
                         count: int) -> list[TaskRecord]:
        # Lists are read from the tail (oldest first, as Go's inspector too); sorted sets by
        # ascending score.
        qk = self.keys.queue_keys(queue)
        source = self._source(queue, state, group)
        if state in ("pending", "active"):
            kind, start, stop = "list", -(offset + count), -(offset + 1)
        else:
            kind, start, stop = "zset", offset, offset + count - 1
        rows = await self.runner.run(
            self._script("inspect_list_tasks"), [source, qk.lease],
            [kind, start, stop, qk.task_prefix, "1" if state == "active" else "0"])
        records = [self._row_record(row, queue) for row in rows]
        if kind == "list":
            records.reverse()
        return records

    async def find_tasks(self, queue: str, state: str, group: str | None, start: int,
                         count: int, type_text: str, error_text: str,
                         scan: int) -> tuple[list[TaskRecord], int | None, int]:
        qk = self.keys.queue_keys(queue)
        source = self._source(queue, state, group)
        kind = "list" if state in ("pending", "active") else "zset"
        found: list[TaskRecord] = []
        position: int | None = start
        scanned = 0
        while position is not None and len(found) < count and scanned < scan:
            reply = await self.runner.run(
                self._script("inspect_find_tasks"), [source, qk.lease],
                [kind, position, min(FIND_BATCH, scan - scanned), count - len(found),
                 qk.task_prefix, type_text.lower(), error_text.lower(),
                 "1" if state == "active" else "0"])
            found += [self._row_record(row, queue) for row in reply[2:]]
            scanned += number(reply[1])
            position = None if number(reply[0]) < 0 else number(reply[0])
        return found, position, scanned

    async def task(self, queue: str, task_id: str) -> TaskRecord | None:
        qk = K.queue_keys(queue)
        row = await self.runner.run("inspect_task_info",
                                    [qk.task(task_id), qk.lease, qk.scheduled, qk.retry,
                                     qk.marks], [task_id])
        return None if row is None else _task_record(task_id, row, queue)

    async def tasks(self, keys: Sequence[tuple[str, str]]) -> list[TaskRecord | None]:
        calls = []
        for queue, task_id in keys:
            qk = K.queue_keys(queue)
            calls.append(ScriptCall("inspect_task_info",
                                    [qk.task(task_id), qk.lease, qk.scheduled, qk.retry,
                                     qk.marks], [task_id]))
        rows = await self.runner.run_many(calls)
        out: list[TaskRecord | None] = []
        for (queue, task_id), row in zip(keys, rows, strict=True):
            if isinstance(row, Exception):
                raise reply_error("reading a task", row)
            out.append(None if row is None else _task_record(task_id, row, queue))
        return out

    async def task_owner(self, queue: str, task_id: str) -> str | None:
        owner = await self.runner.command("reading task owner", "HGET",
                                          K.queue_keys(queue).task(task_id), "owner")
        return text(owner) if owner else None

    async def server_alive(self, server_id: str) -> bool:
        return bool(await self.runner.command("reading server state", "EXISTS",
                                              K.server_key(server_id)))

    async def recover_task(self, outcome: Outcome, owner: str, lease_cutoff_ms: int | str) -> bool:
        call = finish_call(outcome, owner, self.clock.now_ms(), lease_cutoff_ms)
        return bool(await self.runner.run_call(call))

    def _task_keys(self, queue: str, task_id: str) -> list[str]:
        qk = self.keys.queue_keys(queue)
        return [qk.task(task_id), qk.pending, qk.scheduled, qk.retry, qk.archived, qk.completed,
                qk.groups, qk.aggregation_sets]

    async def delete_task(self, queue: str, task_id: str) -> int:
        qk = self.keys.queue_keys(queue)
        return number(await self.runner.run(self._script("inspect_delete_task"),
                                            self._task_keys(queue, task_id),
                                            [task_id, qk.group_prefix]))

    async def run_task(self, queue: str, task_id: str) -> int:
        qk = K.queue_keys(queue)
        return number(await self.runner.run(
            "inspect_run_task", [*self._task_keys(queue, task_id), qk.waiters],
            [task_id, qk.group_prefix, self.clock.now_ms(), K.WAKE_CHANNEL, queue]))

    async def archive_task(self, queue: str, task_id: str) -> tuple[int, int]:
        qk = K.queue_keys(queue)
        now = self.clock.now_ms()
        code, trimmed = await self.runner.run(
            "inspect_archive_task", [*self._task_keys(queue, task_id), qk.archive_limits],
            [task_id, qk.group_prefix, now, ARCHIVE_MAX_SIZE, now - ARCHIVE_MAX_AGE_MS,
             qk.task_prefix])
        return number(code), number(trimmed)

    async def archive_overflow(self, queue: str, adding: int) -> int:
        qk = K.queue_keys(queue)
        max_size, max_age_ms = await self.archive_limits(queue)
        size, expired = await self.runner.commands("reading the archive", [
            ("ZCARD", qk.archived),
            ("ZCOUNT", qk.archived, "-inf", f"({self.clock.now_ms() - max_age_ms}")])
        size, expired = number(size), number(expired)
        return expired + max(0, size - expired + max(0, adding) - max_size)

    async def record_minutes(self, queues: Sequence[str]) -> int:
        minute = self.clock.now_ms() // 60_000
        replies = await self.runner.run_many([self._record_minute_call(q, minute)
                                              for q in queues])
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply_error("recording a queue's minute", reply)
        return sum(int(r) for r in replies)

    def _record_minute_call(self, queue: str, minute: int) -> ScriptCall:
        """The call sampling ``queue`` for ``minute`` (record_minute.lua)."""
        qk = K.queue_keys(queue)
        return ScriptCall("record_minute", [qk.minutes, qk.processed, qk.failed, qk.pending,
                                            qk.active, qk.scheduled, qk.retry],
                          [minute, MINUTE_SAMPLES])

    async def minute_samples(self, queue: str) -> list[tuple[int, int, int, int]]:
        return (await self.minute_samples_of([queue]))[0]

    async def minute_samples_of(self, queues: Sequence[str]
                                ) -> list[list[tuple[int, int, int, int]]]:
        raws = await self._pipelined("reading minute samples", [
            ("LRANGE", self.keys.queue_keys(queue).minutes, 0, -1) for queue in queues])
        out = []
        for raw in raws:
            samples = []
            for item in raw:
                parts = text(item).split(":")
                if len(parts) == 4 and all(p.isdigit() for p in parts):
                    minute, processed, failed, backlog = (int(p) for p in parts)
                    samples.append((minute, processed, failed, backlog))
            out.append(samples)
        return out

    async def archive_limits(self, queue: str) -> tuple[int, int]:
        size, age = await self.runner.command(
            "reading archive limits", "HMGET", K.queue_keys(queue).archive_limits, "max_size",
            "max_age_ms")
        return (ARCHIVE_MAX_SIZE if size is None else number(size),
                ARCHIVE_MAX_AGE_MS if age is None else number(age))

    async def set_archive_limits(self, queue: str, max_size: int | None,
                                 max_age_ms: int | None) -> int:
        qk = K.queue_keys(queue)
        mode, trimmed = "set", 0
        while True:
            now = self.clock.now_ms()
            dropped = number(await self.runner.run(
                "inspect_archive_limits", [qk.archive_limits, qk.archived],
                [mode, "" if max_size is None else max_size,
                 "" if max_age_ms is None else max_age_ms, ARCHIVE_MAX_SIZE,
                 now - ARCHIVE_MAX_AGE_MS, now, qk.task_prefix, self.batch_size]))
            trimmed, mode = trimmed + dropped, "trim"
            if dropped < self.batch_size:
                return trimmed

    async def update_payload(self, queue: str, task_id: str, old_msg: bytes, new_msg: bytes,
                             payload: bytes) -> int:
        qk = K.queue_keys(queue)
        return number(await self.runner.run("inspect_update_payload", [qk.task(task_id)],
                                            [old_msg, new_msg, payload]))

    async def bulk(self, op: BulkOp, queue: str, state: str,
                   group: str | None = None) -> tuple[int, int]:
        source = self._source(queue, state, group)
        gname = group if state == "aggregating" and group else ""
        total = trimmed = 0
        while True:
            taken, done, *dropped = await self.runner.run_call(
                self._bulk_call(op, queue, source, state, gname))
            trimmed += number(dropped[0]) if dropped else 0
            total += number(done)
            if number(taken) < self.batch_size:
                return total, trimmed

    def _bulk_call(self, op: BulkOp, queue: str, source: str, state: str,
                   gname: str) -> ScriptCall:
        """One batch of ``bulk``: ``inspect_<op>_all`` on the tasks in ``state`` of ``source``
        (group ``gname``, '' for none); its reply is {taken, done[, archived tasks trimmed]}."""
        qk = self.keys.queue_keys(queue)
        head = [state, self.batch_size, qk.task_prefix, gname]
        if op == "delete":
            return ScriptCall(self._script("inspect_delete_all"), [source, qk.groups], head)
        now = self.clock.now_ms()
        if op == "run":
            return ScriptCall("inspect_run_all", [source, qk.pending, qk.groups, qk.waiters],
                              [*head, now, K.WAKE_CHANNEL, queue])
        return ScriptCall("inspect_archive_all",
                          [source, qk.archived, qk.groups, qk.archive_limits],
                          [*head, now, ARCHIVE_MAX_SIZE, now - ARCHIVE_MAX_AGE_MS])

    async def redis_info(self) -> dict[str, Any]:
        infos = await self.runner.infos()
        info = dict(infos[0])
        if len(infos) > 1:
            for field in ("connected_clients", "used_memory", "used_memory_peak"):
                info[field] = sum(number(i.get(field)) for i in infos)
            for field in ("used_memory", "used_memory_peak"):
                info[field + "_human"] = f"{info[field] / 2**20:.2f}M"
            info["cluster_masters"] = len(infos)
        return info

    # -- servers

    async def servers(self, now_ms: int) -> list[WorkerRecord]:
        _, _, keys = await self.runner.commands("listing servers", [
            ("ZREMRANGEBYSCORE", K.SERVERS, "-inf", now_ms),
            ("ZREMRANGEBYSCORE", K.WORKERS, "-inf", now_ms),
            ("ZRANGE", K.SERVERS, 0, -1)])
        if not keys:
            return []
        docs = await self.runner.commands("reading servers", [("GET", key) for key in keys])
        live = [(key, doc) for key, doc in zip(keys, docs, strict=True) if doc is not None]
        gone = [key for key, doc in zip(keys, docs, strict=True) if doc is None]
        commands: list[tuple[Any, ...]] = [("ZREM", K.SERVERS, *gone)] if gone else []
        commands += [("HGETALL", K.workers_key(K.server_id_of(text(key)))) for key, _ in live]
        out = await self.runner.commands("reading workers", commands)
        workers = out[1:] if gone else out
        records = []
        for (_, doc), w in zip(live, workers, strict=True):
            try:
                records.append(decode_server(doc, w))
            except UNREADABLE:
                continue  # a state document it cannot read is skipped
        return records


def _whole(value: Any) -> int:
    """A stored whole number read exactly (a Unix ns exceeds a double's precision: never via
    float unless it is written as one); 0 for none or for what is no number."""
    try:
        return int(value or 0)
    except ValueError:
        try:
            return int(float(value))
        except ValueError:
            return 0


def _queue_info(queue: str, counts: Sequence[Any], memory: Any, now_ms: int,
                since_per_ms: int) -> QueueInfo:
    """An ``inspect_queue_info`` reply as a QueueInfo (``since_per_ms``: the layout's
    ``pending_since`` units in a ms); a layout without an expired total reads 0."""
    (pending, active, scheduled, retry, archived, completed, aggregating, groups, processed,
     failed, processed_total, failed_total, paused) = (number(x) for x in counts[:13])
    since = _whole(counts[13])
    latency_ms = now_ms - since // since_per_ms if since > 0 else 0
    return QueueInfo(
        queue=queue,
        size=pending + active + scheduled + retry + archived + completed + aggregating,
        pending=pending, active=active, scheduled=scheduled, retry=retry, archived=archived,
        completed=completed, aggregating=aggregating, groups=groups, processed=processed,
        failed=failed, processed_total=processed_total, failed_total=failed_total,
        paused=bool(paused), latency=timedelta(milliseconds=max(0, latency_ms)),
        memory_usage=number(memory), expired_leases=number(counts[14]),
        timestamp=ms_to_datetime(now_ms),
        expired_total=number(counts[15]) if len(counts) > 15 else 0,
    )
