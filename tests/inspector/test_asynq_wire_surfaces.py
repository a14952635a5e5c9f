"""The Inspector, the CLI and the dashboard on ``?wire=asynq``: queues and tasks that Go asynq
wrote (hashes with asynq's fields only, written here as Go's scripts write them) and that
asyncq wrote, seen and operated through asyncq's public surfaces."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from redis.asyncio import Redis

import asyncq
from asyncq import Client, Inspector, ServeMux, Task, TaskState, Worker
from asyncq._broker._asynq import _codec
from asyncq._broker._asynq import _keys as K
from asyncq._broker._asynq._schema import ServerInfoPB, WorkerInfoPB
from asyncq.testing import wait_until
from asyncq.web import create_app
from tests.helpers.cli import cli_runner, err, gather, js, out
from tests.web.web_helpers import web_http

pytestmark = pytest.mark.anyio


@pytest.fixture
def url(asyncq_redis_url: str) -> str:
    return asyncq_redis_url + "?wire=asynq"


@pytest.fixture
async def inspector(url: str, anyio_backend: object) -> AsyncIterator[Inspector]:
    async with Inspector(url) as ins:
        yield ins


@pytest.fixture
async def client(url: str, anyio_backend: object) -> AsyncIterator[Client]:
    async with Client(url) as c:
        yield c


def now_s() -> int:
    return int(datetime.now(UTC).timestamp())


async def go_task(redis: Redis, queue: str, task_id: str, state: str, *,
                  score: float = 0, group: str = "", result: bytes | None = None,
                  **fields: Any) -> None:
    """A task as Go's scripts store it: msg (protobuf TaskMessage), state, pending_since,
    group, result; nothing of asyncq's."""
    task = _codec.AsynqTask(type=fields.pop("type", "go:task"),
                            payload=fields.pop("payload", b"\x00go"), id=task_id, queue=queue,
                            group_key=group, **fields)
    qk = K.queue_keys(queue)
    mapping: dict[str, Any] = {"msg": _codec.encode(task), "state": state}
    if state == "pending":
        mapping["pending_since"] = (now_s() - 5) * 10**9
    if state == "aggregating":
        mapping["group"] = group
    if result is not None:
        mapping["result"] = result
    await redis.hset(qk.task(task_id), mapping=mapping)
    if state in ("pending", "active"):
        await redis.lpush(qk.state_key(state), task_id)
    elif state == "aggregating":
        await redis.zadd(qk.group(group), {task_id: score})
        await redis.sadd(qk.groups, group)
    else:
        await redis.zadd(qk.state_key(state), {task_id: score})
    await redis.sadd(K.QUEUES, queue)


async def seed(redis: Redis, queue: str) -> None:
    """One Go task in each state."""
    t = now_s()
    await go_task(redis, queue, "go-pending", "pending", retry=3, timeout=120)
    await go_task(redis, queue, "go-active", "active")
    await redis.zadd(K.queue_keys(queue).lease, {"go-active": t - 60})  # its worker is gone
    await go_task(redis, queue, "go-scheduled", "scheduled", score=t + 3600,
                  deadline=t + 7200)
    await go_task(redis, queue, "go-retry", "retry", score=t + 30, retry=5, retried=2,
                  error_msg="connection refused", last_failed_at=t - 10)
    await go_task(redis, queue, "go-archived", "archived", score=t - 5, retry=1, retried=1,
                  error_msg="gave up", last_failed_at=t - 5)
    await go_task(redis, queue, "go-completed", "completed", score=t + 600, retention=600,
                  completed_at=t - 1, result=b"ok!")
    await go_task(redis, queue, "go-grouped", "aggregating", score=t, group="batch")


