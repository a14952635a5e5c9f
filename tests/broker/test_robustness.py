"""Connection robustness, piece by piece (issue 7 item 3 and the fixes the chaos suite exposed):
connection settings, transient errors, idempotent retries of enqueue and dequeue, local lease
expiry while Redis hangs, outcomes kept past a lease, pub/sub liveness, one log line per
outage edge, and the repair of orphaned task records."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections import Counter
from typing import Any

import anyio
import pytest
import structlog
from redis.asyncio import Redis

from asyncq import (
    BrokerError,
    Client,
    ConnectionOptions,
    FakeClock,
    LeaseExpiredError,
    ServeMux,
    Task,
    TaskIDConflictError,
    Worker,
)
from asyncq._broker import Outcome, RawTask, RedisBroker
from asyncq._broker import _keys as K
from asyncq._broker._connection import make_broker
from asyncq._model._message import TaskMessage
from asyncq._testing.redis_server import RedisServer
from asyncq.testing import queue_counts, wait_drained, wait_until
from tests.helpers.dataplane import dead_redis_url, task_hash
from tests.helpers.faults import FaultyBroker, lost_reply

pytestmark = pytest.mark.anyio

OWNER = "srv-a"


# ----------------------------------------------------------------- connection settings


async def test_connection_options_reach_the_clients_asyncq_creates(asyncq_redis_url: str) -> None:
    opts = ConnectionOptions(socket_timeout=1.5, socket_connect_timeout=0.5,
                             health_check_interval=3)
    worker = Worker(asyncq_redis_url, ServeMux(), connection=opts)
    client = Client(asyncq_redis_url, connection=opts)
    try:
        for broker in (worker.broker, client.broker):
            assert isinstance(broker, RedisBroker)
            kwargs = broker.redis.connection_pool.connection_kwargs
            assert (kwargs["socket_timeout"], kwargs["socket_connect_timeout"],
                    kwargs["health_check_interval"]) == (1.5, 0.5, 3)
            # asyncq retries at its own level; redis-py must never re-send a script by itself.
            conn = broker.redis.connection_pool.make_connection()
            assert conn.retry.get_retries() == 0
            assert (broker.ping_interval, broker.reply_timeout) == (3, 1.5)
    finally:
        await worker.broker.close()
        await client.close()


@pytest.mark.parametrize(("field", "value", "error"), [
    ("socket_timeout", 0, ValueError), ("socket_timeout", float("inf"), ValueError),
    ("socket_connect_timeout", -1, ValueError), ("health_check_interval", -1, ValueError),
    ("socket_timeout", True, ValueError), ("socket_keepalive", "yes", TypeError),
])
def test_connection_options_are_validated(field: str, value: object,
                                          error: type[Exception]) -> None:
    with pytest.raises(error, match=field):
        ConnectionOptions(**{field: value})


async def test_connection_options_need_a_url(redis_client: Redis) -> None:
    with pytest.raises(ValueError, match="connection options apply to a Redis URL"):
        Client(redis_client, connection=ConnectionOptions())
    with pytest.raises(ValueError, match="connection options apply to a Redis URL"):
        Worker(redis_client, ServeMux(), connection=ConnectionOptions())
    with pytest.raises(ValueError, match="retry_attempts"):
        Client(redis_client, retry_attempts=-1)


async def test_broker_errors_say_whether_trying_again_can_help(
    redis_client: Redis, asyncq_queue: str,
) -> None:
    down = make_broker(dead_redis_url())
    with pytest.raises(BrokerError) as info:
        await down.ping()
    assert info.value.transient
    await down.close()
    broker = make_broker(redis_client)
    await redis_client.set(K.queue_keys(asyncq_queue).pending, "not a list")
    with pytest.raises(BrokerError) as info:
        await broker.dequeue(asyncq_queue, 1, OWNER, 1000, 1000)
    assert "WRONGTYPE" in str(info.value) and not info.value.transient


# ----------------------------------------------------------------- enqueue retries


@pytest.mark.parametrize("fixed_id", [False, True], ids=["generated id", "task_id"])
async def test_a_retried_enqueue_recognises_its_own_earlier_attempt(
    fixed_id: bool, redis_client: Redis, asyncq_queue: str,
) -> None:
    broker = FaultyBroker(redis_client)
    losing = broker.fault("store", "store_many", when="after", error=lost_reply, times=1)
    opts: dict[str, Any] = {"task_id": "mine"} if fixed_id else {}
    # Without retries the ambiguous failure reaches the caller...
    with pytest.raises(BrokerError):
        await Client(broker).enqueue("t", {"n": 0}, queue=asyncq_queue, **opts)
    # ... with them, a lost reply is retried, and the task found stored is recognised as ours.
    await redis_client.delete(*[k async for k in redis_client.scan_iter(
        match=K.queue_keys(asyncq_queue).base + "*")])
    losing.times = 2
    broker.calls.clear()
    client = Client(broker, retry_attempts=3)
    info = await client.enqueue("t", {"n": 1}, queue=asyncq_queue, unique=60, **opts)
    assert broker.calls["store"] == 3
    assert await redis_client.llen(K.queue_keys(asyncq_queue).pending) == 1
    assert (await task_hash(redis_client, asyncq_queue, info.id))["state"] == b"pending"
    # A real conflict (another task holds the id) is still one, retry or not.
    if fixed_id:
        losing.times = 1
        with pytest.raises(TaskIDConflictError):
            await client.enqueue("t", {"n": 2}, queue=asyncq_queue, task_id="mine")


async def test_a_retried_enqueue_many_reports_its_own_tasks_as_stored(
    redis_client: Redis, asyncq_queue: str,
) -> None:
    broker = FaultyBroker(redis_client)
    await Client(broker).enqueue("t", "other", queue=asyncq_queue, task_id="taken")
    broker.fault("store", "store_many", when="after", error=lost_reply, times=1)
    client = Client(broker, retry_attempts=2)
    results = await client.enqueue_many(
        [Task("t", i, task_id=f"b-{i}", queue=asyncq_queue) for i in range(5)]
        + [Task("t", "mine", task_id="taken", queue=asyncq_queue)])
    assert [type(r).__name__ for r in results] == ["TaskInfo"] * 5 + ["TaskIDConflictError"]
    assert await redis_client.llen(K.queue_keys(asyncq_queue).pending) == 6


async def test_enqueue_retries_with_backoff_until_redis_is_back(
    own_server: RedisServer, asyncq_queue: str,
) -> None:
    async with Client(own_server.url, retry_attempts=8) as client:
        await client.enqueue("t", queue=asyncq_queue)
        own_server.stop()
        async with anyio.create_task_group() as tg:
            done: list[str] = []

            async def produce() -> None:
                done.append((await client.enqueue("t", queue=asyncq_queue)).id)

            tg.start_soon(produce)
            await anyio.sleep(0.5)  # the outage
            assert not done
            own_server.start()
        assert len(done) == 1
        assert await client.broker.read_tasks(asyncq_queue, done) != [None]


# ----------------------------------------------------------------- dequeue request replay


async def test_a_resent_dequeue_request_returns_what_it_leased(
    redis_client: Redis, asyncq_queue: str,
) -> None:
    broker = make_broker(redis_client)
    client = Client(broker)
    ids = [(await client.enqueue("t", i, queue=asyncq_queue)).id for i in range(5)]
    qk = K.queue_keys(asyncq_queue)
    first, _ = await broker.dequeue(asyncq_queue, 2, OWNER, 30_000, 1000, "req-1")
    assert [r.id for r in first] == ids[:2]
    again, dropped = await broker.dequeue(asyncq_queue, 2, OWNER, 30_000, 1000, "req-1")
    assert again == first and dropped == 0
    assert await redis_client.llen(qk.pending) == 3  # nothing more was leased
    assert 0 < await redis_client.pttl(qk.base + "dequeued:" + OWNER) <= 30_000
    nxt, _ = await broker.dequeue(asyncq_queue, 2, OWNER, 30_000, 1000, "req-2")
    assert [r.id for r in nxt] == ids[2:4]
    # A replay only returns tasks still leased to that owner.
    assert (await broker.dequeue(asyncq_queue, 2, "srv-b", 30_000, 1000, "req-2"))[0] != nxt
    await redis_client.hset(qk.task(ids[2]), "owner", "someone-else")
    assert [r.id for r in (await broker.dequeue(asyncq_queue, 2, OWNER, 30_000, 1000,
                                                "req-2"))[0]] == [ids[3]]


async def test_tasks_leased_by_a_dequeue_whose_reply_was_lost_run_at_once(
    redis_client: Redis, asyncq_client: Client, asyncq_queue: str,
) -> None:
    broker = FaultyBroker(redis_client)
    # Its first dequeue that leases something loses the reply.
    lost = broker.fault("dequeue", when="after", error=lost_reply, times=1,
                        only_if=lambda reply: bool(reply[0]))
    ran: list[Task] = []

    async def handler(task: Task) -> None:
        ran.append(task)

    worker = Worker(broker, handler, queues={asyncq_queue: 1}, lease_duration=30,
                    heartbeat_interval=5)
    async with worker:
        began = time.monotonic()
        ids = {(await asyncq_client.enqueue("t", i, queue=asyncq_queue)).id for i in range(3)}
        await wait_drained(redis_client, [asyncq_queue], worker=worker, timeout=20)
    assert time.monotonic() - began < 20  # not after the 30 s lease
    assert lost.fired == 1 and {r.id for r in lost.replies[0][0]} <= ids
    assert {t.id for t in ran} == ids and len(ran) == 3
    assert {t.retried for t in ran} == {0}  # not counted as a failure


# ----------------------------------------------------------------- leases while Redis hangs


async def test_a_handler_is_cancelled_when_its_lease_runs_out_even_if_redis_hangs(
    redis_client: Redis, asyncq_client: Client, asyncq_queue: str,
) -> None:
    broker = FaultyBroker(redis_client)
    # A Redis that accepted the connection but never answers renewals and outcome writes.
    hang = broker.fault("extend_leases", "workers.write", "finish", when="hang",
                        active=False)
    started = asyncio.Event()
    hooked: list[BaseException] = []

    async def handler(task: Task) -> None:
        started.set()
        await asyncio.Event().wait()

    worker = Worker(broker, handler, queues={asyncq_queue: 1}, lease_duration=1,
                    heartbeat_interval=0.25, error_handler=lambda t, e: hooked.append(e))
    async with worker:
        await asyncq_client.enqueue("t", queue=asyncq_queue)
        await started.wait()
        hang.active = True
        # (the hung renewals never return: only the lease running out can end the handler)
        await wait_until(lambda: hooked, timeout=30, message="handler cancelled")
        hang.active = False
    assert [type(e) for e in hooked] == [LeaseExpiredError]


async def test_outcomes_outlive_the_lease_while_redis_is_down_and_each_outage_logs_twice(
    redis_client: Redis, asyncq_client: Client, asyncq_queue: str,
) -> None:
    broker = FaultyBroker(redis_client)
    outage = broker.fault(error=lost_reply, active=False)
    release = asyncio.Event()
    ran: list[str] = []

    async def handler(task: Task) -> None:
        assert task.id is not None
        ran.append(task.id)
        await release.wait()

    with structlog.testing.capture_logs() as logs:
        worker = Worker(broker, handler, queues={asyncq_queue: 1}, lease_duration=0.6,
                        heartbeat_interval=0.1, recover_interval=0.1, recover_grace=0.1)
        async with worker:
            info = await asyncq_client.enqueue("t", queue=asyncq_queue, retention=60)
            await wait_until(lambda: ran, timeout=30)
            outage.active = True
            release.set()  # it finishes while Redis is down...
            await wait_until(lambda: worker.acker.pending, timeout=30)
            await anyio.sleep(1.2)  # ... which lasts two leases (the fault, not a wait)
            assert worker.acker.pending and not worker.processor.running
            outage.active = False
            await wait_drained(redis_client, [asyncq_queue], worker=worker)
            # (the heartbeat's next beat ends its outage: stopping before it would skip that)
            await wait_until(lambda: not worker.heartbeat.outage.ongoing, timeout=30)
    # The outcome was written late, not given up, and the task did not run again.
    assert ran == [info.id]
    assert worker.acker.given_up == 0
    assert (await task_hash(redis_client, asyncq_queue, info.id))["state"] == b"completed"
    edges = Counter((e["event"], e["component"], e.get("operation")) for e in logs
                    if e["event"].startswith("redis calls"))
    for component, operation in (("acker", "write outcomes"), ("heartbeat", "renew leases")):
        assert edges[("redis calls failing", component, operation)] == 1, edges
        assert edges[("redis calls recovered", component, operation)] == 1, edges


# ----------------------------------------------------------------- pub/sub liveness


async def test_a_silent_pubsub_connection_is_detected(own_server: RedisServer) -> None:
    redis = Redis.from_url(own_server.url)
    broker = RedisBroker(redis, ping_interval=0.2, reply_timeout=0.3)
    assert own_server.pid is not None
    try:
        stream = broker.listen([K.WAKE_CHANNEL])
        assert await stream.__anext__() is None  # subscribed
        # The server silent (stopped) until the wait ends: only the missed ping can end it.
        os.kill(own_server.pid, signal.SIGSTOP)
        try:
            with pytest.raises(BrokerError, match="no answer to a ping"):
                with anyio.fail_after(30):
                    await stream.__anext__()
        finally:
            os.kill(own_server.pid, signal.SIGCONT)
        await stream.aclose()
    finally:
        await redis.aclose()


# ----------------------------------------------------------------- orphaned task records


async def test_orphaned_records_are_put_back_or_archived(
    redis_client: Redis, asyncq_client: Client, asyncq_queue: str,
) -> None:
    broker = make_broker(redis_client)
    q = asyncq_queue
    qk = K.queue_keys(q)
    kept = (await asyncq_client.enqueue("t", queue=q)).id  # in its list: left alone
    group = (await asyncq_client.enqueue("t", queue=q, group="g")).id
    records = {
        "o-pending": {"state": "pending", "msg": b"{}"},
        "o-archived": {"state": "archived", "msg": b"{}"},
        "o-completed": {"state": "completed", "msg": b"{}"},
        "o-weird": {"state": "dancing", "msg": b"{}"},
        "o-no-msg": {"state": "pending"},
    }
    for task_id, fields in records.items():
        await redis_client.hset(qk.task(task_id), mapping=fields)
    await redis_client.zrem(qk.group("g"), group)
    ids = [kept, group, *records, "o-missing"]
    actions = await broker.maintenance.repair_tasks(q, ids, 1000)
    assert dict(zip(ids, actions, strict=True)) == {
        kept: "", group: "aggregating", "o-pending": "pending", "o-archived": "archived",
        "o-completed": "completed", "o-missing": "",
        "o-weird": "archived:orphaned task record with an unknown state dancing",
        "o-no-msg": "archived:DecodeError: task message is missing",
    }
    # now all in place
    assert await broker.maintenance.repair_tasks(q, ids, 1000) == [""] * len(ids)
    counts = await queue_counts(redis_client, q)
    assert (counts["pending"], counts["archived"], counts["completed"]) == (2, 3, 1)
    # An undecided pending record (the list is longer than the search bound) is left alone.
    await redis_client.lrem(qk.pending, 0, "o-pending")
    await redis_client.lpush(qk.pending, *[f"filler-{i}" for i in range(5)])
    assert await broker.maintenance.repair_tasks(q, ["o-pending"], 3) == ["?"]


async def test_the_janitor_scan_finds_orphans_of_its_queues_only(
    own_server: RedisServer, asyncq_queue: str,
) -> None:
    redis = Redis.from_url(own_server.url)
    other = asyncq_queue + "-other"
    for q in (asyncq_queue, other):
        await redis.hset(K.queue_keys(q).task("lost"), mapping={"state": "retry",
                                                                 "msg": b"{}"})
    worker = Worker(own_server.url, ServeMux(), queues={asyncq_queue: 1},
                    orphan_scan_count=10)
    try:
        for _ in range(100):
            await worker.janitor.scan_tick()
            if worker.janitor.passes:
                break
        assert worker.janitor.repaired == 1
        assert await redis.zcard(K.queue_keys(asyncq_queue).retry) == 1
        assert await redis.zcard(K.queue_keys(other).retry) == 0
    finally:
        await worker.broker.close()
        await redis.aclose()


# ----------------------------------------------------------------- outcomes vs. recovery


async def test_the_recoverer_leaves_alone_what_this_worker_holds_an_outcome_for(
    asyncq_redis_url: str, asyncq_queue: str, redis_client: Redis,
) -> None:
    clock = FakeClock()
    worker = Worker(asyncq_redis_url, ServeMux(), clock=clock, queues={asyncq_queue: 1},
                    lease_duration=2, heartbeat_interval=0.5, recover_grace=1)
    try:
        client = Client(worker.broker, clock=clock)
        done_id = (await client.enqueue("t", queue=asyncq_queue, retention=60)).id
        other_id = (await client.enqueue("t", queue=asyncq_queue)).id
        owner = worker.config.server_id
        raws, _ = await worker.broker.dequeue(asyncq_queue, 2, owner, 2000, 1000)
        assert {r.id for r in raws} == {done_id, other_id}
        # The handler of done_id finished during an outage longer than the lease; its outcome
        # waits in the acker. other_id's handler was cancelled (nothing held).
        worker.leases.add(done_id, asyncq_queue, clock.now_ms() + 2000, "outcome")
        worker.acker.submit(Outcome("complete", asyncq_queue, done_id, retention_ms=60_000))
        clock.advance(10)
        assert await worker.recoverer.tick() == 1  # other_id only
        assert (await task_hash(redis_client, asyncq_queue, other_id))["state"] == b"retry"
        assert await worker.acker.flush()
        assert (worker.acker.written, worker.acker.given_up) == (1, 0)
        assert done_id not in worker.leases  # written: the acker let go of the lease
        assert (await task_hash(redis_client, asyncq_queue, done_id))["state"] == b"completed"
    finally:
        await worker.broker.close()


async def test_an_outcome_of_an_earlier_run_is_dropped_when_the_task_is_leased_again(
    asyncq_redis_url: str, asyncq_queue: str,
) -> None:
    started = asyncio.Event()

    async def handler(task: Task) -> None:
        started.set()
        await asyncio.Event().wait()

    worker = Worker(asyncq_redis_url, handler, queues={asyncq_queue: 1})
    try:
        msg = TaskMessage(id="again", type="t", queue=asyncq_queue)
        # A retry outcome of run 1 never got written; the task was recovered and leased again.
        worker.leases.add("again", asyncq_queue, 0, "outcome")
        worker.acker.submit(Outcome("retry", asyncq_queue, "again", retry_at_ms=1))
        worker.processor.take(asyncq_queue, RawTask("again", msg, b"", 1),
                               int(time.time() * 1000) + 30_000)
        await started.wait()
        assert "again" not in worker.acker.pending and worker.acker.given_up == 1
        lease = worker.leases.get("again")  # the lease is the new run's
        assert lease is not None and lease.holder == "running" and lease.until_ms > 0
        assert worker.processor.cancel("again", "shutdown")
        await wait_until(lambda: not worker.processor.running, timeout=30)
    finally:
        await worker.broker.close()
