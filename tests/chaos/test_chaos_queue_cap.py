"""A queue's concurrency cap is exact across real worker processes SIGKILLed mid-run.

Three ``asyncq worker`` processes (concurrency 10 each) consume a queue capped at 2 in Redis,
100 tasks of 50 ms whose handler declares no limit. A worker is SIGKILLed while it runs a task
and started again, twice (a tenth, then half of the tasks done). From the ledger of runs (each
start and end, by the handlers' own clocks): never more than 2 at once, a killed run counting
until its lease lapsed (read from Redis right after the kill), since its slot is held that
long; every task completes; and the first dead worker's slot serves other tasks soon after its
lease lapses.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import pytest
import qcapapp
from anyio.abc import Process
from redis.asyncio import Redis

from asyncq import Client, Inspector, Task
from asyncq._broker import _keys as K
from asyncq.testing import wait_until
from tests.helpers.processes import ROOT, worker_process

pytestmark = [pytest.mark.anyio, pytest.mark.chaos]

APP = "tests.chaos.qcapapp:mux"
CAP, TASKS, MS, LEASE = 2, 100, 50, 2.0
WORKER_ARGS = ("--concurrency", "10", "--lease-duration", str(LEASE), "--heartbeat-interval",
               "0.5", "--recover-interval", "0.25", "--recover-grace", "0.25")


class Run:
    """One run of a task: its number, id, worker pid, start and end (None: not ended)."""

    def __init__(self, n: int, task_id: str, pid: int, start: float) -> None:
        self.n, self.id, self.pid, self.start = n, task_id, pid, start
        self.end: float | None = None


async def read_runs(redis: Redis, key: str) -> list[Run]:
    runs: dict[tuple[str, int], Run] = {}
    for raw in await redis.lrange(key, 0, -1):
        what, n, task_id, pid, at = raw.decode().split(" ")
        if what == "s":
            runs[(task_id, int(pid))] = Run(int(n), task_id, int(pid), float(at))
        else:
            runs[(task_id, int(pid))].end = float(at)
    return list(runs.values())


def most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most spans overlapping (an end before a start at the same instant)."""
    edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    now = most = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


async def victim_running(redis: Redis, key: str, procs: list[Process],
                         done: int) -> Process | None:
    """A worker with a run started and not ended, once ``done`` tasks ran (the first kill
    early: what is left takes one slot longer than the lease, so both slots are busy after it
    lapses)."""
    runs = await read_runs(redis, key)
    if len([r for r in runs if r.end is not None]) < done:
        return None
    open_pids = {r.pid for r in runs if r.end is None}
    return next((p for p in procs if p.pid in open_pids), None)


@asynccontextmanager
async def worker(url: str, queue: str, ledger_url: str, log: Path) -> AsyncIterator[Process]:
    env = {**os.environ, qcapapp.LEDGER_URL_ENV: ledger_url, "PYTHONPATH": str(ROOT)}
    async with worker_process(url, queue, log, *WORKER_ARGS, target=APP, env=env,
                              append=True) as proc:
        yield proc


async def test_a_queue_cap_of_2_is_exact_across_three_workers_sigkilled_twice(
    asyncq_client: Client, asyncq_queue: str, asyncq_redis_url: str, redis_client: Redis,
    tmp_path: Path,
) -> None:
    q = asyncq_queue
    key = f"qcap-ledger:{{{q}}}:{time.time_ns()}"
    inspector = Inspector(redis_client)
    await inspector.set_queue_concurrency(q, CAP)
    await asyncq_client.enqueue_many(
        Task("cap:work", {"l": key, "n": i, "ms": MS}, queue=q) for i in range(TASKS))

    async with AsyncExitStack() as stack:
        procs = [await stack.enter_async_context(
                     worker(asyncq_redis_url, q, asyncq_redis_url, tmp_path / f"w{i}.log"))
                 for i in range(3)]

        kills: list[tuple[float, list[Run]]] = []  # (when, the runs it cut)
        for done in (TASKS // 10, TASKS // 2):
            for attempt in range(5):  # a run may end between reading the ledger and the kill
                victim = await wait_until(
                    lambda d=done: victim_running(redis_client, key, procs, d), timeout=30,
                    message=f"a worker running a task, {done} of them done")
                victim.send_signal(signal.SIGKILL)
                assert await victim.wait() == -signal.SIGKILL
                killed_at = time.time()
                # The cut runs hold their slots until their leases lapse: read when that is.
                cut = [r for r in await read_runs(redis_client, key)
                       if r.pid == victim.pid and r.end is None]
                lapses = [await redis_client.zscore(K.queue_keys(q).lease, r.id) for r in cut]
                assert all(lapse is not None for lapse in lapses)
                for run, lapse in zip(cut, lapses, strict=True):
                    run.end = float(lapse or 0) / 1000
                if cut:
                    cap = await inspector.queue_concurrency(q)
                    assert cap is not None and cap.in_use >= len(cut)  # still held: not leaked
                procs[procs.index(victim)] = await stack.enter_async_context(  # started again
                    worker(asyncq_redis_url, q, asyncq_redis_url,
                           tmp_path / f"again{done}-{attempt}.log"))
                if cut:
                    kills.append((killed_at, cut))
                    break
            else:
                raise AssertionError(f"no kill caught a run ({done} done)")

        async def all_done() -> bool:
            runs = await read_runs(redis_client, key)
            return {r.n for r in runs if r.end is not None} >= set(range(TASKS))

        await wait_until(all_done, timeout=60, message="every task completed")
        runs = await read_runs(redis_client, key)

    ended = [r for r in runs if r.end is not None]
    every_cut = [r for _, cut in kills for r in cut]
    cut_ids = {(r.id, r.pid) for r in every_cut}
    spans = [(r.start, r.end) for r in ended if (r.id, r.pid) not in cut_ids]
    spans += [(r.start, r.end) for r in every_cut if r.end is not None]
    killed_at, first_cut = kills[0]
    lapse = max(r.end for r in first_cut if r.end is not None)
    # The dead worker's slots serve others again once its leases lapsed: the first time CAP
    # runs overlap after the lapse (the slots were all in use before the kill).
    after = [(s, e) for s, e in spans if e > lapse]
    full_again = min((max(s for s, _ in pair) for pair in _overlapping_pairs(after)),
                     default=None)
    print(f"\nQUEUE CAP: {len(runs)} runs ({len(every_cut)} cut by {len(kills)} SIGKILLs), "
          f"most at once {most_at_once(spans)}; the first lease lapsed "
          f"{lapse - killed_at:.2f} s after its kill; "
          f"{CAP} running again {(full_again or lapse) - lapse:.3f} s after the lapse")
    assert most_at_once(spans) <= CAP
    assert {r.n for r in ended} == set(range(TASKS))
    assert full_again is not None and full_again - lapse < 2.0
    info = await inspector.queue_info(q)
    assert info.pending + info.active + info.scheduled + info.retry == 0
    cap_after = await inspector.queue_concurrency(q)
    assert cap_after is not None and (cap_after.in_use, cap_after.waiting) == (0, 0)


def _overlapping_pairs(spans: list[tuple[float, float]]) -> list[list[tuple[float, float]]]:
    """Every two spans that overlap (CAP is 2)."""
    ordered = sorted(spans)
    return [[a, b] for i, a in enumerate(ordered) for b in ordered[i + 1:] if b[0] < a[1]]
