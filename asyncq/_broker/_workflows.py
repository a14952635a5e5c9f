"""Workflow operations on Redis: a workflow's state in its own slot (``asyncq:{wf:<id>}:...``),
its steps in their queues' slots, and the outboxes that join the two (see lua/_wf_lib.lua).

Every method is one script or plain command on one slot, so all of it works on Redis Cluster;
what crosses slots is the advancer's (asyncq/_workflow/_advance.py) ordered sequence of them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import anyio
import orjson

from .._clock import Clock
from . import _keys as K
from ._calls import EVENT_RESULT_MAX, ScriptCall
from ._replies import must_register, register, text
from ._runner import ScriptRunner, reply_error
from ._wf_ops import (
    Applied,
    CancelResult,
    Change,
    DropResult,
    NewNode,
    NodeState,
    OutboxRecord,
    StepEnd,
    StepInput,
    StepOutcome,
    StoredStep,
    Value,
    Watched,
    WatchState,
    WorkflowRecord,
    WorkflowState,
    WorkflowSummary,
)

_CHUNK = 500  # steps per store/release/park/drop script call
#: The error a cancelled step is archived with: its outcome record reads as a cancellation.
CANCELLED_TEXT = "TaskCancelledError: task cancelled on request"
#: The record fields a ``WorkflowSummary`` is read from.
_SUMMARY = ("wstate", "created_at", "final", "onerr", "failed_node", "error", "retention")

Listen = Callable[[Sequence[str]], AsyncIterator[tuple[str, str] | None]]


def _token(workflow_id: str, node: str) -> str:
    """How a task names a workflow node it reports to (its 'wf' field holds these)."""
    return f"{workflow_id}#{node}"


def parse_record(raw: bytes) -> list[tuple[str, StepOutcome]]:
    """An outbox record (see asyncq_wf_out in lua/_wf_lib.lua) -> ``[(workflow id, outcome),
    ...]``, one per workflow token of the task. Raises ValueError/UnicodeDecodeError when
    malformed."""
    code, enc = chr(raw[0]), chr(raw[1])
    newline = raw.index(b"\n", 2)
    size = int(raw[2:newline])
    tokens = raw[newline + 1:newline + 1 + size].decode()
    body = raw[newline + 1 + size:]
    end = StepEnd(code)
    if end is StepEnd.FAILED and body == CANCELLED_TEXT.encode():
        end = StepEnd.CANCELLED  # a cancelled step is archived with this error
    out = []
    for token in tokens.split():
        wf_id, _, node = token.rpartition("#")
        out.append((wf_id, StepOutcome(node, end, enc, body)))
    return out


def _outbox_record(task_id: str, raw: bytes) -> OutboxRecord:
    try:
        return OutboxRecord(task_id, raw, parse_record(raw))
    except (ValueError, UnicodeDecodeError, IndexError):
        return OutboxRecord(task_id, raw, None)


def _input_mode(step: StoredStep) -> str:
    """The step's input mode as workflow_store.lua takes it: '!' pending at once, '' none,
    'r' as payload, else the argument's name as a JSON string."""
    if step.ready:
        return "!"
    if step.input in ("", "r"):
        return step.input
    return orjson.dumps(step.input).decode()


def _summary(fields: Sequence[Any]) -> WorkflowSummary | None:
    wstate, created, final, on_error, failed_node, error, retention = (
        "" if f is None else text(f) for f in fields)
    if not wstate:
        return None
    return WorkflowSummary(WorkflowState(wstate), int(created or 0), final, on_error,
                           failed_node, error, int(retention or 0))


def _stored_value(raw: bytes | None) -> Value:
    """A node's stored value: encoding byte + bytes ('e' + error for a failed node)."""
    if not raw:
        return ("-", b"")
    enc = chr(raw[0])
    return (enc if enc in "jb" else "-", raw[1:])