async def test_queue_info_and_every_state_of_go_tasks(inspector: Inspector,
                                                      redis_client: Redis,
                                                      asyncq_queue: str) -> None:
    q = asyncq_queue
    await seed(redis_client, q)
    assert q in await inspector.queues()
    info = await inspector.queue_info(q)
    assert (info.pending, info.active, info.scheduled, info.retry, info.archived,
            info.completed, info.aggregating, info.groups, info.size) == (1, 1, 1, 1, 1, 1, 1, 1,
                                                                           7)
    assert info.expired_leases == 1 and info.memory_usage > 0
    assert timedelta(seconds=4) <= info.latency <= timedelta(seconds=60)
    [pending] = await inspector.list_tasks(q, "pending")
    assert (pending.id, pending.type, pending.payload, pending.max_retry, pending.timeout) == (
        "go-pending", "go:task", b"\x00go", 3, timedelta(seconds=120))
    assert pending.state is TaskState.PENDING and pending.next_process_at is not None
    [active] = await inspector.list_tasks(q, "active")
    assert active.is_orphaned
    [sched] = await inspector.list_tasks(q, "scheduled")
    at = await redis_client.zscore(K.queue_keys(q).scheduled, "go-scheduled")
    assert sched.next_process_at == datetime.fromtimestamp(at, UTC)
    assert sched.deadline is not None and sched.timeout is None
    [retry] = await inspector.list_tasks(q, "retry")
    assert (retry.retried, retry.max_retry, retry.last_error) == (2, 5, "connection refused")
    assert retry.last_failed_at is not None
    [arch] = await inspector.list_tasks(q, "archived")
    assert (arch.last_error, arch.retried) == ("gave up", 1)
    [done] = await inspector.list_tasks(q, "completed")
    assert (done.result, done.completed_at is not None, done.retention) == (
        b"ok!", True, timedelta(seconds=600))
    [grouped] = await inspector.list_tasks(q, "aggregating", group="batch")
    assert grouped.group == "batch"
    assert [(g.group, g.size) for g in await inspector.groups(q)] == [("batch", 1)]
    one = await inspector.task_info(q, "go-retry")
    assert (one.state, one.retried, one.last_error) == (TaskState.RETRY, 2, "connection refused")
    assert (await inspector.find_task("go-archived")).state is TaskState.ARCHIVED
    with pytest.raises(asyncq.TaskNotFoundError):
        await inspector.task_info(q, "nope")
    found = await inspector.find_tasks(q, "retry", error="REFUSED")
    assert [t.id for t in found.tasks] == ["go-retry"]
    assert [d.processed for d in await inspector.history(q, 2)] == [0, 0]


async def test_operating_on_go_tasks(inspector: Inspector, redis_client: Redis,
                                     asyncq_queue: str) -> None:
    q = asyncq_queue
    qk = K.queue_keys(q)
    await seed(redis_client, q)
    with pytest.raises(asyncq.TaskStateError):
        await inspector.delete_task(q, "go-active")
    with pytest.raises(asyncq.TaskStateError):
        await inspector.run_task(q, "go-pending")
    await inspector.run_task(q, "go-archived")
    assert await redis_client.hget(qk.task("go-archived"), "state") == b"pending"
    await inspector.archive_task(q, "go-scheduled")
    with pytest.raises(asyncq.TaskStateError):
        await inspector.archive_task(q, "go-scheduled")
    await inspector.delete_task(q, "go-completed")
    assert not await redis_client.exists(qk.task("go-completed"))
    await go_task(redis_client, q, "go-later", "scheduled", score=now_s() + 60)
    await inspector.update_task_payload(q, "go-later", {"n": 1})
    later = await inspector.task_info(q, "go-later")
    assert later.json() == {"n": 1}
    stored = _codec.decode(await redis_client.hget(qk.task("go-later"), "msg"))
    assert stored.payload == b'{"n":1}'  # what a Go handler receives
    assert await inspector.pause(q) and (await inspector.queue_info(q)).paused
    assert await redis_client.exists(qk.paused)
    assert await inspector.unpause(q)
    assert await inspector.archive_all(q, "pending") == 2
    assert await inspector.run_all(q, "archived") == 3
    assert await inspector.delete_all(q, "pending") == 3
    assert await inspector.run_all(q, "aggregating") == 1
    assert (await inspector.archive_limits(q)).max_size == 10_000
    with pytest.raises(asyncq.QueueNotEmptyError):
        await inspector.delete_queue(q)
    await inspector.recover_task(q, "go-active")  # its lease ran out a minute ago
    assert await redis_client.hget(qk.task("go-active"), "state") == b"retry"
    await inspector.delete_queue(q, force=True)
    assert q not in await inspector.queues()
    assert not await redis_client.sismember(K.QUEUES, q)
    assert not [k async for k in redis_client.scan_iter(match=f"asynq:{{{q}}}:*")]


async def test_asyncq_tasks_run_by_an_asyncq_worker_are_seen(url: str, inspector: Inspector,
                                                             client: Client,
                                                             asyncq_queue: str) -> None:
    q = asyncq_queue
    mux = ServeMux()

    @mux.handler("add")
    async def add(task: Task) -> int:
        return int(task.json()["a"]) + 1

    info = await client.enqueue("add", {"a": 41}, queue=q, retention=timedelta(hours=1),
                                max_retry=2)
    listed = await inspector.task_info(q, info.id)
    assert (listed.state, listed.json(), listed.max_retry) == (TaskState.PENDING, {"a": 41}, 2)
    async with Worker(url, mux, queues={q: 1}, idle_poll_interval=0.05,
                      heartbeat_interval=1.0):
        async def completed() -> bool:
            return (await inspector.task_info(q, info.id)).state is TaskState.COMPLETED
        await wait_until(completed, timeout=20)
    done = await inspector.task_info(q, info.id)
    assert done.result_json() == 42 and done.completed_at is not None
    assert done.started_at is not None
    qi = await inspector.queue_info(q)
    assert (qi.completed, qi.processed, qi.processed_total) == (1, 1, 1)


