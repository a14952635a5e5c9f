"""asyncq workers over ``?wire=asynq`` beside (simulated) Go servers: what Go's Inspector reads
of them (ServerInfo / WorkerInfo records that expire as Go's do), Go's dead runs recovered by
asyncq's recoverer and its live ones left alone, asyncq's lease renewal keeping its own runs
out of a Go recoverer's reach, and a cancellation published on asynq:cancel, as Go's
Inspector.CancelProcessing does, stopping an asyncq run. A Go server is simulated by writing
its records as Go's scripts do (the real Go library is driven by the interop suite)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from asyncq import Client, RevokeTask, ServeMux, SkipRetry, Task
from asyncq._broker._asynq import _codec
from asyncq._broker._asynq import _keys as K
from asyncq._broker._asynq._schema import ServerInfoPB, WorkerInfoPB
from asyncq._testing.harness import WorkerFactory
from asyncq.testing import wait_until
from tests.helpers.inprocess import blocking_mux
from tests.helpers.processes import worker_process

GO_RECOVER_CUTOFF_S = 30  # Go's recoverer: leases that ended 30 s ago or earlier


@pytest.fixture
def aurl(asyncq_redis_url: str) -> str:
    return asyncq_redis_url + "?wire=asynq"


@pytest.fixture
async def aworker(aurl: str, anyio_backend: object) -> AsyncIterator[WorkerFactory]:
    """In-process workers over ``?wire=asynq``, built as the ``asyncq_worker`` fixture does."""
    factory = WorkerFactory(aurl)
    try:
        yield factory
    finally:
        await factory.aclose()


def now_s() -> int:
    return int(time.time())


async def go_servers(redis: Redis) -> dict[str, Any]:
    """Go's rdb.ListServers, by server id: the keys of asynq:servers scored now or later."""
    keys = await redis.zrange(K.SERVERS, now_s(), "+inf", byscore=True)
    found = [ServerInfoPB.FromString(data) for key in keys if (data := await redis.get(key))]
    return {s.server_id: s for s in found}


async def go_workers(redis: Redis) -> list[Any]:
    """Go's rdb.ListWorkers: every WorkerInfo of the live workers keys."""
    keys = await redis.zrange(K.WORKERS, now_s(), "+inf", byscore=True)
    return [WorkerInfoPB.FromString(v) for key in keys for v in await redis.hvals(key)]


async def go_leased(redis: Redis, queue: str, task_id: str, lease_s: int, retried: int = 0) -> None:
    """A task a Go server leased (its Dequeue): msg, state active, in active, a lease entry."""
    qk = K.queue_keys(queue)
    msg = _codec.encode(_codec.AsynqTask(type="go:t", payload=b"go", id=task_id, queue=queue,
                                         retry=25, retried=retried, timeout=1800))
    await redis.hset(qk.task(task_id), mapping={"msg": msg, "state": "active"})
    await redis.lpush(qk.active, task_id)
    await redis.zadd(qk.lease, {task_id: lease_s})


async def test_go_lists_an_asyncq_worker_and_its_running_task(
        aworker: WorkerFactory, aurl: str, redis_client: Redis, asyncq_queue: str) -> None:
    started: list[str] = []
    release = asyncio.Event()
    async with Client(aurl) as client:
        task = await client.enqueue("block", b"the payload", queue=asyncq_queue)
        async with aworker(blocking_mux(started, release), queues={asyncq_queue: 3},
                           concurrency=4, heartbeat_interval=0.5,
                           idle_poll_interval=0.05) as w:
            sid = w.worker.config.server_id
            await wait_until(lambda: started == [task.id], message="the task started")

            async def listed() -> list[Any]:
                return [x for x in await go_workers(redis_client) if x.server_id == sid]
            [run] = await wait_until(listed, message="its run listed")
            server = (await go_servers(redis_client))[sid]
            assert (server.host, server.pid, server.concurrency, dict(server.queues)) == (
                socket.gethostname(), os.getpid(), 4, {asyncq_queue: 3})
            assert (server.strict_priority, server.status, server.active_worker_count) == (
                False, "active", 1)
            assert abs(server.start_time.ToMilliseconds() / 1000 - time.time()) < 60
            assert (run.task_id, run.task_type, run.queue, run.task_payload) == (
                task.id, "block", asyncq_queue, b"the payload")
            assert run.HasField("deadline")  # asyncq's default 30 min timeout
            skey = K.server_key(server.host, server.pid, sid)
            # the TTL the heartbeat asks for (2 beats + 1 s), in whole seconds as Go's SETEX
            assert 1 <= await redis_client.ttl(skey) <= 2
            assert await redis_client.zscore(K.SERVERS, skey) <= now_s() + 2
            release.set()
    # a graceful stop clears its state, as Go's ClearServerState
    assert sid not in await go_servers(redis_client)
    assert not await redis_client.exists(skey, K.workers_key(server.host, server.pid, sid))


