"""Server and worker state in Go asynq's layout, and cancellation on ``asynq:cancel``.

An asyncq worker's heartbeat hands the broker its state as a ``WorkerRecord`` (its running
tasks among it). Here it becomes what Go's heartbeater writes (``rdb.go WriteServerState``):
a protobuf ServerInfo at ``asynq:servers:{host:pid:sid}`` and a hash of protobuf WorkerInfo
records at ``asynq:workers:{host:pid:sid}``, both expiring after the TTL, their keys in the
``asynq:servers`` / ``asynq:workers`` sorted sets scored by the expiry (Unix s), so Go's
Inspector, the ``asynq`` CLI and asynqmon list asyncq workers and their running tasks. What
the protobuf cannot carry (processed/failed counts, ``extra``, the registered task options,
the ``stopping`` status) stays in asyncq's own document beside it (its JSON, ``_records``),
``asynq:servers:{host:pid:sid}:asyncq``, a key Go never reads.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from typing import Any

from google.protobuf.message import DecodeError as PBDecodeError  # type: ignore[import-untyped,unused-ignore]

from ..._clock import Clock
from ..._errors import DecodeError
from .._records import UNREADABLE, decode_server, encode_server
from .._replies import number, text
from .._runner import ScriptRunner
from .._values import RunningTaskRecord, WorkerRecord
from . import _codec
from . import _keys as K
from ._schema import ServerInfoPB, WorkerInfoPB

#: asyncq's worker status -> Go's word for the same state (a Go server shutting down is
#: "closed" until its heartbeater stops; "stopped" takes no new tasks, as SIGTSTP)
STATUS = {"active": "active", "stopped": "stopped", "stopping": "closed"}
_GO_STATUS = {go: ours for ours, go in STATUS.items()}
_INT32_MAX = 2**31 - 1


def _int32(value: Any) -> int:
    return max(-_INT32_MAX - 1, min(_INT32_MAX, int(value)))


def _set_time(field: Any, ms: int) -> None:
    """A google.protobuf.Timestamp set to Unix ``ms``."""
    field.seconds = ms // 1000
    field.nanos = (ms % 1000) * 1_000_000


def _time_ms(pb: Any, name: str) -> int:
    if not pb.HasField(name):
        return 0
    ts = getattr(pb, name)
    return int(ts.seconds) * 1000 + int(ts.nanos) // 1_000_000


def server_pb(record: WorkerRecord, host: str, pid: int) -> bytes:
    """The ServerInfo of an asyncq worker's state."""
    pb: Any = ServerInfoPB(
        host=host, pid=_int32(pid), server_id=record.server_id,
        concurrency=_int32(record.concurrency), strict_priority=record.strict_priority,
        status=STATUS.get(record.status, record.status),
        active_worker_count=_int32(len(record.running)))
    for queue, priority in record.queues.items():
        pb.queues[queue] = _int32(priority)
    _set_time(pb.start_time, record.started_ms)
    data: bytes = pb.SerializeToString()
    return data


def worker_pb(run: RunningTaskRecord, server_id: str, host: str, pid: int,
              payload: bytes) -> bytes:
    """The WorkerInfo of one running task (no deadline: a run without a time limit)."""
    pb: Any = WorkerInfoPB(host=host, pid=_int32(pid), server_id=server_id, task_id=run.task_id,
                           task_type=run.task_type, task_payload=payload, queue=run.queue)
    _set_time(pb.start_time, run.started_ms)
    if run.deadline_ms > 0:
        _set_time(pb.deadline, run.deadline_ms)
    data: bytes = pb.SerializeToString()
    return data


def running_record(info: bytes) -> RunningTaskRecord:
    """A running task from its WorkerInfo."""
    pb: Any = WorkerInfoPB.FromString(info)
    return RunningTaskRecord(task_id=pb.task_id, task_type=pb.task_type, queue=pb.queue,
                             started_ms=_time_ms(pb, "start_time"),
                             deadline_ms=_time_ms(pb, "deadline"),
                             payload_size=len(pb.task_payload))


def server_record(info: bytes, doc: bytes | None,
                  running: tuple[RunningTaskRecord, ...]) -> WorkerRecord:
    """A live server: an asyncq worker from its own document, else (a Go server) from its
    ServerInfo (no counts, extras or task options)."""
    if doc:
        return decode_server(doc, running=running)
    pb: Any = ServerInfoPB.FromString(info)
    return WorkerRecord(
        server_id=pb.server_id, host=pb.host, pid=pb.pid, concurrency=pb.concurrency,
        queues=dict(pb.queues), strict_priority=pb.strict_priority,
        status=_GO_STATUS.get(pb.status, pb.status), started_ms=_time_ms(pb, "start_time"),
        running=running)


