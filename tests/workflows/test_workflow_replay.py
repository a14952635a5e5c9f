"""Crash safety of the advancer, step by step: an outbox record applied but never deleted (the
advancer died after applying it) is applied again by the next advancer without releasing,
running or finishing anything twice — whatever happened to the released step meanwhile."""

from __future__ import annotations

import pytest
import redis.asyncio

from asyncq import Client, Task, chain
from asyncq._broker import Outcome
from asyncq._broker import _keys as K
from asyncq._broker._workflows import parse_record
from asyncq._workflow._engine import advance
from asyncq.testing import WorkerFactory
from tests.workflows.flowapp import LEDGER, mux

pytestmark = pytest.mark.anyio


async def test_a_record_applied_twice_runs_nothing_twice(
        wf_redis: redis.asyncio.Redis, asyncq_client: Client,
        asyncq_worker: WorkerFactory) -> None:
    broker = asyncq_client.broker
    handle = await asyncq_client.enqueue_workflow(
        chain(Task("wf:ledger", "a"), Task("wf:ledger"), Task("wf:ledger")))
    # Play the first step's worker by hand: lease it and write its outcome.
    tasks, _ = await broker.dequeue("default", 1, "w1", 30_000, 1000)
    assert [t.id for t in tasks] == [f"{handle.id}.0"]
    assert await broker.finish([Outcome("done", "default", tasks[0].id, result=b'"a"',
                                        result_enc="j")], "w1") == [True]
    outbox = K.queue_keys("default").wf_outbox
    raw = await wf_redis.hget(outbox, tasks[0].id)
    assert raw is not None
    # An advancer applies it and releases the second step, then dies before deleting it.
    (wf_id, outcome), = parse_record(raw)
    assert wf_id == handle.id
    await advance(broker, wf_id, [outcome])
    await advance(broker, wf_id, [outcome])  # (and one that replays it at once)
    # A worker now runs the rest; its advancer finds the old record too and replays it
    # after the second step ran and was deleted: the step is not released again.
    async with asyncq_worker(mux, workflow_interval=0.3):
        assert await asyncq_client.result(handle.id, timeout=10) == "a"
        await advance(broker, wf_id, [outcome])
    runs = [x.decode() for x in await wf_redis.lrange(LEDGER, 0, -1)]
    assert runs == [f"{handle.id}.1", f"{handle.id}.2"]
    assert not await wf_redis.hlen(outbox)
