"""Wildcard queues (``queues={"tenant:*": 1}``) in a worker on a real Redis: a queue created
after the worker started is served (announced: at once; missed: within queue_scan_interval),
strict priority, pause, one-hop pickup and limits hold on matched queues, a queue removed is
no longer served, and the server state and ``asyncq worker ls`` show the pattern."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict

import orjson
import pytest
from redis.asyncio import Redis

import asyncq
from asyncq._broker import _keys as K
from asyncq.testing import WorkerFactory, wait_until
from tests.helpers.cli import cli_runner, js, out
from tests.helpers.inprocess import gate_dequeues

pytestmark = pytest.mark.anyio


def recording_mux(started: list[tuple[str, str]]) -> asyncq.ServeMux:
    """Type "t" records (queue, task id) as it starts."""
    mux = asyncq.ServeMux()

    @mux.handler("t")
    async def t(task: asyncq.Task) -> None:
        assert task.id is not None
        started.append((task.queue, task.id))

    return mux


async def idle_on(redis: Redis, queue: str) -> None:
    """Wait until one worker is registered idle on ``queue`` (one-hop pickup armed)."""
    async def registered() -> bool:
        return int(await redis.zcard(K.queue_keys(queue).idle)) == 1

    await wait_until(registered, timeout=20, message=f"a worker idle on {queue}")


async def test_a_queue_created_after_the_worker_started_is_served_at_once(
    asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    """The producer that registers a new queue announces it: the worker serves it without
    waiting for its registry scan (60 s here) or its idle poll (30 s)."""
    started: list[tuple[str, str]] = []
    pattern = f"{asyncq_queue}:*"
    async with asyncq_worker(recording_mux(started), queues={pattern: 1},
                             queue_scan_interval=60, idle_poll_interval=30) as w:
        assert w.worker.served.names == []
        latencies = []
        for tenant in ("a", "b", "c"):
            queue = f"{asyncq_queue}:{tenant}"
            sent = time.monotonic()
            info = await asyncq_client.enqueue("t", queue=queue)
            await wait_until(lambda q=queue, i=info: (q, i.id) in started, timeout=20,
                             message=f"the first task of the new queue {queue} started")
            latencies.append(time.monotonic() - sent)
        assert w.worker.discovery is not None and w.worker.discovery.scans == 1  # at start only
        assert w.worker.served.matched == {pattern: [f"{asyncq_queue}:{t}" for t in "abc"]}
        await w.wait_drained(*w.worker.served.names)
    print(f"first-task pickup of a brand-new queue: {[round(s * 1000) for s in latencies]} ms")
    assert max(latencies) < 2.0


async def test_a_queue_whose_announcement_was_missed_is_found_by_the_registry_scan(
    asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis,
) -> None:
    """A queue registered without an announcement (a Go producer, an older asyncq, a
    pub/sub outage) is served within queue_scan_interval."""
    started: list[tuple[str, str]] = []
    queue = f"{asyncq_queue}:quiet"
    async with asyncq_worker(recording_mux(started), queues={f"{asyncq_queue}:*": 1},
                             queue_scan_interval=0.5, idle_poll_interval=300) as w:
        assert w.worker.discovery is not None
        scans = w.worker.discovery.scans
        await redis_client.sadd(K.QUEUES, queue)  # registered, announced by nobody
        info = await asyncq_client.enqueue("t", queue=queue)  # (registered: no announcement)
        sent = time.monotonic()
        await wait_until(lambda: (queue, info.id) in started, timeout=30,
                         message="the task of the unannounced queue started")
        waited = time.monotonic() - sent
        assert w.worker.discovery.scans > scans
        await w.wait_drained(queue)
    print(f"unannounced queue served after {waited * 1000:.0f} ms (scan every 500 ms)")
    # Scans, not the idle poll 5 minutes away: a scan interval, a fetch round, and a loaded
    # machine's slack.
    assert waited < 0.5 + 20


async def test_after_a_pubsub_reconnect_the_registry_is_read_at_once(
    asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis,
) -> None:
    """An announcement may have been missed while the worker's pub/sub was down: once it is
    back, the registry is read without waiting for queue_scan_interval (60 s here)."""
    started: list[tuple[str, str]] = []
    queue = f"{asyncq_queue}:missed"
    async with asyncq_worker(recording_mux(started), queues={f"{asyncq_queue}:*": 1},
                             queue_scan_interval=60, idle_poll_interval=30) as w:
        await redis_client.sadd(K.QUEUES, queue)  # as if its announcement had been missed
        info = await asyncq_client.enqueue("t", queue=queue)
        assert await redis_client.execute_command("CLIENT", "KILL", "TYPE", "pubsub") >= 1
        await wait_until(lambda: (queue, info.id) in started, timeout=20,
                         message="the queue found after the reconnect")
        assert w.worker.discovery is not None and w.worker.discovery.scans == 2


async def test_strict_priority_drains_a_configured_queue_before_the_patterns_queues(
    asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    started: list[tuple[str, str]] = []
    critical, tenants = f"{asyncq_queue}-critical", [f"{asyncq_queue}:{t}" for t in "ab"]
    await asyncq_client.enqueue_many(
        [asyncq.Task("t", queue=q) for q in tenants for _ in range(4)]
        + [asyncq.Task("t", queue=critical) for _ in range(6)])
    async with asyncq_worker(recording_mux(started),
                             queues={f"{asyncq_queue}:*": 1, critical: 2},
                             strict_priority=True, concurrency=1, prefetch=0) as w:
        await w.wait_drained(critical, *tenants)
    order = [q for q, _ in started]
    assert order[:6] == [critical] * 6
    # Then the pattern's queues take turns, one task at a time (a single slot).
    assert order[6:] == [tenants[0], tenants[1]] * 4


async def test_a_paused_matched_queue_is_skipped_and_served_again_once_unpaused(
    asyncq_client: asyncq.Client, asyncq_inspector: asyncq.Inspector,
    asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    started: list[tuple[str, str]] = []
    a, b = f"{asyncq_queue}:a", f"{asyncq_queue}:b"
    await asyncq_client.enqueue_many([asyncq.Task("t", queue=q) for q in (a, b)
                                      for _ in range(3)])
    await asyncq_inspector.pause(b)
    async with asyncq_worker(recording_mux(started), queues={f"{asyncq_queue}:*": 1},
                             idle_poll_interval=0.2) as w:
        await w.wait_drained(a)
        await idle_on(redis_client, a)  # rounds went by since a drained, b among them
        info = await asyncq_client.enqueue("t", queue=a)
        await wait_until(lambda: (a, info.id) in started, message="a's new task started")
        assert [q for q, _ in started] == [a] * 4
        assert (await asyncq_inspector.queue_info(b)).pending == 3
        assert b in w.worker.served.names  # matched, and paused
        await asyncq_inspector.unpause(b)
        await w.wait_drained(b)
    assert [q for q, _ in started].count(b) == 3


async def test_one_hop_pickup_on_matched_queues_found_at_start_and_later(
    asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis,
) -> None:
    """An idle worker registers on every matched queue and hears their hand-off channels:
    those matched at start, and one matched later (its channels subscribed again)."""
    started: list[tuple[str, str]] = []
    early, late = f"{asyncq_queue}:early", f"{asyncq_queue}:late"
    await asyncq_client.enqueue("t", queue=early)
    async with asyncq_worker(recording_mux(started), queues={f"{asyncq_queue}:*": 1},
                             idle_poll_interval=30, queue_scan_interval=60) as w:
        await w.wait_drained(early)
        first = await asyncq_client.enqueue("t", queue=late)  # a new queue: announced
        await wait_until(lambda: (late, first.id) in started, message="the new queue served")
        for queue in (early, late):
            await idle_on(redis_client, queue)
        gate = gate_dequeues(w.worker.broker)  # from here only a hand-off brings a task
        sent = time.monotonic()
        infos = {q: await asyncq_client.enqueue("t", queue=q) for q in (early, late)}
        await wait_until(lambda: all((q, i.id) in started for q, i in infos.items()),
                         timeout=5, message="both tasks handed off")
        handed = time.monotonic() - sent
        gate.set()
        await w.wait_drained(early, late)
    print(f"two hand-offs on matched queues in {handed * 1000:.1f} ms")


async def test_limits_hold_on_each_matched_queue(
    asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    running: dict[str, int] = defaultdict(int)
    most: dict[str, int] = defaultdict(int)
    done: list[str] = []
    mux = asyncq.ServeMux()

    @mux.handler("slow", limits=[asyncq.ConcurrencyLimit(1)])
    async def slow(task: asyncq.Task) -> None:
        running[task.queue] += 1
        most[task.queue] = max(most[task.queue], running[task.queue])
        try:
            await asyncio.sleep(0.02)
        finally:
            running[task.queue] -= 1
        done.append(task.queue)

    tenants = [f"{asyncq_queue}:{t}" for t in "ab"]
    await asyncq_client.enqueue_many([asyncq.Task("slow", queue=q) for q in tenants
                                      for _ in range(6)])
    async with asyncq_worker(mux, queues={f"{asyncq_queue}:*": 1}, concurrency=8) as w:
        await wait_until(lambda: len(done) == 12, timeout=15, message="every task ran")
        await w.wait_drained(*tenants)
    assert dict(most) == dict.fromkeys(tenants, 1)  # a limit's slots are per queue


async def test_a_matched_queue_removed_from_the_registry_is_no_longer_served(
    asyncq_client: asyncq.Client, asyncq_inspector: asyncq.Inspector,
    asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    started: list[tuple[str, str]] = []
    a, b = f"{asyncq_queue}:a", f"{asyncq_queue}:b"
    for queue in (a, b):
        await asyncq_client.enqueue("t", queue=queue)
    async with asyncq_worker(recording_mux(started), queues={f"{asyncq_queue}:*": 1},
                             queue_scan_interval=0.2, heartbeat_interval=0.2,
                             lease_duration=2) as w:
        await w.wait_drained(a, b)
        registered: list[list[str]] = []
        real = w.worker.broker.register_queues

        async def register(queues: list[str]) -> None:
            registered.append(list(queues))
            await real(queues)

        w.worker.broker.register_queues = register  # type: ignore[method-assign]
        await asyncq_inspector.delete_queue(a)
        await wait_until(lambda: w.worker.served.names == [b], timeout=20,
                         message="the removed queue no longer served")
        # Heartbeats register the configured names (none here), never a matched queue.
        await wait_until(lambda: len(registered) >= 3, timeout=20, message="three heartbeats")
        assert registered[-3:] == [[], [], []]
        assert a not in await asyncq_inspector.queues()


async def test_server_state_and_server_ls_show_the_pattern_and_its_queues(
    asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    asyncq_redis_url: str, redis_client: Redis,
) -> None:
    started: list[tuple[str, str]] = []
    pattern, critical = f"{asyncq_queue}:*", f"{asyncq_queue}-critical"
    tenants = [f"{asyncq_queue}:{t}" for t in "abcd"]
    for queue in tenants:
        await asyncq_client.enqueue("t", queue=queue)
    async with asyncq_worker(recording_mux(started), queues={pattern: 1, critical: 6},
                             heartbeat_interval=0.2, lease_duration=2) as w:
        server_id = w.worker.config.server_id
        await w.wait_drained(*tenants)
        state = orjson.loads(await redis_client.get(K.server_key(server_id)))
        assert state["queues"] == {pattern: 1, critical: 6}
        assert state["matched"] == {pattern: tenants}
        cli = cli_runner(asyncq_redis_url)
        table = out(await cli("worker", "ls"))
        docs = js(await cli("worker", "ls", "--json"))
    line = next(row for row in table.splitlines() if server_id in row)
    assert (f"{critical}=6, {pattern}=1 [4: {tenants[0]}, {tenants[1]}, {tenants[2]}, …]"
            in line)
    doc = next(d for d in docs if d["id"] == server_id)
    assert doc["queues"] == {pattern: 1, critical: 6}
    assert doc["matched"] == {pattern: tenants}
    refused = await cli("task", "enqueue", "--type", "t", "--queue", pattern, ok=False)
    assert "must not contain '*'" in refused.stderr.decode()


async def test_a_workflow_on_a_queue_created_later_advances_without_waiting_for_the_net(
    asyncq_client: asyncq.Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    """The workflow advancer follows the matched queues too (it listens to their outboxes
    once they are found): with its safety net at 60 s, the chain still runs through."""
    started: list[tuple[str, str]] = []
    queue = f"{asyncq_queue}:wf"
    async with asyncq_worker(recording_mux(started), queues={f"{asyncq_queue}:*": 1},
                             workflow_interval=60, queue_scan_interval=60) as w:
        info = await asyncq_client.enqueue_workflow(asyncq.chain(
            asyncq.Task("t", queue=queue), asyncq.Task("t", queue=queue),
            asyncq.Task("t", queue=queue)))
        assert await asyncq_client.result(info.id, timeout=30) is None
        assert w.worker.advancer.outage.failures == 0
    assert [q for q, _ in started] == [queue] * 3
