"""Waiters (``client.result``) through killed pub/sub connections (``CLIENT KILL TYPE pubsub``:
the client's event subscription and the workers' hand-off and signal subscriptions) and a Redis
restart shorter than a lease, with worker processes running the tasks:

* every task runs exactly once (the handlers keep a ledger of every start and finish);
* every waiter gets its task's result, or a TaskNotFoundError saying why there is none: its
  task ended, keeping nothing, while the client's event connection was broken — or, for a
  waiter that started late, before the client listened;
* nothing reaches the event loop's exception handler ("Future exception was never
  retrieved") and no other error reaches a waiter.

The last case is the replay those faults can cause, made deterministic: a task handed off in
one hop that its worker's dequeue returns again while its run finishes.
"""

from __future__ import annotations

import asyncio
import gc
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import chaosapp
import pytest
from chaoslib import (
    Ledger,
    LedgerReport,
    cli_worker,
    observer,
    stop_process,
    task_ids,
    task_states,
    wait_settled,
)
from redis.asyncio import Redis

from asyncq import Client, Task, TaskInfo, TaskNotFoundError
from asyncq._broker import _keys as K
from asyncq._broker._redis import HANDOFF_GRACE_MS
from asyncq._testing.redis_server import RedisServer
from asyncq.testing import WorkerFactory, wait_until
from tests.helpers.inprocess import blocking_mux
from tests.helpers.processes import log_events

pytestmark = [pytest.mark.anyio, pytest.mark.chaos]

LEASE = 10.0  # seconds: longer than the restart, so no lease runs out
DOWN = 1.5  # seconds Redis stays down
MISSED = "ended while this client's connection for task events was broken"
CHANGED = "ended while this client was changing its subscription to task events"
BEFORE = "it ended and nothing of it is kept any more"


