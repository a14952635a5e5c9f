"""The schedulers' Redis side (``ScheduleOps``): claimed firings, history, published entries.

A firing is one ``scheduler_<store>.lua`` script: the claim of ``(entry, tick)`` in
``asyncq:{queue}:scheduler_ticks`` (the queue's slot) followed by the ordinary store script, so
claim and task are written together or not at all (see ``asyncq._scheduler._backend``).
"""

from __future__ import annotations

from collections.abc import Sequence

from .._clock import Clock
from . import _keys as K
from ._calls import store_call
from ._records import (
    UNREADABLE,
    decode_entry,
    decode_event,
    encode_entry,
    encode_event,
)
from ._replies import enqueue_code, must_register, register, text
from ._runner import ScriptRunner
from ._values import FireCode, NewTask, SchedulerEntryRecord, SchedulerEventRecord


class RedisScheduleOps:
    """``ScheduleOps`` run with a ScriptRunner."""

    def __init__(self, runner: ScriptRunner, clock: Clock) -> None:
        self.runner = runner
        self.clock = clock

    async def fire(self, task: NewTask, entry_id: str, tick_ms: int,
                   prune_before_ms: int) -> FireCode:
        call = store_call(task, task.msg.enqueued_at_ms or self.clock.now_ms())
        code = await self.runner.run(
            f"scheduler_{call.name}",
            [*call.keys, K.scheduler_ticks_key(task.msg.queue)],
            [*call.args, entry_id, tick_ms, prune_before_ms])
        if must_register(code):
            await register(self.runner, (task.msg.queue,))
        return 2 if int(code) == 2 else enqueue_code(code)

    async def record_event(self, event: SchedulerEventRecord, max_events: int,
                           ttl_ms: int) -> None:
        await self.runner.run("scheduler_record", [K.scheduler_history_key(event.entry_id)],
                              [event.enqueued_at_ms, encode_event(event), max_events, ttl_ms])

    async def publish_entries(self, scheduler_id: str, entries: Sequence[SchedulerEntryRecord],
                              ttl_ms: int, now_ms: int) -> None:
        key = K.scheduler_entries_key(scheduler_id)
        await self.runner.run("scheduler_heartbeat", [key],
                              [ttl_ms, *(encode_entry(e) for e in entries)])
        await self.runner.command("publishing scheduler entries",
                                  "ZADD", K.SCHEDULERS, now_ms + ttl_ms, key)

    async def clear_entries(self, scheduler_id: str) -> None:
        key = K.scheduler_entries_key(scheduler_id)
        await self.runner.command("clearing scheduler entries", "DEL", key)
        await self.runner.command("clearing scheduler entries", "ZREM", K.SCHEDULERS, key)

    async def entries(self) -> list[SchedulerEntryRecord]:
        out = []
        lists = await live_entry_lists(self.runner, K.SCHEDULERS, self.clock.now_ms())
        for doc in (doc for _, items in lists for doc in items):
            try:
                out.append(decode_entry(doc))
            except UNREADABLE:
                continue  # written by an incompatible version: not shown
        return out

    async def events(self, entry_id: str, start: int, stop: int) -> list[SchedulerEventRecord]:
        raw = await self.runner.command("listing scheduler events", "ZREVRANGE",
                                        K.scheduler_history_key(entry_id), start, stop)
        out = []
        for doc in raw:
            try:
                out.append(decode_event(doc, entry_id))
            except UNREADABLE:
                continue
        return out


async def live_entry_lists(runner: ScriptRunner, index: str,
                           now: int) -> list[tuple[str, list[bytes]]]:
    """``(entries key, its records)`` of every live scheduler in the ``index`` sorted set
    (scored by expiry, in the layout's unit, ``now`` too): the expired ones and those whose
    list is gone are pruned from it."""
    what = "listing scheduler entries"
    await runner.command(what, "ZREMRANGEBYSCORE", index, "-inf", f"({now}")
    keys = [text(k) for k in await runner.command(what, "ZRANGE", index, 0, -1)]
    if not keys:
        return []
    lists = await runner.commands(what, [("LRANGE", key, 0, -1) for key in keys])
    gone = [key for key, items in zip(keys, lists, strict=True) if not items]
    if gone:
        await runner.command(what, "ZREM", index, *gone)
    return [(key, list(items)) for key, items in zip(keys, lists, strict=True) if items]
