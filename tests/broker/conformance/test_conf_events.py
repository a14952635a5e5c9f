"""Task events every broker publishes while somebody listens (``set_listening``): one per
transition, in order for each task, with what a listener needs (result, error, retries,
group, the time of the next run), and a revoked task's reason."""

from __future__ import annotations

from datetime import timedelta

import pytest

from asyncq import Client, FakeClock, TaskState
from asyncq._broker import Broker, Outcome
from asyncq._broker._calls import EVENT_RESULT_MAX
from tests.broker.broker_helpers import listening, moves, take

pytestmark = pytest.mark.anyio

ON_CLUSTER = True

OWNER = "srv-e"
LEASE_MS = 30_000




async def test_every_transition_is_told_while_somebody_listens(
        broker: Broker, client: Client, clock: FakeClock, asyncq_queue: str) -> None:
    q = asyncq_queue
    unheard = await client.enqueue("t", b"x", queue=q)  # (nobody listens yet: no event)
    async with listening(broker, q) as events:
        a = await client.enqueue("t", b"a", queue=q)
        later = await client.enqueue("t", queue=q, process_in=timedelta(hours=1))
        grouped = await client.enqueue("t", queue=q, group="g1")
        heard = await take(events, 3)
        assert moves(heard) == [(a.id, None, "pending"), (later.id, None, "scheduled"),
                                (grouped.id, None, "aggregating")]
        assert heard[0].type == "t" and heard[0].retried == 0
        assert heard[1].next_process_at is not None  # (its unit: each layout's module)
        assert heard[2].group == "g1"
        raws, _ = await broker.dequeue(q, 2, OWNER, LEASE_MS, 1000)
        assert [r.id for r in raws] == [unheard.id, a.id]
        assert moves(await take(events, 2)) == [(unheard.id, "pending", "active"),
                                                (a.id, "pending", "active")]
        now = clock.now_ms()
        assert await broker.finish([
            Outcome("retry", q, unheard.id, retry_at_ms=now - 1000, error="boom"),
            Outcome("complete", q, a.id, retention_ms=60_000, result=b'"r"', result_enc="j"),
        ], OWNER) == [True, True]
        # (one event each; their order may differ: a pipelined script not loaded yet is re-sent)
        by_id = {e.id: e for e in await take(events, 2)}
        retry, done = by_id[unheard.id], by_id[a.id]
        assert (retry.state, retry.last_error, retry.retried) == (TaskState.RETRY, "boom", 1)
        assert (done.state, done.result_json(), done.result_kept) == (
            TaskState.COMPLETED, "r", True)
        assert await broker.maintenance.forward(q, "retry", 10) == (1, -1)
        assert moves(await take(events, 1)) == [(unheard.id, "retry", "pending")]
        [raw], _ = await broker.dequeue(q, 1, OWNER, LEASE_MS, 1000)
        await take(events, 1)
        assert await broker.finish([Outcome("requeue", q, raw.id)], OWNER) == [True]
        assert moves(await take(events, 1)) == [(raw.id, "active", "pending")]
        await broker.dequeue(q, 1, OWNER, LEASE_MS, 1000)
        await take(events, 1)
        assert await broker.finish([Outcome("archive", q, raw.id, error="gave up")],
                                    OWNER) == [True]
        [archived] = await take(events, 1)
        assert (archived.state, archived.last_error) == (TaskState.ARCHIVED, "gave up")


async def test_a_done_task_tells_its_result_once_and_a_revoked_one_its_reason(
        broker: Broker, client: Client, asyncq_queue: str) -> None:
    q = asyncq_queue
    ids = [(await client.enqueue("t", queue=q)).id for _ in range(3)]
    await broker.dequeue(q, 3, OWNER, LEASE_MS, 1000)
    big = b"x" * (EVENT_RESULT_MAX + 1)
    async with listening(broker, q) as events:
        assert await broker.finish([
            Outcome("done", q, ids[0], result=b"7", result_enc="j"),
            Outcome("done", q, ids[1], result=big),
            Outcome("done", q, ids[2], error="not wanted"),
        ], OWNER) == [True, True, True]
        by_id = {e.id: e for e in await take(events, 3)}
        small, large, revoked = (by_id[i] for i in ids)
    assert (small.state, small.result_json(), small.result_kept) == (
        TaskState.COMPLETED, 7, False)
    assert (large.result, large.result_too_large) == (None, True)
    assert (revoked.state, revoked.reason, revoked.last_error) == (
        TaskState.DELETED, "revoked", "not wanted")
