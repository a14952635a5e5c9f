"""Server state and cancellation with wire=asynq, as Go writes and reads them: the records Go's
heartbeater writes (protobuf ServerInfo / WorkerInfo, TTLs, the asynq:servers and
asynq:workers registries scored by expiry), what Go's Inspector lists from them, and
cancellation published on asynq:cancel as Go's Inspector.CancelProcessing does."""

from __future__ import annotations

from typing import Any

import anyio
import orjson
import pytest
from redis.asyncio import Redis
from redis.asyncio.client import PubSub

from asyncq import Client, FakeClock
from asyncq._broker import (
    CANCEL_MISSING,
    CANCEL_REMOVED,
    CANCEL_RUNNING,
    RunningTaskRecord,
    WorkerRecord,
    server_info,
)
from asyncq._broker._asynq import _codec
from asyncq._broker._asynq import _keys as K
from asyncq._broker._asynq._broker import AsynqBroker
from asyncq._broker._asynq._schema import ServerInfoPB, WorkerInfoPB
from asyncq._broker._records import decode_server

OWNER = "srv-r"
HOST, PID = "box-1", 4242


def info_doc(clock: FakeClock, **extra: Any) -> dict[str, Any]:
    """A state document as asyncq's heartbeat writes it (Heartbeat.server_info)."""
    return {"server_id": OWNER, "host": HOST, "pid": PID, "concurrency": 8,
            "queues": {"hi": 6, "lo": 1}, "strict_priority": True, "status": "active",
            "started_at": clock.now_ms() - 1500, "active_workers": 1, "processed": 7,
            "failed": 2, **extra}


def running(task_id: str, queue: str, started: int, deadline: int = 0) -> RunningTaskRecord:
    return RunningTaskRecord(task_id, "t", queue, started, deadline, payload_size=4)


def state(doc: dict[str, Any], *runs: RunningTaskRecord) -> WorkerRecord:
    """The record of a worker whose state document (asyncq's JSON) is ``doc``."""
    return decode_server(orjson.dumps(doc), running=runs)


async def go_servers(redis: Redis, now_s: int) -> list[Any]:
    """What Go's rdb.ListServers returns: the keys scored now or later, decoded."""
    keys = await redis.zrange(K.SERVERS, now_s, "+inf", byscore=True)
    return [ServerInfoPB.FromString(data) for key in keys if (data := await redis.get(key))]


async def go_workers(redis: Redis, now_s: int) -> list[Any]:
    """What Go's rdb.ListWorkers returns (HVALS of every live workers key, decoded)."""
    keys = await redis.zrange(K.WORKERS, now_s, "+inf", byscore=True)
    return [WorkerInfoPB.FromString(v) for key in keys for v in await redis.hvals(key)]


async def test_server_state_is_what_gos_heartbeater_writes(
        abroker: AsynqBroker, aclient: Client, redis_client: Redis, clock: FakeClock,
        asyncq_queue: str) -> None:
    task = await aclient.enqueue("t", b"body", queue=asyncq_queue)
    [raw], _ = await abroker.dequeue(asyncq_queue, 1, OWNER, 30_000, 1000)
    started = clock.now_ms()
    doc = info_doc(clock)
    await abroker.workers.write(
        state(doc, running(task.id, asyncq_queue, started, started + 60_500)), 11_000)
    now_s = clock.now_ms() // 1000
    skey, wkey = K.server_key(HOST, PID, OWNER), K.workers_key(HOST, PID, OWNER)
    assert skey == f"asynq:servers:{{{HOST}:{PID}:{OWNER}}}"
    # registries scored by the expiry (Unix s), keys expiring with it (whole seconds)
    assert await redis_client.zscore(K.SERVERS, skey) == now_s + 11
    assert await redis_client.zscore(K.WORKERS, wkey) == now_s + 11
    assert 10 <= await redis_client.ttl(skey) <= 11
    assert 10 <= await redis_client.ttl(wkey) <= 11
    [server] = await go_servers(redis_client, now_s)
    assert (server.host, server.pid, server.server_id, server.concurrency) == (
        HOST, PID, OWNER, 8)
    assert dict(server.queues) == {"hi": 6, "lo": 1}
    assert (server.strict_priority, server.status, server.active_worker_count) == (
        True, "active", 1)
    assert server.start_time.ToMilliseconds() == doc["started_at"]
    [worker] = await go_workers(redis_client, now_s)
    assert (worker.host, worker.pid, worker.server_id, worker.task_id, worker.task_type,
            worker.queue, worker.task_payload) == (HOST, PID, OWNER, task.id, "t",
                                                   asyncq_queue, b"body")
    assert worker.start_time.ToMilliseconds() == started
    assert worker.deadline.ToMilliseconds() == started + 60_500
    # asyncq's own document, beside it in its slot, for what the protobuf cannot carry
    assert orjson.loads(await redis_client.get(K.server_doc_key(HOST, PID, OWNER))) == doc
    assert raw.id == task.id


