"""Workflow operations on Redis: a workflow's state in its own slot (``asyncq:{wf:<id>}:...``),
its steps in their queues' slots, and the outboxes that join the two (see lua/_wf_lib.lua).

Every method is one script or plain command on one slot, so all of it works on Redis Cluster;
what crosses slots is the advancer's (asyncq/_workflow/_advance.py) ordered sequence of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._clock import Clock
from . import _keys as K
from ._calls import EVENT_RESULT_MAX, ScriptCall
from ._replies import must_register, register, text
from ._runner import ScriptRunner, reply_error
from ._wf_ops import Applied, StoredStep

_CHUNK = 500  # steps per store/release/park/drop script call


class RedisWorkflowOps:
    """The Redis implementation of ``WorkflowOps``."""

    def __init__(self, runner: ScriptRunner, clock: Clock) -> None:
        self.runner = runner
        self.clock = clock

    # -- the registry (a key of its own slot, like asyncq:queues)

    async def register(self, workflow_id: str, created_ms: int) -> None:
        await self.runner.command("registering a workflow", "ZADD", K.WORKFLOWS, created_ms,
                                  workflow_id)

    async def unregister(self, workflow_ids: Sequence[str]) -> None:
        if workflow_ids:
            await self.runner.command("unregistering workflows", "ZREM", K.WORKFLOWS,
                                      *workflow_ids)

    async def list_ids(self, start: int, stop: int) -> list[tuple[str, int]]:
        """Registered workflows, newest first: ``(id, created ms)``."""
        rows = await self.runner.command("listing workflows", "ZRANGE", K.WORKFLOWS, start,
                                         stop, "REV", "WITHSCORES")
        if rows and not isinstance(rows[0], list | tuple):
            rows = list(zip(rows[::2], rows[1::2], strict=True))
        return [(text(i), int(float(s))) for i, s in rows]

    # -- creating

    async def create(self, workflow_id: str, msg: bytes, final: str, on_error: str,
                     retention_ms: int, steps: int,
                     nodes: Sequence[tuple[str, bytes, str, int]]) -> bool:
        wk = K.workflow_keys(workflow_id)
        args: list[Any] = [workflow_id, msg, self.clock.now_ms(), final, on_error,
                           retention_ms, steps, len(nodes)]
        for node, spec, succ, count in nodes:
            args += (node, spec, succ, count)
        return bool(await self.runner.run("workflow_create", [wk.record, wk.spec, wk.succ,
                                                              wk.count], args))

    async def store_steps(self, queue: str, steps: Sequence[StoredStep]) -> list[int]:
        """Store steps of one queue (in chunks); one code per step: 1 stored, 0 id exists."""
        qk = K.queue_keys(queue)
        now = self.clock.now_ms()
        calls = []
        for start in range(0, len(steps), _CHUNK):
            part = steps[start:start + _CHUNK]
            keys = [qk.pending, qk.waiters, qk.registered, *(qk.task(s.id) for s in part)]
            args: list[Any] = [now, K.WAKE_CHANNEL, queue]
            for s in part:
                args += (s.id, s.msg, s.payload, s.token, s.mode)
            calls.append(ScriptCall("workflow_store", keys, args))
        codes = _flat(await self.runner.run_many(calls, preload=True), "storing workflow steps")
        if any(must_register(c) for c in codes):
            await register(self.runner, [queue])
        return [0 if int(c) == 0 else 1 for c in codes]

    async def started(self, workflow_id: str) -> str:
        wk = K.workflow_keys(workflow_id)
        return text(await self.runner.run("workflow_started", [wk.record], [workflow_id]))

    # -- advancing

    async def apply(self, workflow_id: str,
                    outcomes: Sequence[tuple[str, str, str, bytes]]) -> Applied:
        wk = K.workflow_keys(workflow_id)
        args: list[Any] = [workflow_id, self.clock.now_ms()]
        for outcome in outcomes:
            args += outcome
        reply = await self.runner.run("workflow_apply", [wk.record, wk.succ, wk.count,
                                                         wk.state, wk.results, wk.ready], args)
        state = text(reply[0])
        if not state:
            return Applied("", "", False, False, [])
        return Applied(state, text(reply[1]), text(reply[2]) == "1", text(reply[3]) == "1",
                       [text(n) for n in reply[4:]])

    async def ready(self, workflow_id: str) -> list[str]:
        members = await self.runner.command("reading ready workflow steps", "SMEMBERS",
                                            K.workflow_keys(workflow_id).ready)
        return sorted(text(m) for m in members)

    async def specs(self, workflow_id: str, nodes: Sequence[str]) -> list[bytes | None]:
        return await self._hmget(K.workflow_keys(workflow_id).spec, nodes)

    async def results(self, workflow_id: str, nodes: Sequence[str]) -> list[bytes | None]:
        return await self._hmget(K.workflow_keys(workflow_id).results, nodes)

    async def _hmget(self, key: str, fields: Sequence[str]) -> list[bytes | None]:
        out: list[bytes | None] = []
        for start in range(0, len(fields), 5000):
            out += await self.runner.command("reading a workflow", "HMGET", key,
                                             *fields[start:start + 5000])
        return out

    async def release(self, queue: str, steps: Sequence[tuple[str, bytes, str]]) -> list[int]:
        qk = K.queue_keys(queue)
        now = self.clock.now_ms()
        calls = []
        for start in range(0, len(steps), _CHUNK):
            part = steps[start:start + _CHUNK]
            keys = [qk.pending, qk.waiters, *(qk.task(i) for i, _, _ in part)]
            args: list[Any] = [now, K.WAKE_CHANNEL, queue]
            for step in part:
                args += step
            calls.append(ScriptCall("workflow_release", keys, args))
        return [int(c) for c in _flat(await self.runner.run_many(calls),
                                      "releasing workflow steps")]

    async def park(self, queue: str, task_ids: Sequence[str], ttl_ms: int) -> int:
        qk = K.queue_keys(queue)
        calls = [ScriptCall("workflow_park", [qk.task(i) for i in task_ids[s:s + _CHUNK]],
                            [ttl_ms]) for s in range(0, len(task_ids), _CHUNK)]
        replies = await self.runner.run_many(calls)
        return sum(int(r) for r in _checked(replies, "parking workflow steps"))

    async def drop(self, queue: str, task_ids: Sequence[str]) -> list[int]:
        qk = K.queue_keys(queue)
        calls = []
        for start in range(0, len(task_ids), _CHUNK):
            part = task_ids[start:start + _CHUNK]
            calls.append(ScriptCall("workflow_drop", [qk.pending, qk.scheduled, qk.retry,
                                                      *(qk.task(i) for i in part)], list(part)))
        return [int(c) for c in _flat(await self.runner.run_many(calls),
                                      "deleting workflow steps")]

    async def finish(self, workflow_id: str, encoding: str, result: bytes) -> bool:
        wk = K.workflow_keys(workflow_id)
        return bool(await self.runner.run(
            "workflow_finish", wk.all(),
            [workflow_id, self.clock.now_ms(), encoding, result, EVENT_RESULT_MAX]))

    async def cancel(self, workflow_id: str, why: str) -> int:
        wk = K.workflow_keys(workflow_id)
        return int(await self.runner.run("workflow_cancel", wk.all(),
                                         [workflow_id, self.clock.now_ms(), why]))

    async def watch(self, queue: str, task_id: str, token: str) -> list[Any]:
        reply = await self.runner.run("workflow_watch", [K.queue_keys(queue).task(task_id)],
                                      [token])
        return list(reply)

    # -- outboxes

    async def take(self, queue: str, owner: str, lock_ms: int, limit: int,
                   idle_ms: int) -> list[tuple[str, bytes]] | None:
        """Up to ``limit`` outbox records of ``queue``; None when another advancer drains it."""
        qk = K.queue_keys(queue)
        flat = await self.runner.run("workflow_outbox_take",
                                     [qk.wf_outbox, qk.wf_lock, qk.wf_idle],
                                     [owner, lock_ms, limit, idle_ms])
        if flat is None:
            return None
        return [(text(flat[i]), bytes(flat[i + 1])) for i in range(0, len(flat), 2)]

    async def ack(self, queue: str, taken: Sequence[tuple[str, bytes]]) -> int:
        args: list[Any] = []
        for task_id, record in taken:
            args += (task_id, record)
        return int(await self.runner.run("workflow_outbox_ack", [K.queue_keys(queue).wf_outbox],
                                         args))

    async def outbox_size(self, queue: str) -> int:
        return int(await self.runner.command("reading a workflow outbox", "HLEN",
                                             K.queue_keys(queue).wf_outbox))

    # -- reading

    async def fields(self, workflow_id: str, names: Sequence[str]) -> list[bytes | None]:
        """Fields of the workflow's record (None: not set, or no such workflow)."""
        return await self._hmget(K.workflow_keys(workflow_id).record, names)

    async def read(self, workflow_id: str) -> tuple[dict[bytes, bytes], dict[bytes, bytes],
                                                    dict[bytes, bytes]]:
        """The workflow's record, node states and node specs (empty dicts: no such
        workflow)."""
        wk = K.workflow_keys(workflow_id)
        record, states, specs = await self.runner.commands(
            "reading a workflow", [("HGETALL", wk.record), ("HGETALL", wk.state),
                                   ("HGETALL", wk.spec)])
        return dict(record), dict(states), dict(specs)


def _checked(replies: Sequence[Any], what: str) -> list[Any]:
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply_error(what, reply)
    return list(replies)


def _flat(replies: Sequence[Any], what: str) -> list[Any]:
    return [code for reply in _checked(replies, what) for code in reply]
