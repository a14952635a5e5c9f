"""asyncq's additions to asynq's layout, script by script: task events (published only while
somebody listens), completion marks, and the keys they use — all below ``asynq:{q}:asyncq:``,
which Go never reads, and all expiring on their own."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from asyncq import Client, FakeClock, TaskState
from asyncq._broker import Outcome
from asyncq._broker._asynq import _events, _reads
from asyncq._broker._asynq import _keys as K
from asyncq._broker._asynq._broker import AsynqBroker
from asyncq._model._events import TaskEvent
from asyncq._model._rules import COMPLETION_MARK_MS

OWNER = "srv-e"
LEASE_MS = 30_000
LUA = Path(K.__file__).parent / "lua"


@asynccontextmanager
async def listening(broker: AsynqBroker, queue: str) -> AsyncIterator[AsyncIterator[Any]]:
    """The queue's events, subscribed and flagged."""
    events = broker.listen_events([queue])
    await asyncio.wait_for(anext(events), 5)  # the EventFlush: subscribed
    await broker.set_listening([queue], 10_000)
    try:
        yield events
    finally:
        await events.aclose()  # type: ignore[attr-defined]


async def take(events: AsyncIterator[Any], n: int) -> list[TaskEvent]:
    return [await asyncio.wait_for(anext(events), 5) for _ in range(n)]


def moves(events: list[TaskEvent]) -> list[tuple[str, str | None, str]]:
    return [(e.id, e.previous.value if e.previous else None, e.state.value) for e in events]


async def test_a_scheduled_tasks_event_names_its_run_in_gos_whole_seconds(
        abroker: AsynqBroker, aclient: Client, clock: FakeClock, asyncq_queue: str) -> None:
    """Go scores a scheduled task in Unix seconds, rounded up (the events every broker tells:
    conformance/test_conf_events.py)."""
    q = asyncq_queue
    async with listening(abroker, q) as events:
        await aclient.enqueue("t", queue=q, process_in=timedelta(hours=1))
        heard = await take(events, 1)
        assert heard[0].next_process_at is not None
        assert int(heard[0].next_process_at.timestamp()) == (
            clock.now_ms() + 3_600_000 + 999) // 1000


async def test_a_completion_mark_is_kept_a_while_in_a_key_go_ignores(
        abroker: AsynqBroker, aclient: Client, redis_client: Redis, clock: FakeClock,
        asyncq_queue: str) -> None:
    q = asyncq_queue
    qk, xk = K.queue_keys(q), K.extra_keys(q)
    old, new, none = [(await aclient.enqueue("t", queue=q)).id for _ in range(3)]
    await abroker.dequeue(q, 3, OWNER, LEASE_MS, 1000)
    assert await abroker.finish([Outcome("done", q, old, retention_ms=COMPLETION_MARK_MS)],
                                OWNER) == [True]
    clock.advance(COMPLETION_MARK_MS / 1000 + 1)
    assert await abroker.finish([Outcome("done", q, new, retention_ms=COMPLETION_MARK_MS),
                                 Outcome("done", q, none)], OWNER) == [True, True]
    # Go's view: all three deleted as its Done deletes them, nothing in completed.
    assert not await redis_client.exists(qk.task(old), qk.task(new), qk.task(none))
    assert await redis_client.zcard(qk.completed) == 0
    # The mark: only the recent one (the older was dropped when the new one came), expiring.
    assert await redis_client.zrange(xk.marks, 0, -1) == [new.encode()]
    assert 0 < await redis_client.pttl(xk.marks) <= COMPLETION_MARK_MS
    [rec_new, rec_none] = await abroker.inspect.tasks([(q, new), (q, none)])
    assert rec_none is None
    assert rec_new is not None and (rec_new.state, rec_new.msg) == ("completed", b"")
    assert rec_new.completed_at_ms == clock.now_ms()
    clock.advance(COMPLETION_MARK_MS / 1000 + 1)  # a mark read after its minute is no answer
    assert await abroker.inspect.tasks([(q, new)]) == [None]