async def test_servers_of_go_are_listed(inspector: Inspector, redis_client: Redis) -> None:
    t = now_s()
    host, pid, sid = "go-box", 77, "f00d-1"
    skey, wkey = K.server_key(host, pid, sid), K.workers_key(host, pid, sid)
    info = ServerInfoPB(host=host, pid=pid, server_id=sid, concurrency=4,
                        queues={"critical": 6}, status="active")
    info.start_time.FromSeconds(t - 100)
    worker = WorkerInfoPB(host=host, pid=pid, server_id=sid, task_id="w1", task_type="img",
                          task_payload=b"abc", queue="critical")
    worker.start_time.FromSeconds(t - 2)
    await redis_client.set(skey, info.SerializeToString())
    await redis_client.hset(wkey, "w1", worker.SerializeToString())
    await redis_client.zadd(K.SERVERS, {skey: t + 10})
    await redis_client.zadd(K.WORKERS, {wkey: t + 10})
    try:
        [srv] = [s for s in await inspector.workers() if s.id == sid]
        assert (srv.host, srv.pid, srv.concurrency, dict(srv.queues), srv.status) == (
            host, pid, 4, {"critical": 6}, "active")
        assert [(w.task_id, w.task_type, w.payload_size) for w in srv.active_workers] == [
            ("w1", "img", 3)]
    finally:
        await redis_client.zrem(K.SERVERS, skey)
        await redis_client.zrem(K.WORKERS, wkey)
        await redis_client.delete(skey, wkey)


async def test_the_cli_on_wire_asynq(url: str, client: Client, redis_client: Redis,
                                     asyncq_queue: str) -> None:
    q = asyncq_queue
    cli = cli_runner(url)
    await seed(redis_client, q)
    mine = await client.enqueue("mail", {"to": "x"}, queue=q)
    ls, inspect, pending, retry, one, one_text, go_one = await gather(
        cli("queue", "ls", "--json"), cli("queue", "inspect", q, "--json"),
        cli("task", "ls", "-q", q, "-s", "pending", "--json"),
        cli("task", "ls", "-q", q, "-s", "retry", "--redis-url", url),
        cli("task", "inspect", "-q", q, mine.id, "--json"),
        cli("task", "inspect", "-q", q, mine.id),
        cli("task", "inspect", "-q", q, "go-retry", "--json"))
    assert q in js(ls)
    [doc] = js(inspect)
    assert (doc["pending"], doc["retry"], doc["size"]) == (2, 1, 8)
    assert [(t["id"], t["payload"]) for t in js(pending)] == [
        ("go-pending", "AGdv"), (mine.id, {"to": "x"})]  # bytes as base64, JSON as itself
    assert "go-retry" in out(retry) and "connection refused" in out(retry)
    assert js(one)["state"] == "pending" and js(one)["type"] == "mail"
    assert f"id:              {mine.id}" in out(one_text)
    g = js(go_one)
    assert (g["retried"], g["max_retry"], g["last_error"]) == (2, 5, "connection refused")
    assert "not found" in err(await cli("task", "inspect", "-q", q, "nope", ok=False))
    assert out(await cli("task", "archive", "-q", q, mine.id)).strip() == (
        f"archived task {mine.id}")


async def test_the_dashboard_on_wire_asynq(url: str, redis_client: Redis,
                                           asyncq_queue: str) -> None:
    q = asyncq_queue
    await seed(redis_client, q)
    async with web_http(create_app(url)) as http:
        overview = await http.get("/")
        pending = await http.get("/queue", params={"q": q})
        retry = await http.get("/queue", params={"q": q, "state": "retry"})
        task = await http.get("/task", params={"q": q, "id": "go-retry"})
        live = await http.get("/live", params={"q": q})
    assert overview.status_code == 200 and f'data-queue="{q}"' in overview.text
    assert pending.status_code == 200 and "go-pending" in pending.text
    assert retry.status_code == 200 and "go-retry" in retry.text
    assert "connection refused" in retry.text
    assert task.status_code == 200 and "connection refused" in task.text
    assert live.status_code == 200
    counts = live.json()["queues"][q]
    assert (counts["pending"], counts["archived"], counts["aggregating"]) == (1, 1, 1)


async def test_a_queue_of_asyncqs_own_layout_is_a_clear_error(url: str, asyncq_client: Client,
                                                              inspector: Inspector,
                                                              asyncq_queue: str) -> None:
    await asyncq_client.enqueue("t", queue=asyncq_queue)  # asyncq's own layout
    with pytest.raises(asyncq.BrokerError, match=r"drop \?wire=asynq"):
        await inspector.queue_info(asyncq_queue)
    assert asyncq_queue not in await inspector.queues()
    cli = cli_runner(url)
    assert "drop ?wire=asynq" in err(await cli("queue", "inspect", asyncq_queue, ok=False))
