"""Redis Cluster specifics: every script in one slot, queues on different masters, braces in
ids, NOSCRIPT on fresh masters, pub/sub across nodes, SCAN and INFO over every master."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from redis.asyncio import Redis, RedisCluster
from redis.crc import key_slot
from topology.cluster import LocalCluster, redis_cli

from asyncq import (
    Client,
    ConcurrencyLimit,
    FakeClock,
    Inspector,
    Limiter,
    Scheduler,
    ServeMux,
    Task,
    TaskIDConflictError,
    TaskInfo,
    TaskState,
    Worker,
    chain,
)
from asyncq._broker import Outcome, RedisBroker, RunningTaskRecord, WorkerRecord
from asyncq._broker import _keys as K
from asyncq._broker._asynq._scripts import asynq_scripts
from asyncq._broker._connection import connect, make_broker
from asyncq._broker._scripts import load_scripts
from asyncq._workflow._advance import Advancer
from asyncq.testing import wait_drained, wait_until
from tests.broker.asynq.test_asynq_cluster import drive_every_asynq_script
from tests.helpers.inprocess import gate_dequeues

from .conftest import SlotChecker

pytestmark = pytest.mark.anyio

OWNER = "test-owner"
LEASE_MS = 30_000


@pytest.fixture
async def rc(cluster: LocalCluster, anyio_backend: object) -> AsyncIterator[RedisCluster]:
    client, close = connect(cluster.url)
    assert isinstance(client, RedisCluster)
    await client.initialize()
    try:
        yield client
    finally:
        await close()


def queues_on_each_master(cluster: LocalCluster) -> dict[int, str]:
    """One fresh queue name per master: {master port: queue}."""
    masters = cluster.master_ports()
    chosen: dict[int, str] = {}
    while len(chosen) < len(masters):
        name = f"c-{uuid.uuid4().hex[:8]}"
        port = cluster.node_for_slot(key_slot(name.encode()))
        chosen.setdefault(port, name)
    return chosen


async def test_queues_live_on_different_masters(cluster: LocalCluster,
                                                rc: RedisCluster) -> None:
    by_master = queues_on_each_master(cluster)
    assert len(by_master) == 3
    done: list[str] = []
    mux = ServeMux()

    @mux.handler("t")
    async def handle(task: Task) -> None:
        done.append(task.queue)

    async with Client(cluster.url) as client:
        await client.enqueue_many([Task("t", queue=q, retention=timedelta(minutes=5))
                                   for q in by_master.values() for _ in range(20)])
        async with Worker(cluster.url, mux, queues=dict.fromkeys(by_master.values(), 1),
                          concurrency=10, forward_interval=0.1) as worker:
            await wait_drained(rc, by_master.values(), worker=worker, timeout=20)
    assert sorted(done) == sorted([q for q in by_master.values() for _ in range(20)])
    for port, q in by_master.items():
        completed = K.queue_keys(q).completed
        # The server itself says which slot the key is in, and only that master holds it.
        slot = int(redis_cli("-p", str(port), "cluster", "keyslot", completed))
        assert slot == key_slot(q.encode())
        for other in cluster.master_ports():
            count = int(redis_cli("-p", str(other), "cluster", "countkeysinslot", str(slot)))
            assert (count > 0) == (other == port), (q, port, other, count)
        node = Redis(port=port)
        try:
            assert await node.zcard(completed) == 20
        finally:
            await node.aclose()


async def test_braces_in_ids_groups_and_unique_keys_stay_in_the_queue_slot(
    cluster: LocalCluster, rc: RedisCluster
) -> None:
    q = f"c-{uuid.uuid4().hex[:8]}"
    qk = K.queue_keys(q)
    slot = key_slot(q.encode())
    seen: list[str] = []
    aggregated: list[list[str]] = []
    mux = ServeMux()

    @mux.handler("t")
    async def handle(task: Task) -> None:
        assert task.id is not None
        seen.append(task.id)

    @mux.handler("batch")
    async def batch(task: Task) -> None:
        aggregated.append(task.json())

    def aggregate(group: str, tasks: list[Task]) -> Task:
        return Task("batch", [t.id for t in tasks])

    ids = ["}{", "a{b}c", "{other}", "x}"]
    async with Client(cluster.url) as client:
        for task_id in ids:
            await client.enqueue("t", queue=q, task_id=task_id)
        await client.enqueue("t", queue=q, task_id="u1", unique_key="k{x}}",
                             unique=timedelta(minutes=1))
        for i in range(2):
            await client.enqueue("g", queue=q, task_id=f"g{{{i}}}", group="grp{1}")
        for key in [qk.task(i) for i in [*ids, "u1"]] + [qk.group("grp{1}"),
                                                         qk.unique("t", None, "k{x}}")]:
            assert await rc.cluster_keyslot(key) == slot, key
            assert await rc.exists(key) == 1, key
        async with Worker(cluster.url, mux, queues={q: 1}, group_aggregator=aggregate,
                          group_grace_period=1, group_max_size=2,
                          forward_interval=0.1) as worker:
            await wait_until(lambda: len(aggregated) == 1, timeout=20, message="aggregated")
            await wait_drained(rc, [q], worker=worker)
    assert sorted(seen) == sorted([*ids, "u1"])
    assert sorted(aggregated[0]) == ["g{0}", "g{1}"]


async def test_every_script_runs_in_one_slot(cluster: LocalCluster,
                                             slot_checker: SlotChecker) -> None:
    """Drive every Lua script through the broker, client, inspector and scheduler on the
    cluster; the checker fails the test if any call names keys of two slots."""
    slot_checker.calls.clear()
    q = f"c-{uuid.uuid4().hex[:8]}"
    broker = make_broker(cluster.url)
    asynq_broker: Any = make_broker(cluster.url, wire="asynq")
    client = Client(broker)
    inspector = Inspector(cluster.url)
    clock = FakeClock()
    scheduler = Scheduler(cluster.url, clock=clock)
    try:
        await client.enqueue("t", queue=q, unique=timedelta(minutes=1))
        await client.enqueue_many([Task("t", queue=q) for _ in range(7)])
        later = await client.enqueue("t", queue=q, process_in=timedelta(hours=1))
        await client.enqueue("t", queue=q, group="g1")
        now = int(time.time() * 1000)

        leased, _ = await broker.dequeue(q, 8, OWNER, LEASE_MS, 1000, request_id="r1")
        ids = [t.id for t in leased]
        assert len(ids) == 8
        assert await broker.extend_leases(q, ids, OWNER, LEASE_MS) == [True] * 8
        assert await client.cancel(ids[0], queue=q) == "requested"
        waiting = await client.enqueue("t", queue=q)  # (cancelled while waiting: removed)
        assert await client.cancel(waiting.id, queue=q) == "removed"
        assert (await broker.extend_leases(q, ids[:1], OWNER, LEASE_MS)) == [2]
        assert await broker.maintenance.quarantine(q, [b"\xff"]) == ["invalid-id:ff"]
        await broker.write_result(q, ids[0], b"partial")
        assert await broker.set_progress(q, ids[0], OWNER, b'{"v": 0.5, "at": 1}')
        out = await broker.finish([
            Outcome("complete", q, ids[0], retention_ms=1, result=b"r"),
            Outcome("retry", q, ids[1], retry_at_ms=now - 1000, error="e"),
            Outcome("archive", q, ids[2], error="e"),
            Outcome("requeue", q, ids[3]),
        ], OWNER)
        assert out == [True] * 4
        assert await broker.finish([Outcome("done", q, ids[4])], OWNER) == [True]
        assert await broker.finish([Outcome("done", q, ids[6]), Outcome("done", q, ids[7])],
                                   OWNER) == [True, True]  # (done_batch)
        assert await broker.finish([Outcome("expire", q, ids[5], error="expired")],
                                   OWNER) == [True]
        assert (await broker.maintenance.forward(q, "retry", 100))[0] == 1
        await broker.maintenance.list_lease_expired(q, now + 10 * LEASE_MS, 10)
        await broker.maintenance.reclaim_orphans(q, 10)
        await broker.maintenance.delete_expired_completed(q, 10)
        await broker.maintenance.record_minute(q)
        await broker.maintenance.repair_tasks(q, [later.id], 10)
        await broker.workers.write(WorkerRecord(
            "srv-1", "h", 1, 1, {q: 1}, False, "active", 0,
            running=(RunningTaskRecord("t1", "t", q, 0),)), 10_000)
        await broker.workers.clear("srv-1")
        assert (await broker.maintenance.backlog(q, now + 1000)).pending > 0
        assert await broker.aggregation.check(q, "g1", "set1", 0, 0, 0, now + 60_000) == 1
        assert len(await broker.aggregation.read_set(q, "g1", "set1")) == 1
        await broker.aggregation.reclaim_stale_sets(q)
        await client.enqueue("t", queue=q, group="g1")
        assert await broker.aggregation.check(q, "g1", "set3", 0, 0, 0, now + 60_000) == 1
        assert await broker.aggregation.return_set(q, "g1", "set3") >= 1
        await client.enqueue("t", queue=q, group="g1")
        await broker.aggregation.check(q, "g1", "set2", 0, 0, 0, now + 60_000)
        await broker.aggregation.delete_set(q, "g1", "set2")
        async with Limiter(client, ConcurrencyLimit(1, name="c"), queue=q).acquire("k{1}"):
            assert len(await inspector.limits(q)) == 1  # limit_acquire, _usage, _release
        await inspector.set_queue_concurrency(q, 3)  # limit_set (the queue's cap)
        await inspector.set_limit(q, ConcurrencyLimit(2, name="c"))  # (a declared limit's)
        assert [u.kind for u in await inspector.limits(q)] == ["queue", "concurrency"]

        assert await inspector.pause(q) and await inspector.unpause(q)
        info = await inspector.queue_info(q)
        assert info.size > 0 and info.memory_usage > 0
        await inspector.groups(q)
        await inspector.list_tasks(q, TaskState.PENDING)
        await inspector.find_tasks(q, TaskState.PENDING, task_type="t")
        await inspector.set_archive_limits(q, max_size=1000)
        assert (await inspector.archive_limits(q)).max_size == 1000
        await inspector.minute_stats(q)
        await inspector.task_info(q, later.id)
        await inspector.update_task_payload(q, later.id, {"new": True})
        await inspector.run_task(q, later.id)
        await inspector.archive_task(q, later.id)
        await inspector.delete_task(q, later.id)
        await inspector.archive_all(q, TaskState.PENDING)
        await inspector.run_all(q, TaskState.ARCHIVED)
        await inspector.delete_all(q, TaskState.PENDING)

        scheduler.register("@every 1s", "s", queue=q)
        scheduler.register("@every 1s", "s", queue=q, process_in=timedelta(hours=1))
        scheduler.register("@every 1s", "s", queue=q, group="g2")
        clock.advance(2)
        assert len(await scheduler.tick()) == 3
        await scheduler.heartbeat.beat()
        await scheduler.heartbeat.clear()
        await inspector.delete_queue(q, force=True)
        await _drive_workflow_scripts(client, broker, f"{q}-wf")
        await drive_every_asynq_script(asynq_broker)  # the wire=asynq layout's scripts
    finally:
        await scheduler.broker.close()
        await inspector.close()
        await client.close()
        await broker.close()
        await asynq_broker.close()
    # (the asynq layout's inspection scripts: tests/broker/asynq/test_inspect_cluster.py)
    asynq = {n for n in asynq_scripts() if not n.startswith("asynq_inspect_")}
    missing = (set(load_scripts()) | asynq) - set(slot_checker.calls)
    assert not missing, f"scripts not exercised on the cluster: {sorted(missing)}"


async def _drive_workflow_scripts(client: Client, broker: RedisBroker, q: str) -> None:
    """Every workflow script: start (create/store/watch/started), a step ending and the
    advancer (take/apply/release/ack/finish/drop), a failure (park), a cancellation."""
    advancer = Advancer(broker, [q], OWNER)

    async def run_next(outcome: str = "done") -> None:
        leased, _ = await broker.dequeue(q, 1, OWNER, LEASE_MS, 1000)
        kind = "done" if outcome == "done" else "archive"
        await broker.finish([Outcome(kind, q, leased[0].id, error=outcome * (kind != "done"))],
                            OWNER)
        await advancer.drain(q)

    dep = await client.enqueue("t", queue=q)
    ok = await client.enqueue_workflow(chain(Task("t", queue=q), Task("t", queue=q)),
                                       on_error=Task("t", queue=q), after=[dep])
    await run_next()  # the dependency: releases the first step
    await run_next()
    await run_next()  # the last step: the workflow finishes, its error callback is dropped
    assert await client.result(ok.id, timeout=30) is None
    failing = await client.enqueue_workflow(chain(Task("t", queue=q), Task("t", queue=q)))
    await run_next("broke")  # fails it: the waiting step is parked
    cancelled = await client.enqueue_workflow(chain(Task("t", queue=q), Task("t", queue=q)))
    assert await client.cancel(cancelled.id)
    del failing


async def test_scripts_are_reloaded_after_a_script_flush_on_every_master(
    cluster: LocalCluster, rc: RedisCluster
) -> None:
    q = f"c-{uuid.uuid4().hex[:8]}"
    broker = make_broker(cluster.url)
    client = Client(broker)
    try:
        await broker.load_scripts()
        await rc.script_flush()  # every master
        await client.enqueue_many([Task("t", queue=q) for _ in range(10)])  # preload path
        await rc.script_flush()  # every master
        leased, _ = await broker.dequeue(q, 10, OWNER, LEASE_MS, 1000)  # _eval fallback
        await rc.script_flush()  # every master
        out = await broker.finish([Outcome("done", q, t.id) for t in leased], OWNER)
        assert out == [True] * 10  # _eval_many fallback
    finally:
        await broker.close()


async def test_overlapping_enqueues_to_queues_on_every_master_are_all_stored(
    cluster: LocalCluster, rc: RedisCluster
) -> None:
    # Calls that overlap leave together: one pipeline per master, each call in its slot, a
    # conflict reported to its own caller; after a SCRIPT FLUSH too (NOSCRIPT in a batch).
    by_master = queues_on_each_master(cluster)
    queues = list(by_master.values())
    async with Client(cluster.url) as client:
        await client.enqueue("t", queue=queues[0], task_id="taken")
        await rc.script_flush()
        results = await asyncio.gather(
            *[client.enqueue("t", {"i": i}, queue=queues[i % 3]) for i in range(60)],
            client.enqueue("t", queue=queues[0], task_id="taken"), return_exceptions=True)
    assert isinstance(results[-1], TaskIDConflictError)
    infos = results[:-1]
    assert all(isinstance(i, TaskInfo) for i in infos), infos
    for q in queues:
        stored = await rc.lrange(K.queue_keys(q).pending, 0, -1)
        ids = {i.id for i in infos if isinstance(i, TaskInfo) and i.queue == q}
        assert len(ids) == 20
        assert ids <= {s.decode() for s in stored}


def queue_recorder(done: list[str]) -> ServeMux:
    """A mux whose "t" handler notes the queue of each task it runs in ``done``."""
    mux = ServeMux()

    @mux.handler("t")
    async def handle(task: Task) -> None:
        done.append(task.queue)

    return mux


async def test_wakeups_published_on_any_master_reach_the_worker(cluster: LocalCluster) -> None:
    by_master = queues_on_each_master(cluster)
    done: list[str] = []
    mux = queue_recorder(done)
    # Polling every 60 s: only a wake-up (PUBLISH from the enqueue script, on whichever master
    # holds the queue) can get the tasks run within the deadline below.
    async with Worker(cluster.url, mux, queues=dict.fromkeys(by_master.values(), 1),
                      idle_poll_interval=60) as worker, Client(cluster.url) as client:
        await wait_until(lambda: not worker.processor.running, timeout=30, message="idle")
        for q in by_master.values():
            await client.enqueue("t", queue=q)
        await wait_until(lambda: len(done) == 3, timeout=30, message="woken on every master")


async def test_tasks_are_handed_off_in_one_hop_on_every_master(cluster: LocalCluster,
                                                              rc: RedisCluster) -> None:
    by_master = queues_on_each_master(cluster)
    done: list[str] = []
    mux = queue_recorder(done)
    async with Worker(cluster.url, mux, queues=dict.fromkeys(by_master.values(), 1),
                      idle_poll_interval=60) as worker, Client(cluster.url) as client:
        async def registered() -> bool:
            counts = [await rc.zcard(K.queue_keys(q).idle) for q in by_master.values()]
            return all(n == 1 for n in counts)

        await wait_until(registered, timeout=30, message="idle on every master's queue")
        # No dequeue reaches Redis any more: only hand-offs (SPUBLISH from the enqueue script
        # on the queue's master, heard on the worker's channel there) can run the tasks.
        gate = gate_dequeues(worker.broker)
        for q in by_master.values():
            await client.enqueue("t", queue=q)
        await wait_until(lambda: len(done) == 3, timeout=30, message="handed off on every master")
        gate.set()
    assert sorted(done) == sorted(by_master.values())


async def test_scan_and_info_cover_every_master(cluster: LocalCluster) -> None:
    by_master = queues_on_each_master(cluster)
    broker: RedisBroker = make_broker(cluster.url)
    try:
        async with Client(broker) as client:
            for q in by_master.values():
                await client.enqueue("t", queue=q, task_id="scan-me")
        found: set[tuple[str, str]] = set()
        cursor, steps = 0, 0
        while True:
            cursor, keys = await broker.maintenance.scan_task_keys(cursor, 100)
            found.update(keys)
            steps += 1
            if cursor == 0:
                break
        assert {(q, "scan-me") for q in by_master.values()} <= found
        assert steps >= 3  # at least one step per master
        async with Inspector(cluster.url) as inspector:
            info = await inspector.redis_info()
            assert info["cluster_masters"] == 3
            assert info["redis_mode"] == "cluster"
    finally:
        await broker.close()


async def test_a_cluster_client_of_yours_works(rc: RedisCluster) -> None:
    q = f"c-{uuid.uuid4().hex[:8]}"
    done: list[str] = []
    mux = ServeMux()

    @mux.handler("t")
    async def handle(task: Task) -> None:
        done.append(task.queue)

    async with Client(rc) as client, Worker(rc, mux, queues={q: 1}), Inspector(rc) as inspector:
        await client.enqueue("t", queue=q)
        await wait_until(lambda: done == [q], timeout=10, message="ran")

        async def counted() -> bool:  # the handler returned; the ack follows it
            return (await inspector.queue_info(q)).processed == 1

        await wait_until(counted, timeout=10, message="counted as processed")
    assert await rc.ping()  # still open: it is the caller's


async def test_a_pipeline_whose_slot_moved_follows_the_redirection(cluster: LocalCluster,
                                                                   rc: RedisCluster) -> None:
    """The client read the slots, then the queue's slot moved to another master: the
    hand-packed pipeline meets MOVED, re-sends those calls through a redirect-following
    pipeline, and every task is stored once, on the new master."""
    q = f"c-{uuid.uuid4().hex[:8]}"
    slot = key_slot(q.encode())
    source = cluster.node_for_slot(slot)
    target = next(p for p in cluster.master_ports() if p != source)
    target_id = redis_cli("-p", str(target), "CLUSTER", "MYID").strip()
    async with Client(rc) as client:
        await client.enqueue("warm-up", queue=f"other-{q}")  # slots are read, stale from now
        for port in cluster.master_ports():
            redis_cli("-p", str(port), "CLUSTER", "SETSLOT", str(slot), "NODE", target_id)
        results = await client.enqueue_many(Task("t", {"n": n}, queue=q) for n in range(5))
    assert all(not isinstance(r, Exception) for r in results), results
    on_target = Redis(port=target)
    try:
        assert await on_target.llen(K.queue_keys(q).pending) == 5
    finally:
        await on_target.aclose()