class AsynqServers:
    """Server state and cancellation, run with the broker's ScriptRunner."""

    def __init__(self, runner: ScriptRunner, clock: Clock) -> None:
        self.runner = runner
        self.clock = clock
        self._where: dict[str, tuple[str, int]] = {}  # server id -> (host, pid) it wrote as
        self._payloads: dict[str, bytes] = {}  # running task id -> payload (read once per run)

    def _keys(self, server_id: str) -> tuple[str, str, str]:
        host, pid = self._where.get(server_id, (socket.gethostname(), os.getpid()))
        return (K.server_key(host, pid, server_id), K.workers_key(host, pid, server_id),
                K.server_doc_key(host, pid, server_id))

    async def write(self, record: WorkerRecord, ttl_ms: int) -> None:
        """As Go's WriteServerState: ZADD both registries (score: expiry, Unix s), then one
        script rewriting the server's keys with the TTL (whole seconds, rounded up)."""
        server_id = record.server_id
        host = record.host or socket.gethostname()
        pid = record.pid or os.getpid()
        self._where[server_id] = (host, pid)
        payloads = await self._payloads_of(record.running)
        args: list[Any] = []
        for run in record.running:
            args += [run.task_id, worker_pb(run, server_id, host, pid,
                                            payloads.get(run.task_id, b""))]
        ttl_s = max(1, -(-ttl_ms // 1000))
        expiry_s = self.clock.now_ms() // 1000 + ttl_s
        skey, wkey, dkey = self._keys(server_id)
        await self.runner.commands("writing server state", [
            ("ZADD", K.SERVERS, expiry_s, skey), ("ZADD", K.WORKERS, expiry_s, wkey)])
        await self.runner.run("asynq_write_server_state", [skey, wkey, dkey],
                              [ttl_s, server_pb(record, host, pid), encode_server(record),
                               *args])

    async def _payloads_of(self, runs: Sequence[RunningTaskRecord]) -> dict[str, bytes]:
        """The payload of each running task (WorkerInfo carries it, asyncq's record only its
        size), read from its task hash the first time it is seen, then remembered while it
        runs."""
        ids = {run.task_id for run in runs}
        self._payloads = {t: p for t, p in self._payloads.items() if t in ids}
        new = [(run.task_id, run.queue) for run in runs if run.task_id not in self._payloads]
        if new:
            replies = await self.runner.commands("reading running tasks", [
                ("HGET", K.queue_keys(queue).task(task_id), K.F_MSG) for task_id, queue in new])
            for (task_id, _), msg in zip(new, replies, strict=True):
                try:
                    self._payloads[task_id] = _codec.decode(msg or b"").payload
                except DecodeError:  # (gone, or not a TaskMessage: shown without payload)
                    self._payloads[task_id] = b""
        return self._payloads

    async def clear(self, server_id: str) -> None:
        """As Go's ClearServerState: out of both registries, then the keys deleted."""
        skey, wkey, dkey = self._keys(server_id)
        await self.runner.commands("clearing server state", [
            ("ZREM", K.SERVERS, skey), ("ZREM", K.WORKERS, wkey)])
        await self.runner.run("asynq_clear_server_state", [skey, wkey, dkey], [])
        self._where.pop(server_id, None)
        self._payloads.clear()

    async def read(self, now_ms: int) -> list[WorkerRecord]:
        """Every live server, Go's and asyncq's (what ``InspectOps.servers`` returns): the
        servers whose expiry in ``asynq:servers`` is not past, as Go's Inspector lists them."""
        now_s = now_ms // 1000
        *_, found = await self.runner.commands("listing servers", [
            ("ZREMRANGEBYSCORE", K.SERVERS, "-inf", now_s - 1),  # expired entries: pruned
            ("ZREMRANGEBYSCORE", K.WORKERS, "-inf", now_s - 1),
            ("ZRANGE", K.SERVERS, now_s, "+inf", "BYSCORE")])
        keys = [text(k) for k in found]
        replies = await self.runner.commands("reading servers", [
            cmd for key in keys for cmd in (
                ("GET", key), ("GET", K.server_doc_key_of(key)),
                ("HGETALL", K.workers_key_of(key)))])
        out: list[WorkerRecord] = []
        for i in range(0, len(replies), 3):
            info, doc, workers = replies[i:i + 3]
            if info is None:
                continue  # expired between the two reads
            try:
                running = tuple(running_record(w) for w in workers.values())
                out.append(server_record(info, doc, running))
            except (PBDecodeError, *UNREADABLE):  # not asynq's: skipped, as Go does
                continue
        return out

    async def request_cancel(self, queue: str, task_id: str) -> int:
        qk = K.queue_keys(queue)
        return number(await self.runner.run(
            "asynq_request_cancel",
            [qk.task(task_id), qk.pending, qk.scheduled, qk.retry, qk.archived, qk.completed,
             qk.groups, qk.aggregation_sets],
            [task_id, qk.group_prefix, K.CANCEL_CHANNEL]))

    async def publish_cancel(self, task_id: str) -> None:
        """As Go's Inspector.CancelProcessing: the task id published on ``asynq:cancel``."""
        await self.runner.command("publishing cancellation", "PUBLISH", K.CANCEL_CHANNEL,
                                  task_id)
