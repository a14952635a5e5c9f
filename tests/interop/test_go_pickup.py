"""Tasks Go's own client (``asynq.Client``, unmodified) enqueues start at once on an idle asyncq
worker: its blocked wait on the queue's pending list ends as Go LPUSHes the id, and the worker
dequeues it. Each worker polls only every 5 minutes here, so no poll can explain a start within
the test's bounds. Two workers on three queues run each task exactly once; beside a Go server on
the same queue, the Go server keeps serving (and Go's Inspector sees no task left behind)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from asyncqpeer import asynq_url, recording_mux
from goharness import GoPrograms, Ledger
from redis.asyncio import Redis

from asyncq import Worker
from asyncq._broker._asynq import _keys as K
from asyncq.testing import wait_until

pytestmark = pytest.mark.anyio
POLL = 300.0  # the asyncq workers' idle poll: far beyond every wait below


async def idle_workers(redis: Redis, queue: str) -> int:
    """asyncq workers whose last dequeue of ``queue`` found nothing."""
    return int(await redis.zcard(K.extra_keys(queue).idle))


async def test_go_tasks_start_at_once_on_idle_asyncq_workers(asynq_go: GoPrograms,
                                                              interop_redis: str) -> None:
    queues = [f"gp-{uuid.uuid4().hex[:8]}" for _ in range(3)]
    ledger = Ledger()
    mux = recording_mux(ledger)
    redis = Redis.from_url(interop_redis)
    ids: list[str] = []
    try:
        async with Worker(asynq_url(interop_redis), mux, queues=dict.fromkeys(queues, 1),
                          idle_poll_interval=POLL), \
                Worker(asynq_url(interop_redis), mux, queues=dict.fromkeys(queues, 1),
                       idle_poll_interval=POLL):
            for _ in range(3):
                for q in queues:
                    await wait_until(lambda q=q: _both_idle(redis, q), timeout=30)
                    run = await asynq_go.produce(interop_redis, "-n", "2", "-type", "ok",
                                                 "-queue", q)
                    assert not run.errors
                    ids += run.ids
                    # Within the Go program's own start-up and a few seconds: not a poll.
                    n = len(ids)
                    await wait_until(lambda n=n: len(ledger.ends) >= n, timeout=30,
                                     message=f"{n} Go tasks run")
    finally:
        await redis.aclose()
    runs = ledger.ends_by_id()
    assert sorted(runs) == sorted(ids)
    assert all(len(r) == 1 and r[0]["outcome"] == "ok" for r in runs.values())


async def _both_idle(redis: Redis, queue: str) -> bool:
    return await idle_workers(redis, queue) == 2


async def test_a_go_server_beside_a_waiting_asyncq_worker_is_unaffected(
        asynq_go: GoPrograms, interop_redis: str, workdir: Path) -> None:
    q = f"gs-{uuid.uuid4().hex[:8]}"
    ledger = Ledger()
    redis = Redis.from_url(interop_redis)
    try:
        async with asynq_go.server(interop_redis, workdir, "-queues", f"{q}=1",
                                   "-concurrency", "2", "-task-check-interval", "100ms"
                                   ) as server, \
                Worker(asynq_url(interop_redis), recording_mux(ledger), queues={q: 1},
                       concurrency=1, idle_poll_interval=POLL):
            await wait_until(lambda: idle_workers(redis, q), timeout=30)
            # 200 ms each, one at a time: the asyncq worker cannot take them all, so both run.
            run = await asynq_go.produce(interop_redis, "-n", "40", "-type", "sleep:200",
                                         "-queue", q, "-rate", "40")
            assert not run.errors

            def done() -> bool:
                return len(ledger.ends) + len(server.ledger().ends) >= 40

            await wait_until(done, timeout=60, message="40 Go tasks run")

            async def settled() -> dict[str, object] | None:
                info = await asynq_go.inspect(interop_redis, "queue", "-queue", q)
                return info if info["pending"] == info["active"] == 0 else None

            # Go's Inspector sees the queue as Go left it: nothing pending, nothing active.
            info = await wait_until(settled, timeout=30, message="the queue settled")
            go_runs = server.ledger()
    finally:
        await redis.aclose()
    runs: dict[str, int] = {}
    for end in [*ledger.ends, *go_runs.ends]:
        runs[end["id"]] = runs.get(end["id"], 0) + 1
    assert sorted(runs) == sorted(run.ids)
    assert set(runs.values()) == {1}
    assert go_runs.ends, "the Go server ran none: it was starved, not beside"
    assert info["processed"] == 40, info
