"""Every wire=asynq script on a 3-master Redis Cluster: each names keys of one slot only (the
queue's hash tag), so the cluster runs it; a key of another slot would be refused (CROSSSLOT).
Also checked directly: every key and lock a script call names hashes to the queue's slot."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from redis.crc import key_slot

from asyncq import Client, Task
from asyncq._broker import (
    CANCEL_REMOVED,
    CANCEL_RUNNING,
    Outcome,
    RunningTaskRecord,
    WorkerRecord,
)
from asyncq._broker._asynq._broker import AsynqBroker
from asyncq._broker._asynq._scripts import asynq_scripts
from asyncq._broker._runner import ScriptRunner
from tests.broker.conformance.test_conf_limits import drive_limits, drive_schedules

OWNER = "srv-c"


async def test_every_asynq_script_runs_in_one_slot(cbroker: AsynqBroker,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    called: set[str] = set()
    slots: list[set[int]] = []
    real_run, real_pipeline = ScriptRunner.run, ScriptRunner._pipeline

    def record(name: str, keys: Any) -> None:
        called.add(name)
        slots.append({key_slot(k.encode()) for k in keys})

    async def run(self: ScriptRunner, name: str, keys: Any, args: Any) -> Any:
        record(name, keys)
        return await real_run(self, name, keys, args)

    async def pipeline(self: ScriptRunner, calls: Any, preload: Any = ()) -> Any:
        for script, keys, _ in calls:
            record(script.name, keys)
        return await real_pipeline(self, calls, preload)

    monkeypatch.setattr(ScriptRunner, "run", run)
    monkeypatch.setattr(ScriptRunner, "_pipeline", pipeline)
    await drive_every_asynq_script(cbroker)
    # (the inspection scripts are driven by test_inspect_cluster.py)
    # (it also runs asyncq's own scheduler_heartbeat/_record, which are layout-free)
    assert {n for n in asynq_scripts() if not n.startswith("asynq_inspect_")} <= called, (
        "a script was not driven")
    assert all(len(s) == 1 for s in slots)


async def drive_every_asynq_script(cbroker: AsynqBroker) -> None:
    """Run every ``asynq_*`` script at least once through the broker, on a queue of its own
    (also driven under the deployment suite's slot checker: tests/deploy/test_cluster.py)."""
    q = f"c-{uuid.uuid4().hex[:8]}"
    client = Client(cbroker)
    await client.enqueue("t", b"u", queue=q, unique=timedelta(minutes=1))
    await client.enqueue_many([Task("t", queue=q) for _ in range(7)])
    await client.enqueue("t", queue=q, process_in=timedelta(hours=1))
    await client.enqueue("t", queue=q, group="g1", unique=timedelta(minutes=1))
    leased, _ = await cbroker.dequeue(q, 7, OWNER, 30_000, 1000)
    ids = [t.id for t in leased]
    assert len(ids) == 7
    assert await cbroker.extend_leases(q, ids, OWNER, 30_000) == [1] * 7
    assert await cbroker.write_result(q, ids[0], b"r") == 1
    now = cbroker.clock.now_ms()
    assert await cbroker.finish([
        Outcome("complete", q, ids[0], retention_ms=60_000, result=b"r"),
        Outcome("retry", q, ids[1], retry_at_ms=now - 5000, error="e"),
        Outcome("archive", q, ids[2], error="e"),
        Outcome("requeue", q, ids[3]),
        Outcome("done", q, ids[4]),
    ], OWNER) == [True] * 5
    assert await cbroker.finish([Outcome("done", q, ids[5]), Outcome("done", q, ids[6])],
                                OWNER) == [True, True]  # (asynq_done_batch)
    assert (await cbroker.maintenance.forward(q, "retry", 100))[0] == 1
    assert await cbroker.pause(q) and await cbroker.unpause(q)
    # phase 2, the worker's runtime: cancellation, recovery, janitor, groups, server state
    [again], _ = await cbroker.dequeue(q, 1, OWNER, 30_000, 1000)
    assert await cbroker.request_cancel(q, again.id) == CANCEL_RUNNING
    waiting = await client.enqueue("t", queue=q)  # (cancelled while waiting to run: removed)
    assert await cbroker.request_cancel(q, waiting.id) == CANCEL_REMOVED
    assert await cbroker.extend_leases(q, [again.id], OWNER, 30_000) == [2]
    expired = await cbroker.maintenance.list_lease_expired(q, now + 3_600_000, 10)
    assert [t.id for t in expired] == [again.id]
    later = cbroker.clock.now_ms() + 3_600_000
    assert await cbroker.maintenance.recover(
        Outcome("retry", q, again.id, retry_at_ms=later, error="e"), now) is False
    assert await cbroker.maintenance.reclaim_orphans(q, 10) == 0
    assert await cbroker.maintenance.delete_expired_completed(q, 10) == 0
    assert await cbroker.aggregation.list_groups(q) == ["g1"]
    assert await cbroker.aggregation.check(q, "g1", "s1", 0, 0, 0, now + 60_000) == 1
    assert len(await cbroker.aggregation.read_set(q, "g1", "s1")) == 1
    assert await cbroker.aggregation.return_set(q, "g1", "s1") == 1
    assert await cbroker.aggregation.check(q, "g1", "s2", 0, 0, 0, now - 1000) == 1
    assert await cbroker.aggregation.reclaim_stale_sets(q) == 1
    assert await cbroker.aggregation.check(q, "g1", "s3", 0, 0, 0, now + 60_000) == 1
    assert await cbroker.aggregation.delete_set(q, "g1", "s3") == 1
    await cbroker.workers.write(WorkerRecord("srv-c", "h", 1, 0, {"q": 1}, False, "", 1, running=(
        RunningTaskRecord(again.id, "", q, 0),)), 10_000)
    assert len(await cbroker.workers.read(now)) >= 1
    await cbroker.workers.clear("srv-c")
    await drive_schedules_and_limits(cbroker, q)


async def drive_schedules_and_limits(cbroker: AsynqBroker, q: str) -> None:
    """A Scheduler firing each store shape, a limit claimed and given back, a cap set on the
    queue (conformance/test_conf_limits.py, on every layout)."""
    await drive_schedules(cbroker, q)
    await drive_limits(cbroker, Client(cbroker), q)