async def test_status_and_an_unlimited_run_as_go_words_them(
        abroker: AsynqBroker, redis_client: Redis, clock: FakeClock, asyncq_queue: str) -> None:
    """A worker draining for shutdown is "closed" (a Go server shutting down); a run without
    a time limit has no deadline; a task whose record is gone shows no payload."""
    doc = info_doc(clock, status="stopping")
    await abroker.workers.write(state(doc, running("gone", asyncq_queue, 5)), 10_000)
    now_s = clock.now_ms() // 1000
    [server] = await go_servers(redis_client, now_s)
    assert server.status == "closed"
    [worker] = await go_workers(redis_client, now_s)
    assert not worker.HasField("deadline") and worker.task_payload == b""
    await abroker.workers.write(state(info_doc(clock, status="stopped")), 10_000)
    [server] = await go_servers(redis_client, now_s)
    assert (server.status, server.active_worker_count) == ("stopped", 0)
    assert await go_workers(redis_client, now_s) == []


async def test_an_expired_server_is_not_listed_and_clear_removes_it(
        abroker: AsynqBroker, redis_client: Redis, clock: FakeClock) -> None:
    await abroker.workers.write(state(info_doc(clock)), 10_000)
    now_s = clock.now_ms() // 1000
    assert len(await go_servers(redis_client, now_s + 10)) == 1
    assert await go_servers(redis_client, now_s + 11) == []  # Go's listing: score >= now
    await abroker.workers.clear(OWNER)
    for key in (K.server_key(HOST, PID, OWNER), K.workers_key(HOST, PID, OWNER),
                K.server_doc_key(HOST, PID, OWNER)):
        assert not await redis_client.exists(key)
    assert await redis_client.zscore(K.SERVERS, K.server_key(HOST, PID, OWNER)) is None
    assert await redis_client.zscore(K.WORKERS, K.workers_key(HOST, PID, OWNER)) is None