async def test_events_and_pickup_keys_expire_on_their_own(
        abroker: AsynqBroker, aclient: Client, redis_client: Redis, asyncq_queue: str) -> None:
    """Go's Inspector removing the queue deletes only the keys Go knows: asyncq's extras must
    not outlive it."""
    q = asyncq_queue
    xk = K.extra_keys(q)
    await abroker.set_listening([q], 10_000)
    await abroker.dequeue(q, 1, OWNER, LEASE_MS, 3000, one_hop=True)  # waiters flag, idle
    tid = (await aclient.enqueue("t", queue=q)).id  # (nobody hears the hand-off: not leased)
    [raw], _ = await abroker.dequeue(q, 1, OWNER, LEASE_MS, 3000)
    assert raw.id == tid
    await abroker.dequeue(q, 1, OWNER, LEASE_MS, 3000, one_hop=True)
    await abroker.finish([Outcome("done", q, tid, retention_ms=COMPLETION_MARK_MS)], OWNER)
    keys = [k.decode() for k in await redis_client.keys(xk.base.replace("{", "[{]") + "*")]
    assert sorted(keys) == sorted([xk.listening, xk.waiters, xk.idle, xk.marks])
    for key in keys:
        assert await redis_client.pttl(key) > 0, key


def test_every_extra_key_a_script_builds_is_in_the_key_module() -> None:
    """The asynq scripts build asyncq's keys as base .. 'asyncq:<name>': each name is one of
    AsyncqExtraKeys, and nothing else is written below Go's names."""
    xk = K.extra_keys("q")
    known = {xk.listening, xk.events, xk.waiters, xk.idle, xk.marks, xk.handoff("o"),
             xk.handoff_channel("o"), K.limits_registry("q")}
    known_suffixes = {re.sub(r"o$", "", k.removeprefix(xk.base)) for k in known}
    built: set[str] = set()
    for path in LUA.glob("*.lua"):
        built |= set(re.findall(r"'asyncq:([a-z_]+:?)'", path.read_text()))
    assert built == known_suffixes
    assert xk.base == "asynq:{q}:asyncq:" and K.WAKE_CHANNEL == "asynq:asyncq:wake"


async def test_a_recheck_never_repeats_an_event_asyncq_published(
        abroker: AsynqBroker, aclient: Client, asyncq_queue: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The race the flush barrier settles: the recheck reads a task gone whose own event is
    published but not yet taken; that event comes, once, and the recheck adds nothing."""
    q = asyncq_queue
    source = abroker.event_source
    monkeypatch.setattr(_events, "RECHECK_INTERVAL", 0.01)
    read = asyncio.Event()
    real_read = _events.read_tasks

    async def reading(*args: Any) -> Any:
        out = await real_read(*args)
        read.set()
        return out
    monkeypatch.setattr(_events, "read_tasks", reading)
    async with listening(abroker, q) as events:
        tid = (await aclient.enqueue("t", queue=q)).id
        await abroker.dequeue(q, 1, OWNER, LEASE_MS, 1000)
        assert moves(await take(events, 2)) == [(tid, None, "pending"),
                                                (tid, "pending", "active")]
        since = source.position()
        [active] = await _reads.read_tasks(abroker.runner, [(q, tid)], 0)
        source.note(q, tid, active, since)
        assert await abroker.finish([Outcome("done", q, tid)], OWNER) == [True]
        await asyncio.wait_for(read.wait(), 5)  # the recheck read it gone (event not taken)
        [done] = await take(events, 1)
        assert (done.id, done.state) == (tid, TaskState.COMPLETED)
        with pytest.raises(TimeoutError):  # (the recheck's answer, dropped)
            await asyncio.wait_for(anext(events), 0.5)
        assert source._watched == {}
