"""Waits for tasks a Go asynq server finishes, on ``?wire=asynq``: Go publishes no event, so the
client learns the outcome from the task's hash — when the wait starts, and by the recheck of
waited-for tasks (every ``RECHECK_INTERVAL`` s). The Go server is played here by the commands
Go's scripts run (``internal/rdb/rdb.go``: Dequeue, MarkAsComplete, Done, Archive)."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest
from redis.asyncio import Redis

from asyncq import Client, ServeMux, Task, TaskFailedError, TaskNotFoundError, TaskState, Worker
from asyncq._broker._asynq import _codec
from asyncq._broker._asynq import _keys as K
from asyncq.testing import wait_until

pytestmark = pytest.mark.anyio


async def go_dequeue(redis: Redis, queue: str) -> str:
    qk = K.queue_keys(queue)
    task_id = (await redis.rpoplpush(qk.pending, qk.active)).decode()
    await redis.hset(qk.task(task_id), "state", "active")
    await redis.hdel(qk.task(task_id), "pending_since")
    await redis.zadd(qk.lease, {task_id: int(time.time()) + 30})
    return task_id


async def go_settle(redis: Redis, queue: str, task_id: str) -> _codec.AsynqTask:
    qk = K.queue_keys(queue)
    await redis.lrem(qk.active, 0, task_id)
    await redis.zrem(qk.lease, task_id)
    return _codec.decode(await redis.hget(qk.task(task_id), "msg") or b"")


async def go_mark_complete(redis: Redis, queue: str, task_id: str, result: bytes) -> None:
    """A Go handler wrote ``result`` (ResultWriter) and its task has a retention."""
    qk = K.queue_keys(queue)
    await redis.hset(qk.task(task_id), "result", result)
    task = await go_settle(redis, queue, task_id)
    now = int(time.time())
    await redis.zadd(qk.completed, {task_id: now + task.retention})
    await redis.hset(qk.task(task_id), mapping={
        "msg": _codec.encode(task._replace(completed_at=now)), "state": "completed"})


async def go_done(redis: Redis, queue: str, task_id: str) -> None:
    await go_settle(redis, queue, task_id)
    await redis.delete(K.queue_keys(queue).task(task_id))


async def go_archive(redis: Redis, queue: str, task_id: str, error: str) -> None:
    qk = K.queue_keys(queue)
    task = await go_settle(redis, queue, task_id)
    now = int(time.time())
    await redis.zadd(qk.archived, {task_id: now})
    await redis.hset(qk.task(task_id), mapping={
        "msg": _codec.encode(task._replace(error_msg=error, last_failed_at=now)),
        "state": "archived"})


async def test_a_wait_learns_what_a_go_server_did_within_the_recheck(
        asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str) -> None:
    q = asyncq_queue
    url = asyncq_redis_url + "?wire=asynq"
    async with Client(url) as client:
        kept = await client.enqueue("t", b"1", queue=q, retention=timedelta(minutes=5))
        plain = await client.enqueue("t", b"2", queue=q)
        failing = await client.enqueue("t", b"3", queue=q)
        assert [await go_dequeue(redis_client, q) for _ in range(3)] == [
            kept.id, plain.id, failing.id]
        waits = [asyncio.ensure_future(client.result(t, timeout=45))
                 for t in (kept, plain, failing)]
        # The waits read their tasks active (nothing final yet), so they are rechecked.
        source = client.broker.event_source  # type: ignore[attr-defined]
        await wait_until(lambda: len(source._watched) == 3, timeout=30)
        began = time.monotonic()
        await go_mark_complete(redis_client, q, kept.id, b"from go")
        await go_done(redis_client, q, plain.id)
        await go_archive(redis_client, q, failing.id, "go says no")
        results = await asyncio.gather(*waits, return_exceptions=True)
        took = time.monotonic() - began
        assert results[0] == b"from go"
        assert isinstance(results[1], TaskFailedError)
        assert results[1].info.state is TaskState.DELETED
        assert "without an asyncq event" in str(results[1])
        assert isinstance(results[2], TaskFailedError)
        assert results[2].info.state is TaskState.ARCHIVED
        assert results[2].last_error == "go says no"
        assert took < 30  # a recheck, not the final read at the waits' 45 s timeout
        assert source._watched == {}
        # A wait starting after Go finished reads the outcome at once.
        info = await client.wait(kept, timeout=30)
        assert (info.state, info.result) == (TaskState.COMPLETED, b"from go")


async def test_a_go_enqueued_task_an_asyncq_worker_runs_can_be_waited_for(
        asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str) -> None:
    """Go's client writes retention 0 (its default): the result then travels only with the
    completion event, which a wait listening before the end hears; a later wait finds nothing,
    as with ``retention=0`` in asyncq."""
    q = asyncq_queue
    qk = K.queue_keys(q)
    url = asyncq_redis_url + "?wire=asynq"
    go = _codec.AsynqTask(type="square", payload=b"7", id="go-7", queue=q, timeout=60)
    await redis_client.sadd(K.QUEUES, q)
    await redis_client.hset(qk.task("go-7"), mapping={
        "msg": _codec.encode(go), "state": "pending", "pending_since": time.time_ns()})
    await redis_client.lpush(qk.pending, "go-7")
    mux = ServeMux()

    @mux.handler("square")
    async def square(task: Task) -> int:
        return int(task.payload) ** 2

    async with Client(url) as client:
        waiting = asyncio.ensure_future(client.result("go-7", queue=q, timeout=30))
        source = client.broker.event_source  # type: ignore[attr-defined]
        await wait_until(lambda: (q, "go-7") in source._watched, timeout=30)
        async with Worker(url, mux, queues={q: 1}):
            assert await waiting == 49
    async with Client(url) as late:
        with pytest.raises(TaskNotFoundError):
            await late.result("go-7", queue=q, timeout=5)