async def test_gos_dead_runs_are_recovered_and_its_live_ones_left_alone(
        aworker: WorkerFactory, redis_client: Redis, asyncq_queue: str) -> None:
    qk = K.queue_keys(asyncq_queue)
    t = now_s()
    await go_leased(redis_client, asyncq_queue, "dead", t - 90, retried=1)
    await go_leased(redis_client, asyncq_queue, "late", t - 10)  # a heartbeat late, not dead
    await go_leased(redis_client, asyncq_queue, "live", t + 30)
    async with aworker(blocking_mux([], asyncio.Event()), queues={asyncq_queue: 1},
                       recover_interval=0.2, idle_poll_interval=0.05):
        async def retried(task_id: str) -> bool:
            return await redis_client.zscore(qk.retry, task_id) is not None
        await wait_until(lambda: retried("dead"), message="the dead run recovered")
        # one more recoverer round after this one: the others were looked at twice
        await go_leased(redis_client, asyncq_queue, "dead2", now_s() - 90)
        await wait_until(lambda: retried("dead2"), message="a second round")
        await redis_client.zadd(qk.lease, {"live": now_s() + 30}, xx=True)  # its heartbeat
    msg = _codec.decode(await redis_client.hget(qk.task("dead"), "msg"))
    assert (msg.retried, msg.error_msg) == (2, "task lease expired")  # (as Go's texts read)
    assert await redis_client.hget(qk.task("dead"), "state") == b"retry"
    for task_id in ("late", "live"):
        assert await redis_client.hget(qk.task(task_id), "state") == b"active"
        assert await redis_client.zscore(qk.lease, task_id) is not None
    assert sorted(await redis_client.lrange(qk.active, 0, -1)) == [b"late", b"live"]


async def test_asyncqs_lease_renewal_keeps_its_runs_out_of_a_go_recoverers_reach(
        aworker: WorkerFactory, aurl: str, redis_client: Redis, asyncq_queue: str) -> None:
    """Scores in Unix s, renewed each beat to now + 30 s: never as old as Go's cutoff."""
    qk = K.queue_keys(asyncq_queue)
    started: list[str] = []
    release = asyncio.Event()
    async with Client(aurl) as client:
        task = await client.enqueue("block", queue=asyncq_queue)
        async with aworker(blocking_mux(started, release), queues={asyncq_queue: 1},
                           heartbeat_interval=0.5, idle_poll_interval=0.05):
            await wait_until(lambda: started == [task.id], message="the task started")
            first = await redis_client.zscore(qk.lease, task.id)
            assert now_s() + 28 <= first <= now_s() + 30

            async def renewed() -> float | None:
                score = await redis_client.zscore(qk.lease, task.id)
                return score if score is not None and score > first else None
            score = await wait_until(renewed, timeout=30, message="the lease renewed")
            assert now_s() + 28 <= score <= now_s() + 30
            # what Go's recoverer lists (ListLeaseExpired(now - 30 s)) does not hold it
            go_listed = await redis_client.zrange(qk.lease, "-inf", now_s() - GO_RECOVER_CUTOFF_S,
                                                  byscore=True)
            assert task.id.encode() not in go_listed
            release.set()


async def test_a_cancel_published_as_gos_inspector_does_stops_an_asyncq_run(
        aworker: WorkerFactory, aurl: str, redis_client: Redis, asyncq_queue: str) -> None:
    qk = K.queue_keys(asyncq_queue)
    started: list[str] = []
    cancelled: list[str] = []
    async with Client(aurl) as client:
        task = await client.enqueue("block", queue=asyncq_queue)
        async with aworker(blocking_mux(started, asyncio.Event(), cancelled),
                           queues={asyncq_queue: 1}, idle_poll_interval=0.05):
            await wait_until(lambda: started == [task.id], message="the task started")
            await redis_client.publish(K.CANCEL_CHANNEL, task.id)  # Inspector.CancelProcessing
            await wait_until(lambda: cancelled == [task.id], message="the handler cancelled")

            async def archived() -> bool:
                return await redis_client.zscore(qk.archived, task.id) is not None
            await wait_until(archived, message="the task archived")
    msg = _codec.decode(await redis_client.hget(qk.task(task.id), "msg"))
    assert "cancelled on request" in msg.error_msg


