"""The core end-to-end scenarios on every deployment: Redis Cluster (3 masters), Sentinel
(master + replica + 3 Sentinels), a TLS-only server and an ACL-limited user (issue 8, item 5).

Each scenario talks to Redis only through the deployment's URL (as the application would),
and checks the outcome with an admin connection or the Inspector.
"""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis, RedisCluster

from asyncq import Client, Inspector, Scheduler, ServeMux, Task, TaskState, Worker
from asyncq._broker import _keys as K
from asyncq.testing import wait_drained, wait_until
from tests.helpers.processes import worker_process

from .conftest import Deployment

pytestmark = pytest.mark.anyio

FAST = {"forward_interval": 0.05, "heartbeat_interval": 0.25, "recover_interval": 0.2,
        "recover_grace": 0.2, "shutdown_timeout": 2.0, "idle_poll_interval": 0.5}


def queues(n: int = 3) -> list[str]:
    tag = uuid.uuid4().hex[:8]
    return [f"d-{tag}-{i}" for i in range(n)]


class Recorder:
    """A mux whose handlers record what ran."""

    def __init__(self) -> None:
        self.done: Counter[str] = Counter()
        self.started: dict[str, asyncio.Event] = {}
        self.mux = ServeMux()
        self.mux.handler("ok")(self.ok)
        self.mux.handler("flaky")(self.flaky)
        self.mux.handler("block")(self.block)
        self.mux.handler("slow:block")(self.ok)  # the recovering worker finishes it at once

    async def ok(self, task: Task) -> None:
        assert task.id is not None
        self.done[task.id] += 1

    async def flaky(self, task: Task) -> None:
        assert task.id is not None
        if task.retried == 0:
            raise RuntimeError("first attempt fails")
        self.done[task.id] += 1

    async def block(self, task: Task) -> None:
        assert task.id is not None
        self.started.setdefault(task.id, asyncio.Event()).set()
        await asyncio.Event().wait()


def no_delay(n: int, exc: BaseException, task: Task) -> float:
    return 0.0


async def test_enqueue_process_and_inspect(deployment: Deployment,
                                           admin: Redis | RedisCluster) -> None:
    qs = queues()
    rec = Recorder()
    async with Client(deployment.url) as client:
        one = await client.enqueue("ok", queue=qs[0], retention=timedelta(minutes=5))
        many = await client.enqueue_many(
            [Task("ok", {"i": i}, queue=qs[i % 3], retention=timedelta(minutes=5))
             for i in range(60)])
        ids = [one.id] + [t.id for t in many if not isinstance(t, Exception)]
        assert len(ids) == 61
        async with Worker(deployment.url, rec.mux, queues=dict.fromkeys(qs, 1),
                          concurrency=8, **FAST) as worker:
            await wait_drained(admin, qs, worker=worker, timeout=20)
            async with Inspector(deployment.url) as inspector:
                servers = await inspector.workers()
                assert worker.config.server_id in {s.id for s in servers}
                assert set(qs) <= set(await inspector.queues())
                infos = [await inspector.queue_info(q) for q in qs]
                assert [i.completed for i in infos] == [21, 20, 20]
                assert sum(i.processed for i in infos) == 61
                listed = await inspector.list_tasks(qs[0], TaskState.COMPLETED, page_size=100)
                assert {t.id for t in listed} >= {one.id}
                assert (await inspector.task_info(qs[1], ids[2])).state is TaskState.COMPLETED
                assert (await inspector.history(qs[0], days=1))[0].processed == 21
    assert set(rec.done) == set(ids)
    assert max(rec.done.values()) == 1


