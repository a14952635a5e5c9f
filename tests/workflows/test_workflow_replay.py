"""Crash safety of the advancer, step by step: an outbox record applied but never deleted (the
advancer died after applying it) is applied again by the next advancer without releasing,
running or finishing anything twice — whatever happened to the released step meanwhile."""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pytest
import redis.asyncio

from asyncq import Client, Task, chain, group
from asyncq._broker import Broker, Outcome
from asyncq._broker import _keys as K
from asyncq._broker._wf_ops import StoredStep
from asyncq._broker._workflows import parse_record
from asyncq._workflow._engine import advance
from asyncq._workflow._start import start_workflow
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
        assert await asyncq_client.result(handle.id, timeout=30) == "a"
        await advance(broker, wf_id, [outcome])
    runs = [x.decode() for x in await wf_redis.lrange(LEDGER, 0, -1)]
    assert runs == [f"{handle.id}.1", f"{handle.id}.2"]
    assert not await wf_redis.hlen(outbox)


class FastFirstStep:
    """Workflow operations that play a worker as fast as can be: the moment a step that is
    ready at once is stored, it is leased, finished and its outcome applied — before the start
    of its workflow stored anything else."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.inner = broker.workflows
        self.ran: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def store_steps(self, queue: str, steps: Sequence[StoredStep]) -> list[bool]:
        stored = await self.inner.store_steps(queue, steps)
        for step in steps:
            if step.ready:
                tasks, _ = await self.broker.dequeue(queue, 1, "w1", 30_000, 1000)
                assert [t.id for t in tasks] == [step.id]
                await self.broker.finish([Outcome("done", queue, step.id, result=b'"a"',
                                                  result_enc="j")], "w1")
                raw = await self.inner.take(queue, "w1", 1000, 10, 60_000)
                for record in raw:
                    for wf_id, outcome in record.outcomes or ():
                        await advance(self.broker, wf_id, [outcome])
                await self.inner.ack(queue, raw)
                self.ran.append(step.id)
        return stored


async def test_a_first_step_that_ends_before_the_rest_is_stored_releases_every_next_step(
        wf_redis: redis.asyncio.Redis, asyncq_client: Client,
        asyncq_worker: WorkerFactory) -> None:
    # The first step's queue comes first; its successors are in two other queues, stored by
    # separate calls. The first step ends before the start returns: both must still run.
    fast = FastFirstStep(asyncq_client.broker)
    broker = SimpleNamespace(**{n: getattr(asyncq_client.broker, n)
                                for n in ("dequeue", "finish", "request_cancel")},
                             workflows=fast)
    flow = chain(Task("wf:ledger", "a", queue="q-a"),
                 group(Task("wf:ledger", queue="q-b"), Task("wf:ledger", queue="q-c")))
    handle = await start_workflow(broker, flow, workflow_id=None,  # type: ignore[arg-type]
                                  on_error=None, retention=60)
    assert fast.ran == [f"{handle.id}.0"]
    async with asyncq_worker(mux, queues={"q-b": 1, "q-c": 1}, workflow_interval=0.3):
        assert await asyncq_client.result(handle.id, timeout=30) == ["a", "a"]
    runs = sorted(x.decode() for x in await wf_redis.lrange(LEDGER, 0, -1))
    assert runs == [f"{handle.id}.1", f"{handle.id}.2"]