async def test_servers_read_back_as_asyncqs_documents(
        abroker: AsynqBroker, aclient: Client, redis_client: Redis, clock: FakeClock,
        asyncq_queue: str) -> None:
    """An asyncq worker reads back as it published itself; a Go server from its protobuf."""
    task = await aclient.enqueue("t", b"abcd", queue=asyncq_queue)
    await abroker.dequeue(asyncq_queue, 1, OWNER, 30_000, 1000)
    doc = info_doc(clock)
    await abroker.workers.write(state(doc, running(task.id, asyncq_queue, 1000, 0)), 10_000)
    go: Any = ServerInfoPB(host="gohost", pid=7, server_id="go-uuid", concurrency=10,
                           status="active", active_worker_count=1)
    go.queues["default"] = 1
    go.start_time.FromMilliseconds(1_700_000_000_000)
    go_key = K.server_key("gohost", 7, "go-uuid")
    gw: Any = WorkerInfoPB(host="gohost", pid=7, server_id="go-uuid", task_id="g1",
                           task_type="go:t", task_payload=b"xyz", queue="default")
    gw.start_time.FromMilliseconds(1_700_000_001_000)
    await redis_client.set(go_key, go.SerializeToString(), ex=10)
    await redis_client.hset(K.workers_key("gohost", 7, "go-uuid"), "g1", gw.SerializeToString())
    await redis_client.zadd(K.SERVERS, {go_key: clock.now_ms() // 1000 + 10})
    try:
        found = {s.id: s for s in map(server_info, await abroker.workers.read(clock.now_ms()))}
    finally:
        await redis_client.delete(go_key, K.workers_key("gohost", 7, "go-uuid"))
        await redis_client.zrem(K.SERVERS, go_key)
    mine, theirs = found[OWNER], found["go-uuid"]
    assert (mine.processed, mine.failed, mine.concurrency, dict(mine.queues)) == (
        7, 2, 8, {"hi": 6, "lo": 1})
    [run] = mine.active_workers
    assert (run.task_id, run.queue, run.payload_size, run.deadline) == (
        task.id, asyncq_queue, 4, None)
    assert (theirs.host, theirs.pid, theirs.status, dict(theirs.queues)) == (
        "gohost", 7, "active", {"default": 1})
    assert int(theirs.started.timestamp() * 1000) == 1_700_000_000_000
    [grun] = theirs.active_workers
    assert (grun.task_id, grun.task_type, grun.payload_size) == ("g1", "go:t", 3)


# ---------------------------------------------------------------- cancellation


async def next_message(pubsub: PubSub, timeout: float = 5.0) -> bytes | None:
    with anyio.move_on_after(timeout):
        while True:
            msg = await pubsub.get_message(ignore_subscribe_messages=True, timeout=timeout)
            if msg is not None:
                data: bytes = msg["data"]
                return data
    return None


@pytest.fixture
async def cancels(redis_client: Redis) -> Any:
    """A subscriber of asynq:cancel, as Go servers and asyncq workers are."""
    pubsub = redis_client.pubsub()
    await pubsub.subscribe(K.CANCEL_CHANNEL)
    assert (await pubsub.get_message(timeout=5))["type"] == "subscribe"  # type: ignore[index]
    try:
        yield pubsub
    finally:
        await pubsub.aclose()


async def test_request_cancel_publishes_and_marks_only_this_run(
        abroker: AsynqBroker, aclient: Client, clock: FakeClock, cancels: PubSub,
        asyncq_queue: str) -> None:
    """On Go's channel (the marker and its run: conformance/test_conf_transitions.py)."""
    task = await aclient.enqueue("t", queue=asyncq_queue)
    [_], _ = await abroker.dequeue(asyncq_queue, 1, OWNER, 30_000, 1000)
    assert await abroker.request_cancel(asyncq_queue, task.id) == CANCEL_RUNNING
    assert await next_message(cancels) == task.id.encode()


async def test_request_cancel_of_a_task_waiting_to_run_removes_it(
        abroker: AsynqBroker, aclient: Client, redis_client: Redis, cancels: PubSub,
        asyncq_queue: str) -> None:
    """As Go's DeleteTask: out of the pending list, its hash deleted; nothing published."""
    qk = K.queue_keys(asyncq_queue)
    task = await aclient.enqueue("t", queue=asyncq_queue)
    assert await abroker.request_cancel(asyncq_queue, task.id) == CANCEL_REMOVED
    assert await abroker.request_cancel(asyncq_queue, task.id) == CANCEL_MISSING
    assert await abroker.request_cancel(asyncq_queue, "no-such-task") == CANCEL_MISSING
    assert await next_message(cancels, 0.3) is None
    assert not await redis_client.exists(qk.task(task.id))
    assert await redis_client.lrange(qk.pending, 0, -1) == []


async def test_a_go_run_is_cancelled_by_the_message_alone(
        abroker: AsynqBroker, redis_client: Redis, cancels: PubSub, asyncq_queue: str) -> None:
    """A run a Go server leased has no asyncq fields: published, nothing marked (Go servers
    read no marker), as Go's Inspector.CancelProcessing."""
    qk = K.queue_keys(asyncq_queue)
    msg = _codec.encode(_codec.AsynqTask(type="go", payload=b"", id="g1", queue=asyncq_queue))
    await redis_client.hset(qk.task("g1"), mapping={"msg": msg, "state": "active"})
    assert await abroker.request_cancel(asyncq_queue, "g1") == CANCEL_RUNNING
    assert await next_message(cancels) == b"g1"
    assert await redis_client.hget(qk.task("g1"), K.F_CANCEL) is None
    await abroker.publish_cancel("g2")
    assert await next_message(cancels) == b"g2"