@pytest.mark.timeout(300)
async def test_5000_waiters_through_pubsub_kills_and_a_redis_restart(
    aof_server: RedisServer, asyncq_redis_url: str, asyncq_queue: str, ledger: Ledger,
    tmp_path: Path,
) -> None:
    n = 5000
    q = asyncq_queue
    url = aof_server.url
    ids = task_ids("waiters", n)
    logs = [tmp_path / "w1.log", tmp_path / "w2.log"]
    args = ("--concurrency", "25", "--lease-duration", str(LEASE))
    redis = observer(url)
    began = time.monotonic()
    killed = 0
    try:
        with unhandled_errors() as unhandled:
            async with Client(url) as client:
                tasks = [Task("chaos:echo", chaosapp.payload(ledger.key, i, ms=[10, 40]),
                              task_id=ids[i], queue=q) for i in range(n)]
                infos = [info for info in await client.enqueue_many(tasks)
                         if isinstance(info, TaskInfo)]
                assert len(infos) == n
                waits: list[asyncio.Future[Any]] = []
                done_before: set[int] = set()  # tasks that finished before their waiter began

                async def wave(upto: int) -> None:
                    """Start the waiters of the tasks up to ``upto`` not waited for yet."""
                    _, finishes = await ledger.counts(n)
                    done_before.update(i for i in range(len(waits), upto) if finishes[i])
                    waits.extend(asyncio.ensure_future(client.result(info, timeout=120))
                                 for info in infos[len(waits):upto])

                async def kill() -> int:
                    return await _kill_pubsub(redis)

                async def subscribed() -> None:
                    """Until the client's subscription is up (a wave started before would
                    wait for it, and its tasks might run meanwhile)."""
                    await wait_until(lambda: client._waits.hub.subscribed(q), timeout=10)

                # Half the waiters start before any task runs; the others in waves, each just
                # before a CLIENT KILL, so that some are reading their task's state when their
                # connection dies (their tasks are far enough down the queue not to have run).
                await wave(n // 2)
                async with cli_worker(url, q, asyncq_redis_url, logs[0], *args) as w1, \
                        cli_worker(url, q, asyncq_redis_url, logs[1], *args) as w2:
                    for share, upto in ((0.1, 3 * n // 5), (0.3, 7 * n // 10)):
                        await wait_until(lambda s=share: _finished(ledger, n, s), timeout=60)
                        await subscribed()
                        await wave(upto)
                        await anyio.sleep(0.005)
                        killed += await kill()
                    await wait_until(lambda: _finished(ledger, n, 0.45), timeout=60)
                    aof_server.stop()
                    await anyio.sleep(DOWN)  # the fault: Redis down for less than a lease
                    aof_server.start()
                    await wait_until(lambda: _finished(ledger, n, 0.6), timeout=60)
                    await subscribed()
                    await wave(n)
                    await anyio.sleep(0.005)
                    killed += await kill()
                    with anyio.fail_after(120):
                        outcomes = await asyncio.gather(*waits, return_exceptions=True)
                    await wait_settled(redis, [q], timeout=60)
                    assert w1.returncode is None and w2.returncode is None, "a worker died"
                    for proc in (w1, w2):
                        code, _ = await stop_process(proc, timeout=15)
                        assert code == 0
            duration = time.monotonic() - began
            starts, finishes = await ledger.counts(n)
            states = await task_states(redis, q, ids)
    finally:
        await redis.aclose()

    got = _outcomes(outcomes, list(range(n)))
    # A task that ended while the client's subscription was down, before its waiter began
    # (the wave started once the subscription was back), is rightly "ended before the wait".
    late = [i for i, out in enumerate(outcomes)
            if isinstance(out, TaskNotFoundError) and BEFORE in str(out)]
    duplicates = [ids[i] for i, s in enumerate(starts) if s > 1]
    events = [e for log in logs for e in log_events(log)]
    report = LedgerReport(
        "5000 waiters, pub/sub killed x3, Redis restarted", enqueued=n,
        completed=sum(1 for f in finishes if f == 1), duplicates=len(duplicates),
        lost=sum(1 for f in finishes if f == 0), duplicate_ids=duplicates,
        extra={"waiters": n, "duration_s": round(duration, 1), "waiter_outcomes": got,
               "pubsub_connections_killed": killed, "unhandled": len(unhandled),
               "lease_lost": sum(1 for e in events
                                 if e["event"] == "lease lost; handler cancelled")})
    report.publish()
    assert killed >= 3
    assert duplicates == [], duplicates[:20]
    assert all(f == 1 for f in finishes), [ids[i] for i, f in enumerate(finishes) if f != 1]
    assert all(state in ("", "completed") for state, _ in states)
    assert set(got) <= {"result", "missed on a broken connection", "ended before the wait"}, got
    assert set(late) <= done_before, sorted(set(late) - done_before)[:20]
    assert unhandled == [], unhandled[:5]
    assert not [e for e in events if e.get("level") in ("error", "critical")], "errors logged"


@pytest.mark.timeout(120)
async def test_waiters_started_while_pubsub_connections_are_killed(
    own_server: RedisServer, asyncq_redis_url: str, asyncq_queue: str, ledger: Ledger,
    tmp_path: Path,
) -> None:
    """Waits start all along (for tasks running, done or not yet run) while every pub/sub
    connection is killed every 40 ms."""
    n, rounds, per_round = 4000, 40, 100
    q = asyncq_queue
    url = own_server.url
    ids = task_ids("late", n)
    redis = observer(url)
    rng = random.Random(7)
    try:
        with unhandled_errors() as unhandled:
            async with Client(url) as client:
                tasks = [Task("chaos:echo", chaosapp.payload(ledger.key, i, ms=[1, 5]),
                              task_id=ids[i], queue=q) for i in range(n)]
                infos = [info for info in await client.enqueue_many(tasks)
                         if isinstance(info, TaskInfo)]
                assert len(infos) == n
                waits: list[asyncio.Future[Any]] = []
                expected: list[int] = []
                async with cli_worker(url, q, asyncq_redis_url, tmp_path / "w.log",
                                      "--concurrency", "50"):
                    for _ in range(rounds):
                        expected += [rng.randrange(n) for _ in range(per_round)]
                        waits.extend(asyncio.ensure_future(client.result(infos[i], timeout=30))
                                     for i in expected[len(waits):])
                        await anyio.sleep(0.01)
                        await redis.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
                        await anyio.sleep(0.03)
                    with anyio.fail_after(60):
                        outcomes = await asyncio.gather(*waits, return_exceptions=True)
                    await wait_settled(redis, [q], timeout=30)
            starts, finishes = await ledger.counts(n)
    finally:
        await redis.aclose()
    got = _outcomes(outcomes, expected)
    print(f"\nwaiters={rounds * per_round} outcomes={got} unhandled={len(unhandled)}")
    assert all(s == 1 for s in starts) and all(f == 1 for f in finishes)
    assert set(got) <= {"result", "missed on a broken connection", "ended before the wait",
                        "missed while changing the subscription"}, got
    assert unhandled == [], unhandled[:5]


@contextmanager
def unhandled_errors() -> Iterator[list[str]]:
    """What reaches the running loop's exception handler inside the block (a garbage
    collection at its end makes every future and task dropped unretrieved report)."""
    loop = asyncio.get_running_loop()
    seen: list[str] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(
        lambda _loop, context: seen.append(f"{context.get('message')}: "
                                           f"{context.get('exception')!r}"))
    try:
        yield seen
        gc.collect()
    finally:
        loop.set_exception_handler(previous)


def _outcomes(outcomes: list[Any], expected: list[int]) -> dict[str, int]:
    """How many waiters got their result (``expected[i]`` for waiter i), or which error (by
    what it says)."""
    counts: dict[str, int] = {}
    for out, want in zip(outcomes, expected, strict=True):
        if isinstance(out, TaskNotFoundError) and MISSED in str(out):
            kind = "missed on a broken connection"
        elif isinstance(out, TaskNotFoundError) and CHANGED in str(out):
            kind = "missed while changing the subscription"
        elif isinstance(out, TaskNotFoundError) and BEFORE in str(out):
            kind = "ended before the wait"
        elif isinstance(out, BaseException):
            kind = repr(out)
        else:
            kind = "result" if out == want else f"wrong result {out!r}"
        counts[kind] = counts.get(kind, 0) + 1
    return counts


async def _finished(ledger: Ledger, n: int, share: float) -> bool:
    return await ledger.finished(n) >= n * share


async def _kill_pubsub(redis: Redis) -> int:
    """Kill every pub/sub connection of the server (the client's and the workers')."""
    return int(await redis.execute_command("CLIENT", "KILL", "TYPE", "pubsub"))


async def test_a_hand_off_a_dequeue_returns_after_it_finished_is_not_run_again(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    """How the duplicate of the issue came about: a task handed off in one hop and still
    running when its worker's next dequeue (past the grace) returns it again; its outcome is
    written in between, so the dequeue's reply arrives after the worker let go of it."""
    q = asyncq_queue
    started: list[str] = []
    release = asyncio.Event()
    async with asyncq_worker(blocking_mux(started, release), queues={q: 1}, concurrency=2,
                             idle_poll_interval=30, lease_duration=30) as w:
        idle = K.queue_keys(q).idle
        await wait_until(lambda: _idle(redis_client, idle), timeout=5, message="registered")
        first = await asyncq_client.enqueue("block", queue=q)
        await wait_until(lambda: started == [first.id], timeout=5, message="handed off")
        # Past the grace, a dequeue of this worker returns the hand-off again (it is still
        # leased to it): hold that dequeue's reply until the task has finished.
        handoff = K.queue_keys(q).handoff(w.worker.config.server_id)
        await wait_until(lambda: _past_grace(redis_client, handoff, first.id), timeout=5,
                         message="the hand-off record older than its grace")
        held: list[Any] = []
        hold = asyncio.Event()
        real = w.worker.broker.dequeue

        async def held_dequeue(*args: Any, **kwargs: Any) -> Any:
            reply = await real(*args, **kwargs)
            if any(raw.id == first.id for raw in reply[0]):
                held.append(reply)
                await hold.wait()
            return reply

        w.worker.broker.dequeue = held_dequeue  # type: ignore[method-assign]
        await wait_until(lambda: _idle(redis_client, idle), timeout=5, message="registered")
        await asyncq_client.enqueue("quick", queue=q)  # its hand-off makes the worker dequeue
        await wait_until(lambda: held, timeout=5, message="the dequeue returned the hand-off")
        release.set()
        await wait_until(lambda: first.id not in w.worker.leases, timeout=5,
                         message="outcome written")
        hold.set()
        await w.wait_drained(q)
    assert started.count(first.id) == 1, started


async def _idle(redis: Redis, key: str) -> bool:
    return bool(await redis.zcard(key))


async def _past_grace(redis: Redis, handoff: str, task_id: str) -> bool:
    """Whether the hand-off record of ``task_id`` is older than the grace by the server's
    clock (what the dequeue script compares it with)."""
    record = await redis.hget(handoff, task_id)
    seconds, micros = await redis.time()
    now_ms = seconds * 1000 + micros // 1000
    return record is not None and int(record.split(b":")[1]) < now_ms - HANDOFF_GRACE_MS
