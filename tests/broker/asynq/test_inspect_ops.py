"""InspectOps over Go asynq's layout (AsynqBroker.inspect): what Go's Inspector reads, task
records of tasks Go enqueued (only asynq's fields) and of tasks asyncq enqueued, and each change
written the way Go's inspector scripts write it (internal/rdb/inspect.go)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from redis.asyncio import Redis

from asyncq import Client, FakeClock
from asyncq._broker import Outcome
from asyncq._broker._asynq import _codec
from asyncq._broker._asynq import _inspect as I
from asyncq._broker._asynq import _keys as K
from asyncq._broker._asynq._broker import AsynqBroker
from asyncq._broker._asynq._schema import ServerInfoPB, WorkerInfoPB
from asyncq._errors import BrokerError
from asyncq._model._message import decode_message

OWNER = "srv-a"
LEASE_MS = 30_000


async def go_task(redis: Redis, queue: str, task_id: str, state: str, *,
                  score: float | None = None, pending_since_ns: int = 0, group: str = "",
                  unique_key: str = "", result: bytes | None = None,
                  **fields: Any) -> _codec.AsynqTask:
    """A task as Go's scripts leave it: a hash with asynq's fields only (msg, state,
    pending_since, group, unique_key, result), in the container of its state."""
    task = _codec.AsynqTask(type=fields.pop("type", "go:task"),
                            payload=fields.pop("payload", b"go-payload"), id=task_id,
                            queue=queue, group_key=group, unique_key=unique_key, **fields)
    qk = K.queue_keys(queue)
    mapping: dict[str, Any] = {"msg": _codec.encode(task), "state": state}
    if state == "pending":
        mapping["pending_since"] = pending_since_ns
    if state == "aggregating":
        mapping["group"] = group
    if unique_key:
        mapping["unique_key"] = unique_key
        await redis.set(unique_key, task_id)
    if result is not None:
        mapping["result"] = result
    await redis.hset(qk.task(task_id), mapping=mapping)
    if state in ("pending", "active"):
        await redis.lpush(qk.state_key(state), task_id)
    elif state == "aggregating":
        await redis.zadd(qk.group(group), {task_id: score or 0})
        await redis.sadd(qk.groups, group)
    else:
        await redis.zadd(qk.state_key(state), {task_id: score or 0})
    await redis.sadd(K.QUEUES, queue)
    return task


async def fields(redis: Redis, queue: str, task_id: str) -> dict[str, bytes]:
    raw = await redis.hgetall(K.queue_keys(queue).task(task_id))
    return {k.decode(): v for k, v in raw.items()}


async def test_queue_info_reads_what_gos_inspector_reads(
        abroker: AsynqBroker, aclient: Client, redis_client: Redis, clock: FakeClock,
        asyncq_queue: str) -> None:
    q, now_s = asyncq_queue, clock.now_ms() // 1000
    qk = K.queue_keys(q)
    await go_task(redis_client, q, "p1", "pending", pending_since_ns=(now_s - 15) * 10**9)
    await aclient.enqueue("t", b"x", queue=q)  # newer: at the head
    await go_task(redis_client, q, "a1", "active")
    await redis_client.zadd(qk.lease, {"a1": now_s - 1})  # a lease that ran out
    await go_task(redis_client, q, "s1", "scheduled", score=now_s + 60)
    await aclient.enqueue("t", queue=q, process_in=timedelta(hours=1))
    await go_task(redis_client, q, "r1", "retry", score=now_s + 60)
    await go_task(redis_client, q, "x1", "archived", score=now_s)
    await go_task(redis_client, q, "c1", "completed", score=now_s + 600)
    await go_task(redis_client, q, "g1", "aggregating", group="ga", score=now_s)
    await go_task(redis_client, q, "g2", "aggregating", group="gb", score=now_s)
    await go_task(redis_client, q, "g3", "aggregating", group="gb", score=now_s)
    day = K.day_string(clock.now_ms())
    await redis_client.mset({qk.processed_day(day): 7, qk.failed_day(day): 2,
                             qk.processed: 70, qk.failed: 20})
    await abroker.pause(q)
    info = await abroker.inspect.queue_info(q, clock.now_ms())
    assert (info.pending, info.active, info.scheduled, info.retry, info.archived,
            info.completed, info.aggregating, info.groups) == (2, 1, 2, 1, 1, 1, 3, 2)
    assert info.size == 11
    assert (info.processed, info.failed, info.processed_total, info.failed_total) == (
        7, 2, 70, 20)
    assert info.paused and info.expired_leases == 1 and info.memory_usage > 0
    assert info.latency == timedelta(seconds=15) + timedelta(
        milliseconds=clock.now_ms() % 1000)
    [again] = await abroker.inspect.queue_infos([q], clock.now_ms(), memory=False)
    assert again.memory_usage == 0 and again.pending == 2
    assert await abroker.inspect.groups(q) == [("ga", 1), ("gb", 2)]
    assert await abroker.aggregation.list_groups(q) == ["ga", "gb"]
    assert await abroker.inspect.queue_names() == sorted(
        m.decode() for m in await redis_client.smembers(K.QUEUES))
    assert await abroker.inspect.queue_exists(q) and not await abroker.inspect.queue_exists("no")
    assert await abroker.inspect.daily_counts(q, [day, "2000-01-01"]) == [(7, 2), (0, 0)]


async def test_records_of_go_and_asyncq_tasks(abroker: AsynqBroker, aclient: Client,
                                              redis_client: Redis, clock: FakeClock,
                                              asyncq_queue: str) -> None:
    q, now_s = asyncq_queue, clock.now_ms() // 1000
    qk = K.queue_keys(q)
    go = await go_task(redis_client, q, "go-r", "retry", score=now_s + 30, retry=5, retried=2,
                       error_msg="boom", last_failed_at=now_s - 3, timeout=60,
                       headers={"k": "v"})
    mine = await aclient.enqueue("email", {"to": "a"}, queue=q, max_retry=3)
    [raw], _ = await abroker.dequeue(q, 1, OWNER, LEASE_MS, 1000)
    assert raw.id == mine.id
    await abroker.finish([Outcome("retry", q, mine.id, retry_at_ms=clock.now_ms() + 5000,
                                  error="bad", traceback="Traceback: here")], OWNER)
    rows = await abroker.inspect.list_tasks(q, "retry", None, 0, 10)
    assert [r.id for r in rows] == [mine.id, "go-r"]  # by score: 5 s, then 30 s
    rec = rows[1]
    m = decode_message(rec.msg)
    assert (m.type, m.max_retry, m.timeout_ms, m.headers, rec.payload) == (
        "go:task", 5, 60_000, {"k": "v"}, b"go-payload")
    assert (rec.state, rec.retried, rec.error, rec.failed_at_ms, rec.score) == (
        "retry", 2, "boom", (now_s - 3) * 1000, (now_s + 30) * 1000)
    info = await abroker.inspect.task(q, mine.id)
    assert info is not None
    mm = decode_message(info.msg)
    assert (mm.type, mm.max_retry, mm.enc, info.payload) == ("email", 3, "j", b'{"to":"a"}')
    assert (info.retried, info.error, info.traceback, info.queue) == (
        1, "bad", "Traceback: here", q)
    assert info.started_at_ms == clock.now_ms()
    assert await abroker.inspect.task(q, "nope") is None
    found, missing = await abroker.inspect.tasks([(q, go.id), (q, "nope")])
    assert missing is None and found is not None
    assert (found.id, found.queue, found.error, found.score) == (
        "go-r", q, "boom", (now_s + 30) * 1000)
    # an active task carries its lease; a completed one its result and completion time
    await go_task(redis_client, q, "go-a", "active")
    await redis_client.zadd(qk.lease, {"go-a": now_s + 30})
    [act] = await abroker.inspect.list_tasks(q, "active", None, 0, 10)
    assert (act.id, act.score) == ("go-a", (now_s + 30) * 1000)
    await go_task(redis_client, q, "go-c", "completed", score=now_s + 100,
                  completed_at=now_s, result=b"done")
    [comp] = await abroker.inspect.list_tasks(q, "completed", None, 0, 10)
    assert (comp.result, comp.completed_at_ms, comp.result_enc) == (b"done", now_s * 1000, "b")
    # an unreadable message is skipped by listings' decoding, not fatal to the read
    await redis_client.hset(qk.task("bad"), mapping={"msg": b"\xff\xff", "state": "archived"})
    await redis_client.zadd(qk.archived, {"bad": 1})
    [bad] = await abroker.inspect.list_tasks(q, "archived", None, 0, 10)
    assert bad.msg == I.UNREADABLE


async def test_pages_come_in_processing_order(abroker: AsynqBroker, redis_client: Redis,
                                              asyncq_queue: str) -> None:
    q = asyncq_queue
    for i in range(7):
        await go_task(redis_client, q, f"p{i}", "pending")
    page = await abroker.inspect.list_tasks(q, "pending", None, 2, 3)
    assert [r.id for r in page] == ["p2", "p3", "p4"]  # oldest first, as Go lists them
    found, nxt, scanned = await abroker.inspect.find_tasks(q, "pending", None, 0, 2, "", "",
                                                           100)
    assert ([r.id for r in found], nxt, scanned) == (["p0", "p1"], 2, 2)


async def test_find_reads_type_and_error_from_the_protobuf(abroker: AsynqBroker,
                                                           redis_client: Redis,
                                                           asyncq_queue: str) -> None:
    q = asyncq_queue
    await go_task(redis_client, q, "a", "archived", score=1, type="email:Send",
                  error_msg="SMTP timeout")
    await go_task(redis_client, q, "b", "archived", score=2, type="email:send",
                  error_msg="bounced")
    await go_task(redis_client, q, "c", "archived", score=3, type="image:resize",
                  error_msg="smtp? no")
    found, nxt, scanned = await abroker.inspect.find_tasks(q, "archived", None, 0, 10,
                                                           "EMAIL", "", 100)
    assert ([r.id for r in found], nxt, scanned) == (["a", "b"], None, 3)
    found, _, _ = await abroker.inspect.find_tasks(q, "archived", None, 0, 10, "", "smtp", 100)
    assert [r.id for r in found] == ["a", "c"]
    found, _, _ = await abroker.inspect.find_tasks(q, "archived", None, 0, 10, "email",
                                                   "smtp", 100)
    assert [r.id for r in found] == ["a"]


async def test_delete_run_archive_one_task(abroker: AsynqBroker, redis_client: Redis,
                                           clock: FakeClock, asyncq_queue: str) -> None:
    q, now_s = asyncq_queue, clock.now_ms() // 1000
    qk = K.queue_keys(q)
    lock = qk.unique("go:task", "0" * 32)
    await go_task(redis_client, q, "s", "scheduled", score=now_s + 60, unique_key=lock)
    await go_task(redis_client, q, "a", "active")
    await go_task(redis_client, q, "g", "aggregating", group="grp", score=now_s)
    await go_task(redis_client, q, "c", "completed", score=now_s + 60, completed_at=now_s)
    ops = abroker.inspect
    assert await ops.delete_task(q, "a") == -1 and await ops.run_task(q, "a") == -1
    assert await ops.archive_task(q, "a") == (-1, 0)
    assert await ops.delete_task(q, "zz") == 0 and await ops.run_task(q, "zz") == 0
    # delete releases the lock it holds, as Go's DeleteTask
    assert await ops.delete_task(q, "s") == 1
    assert not await redis_client.exists(qk.task("s"), lock)
    assert await redis_client.zcard(qk.scheduled) == 0
    # run: to the head of pending, pending_since set; a completed one loses completed_at
    clock.advance(2)
    assert await ops.run_task(q, "c") == 1
    h = await fields(redis_client, q, "c")
    assert h["state"] == b"pending" and int(h["pending_since"]) == clock.now_ms() * 10**6
    assert _codec.decode(h["msg"]).completed_at == 0
    assert await ops.run_task(q, "c") == -2
    assert await redis_client.lrange(qk.pending, 0, -1) == [b"c"]
    # archive an aggregating task: its group empties and leaves the groups set
    assert await ops.archive_task(q, "g") == (1, 0)
    assert await ops.archive_task(q, "g") == (-2, 0)
    assert not await redis_client.exists(qk.group("grp"))
    assert await redis_client.smembers(qk.groups) == set()
    assert await redis_client.zscore(qk.archived, "g") == clock.now_ms() // 1000
    assert (await fields(redis_client, q, "g"))["state"] == b"archived"
    # run it again: back to pending
    assert await ops.run_task(q, "g") == 1
    assert await redis_client.lrange(qk.pending, 0, -1) == [b"g", b"c"]


async def test_archiving_keeps_gos_caps(abroker: AsynqBroker, redis_client: Redis,
                                        clock: FakeClock, asyncq_queue: str,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(I, "ARCHIVE_MAX_SIZE", 4)
    q, now_s = asyncq_queue, clock.now_ms() // 1000
    qk = K.queue_keys(q)
    await go_task(redis_client, q, "old", "archived", score=now_s - I.ARCHIVE_MAX_AGE_S)
    for i in range(3):
        await go_task(redis_client, q, f"x{i}", "archived", score=now_s - 10 + i)
    for i in range(3):
        await go_task(redis_client, q, f"p{i}", "pending")
    ops = abroker.inspect
    assert await ops.archive_limits(q) == (4, 90 * 86_400_000)
    with pytest.raises(BrokerError, match="cannot be set with wire=asynq") as caught:
        await ops.set_archive_limits(q, 10, None)
    assert caught.value.refused
    # 4 archived, 1 of them 90 days old; +1 -> the old one, then the oldest so 3 remain
    assert await ops.archive_overflow(q, 1) == 2
    assert await ops.archive_task(q, "p0") == (1, 2)
    assert [m.decode() for m in await redis_client.zrange(qk.archived, 0, -1)] == [
        "x1", "x2", "p0"]
    assert not await redis_client.exists(qk.task("old"), qk.task("x0"))  # hashes gone too
    assert await ops.bulk("archive", q, "pending") == (2, 2)
    assert [m.decode() for m in await redis_client.zrange(qk.archived, 0, -1)] == [
        "p0", "p1", "p2"]


async def test_bulk_operations_go_batch_by_batch(abroker: AsynqBroker, redis_client: Redis,
                                                 clock: FakeClock, asyncq_queue: str) -> None:
    q, now_s = asyncq_queue, clock.now_ms() // 1000
    qk = K.queue_keys(q)
    ops = abroker.inspect
    ops.batch_size = 2
    for i in range(5):
        await go_task(redis_client, q, f"s{i}", "scheduled", score=now_s + i,
                      unique_key=qk.unique("t", f"{i:032d}"))
    await go_task(redis_client, q, "p", "pending")
    assert await ops.bulk("run", q, "scheduled") == (5, 0)
    # after the pending task, in score order; pending_since set on each
    assert [m.decode() for m in await redis_client.lrange(qk.pending, 0, -1)] == [
        "s4", "s3", "s2", "s1", "s0", "p"]
    assert int((await fields(redis_client, q, "s0"))["pending_since"]) == clock.now_ms() * 10**6
    assert await ops.bulk("archive", q, "pending") == (6, 0)
    assert await redis_client.llen(qk.pending) == 0 and await redis_client.zcard(
        qk.archived) == 6
    assert await ops.bulk("delete", q, "archived") == (6, 0)
    assert not await redis_client.exists(qk.archived, qk.task("s3"), qk.unique("t", f"{3:032d}"))
    for i in range(3):
        await go_task(redis_client, q, f"g{i}", "aggregating", group="grp", score=now_s)
    assert await ops.bulk("run", q, "aggregating", "grp") == (3, 0)
    assert not await redis_client.exists(qk.group("grp"))
    assert await redis_client.smembers(qk.groups) == set()


async def test_remove_queue_and_register_it_again(abroker: AsynqBroker, aclient: Client,
                                                  redis_client: Redis, clock: FakeClock,
                                                  asyncq_queue: str) -> None:
    q = asyncq_queue
    qk = K.queue_keys(q)
    info = await aclient.enqueue("t", queue=q)
    await abroker.maintenance.record_minute(q)
    day = K.day_string(clock.now_ms())
    await redis_client.set(qk.processed_day(day), 3)
    ops = abroker.inspect  # (what its calls return: conformance/test_conf_inspect.py)
    await ops.delete_task(q, info.id)
    await ops.remove_queue(q, "remove", [day])
    assert not await redis_client.exists(qk.processed_day(day), qk.minutes, qk.pending)
    await ops.unregister_queue(q)
    assert not await redis_client.sismember(K.QUEUES, q)
    # the broker forgot it had registered the queue: the next task registers it again
    await aclient.enqueue("t", queue=q)
    assert await redis_client.sismember(K.QUEUES, q)


async def test_update_payload_rewrites_only_the_payload(abroker: AsynqBroker,
                                                        redis_client: Redis, clock: FakeClock,
                                                        asyncq_queue: str) -> None:
    q, now_s = asyncq_queue, clock.now_ms() // 1000
    go = await go_task(redis_client, q, "s", "scheduled", score=now_s + 60, retry=4,
                       headers={"a": "b"})
    ops = abroker.inspect
    rec = await ops.task(q, "s")
    assert rec is not None
    assert await ops.update_payload(q, "s", b"{}", rec.msg, b"new") == -2
    assert await ops.update_payload(q, "s", rec.msg, rec.msg, b"new") == 1
    h = await fields(redis_client, q, "s")
    assert _codec.decode(h["msg"]) == go._replace(payload=b"new")
    assert "asyncq_msg" not in h  # raw bytes: Go's message says it all
    msg = decode_message(rec.msg)
    msg.enc = "j"
    assert await ops.update_payload(q, "s", rec.msg, msg.encode(), b'{"n":1}') == 1
    h = await fields(redis_client, q, "s")
    assert decode_message(h["asyncq_msg"]).enc == "j"
    assert _codec.decode(h["msg"]).payload == b'{"n":1}'
    await go_task(redis_client, q, "p", "pending")
    prec = await ops.task(q, "p")
    assert prec is not None
    assert await ops.update_payload(q, "p", prec.msg, prec.msg, b"x") == -1
    assert await ops.update_payload(q, "zz", prec.msg, prec.msg, b"x") == 0


async def test_servers_are_read_from_asynqs_protobuf_records(
        abroker: AsynqBroker, redis_client: Redis, clock: FakeClock) -> None:
    now = clock.now_ms()
    host, pid, sid = "gohost", 4242, "uuid-live"
    skey, wkey = K.server_key(host, pid, sid), K.workers_key(host, pid, sid)
    info = ServerInfoPB(host=host, pid=pid, server_id=sid, concurrency=10,
                        queues={"default": 3, "low": 1}, strict_priority=True,
                        status="active", active_worker_count=1)
    info.start_time.FromMilliseconds(now - 60_000)
    worker = WorkerInfoPB(host=host, pid=pid, server_id=sid, task_id="t1", task_type="email",
                          task_payload=b"12345", queue="default")
    worker.start_time.FromMilliseconds(now - 5000)
    worker.deadline.FromMilliseconds(now + 25_000)
    await redis_client.set(skey, info.SerializeToString(), ex=10)
    await redis_client.hset(wkey, "t1", worker.SerializeToString())
    await redis_client.zadd(K.SERVERS, {skey: now // 1000 + 10})
    await redis_client.zadd(K.WORKERS, {wkey: now // 1000 + 10})
    dead = K.server_key(host, 1, "uuid-dead")
    await redis_client.zadd(K.SERVERS, {dead: now // 1000 - 5})
    try:
        records = await abroker.inspect.servers(now)
        assert len([r for r in records if r.server_id == "uuid-live"]) == 1
        assert await redis_client.zscore(K.SERVERS, dead) is None  # pruned, as Go does
        from asyncq._broker import server_info
        [srv] = [server_info(r) for r in records if r.server_id == "uuid-live"]
        assert (srv.id, srv.host, srv.pid, srv.concurrency, dict(srv.queues),
                srv.strict_priority, srv.status) == (
            sid, host, pid, 10, {"default": 3, "low": 1}, True, "active")
        assert srv.started.timestamp() * 1000 == now - 60_000
        [w] = srv.active_workers
        assert (w.task_id, w.task_type, w.queue, w.payload_size) == ("t1", "email", "default", 5)
        assert w.deadline is not None and w.deadline.timestamp() * 1000 == now + 25_000
        # the Go server running t1 owns it; it is alive while its state is published
        q = "default-" + sid
        await go_task(redis_client, q, "t1", "active")
        assert await abroker.inspect.task_owner(q, "t1") == sid
        assert await abroker.inspect.server_alive(sid)
        assert not await abroker.inspect.server_alive("uuid-dead")
    finally:
        await redis_client.zrem(K.SERVERS, skey)
        await redis_client.zrem(K.WORKERS, wkey)
        await redis_client.delete(skey, wkey)


async def test_recover_a_stranded_task(abroker: AsynqBroker, aclient: Client,
                                       redis_client: Redis, clock: FakeClock,
                                       asyncq_queue: str) -> None:
    q = asyncq_queue
    qk = K.queue_keys(q)
    info = await aclient.enqueue("t", queue=q)
    await abroker.dequeue(q, 1, OWNER, LEASE_MS, 1000)
    ops = abroker.inspect  # (what its calls return: conformance/test_conf_inspect.py)
    clock.advance(LEASE_MS / 1000 + 1)
    out = Outcome("retry", q, info.id, retry_at_ms=clock.now_ms(), error="recovered")
    await ops.recover_task(out, "", clock.now_ms())
    h = await fields(redis_client, q, info.id)
    task = _codec.decode(h["msg"])
    assert (h["state"], task.retried, task.error_msg) == (b"retry", 1, "recovered")
    assert "owner" not in h and await redis_client.zcard(qk.lease) == 0
    assert await redis_client.get(qk.failed) == b"1"
