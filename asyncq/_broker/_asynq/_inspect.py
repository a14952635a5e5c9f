"""The inspector's side of Go asynq's layout (``wire=asynq``): ``InspectOps`` reading what Go's
Inspector reads (``internal/rdb/inspect.go``) and changing tasks as its scripts do.

Records are translated here: a task hash holds a protobuf TaskMessage (and, for a task asyncq
enqueued, asyncq's own message in ``asyncq_msg``); the Inspector gets asyncq's ``TaskRecord``
(asyncq's JSON message, payload, retries, last error, times in ms) whoever enqueued it. Server
and worker states are protobuf ServerInfo/WorkerInfo, handed on as asyncq's JSON documents.

Every change is one ``lua/asynq_inspect_*.lua`` script; bulk operations go batch by batch
(``batch_size`` tasks per atomic call, where Go moves a whole state in one call), so a huge
queue never blocks Redis for long. Archive caps are Go's fixed ones (10 000 tasks, of which an
archive keeps 9 999 after each archiving, and 90 days): a Go server would apply no other.
The dashboard's minute samples live in ``asynq:{q}:asyncq:minutes``, a key Go never reads.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar

from google.protobuf.message import DecodeError as PBDecodeError  # type: ignore[import-untyped,unused-ignore]

from ... import _defaults
from ..._clock import Clock
from ..._errors import BrokerError, DecodeError
from .._calls import STATS_TTL_MS, ScriptCall
from .._inspect import RedisInspectOps, limits_named
from .._maintenance import MINUTE_SAMPLES
from .._replies import number, text
from .._runner import ScriptRunner
from .._values import Backlog, BulkOp, Outcome, TaskRecord, WorkerRecord
from . import _codec
from . import _keys as K
from ._layout import mismatch_error
from ._reads import TaskReads
from ._schema import WorkerInfoPB

BATCH_SIZE = 1000
FIND_BATCH = 1000  # entries a task search examines per script call
MEMORY_SAMPLE = 20  # task hashes sampled per list/zset for the memory estimate (Go's)
MEMORY_GROUP_SAMPLE = 5  # groups sampled for the memory estimate (Go's)
ARCHIVE_MAX_SIZE = _defaults.ARCHIVE_MAX_SIZE  # Go's maxArchiveSize, 10 000
ARCHIVE_MAX_AGE_S = _defaults.ARCHIVE_MAX_AGE_MS // 1000  # Go's archivedExpirationInDays, 90
STATS_TTL_S = STATS_TTL_MS // 1000  # Go's statsTTL: daily counters live 90 days
#: A message asyncq cannot read (decode_message raises DecodeError on it): what a record whose
#: TaskMessage is not valid protobuf carries, so listings skip it and task_info raises.
UNREADABLE = b"{}"


def _ceil_s(ms: int) -> int:
    return -(-ms // 1000)


def _score_ms(score: Any) -> int | None:
    """A zset score in Unix s as Unix ms (None when there is none)."""
    if score is None or score is False:
        return None
    return round(float(score) * 1000)


def _json_message(msg: bytes, amsg: bytes | None) -> bytes:
    """asyncq's message of a task: the one asyncq stored, else built from Go's TaskMessage
    (DecodeError when that is not readable)."""
    return amsg if amsg else _codec.to_asyncq(_codec.decode(msg)).encode()


def _record(row: Sequence[Any], queue: str = "") -> TaskRecord:
    """A row of the asynq_inspect scripts ({id, msg, state, result, score, asyncq_msg,
    result_enc, started_at, error, limited[, traceback]}) as asyncq's TaskRecord (a message
    that decodes but cannot be run, a hostile Go record, still shows its payload and error)."""
    task_id, msg, state, result, score, amsg, enc, started, error = row[:9]
    try:
        task = _codec.decode(msg or b"")
    except DecodeError:
        task, json_msg = _codec.AsynqTask("", b"", text(task_id), queue), UNREADABLE
    else:
        try:
            json_msg = amsg if amsg else _codec.to_asyncq(task).encode()
        except DecodeError:
            json_msg = UNREADABLE
    return TaskRecord(
        id=text(task_id), msg=json_msg, payload=task.payload, state=text(state or b""),
        retried=task.retried, error=_codec.stored_error(task.error_msg, error),
        failed_at_ms=task.last_failed_at * 1000,
        completed_at_ms=task.completed_at * 1000, result=result or None,
        score=_score_ms(score), result_enc=text(enc or b"") or "b",
        started_at_ms=number(started), queue=queue,
        traceback=text(row[10] or b"") if len(row) > 10 else "",
        limited_by=limits_named(row[9]) if len(row) > 9 else (),
    )


class AsynqInspectOps(RedisInspectOps):
    """``InspectOps`` over asynq's layout, run with the broker's ScriptRunner (which holds the
    ``asynq_inspect_*`` scripts): asyncq's, with this layout's keys and scripts, and its own
    methods where Go's layout reads or changes tasks differently. ``forget(queue)`` is called
    once a queue is removed, so the broker registers and checks it again at its next use (as
    Go's client clears its cache)."""

    keys: ClassVar[Any] = K
    script_prefix: ClassVar[str] = "asynq_"
    since_per_ms: ClassVar[int] = 1_000_000

    def __init__(self, runner: ScriptRunner, clock: Clock, *,
                 servers: Callable[[int], Awaitable[list[WorkerRecord]]],
                 reads: TaskReads,
                 forget: Callable[[str], None] = lambda queue: None,
                 batch_size: int = BATCH_SIZE) -> None:
        super().__init__(runner, clock, batch_size=batch_size)
        self._forget = forget
        self._servers = servers
        self._reads = reads

    def _row_record(self, row: Sequence[Any], queue: str) -> TaskRecord:
        return _record(row, queue)

    # -- queues

    async def queue_exists(self, queue: str) -> bool:
        """Whether ``queue`` is in ``asynq:queues``; a queue only asyncq's own layout knows is
        a BrokerError (refused) saying to drop ``?wire=asynq``, not a missing queue."""
        mine, other = await self.runner.commands("reading queues", [
            ("SISMEMBER", K.QUEUES, queue), ("SISMEMBER", K.ASYNCQ_QUEUES, queue)])
        if not mine and other:
            raise mismatch_error(queue, "asynq")
        return bool(mine)

    async def unregister_queue(self, queue: str) -> None:
        """SREM from ``asynq:queues``; a task stored meanwhile by a producer that had the queue
        registered already (Go's client and ours cache that) registers it back."""
        qk = K.queue_keys(queue)
        await self.runner.command("removing queue", "SREM", K.QUEUES, queue)
        self._forget(queue)
        if await self.runner.command("reading queue keys", "EXISTS", qk.pending, qk.active,
                                     qk.scheduled, qk.retry, qk.archived, qk.completed,
                                     qk.groups):
            await self.runner.command("registering queue", "SADD", K.QUEUES, queue)

    def _queue_info_calls(self, queue: str, day: str, now_ms: int,
                          memory: bool) -> list[ScriptCall]:
        """Go's Inspector's counts (no staged sets among the aggregating, no expired total;
        leases scored in Unix s) and Go's memory estimate."""
        qk = K.queue_keys(queue)
        calls = [ScriptCall(
            "asynq_inspect_queue_info",
            [qk.pending, qk.active, qk.scheduled, qk.retry, qk.archived, qk.completed,
             qk.paused, qk.processed, qk.failed, qk.processed_day(day),
             qk.failed_day(day), qk.groups, qk.lease],
            [qk.task_prefix, qk.group_prefix, now_ms // 1000])]
        if memory:
            calls.append(ScriptCall(
                "asynq_inspect_memory_usage",
                [qk.active, qk.pending, qk.scheduled, qk.retry, qk.archived, qk.completed,
                 qk.groups],
                [qk.task_prefix, MEMORY_SAMPLE, MEMORY_GROUP_SAMPLE, qk.group_prefix]))
        return calls

    def _own_queue_keys(self, queue: str) -> list[str]:
        return []

    # -- tasks

    def _info_call(self, queue: str, task_id: str) -> ScriptCall:
        qk = K.queue_keys(queue)
        return ScriptCall("asynq_inspect_task_info",
                          [qk.task(task_id), qk.lease, qk.scheduled, qk.retry],
                          [task_id, qk.task_prefix])

    async def task(self, queue: str, task_id: str) -> TaskRecord | None:
        row = await self.runner.run_call(self._info_call(queue, task_id))
        if row is None:  # gone, or completed leaving only a completion mark
            return (await self._reads.tasks([(queue, task_id)]))[0]
        return _record(row, queue)

    async def tasks(self, keys: Sequence[tuple[str, str]]) -> list[TaskRecord | None]:
        """What waits read (completion marks included; each read noted, so a task a Go
        server finishes is reported by the recheck)."""
        return await self._reads.tasks(keys)

    async def task_owner(self, queue: str, task_id: str) -> str | None:
        """The asyncq worker holding the task (its ``owner`` field), else the Go server whose
        workers hash lists it (by its server id), else None."""
        owner = await self.runner.command("reading task owner", "HGET",
                                          K.queue_keys(queue).task(task_id), K.F_OWNER)
        if owner:
            return text(owner)
        keys = await self.runner.command("listing workers", "ZRANGEBYSCORE", K.WORKERS,
                                         self.clock.now_ms() // 1000, "+inf")
        if not keys:
            return None
        found = await self.runner.commands("reading workers",
                                           [("HGET", key, task_id) for key in keys])
        for data in found:
            if data is None:
                continue
            try:
                pb: Any = WorkerInfoPB.FromString(data)
            except PBDecodeError:
                continue
            if pb.server_id:
                return str(pb.server_id)
        return None

    async def server_alive(self, server_id: str) -> bool:
        keys = await self.runner.command("listing servers", "ZRANGEBYSCORE", K.SERVERS,
                                         self.clock.now_ms() // 1000, "+inf")
        mine = [key for key in map(text, keys) if K.server_key_matches(key, server_id)]
        return bool(mine) and bool(await self.runner.command("reading server state", "EXISTS",
                                                             *mine[:1]))

    async def recover_task(self, outcome: Outcome, owner: str,
                           lease_cutoff_ms: int | str) -> bool:
        if outcome.kind not in ("retry", "archive"):
            raise ValueError(f"a recovered task is retried or archived, not {outcome.kind!r}")
        qk = K.queue_keys(outcome.queue)
        now = self.clock.now_ms()
        now_s = now // 1000
        day = K.day_string(now)
        cutoff = "" if lease_cutoff_ms == "" else int(lease_cutoff_ms) // 1000
        return bool(await self.runner.run(
            "asynq_inspect_recover",
            [qk.task(outcome.task_id), qk.active, qk.lease, qk.retry, qk.archived,
             qk.processed_day(day), qk.failed_day(day), qk.processed, qk.failed],
            [outcome.task_id, outcome.kind, owner, cutoff, _ceil_s(outcome.retry_at_ms),
             outcome.error, now_s, now_s + STATS_TTL_S, now_s - ARCHIVE_MAX_AGE_S,
             ARCHIVE_MAX_SIZE, qk.task_prefix, outcome.traceback,
             _codec.go_error(outcome.error)]))

    async def run_task(self, queue: str, task_id: str) -> int:
        qk = K.queue_keys(queue)
        return number(await self.runner.run(
            "asynq_inspect_run_task", self._task_keys(queue, task_id),
            [task_id, qk.group_prefix, self.clock.now_ms() * 1_000_000]))

    async def archive_task(self, queue: str, task_id: str) -> tuple[int, int]:
        qk = K.queue_keys(queue)
        now_s = self.clock.now_ms() // 1000
        code, trimmed = await self.runner.run(
            "asynq_inspect_archive_task", self._task_keys(queue, task_id),
            [task_id, qk.group_prefix, now_s, ARCHIVE_MAX_SIZE, now_s - ARCHIVE_MAX_AGE_S,
             qk.task_prefix, self.batch_size])
        return number(code), number(trimmed)

    async def archive_overflow(self, queue: str, adding: int) -> int:
        """As Go trims after archiving: every entry archived 90 days ago or more, then the
        oldest, so that at most 9 999 remain."""
        qk = K.queue_keys(queue)
        cutoff = self.clock.now_ms() // 1000 - ARCHIVE_MAX_AGE_S
        size, expired = await self.runner.commands("reading the archive", [
            ("ZCARD", qk.archived), ("ZCOUNT", qk.archived, "-inf", cutoff)])
        size, expired = number(size), number(expired)
        return expired + max(0, size - expired + max(0, adding) - (ARCHIVE_MAX_SIZE - 1))

    async def archive_limits(self, queue: str) -> tuple[int, int]:
        """Go's caps, the same for every queue (Go servers know no other)."""
        return ARCHIVE_MAX_SIZE, ARCHIVE_MAX_AGE_S * 1000

    async def set_archive_limits(self, queue: str, max_size: int | None,
                                 max_age_ms: int | None) -> int:
        raise BrokerError(
            "archive limits cannot be set with wire=asynq: Go asynq's servers keep their fixed "
            "caps (10 000 tasks, 90 days) and would not apply a queue's own", refused=True)

    async def update_payload(self, queue: str, task_id: str, old_msg: bytes, new_msg: bytes,
                             payload: bytes) -> int:
        """``old_msg``/``new_msg`` are asyncq's messages: the TaskMessage's payload is rewritten;
        asyncq's message is kept (with its new payload encoding) when the task had one or its
        encoding is no longer raw bytes, which is all Go's message can say."""
        qk = K.queue_keys(queue)
        msg, amsg = await self.runner.command("reading a task", "HMGET", qk.task(task_id),
                                              K.F_MSG, K.F_AMSG)
        if msg is None:
            return 0
        try:
            if _json_message(msg, amsg) != old_msg:
                return -2
            plain = _codec.to_asyncq(_codec.decode(msg)).encode()
        except DecodeError:
            return -2
        keep = new_msg if amsg or new_msg != plain else b""
        return number(await self.runner.run("asynq_inspect_update_payload", [qk.task(task_id)],
                                            [msg, amsg or b"", payload, keep]))

    def _bulk_call(self, op: BulkOp, queue: str, source: str, state: str,
                   gname: str) -> ScriptCall:
        if op == "delete":
            return super()._bulk_call(op, queue, source, state, gname)
        qk = K.queue_keys(queue)
        head = [state, self.batch_size, qk.task_prefix, gname]
        if op == "run":
            return ScriptCall("asynq_inspect_run_all", [source, qk.pending, qk.groups],
                              [*head, self.clock.now_ms() * 1_000_000])
        now_s = self.clock.now_ms() // 1000
        return ScriptCall("asynq_inspect_archive_all", [source, qk.archived, qk.groups],
                          [*head, now_s, ARCHIVE_MAX_SIZE, now_s - ARCHIVE_MAX_AGE_S])

    # -- servers

    async def servers(self, now_ms: int) -> list[WorkerRecord]:
        """Live servers as Go's Inspector lists them, Go's and asyncq's alike (read by the
        broker's server-state part, which also knows asyncq's own documents)."""
        return await self._servers(now_ms)

    # -- what the worker asks (Broker.backlog, list_groups, record_minute)

    async def backlog(self, queue: str, horizon_ms: int) -> Backlog:
        qk = K.queue_keys(queue)
        pending, due, groups, paused = await self.runner.run(
            "asynq_inspect_backlog", [qk.pending, qk.scheduled, qk.retry, qk.groups, qk.paused],
            [horizon_ms // 1000])
        return Backlog(int(pending), int(due), int(groups), bool(paused))

    async def list_groups(self, queue: str) -> list[str]:
        members = await self.runner.command("listing groups", "SMEMBERS",
                                            K.queue_keys(queue).groups)
        return sorted(text(m) for m in members)

    def _record_minute_call(self, queue: str, minute: int) -> ScriptCall:
        qk = K.queue_keys(queue)
        return ScriptCall(
            "asynq_inspect_record_minute",
            [qk.minutes, qk.processed, qk.failed, qk.pending, qk.active, qk.scheduled, qk.retry],
            [minute, MINUTE_SAMPLES])

    async def record_minute(self, queue: str) -> bool:
        qk = K.queue_keys(queue)
        return bool(await self.runner.run(
            "asynq_inspect_record_minute",
            [qk.minutes, qk.processed, qk.failed, qk.pending, qk.active, qk.scheduled, qk.retry],
            [self.clock.now_ms() // 60_000, MINUTE_SAMPLES]))