async def test_retry_then_success(deployment: Deployment, admin: Redis | RedisCluster) -> None:
    q, = queues(1)
    rec = Recorder()
    async with Client(deployment.url) as client:
        info = await client.enqueue("flaky", queue=q, max_retry=3)
        async with Worker(deployment.url, rec.mux, queues={q: 1}, retry_delay=no_delay,
                          **FAST) as worker:
            await wait_until(lambda: rec.done[info.id] == 1, timeout=15, message="retried")
            await wait_drained(admin, [q], worker=worker, include_scheduled=True)
        async with Inspector(deployment.url) as inspector:
            qi = await inspector.queue_info(q)
            assert (qi.processed, qi.failed, qi.size) == (2, 1, 0)


async def test_scheduled_task_runs_when_due(deployment: Deployment,
                                            admin: Redis | RedisCluster) -> None:
    q, = queues(1)
    rec = Recorder()
    async with Client(deployment.url) as client:
        info = await client.enqueue("ok", queue=q, process_in=timedelta(milliseconds=600))
        assert info.state is TaskState.SCHEDULED
        async with Inspector(deployment.url) as inspector:
            scheduled = await inspector.list_tasks(q, TaskState.SCHEDULED)
            assert [t.id for t in scheduled] == [info.id]
        async with Worker(deployment.url, rec.mux, queues={q: 1}, **FAST):
            await wait_until(lambda: rec.done[info.id] == 1, timeout=15, message="ran")


async def test_cancel_a_running_task(deployment: Deployment) -> None:
    q, = queues(1)
    rec = Recorder()
    async with Client(deployment.url) as client:
        info = await client.enqueue("block", queue=q, max_retry=0)
        async with Worker(deployment.url, rec.mux, queues={q: 1}, **FAST), \
                Inspector(deployment.url) as inspector:
            await wait_until(lambda: info.id in rec.started, timeout=15, message="started")
            await client.cancel(info.id)

            async def archived() -> bool:
                return (await inspector.queue_info(q)).archived == 1

            await wait_until(archived, timeout=15, message="archived after cancel")
            task = await inspector.task_info(q, info.id)
            assert task.state is TaskState.ARCHIVED
            assert "cancel" in (task.last_error or "")




async def test_task_of_a_killed_worker_is_recovered(deployment: Deployment,
                                                    admin: Redis | RedisCluster,
                                                    tmp_path: Path) -> None:
    q, = queues(1)
    rec = Recorder()
    qk = K.queue_keys(q)
    async with Client(deployment.url) as client:
        info = await client.enqueue("slow:block", queue=q)
        async with worker_process(deployment.url, q, tmp_path / "worker.log", "--lease-duration",
                                  "1", "--heartbeat-interval", "0.25") as proc:
            async def running() -> bool:
                return await admin.hget(qk.task(info.id), "state") == b"active"

            try:
                await wait_until(running, timeout=20, message="active in the worker process")
            except TimeoutError:
                raise AssertionError((tmp_path / "worker.log").read_text()[-3000:]) from None
            proc.send_signal(signal.SIGKILL)
            assert await proc.wait() == -signal.SIGKILL
        async with Worker(deployment.url, rec.mux, queues={q: 1}, lease_duration=1,
                          retry_delay=no_delay, **FAST) as worker:
            await wait_until(lambda: rec.done[info.id] == 1, timeout=20, message="recovered")
            assert worker.recoverer.recovered >= 1
            await wait_drained(admin, [q], worker=worker, include_scheduled=True)


async def test_scheduler_enqueues_and_inspector_lists_it(deployment: Deployment) -> None:
    q, = queues(1)
    rec = Recorder()
    scheduler = Scheduler(deployment.url, heartbeat_interval=0.5)
    entry = scheduler.register("@every 1s", "ok", queue=q)
    async with scheduler, Worker(deployment.url, rec.mux, queues={q: 1}, **FAST), \
            Inspector(deployment.url) as inspector:
        await wait_until(lambda: sum(rec.done.values()) >= 1, timeout=15, message="fired")

        async def listed() -> Any:
            return [e for e in await inspector.scheduler_entries() if e.id == entry]

        await wait_until(listed, timeout=10, message="entry published")
        events = await inspector.scheduler_history(entry)
        assert events and events[0].queue == q