class RedisWorkflowOps:
    """The Redis implementation of ``WorkflowOps``; ``listen`` is the broker's pub/sub
    listener (the outboxes' wake-ups are published on a channel per queue)."""

    def __init__(self, runner: ScriptRunner, clock: Clock, listen: Listen) -> None:
        self.runner = runner
        self.clock = clock
        self._listen = listen

    # -- the registry (a key of its own slot, like asyncq:queues)

    async def register(self, workflow_id: str, created_ms: int) -> None:
        await self.runner.command("registering a workflow", "ZADD", K.WORKFLOWS, created_ms,
                                  workflow_id)

    async def unregister(self, workflow_ids: Sequence[str]) -> None:
        if workflow_ids:
            await self.runner.command("unregistering workflows", "ZREM", K.WORKFLOWS,
                                      *workflow_ids)

    async def list_ids(self, start: int, stop: int) -> list[tuple[str, int]]:
        rows = await self.runner.command("listing workflows", "ZRANGE", K.WORKFLOWS, start,
                                         stop, "REV", "WITHSCORES")
        if rows and not isinstance(rows[0], list | tuple):
            rows = list(zip(rows[::2], rows[1::2], strict=True))
        return [(text(i), int(float(s))) for i, s in rows]

    # -- creating

    async def create(self, workflow_id: str, msg: bytes, final: str, on_error: str,
                     retention_ms: int, steps: int, nodes: Sequence[NewNode]) -> bool:
        wk = K.workflow_keys(workflow_id)
        args: list[Any] = [workflow_id, msg, self.clock.now_ms(), final, on_error,
                           retention_ms, steps, len(nodes)]
        for node in nodes:
            args += (node.node, node.spec, ",".join(node.successors), node.inputs)
        return bool(await self.runner.run("workflow_create", [wk.record, wk.spec, wk.succ,
                                                              wk.count], args))

    async def store_steps(self, queue: str, steps: Sequence[StoredStep]) -> list[bool]:
        qk = K.queue_keys(queue)
        now = self.clock.now_ms()
        calls = []
        for start in range(0, len(steps), _CHUNK):
            part = steps[start:start + _CHUNK]
            keys = [qk.pending, qk.waiters, qk.registered, *(qk.task(s.id) for s in part)]
            args: list[Any] = [now, K.WAKE_CHANNEL, queue]
            for s in part:
                args += (s.id, s.msg, s.payload, _token(s.workflow_id, s.node), _input_mode(s))
            calls.append(ScriptCall("workflow_store", keys, args))
        codes = _flat(await self.runner.run_many(calls, preload=True), "storing workflow steps")
        if any(must_register(c) for c in codes):
            await register(self.runner, [queue])
        return [int(c) != 0 for c in codes]

    async def started(self, workflow_id: str) -> WorkflowState | None:
        wk = K.workflow_keys(workflow_id)
        state = text(await self.runner.run("workflow_started", [wk.record], [workflow_id]))
        return WorkflowState(state) if state else None

    # -- advancing

    async def apply(self, workflow_id: str, outcomes: Sequence[StepOutcome]) -> Applied:
        wk = K.workflow_keys(workflow_id)
        args: list[Any] = [workflow_id, self.clock.now_ms()]
        for o in outcomes:
            args += (o.node, o.end.value, o.encoding, o.body)
        reply = await self.runner.run("workflow_apply", [wk.record, wk.succ, wk.count,
                                                         wk.state, wk.results, wk.ready], args)
        state = text(reply[0])
        if not state:
            return Applied(None, Change.NONE, False, False, [])
        return Applied(WorkflowState(state), Change(text(reply[1])), text(reply[2]) == "1",
                       text(reply[3]) == "1", [text(n) for n in reply[4:]])

    async def ready(self, workflow_id: str) -> list[str]:
        members = await self.runner.command("reading ready workflow steps", "SMEMBERS",
                                            K.workflow_keys(workflow_id).ready)
        return sorted(text(m) for m in members)

    async def specs(self, workflow_id: str, nodes: Sequence[str]) -> list[bytes | None]:
        return await self._hmget(K.workflow_keys(workflow_id).spec, nodes)

    async def results(self, workflow_id: str, nodes: Sequence[str]) -> list[Value]:
        raws = await self._hmget(K.workflow_keys(workflow_id).results, nodes)
        return [_stored_value(raw) for raw in raws]

    async def _hmget(self, key: str, fields: Sequence[str]) -> list[bytes | None]:
        out: list[bytes | None] = []
        for start in range(0, len(fields), 5000):
            out += await self.runner.command("reading a workflow", "HMGET", key,
                                             *fields[start:start + 5000])
        return out

    async def release(self, queue: str, steps: Sequence[StepInput]) -> list[bool]:
        qk = K.queue_keys(queue)
        now = self.clock.now_ms()
        calls = []
        for start in range(0, len(steps), _CHUNK):
            part = steps[start:start + _CHUNK]
            keys = [qk.pending, qk.waiters, *(qk.task(s.task_id) for s in part)]
            args: list[Any] = [now, K.WAKE_CHANNEL, queue]
            for step in part:
                args += (step.task_id, step.input, step.encoding)
            calls.append(ScriptCall("workflow_release", keys, args))
        return [int(c) == 1 for c in _flat(await self.runner.run_many(calls),
                                           "releasing workflow steps")]

    async def park(self, queue: str, task_ids: Sequence[str], ttl_ms: int) -> int:
        qk = K.queue_keys(queue)
        calls = [ScriptCall("workflow_park", [qk.task(i) for i in task_ids[s:s + _CHUNK]],
                            [ttl_ms]) for s in range(0, len(task_ids), _CHUNK)]
        replies = await self.runner.run_many(calls)
        return sum(int(r) for r in _checked(replies, "parking workflow steps"))

    async def drop(self, queue: str, task_ids: Sequence[str]) -> list[DropResult]:
        qk = K.queue_keys(queue)
        calls = []
        for start in range(0, len(task_ids), _CHUNK):
            part = task_ids[start:start + _CHUNK]
            calls.append(ScriptCall("workflow_drop", [qk.pending, qk.scheduled, qk.retry,
                                                      *(qk.task(i) for i in part)], list(part)))
        return [DropResult(int(c)) for c in _flat(await self.runner.run_many(calls),
                                                  "deleting workflow steps")]

    async def finish(self, workflow_id: str, encoding: str, result: bytes) -> bool:
        wk = K.workflow_keys(workflow_id)
        return bool(await self.runner.run(
            "workflow_finish", wk.all(),
            [workflow_id, self.clock.now_ms(), encoding, result, EVENT_RESULT_MAX]))

    async def cancel(self, workflow_id: str, why: str) -> CancelResult:
        wk = K.workflow_keys(workflow_id)
        return CancelResult(int(await self.runner.run("workflow_cancel", wk.all(),
                                                      [workflow_id, self.clock.now_ms(), why])))

    async def watch(self, queue: str, task_id: str, workflow_id: str, node: str) -> Watched:
        qk = K.queue_keys(queue)
        reply = await self.runner.run("workflow_watch", [qk.task(task_id), qk.marks],
                                      [_token(workflow_id, node), task_id])
        state = WatchState(text(reply[0]))
        if state is WatchState.SUCCEEDED:
            return Watched(state, text(reply[1]), bytes(reply[2]))
        if state is WatchState.FAILED:
            return Watched(state, "-", bytes(reply[1]))
        return Watched(state)

    # -- outboxes

    async def take(self, queue: str, owner: str, lock_ms: int, limit: int,
                   idle_ms: int) -> list[OutboxRecord] | None:
        qk = K.queue_keys(queue)
        flat = await self.runner.run("workflow_outbox_take",
                                     [qk.wf_outbox, qk.wf_lock, qk.wf_idle],
                                     [owner, lock_ms, limit, idle_ms])
        if flat is None:
            return None
        return [_outbox_record(text(flat[i]), bytes(flat[i + 1]))
                for i in range(0, len(flat), 2)]

    async def ack(self, queue: str, taken: Sequence[OutboxRecord]) -> int:
        args: list[Any] = []
        for record in taken:
            args += (record.task_id, record.raw)
        return int(await self.runner.run("workflow_outbox_ack", [K.queue_keys(queue).wf_outbox],
                                         args))

    async def outbox_size(self, queue: str) -> int:
        return int(await self.runner.command("reading a workflow outbox", "HLEN",
                                             K.queue_keys(queue).wf_outbox))

    async def listen_outboxes(self, queues: Sequence[str]) -> AsyncIterator[None]:
        channels = sorted({K.queue_keys(q).wf_wake for q in queues})
        if not channels:  # (a worker serving only a pattern that matched nothing yet)
            await anyio.sleep_forever()
        async for _ in self._listen(channels):
            yield None

    # -- reading

    async def summary(self, workflow_id: str) -> WorkflowSummary | None:
        return _summary(await self._hmget(K.workflow_keys(workflow_id).record, _SUMMARY))

    async def read(self, workflow_id: str) -> WorkflowRecord | None:
        wk = K.workflow_keys(workflow_id)
        record, states, specs = await self.runner.commands(
            "reading a workflow", [("HGETALL", wk.record), ("HGETALL", wk.state),
                                   ("HGETALL", wk.spec)])
        record = dict(record)
        summary = _summary([record.get(name.encode()) for name in _SUMMARY])
        if summary is None:
            return None
        return WorkflowRecord(
            summary, record.get(b"result"), text(record.get(b"result_enc") or b"") or "j",
            {text(k): NodeState(text(v)) for k, v in dict(states).items()},
            {text(k): bytes(v) for k, v in dict(specs).items()})


def _checked(replies: Sequence[Any], what: str) -> list[Any]:
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply_error(what, reply)
    return list(replies)


def _flat(replies: Sequence[Any], what: str) -> list[Any]:
    return [code for reply in _checked(replies, what) for code in reply]
