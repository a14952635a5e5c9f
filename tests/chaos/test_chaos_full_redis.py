"""A full Redis (``maxmemory`` + ``noeviction``), issue 12 item A: producers fill it until
enqueue fails loudly, and keep it full (a second queue nobody serves takes any byte the
workers free); two worker processes started afterwards drain the filled queue completely,
through dequeue, extend-lease (tasks outliving their lease), retry + forward and complete.
Ledger: nothing lost, nothing run twice."""

from __future__ import annotations

from pathlib import Path

import anyio
import chaosapp
import pytest
from chaoslib import Ledger, build_report, observer, runner_worker, stop_process, wait_settled

from asyncq import BrokerError, Client, Task
from asyncq._testing.redis_server import RedisServer
from asyncq.testing import wait_until

pytestmark = [pytest.mark.anyio, pytest.mark.chaos]

PAD = "x" * 1500
HEADROOM = 3 * 2**20  # bytes of maxmemory above what the empty server uses


def task(ledger: Ledger, queue: str, i: int) -> Task:
    if i % 25 == 0:  # outlives its 1 s lease: the heartbeat must renew it under OOM
        return Task("chaos:work", chaosapp.payload(ledger.key, i, ms=2500, pad=PAD),
                    task_id=f"full-{i}", queue=queue, retention=3600)
    if i % 5 == 0:  # fails half the time: retry + forward under OOM
        return Task("chaos:flaky", chaosapp.payload(ledger.key, i, p=0.5, pad=PAD),
                    task_id=f"full-{i}", queue=queue, retention=3600, max_retry=25)
    return Task("chaos:work", chaosapp.payload(ledger.key, i, ms=[0, 20], pad=PAD),
                task_id=f"full-{i}", queue=queue, retention=3600)


class Producers:
    """Fill ``queue`` until Redis refuses (tasks 0..n-1, the ledger's order), then keep a
    filler queue topped up."""

    def __init__(self, url: str, queue: str, ledger: Ledger) -> None:
        self.url, self.queue, self.ledger = url, queue, ledger
        self.ids: list[str] = []
        self.refused = 0
        self.filler_accepted = 0
        self.full = anyio.Event()
        self.stop = False
        self._next = 0

    async def fill(self, client: Client) -> None:
        while not self.full.is_set():
            i, self._next = self._next, self._next + 1
            t = task(self.ledger, self.queue, i)
            try:
                await client.enqueue(t)
            except BrokerError as exc:
                assert "maxmemory" in str(exc), exc
                self.refused += 1
                self.full.set()
                return
            self.ids.append(t.id or "")

    async def top_up(self, client: Client) -> None:
        while not self.stop:
            try:
                await client.enqueue(Task("chaos:filler", {"pad": PAD},
                                          queue=f"{self.queue}-filler"))
                self.filler_accepted += 1
            except BrokerError:
                self.refused += 1
                await anyio.sleep(0.005)

    async def run(self) -> None:
        async with Client(self.url) as client:
            await self.fill(client)
            await self.top_up(client)


@pytest.mark.timeout(180)
async def test_full_redis_is_drained_by_worker_processes(
    own_server: RedisServer, asyncq_redis_url: str, asyncq_queue: str, ledger: Ledger,
    tmp_path: Path,
) -> None:
    q = asyncq_queue
    url = own_server.url
    redis = observer(url)
    used = int((await redis.info("memory"))["used_memory"])
    await redis.config_set("maxmemory-policy", "noeviction")
    await redis.config_set("maxmemory", used + HEADROOM)
    producers = Producers(url, q, ledger)
    options = {"queues": {q: 1}, "concurrency": 20, "lease_duration": 1.0,
               "retry_delay_ms": 100, "forward_interval": 0.2}
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(producers.run)
            await producers.full.wait()
            # A handful of batches' worth, all accepted before the first refusal.
            assert len(producers.ids) > 500
            async with runner_worker(url, asyncq_redis_url, tmp_path / "w1.log", **options) as w1, \
                    runner_worker(url, asyncq_redis_url, tmp_path / "w2.log", **options) as w2:
                await wait_until(lambda: ledger.started(len(producers.ids)), timeout=30,
                                 message="workers started running tasks on a full Redis")
                await wait_settled(redis, [q], timeout=90)
                assert w1.returncode is None and w2.returncode is None, "a worker died"
                producers.stop = True
                for proc in (w1, w2):
                    code, _ = await stop_process(proc, timeout=15)
                    assert code == 0
        n = len(producers.ids)
        ids = producers.ids
        # flaky tasks run until their first success: every failed start is expected.
        starts, finishes = await ledger.counts(n)
        runs = [starts[i] if i % 25 and i % 5 == 0 else 1 for i in range(n)]
        report = await build_report("full Redis drained", redis, q, ledger, ids,
                                    runs_expected=runs)
    finally:
        await redis.aclose()
    report.extra = {"enqueue_refused": producers.refused,
                    "filler_accepted": producers.filler_accepted}
    report.publish()
    # Redis stayed full while the workers drained it (completed tasks are kept, so little is
    # freed), and every enqueue meanwhile failed loudly.
    assert producers.refused > 50, report
    assert (report.completed, report.archived, report.lost, report.duplicates) == \
        (len(ids), 0, 0, 0), report
    assert all(f == 1 for f in finishes), "a task finished twice"