async def test_a_worker_process_is_listed_then_expires_as_gos_after_sigkill(
        aurl: str, redis_client: Redis, asyncq_queue: str, tmp_path: Path) -> None:
    """A real ``asyncq worker`` process: listed with its pid and running task; killed, its
    records expire after the TTL and Go's listing drops it; its run, no longer renewed, is
    recovered by another asyncq worker's recoverer."""
    qk = K.queue_keys(asyncq_queue)
    log = tmp_path / "worker.log"
    async with Client(aurl) as client:
        task = await client.enqueue("slow:block", b'{"n": 1}', queue=asyncq_queue)
        async with worker_process(aurl, asyncq_queue, log, "--heartbeat-interval", "1",
                                  "--lease-duration", "3", "--idle-poll-interval",
                                  "0.05") as proc:
            async def listed() -> list[Any]:
                # (a beat written before the run started lists the server with no run: wait
                # for one written while it ran; server and runs are read one after the other)
                return [(s, w) for s in (await go_servers(redis_client)).values()
                        if s.pid == proc.pid and s.active_worker_count == 1
                        for w in await go_workers(redis_client) if w.server_id == s.server_id]
            [(server, run)] = await wait_until(listed, timeout=30,
                                               message=f"the worker listed (log: {log})")
            assert (server.host, server.status, server.active_worker_count) == (
                socket.gethostname(), "active", 1)
            assert (run.task_id, run.task_type, run.task_payload) == (
                task.id, "slow:block", b'{"n": 1}')
            skey = K.server_key(server.host, server.pid, server.server_id)
            assert 1 <= await redis_client.ttl(skey) <= 3
            proc.send_signal(signal.SIGKILL)
            await proc.wait()

            async def gone() -> bool:
                return (server.server_id not in await go_servers(redis_client)
                        and not await redis_client.exists(skey))
            await wait_until(gone, timeout=10, message="its state expired")
        assert await redis_client.hget(qk.task(task.id), "state") == b"active"
        factory = WorkerFactory(aurl)
        try:
            async with factory(blocking_mux([], asyncio.Event()), queues={asyncq_queue: 1},
                               recover_interval=0.2, recover_grace=0.5,
                               idle_poll_interval=0.05):
                async def recovered() -> bool:
                    return await redis_client.zscore(qk.retry, task.id) is not None
                await wait_until(recovered, timeout=15, message="its run recovered")
        finally:
            await factory.aclose()


async def test_failures_end_as_a_go_server_ends_them(
        aworker: WorkerFactory, aurl: str, redis_client: Redis, asyncq_queue: str) -> None:
    """SkipRetry: archived at once, retried unchanged (Go's SkipRetry); RevokeTask: deleted,
    counted processed, not failed (Go's RevokeTask); any other error: retried after asynq's
    default delay, retried^4 + 15 + rand(0..29) * (retried + 1) s."""
    qk = K.queue_keys(asyncq_queue)
    mux = ServeMux()

    @mux.handler("skip")
    async def skip(task: Task) -> None:
        raise SkipRetry("bad input")

    @mux.handler("revoke")
    async def revoke(task: Task) -> None:
        raise RevokeTask("not wanted")

    @mux.handler("fail")
    async def fail(task: Task) -> None:
        raise ValueError("boom")

    async with Client(aurl) as client:
        skipped = await client.enqueue("skip", queue=asyncq_queue, max_retry=5)
        revoked = await client.enqueue("revoke", queue=asyncq_queue)
        failed = await client.enqueue("fail", queue=asyncq_queue)
        enqueued_s = time.time()
        async with aworker(mux, queues={asyncq_queue: 1}, idle_poll_interval=0.05):
            async def settled() -> bool:
                return (await redis_client.llen(qk.active) == 0
                        and await redis_client.llen(qk.pending) == 0
                        and not await redis_client.exists(qk.task(revoked.id))
                        and await redis_client.zcard(qk.retry) == 1)
            await wait_until(settled, message="every task ended")
    skip_msg = _codec.decode(await redis_client.hget(qk.task(skipped.id), "msg"))
    assert await redis_client.zscore(qk.archived, skipped.id) is not None
    assert (skip_msg.retried, skip_msg.error_msg) == (0, "bad input")  # (as Go's texts read)
    fail_msg = _codec.decode(await redis_client.hget(qk.task(failed.id), "msg"))
    assert (fail_msg.retried, fail_msg.error_msg) == (1, "boom")
    assert await redis_client.hget(qk.task(failed.id), K.F_ERROR) == b"ValueError: boom"
    retry_at = await redis_client.zscore(qk.retry, failed.id)
    assert enqueued_s + 15 - 1 <= retry_at <= time.time() + 44 + 1
    assert await redis_client.get(qk.processed) == b"3"
    assert await redis_client.get(qk.failed) == b"2"  # the revoked task is no failure
