"""A mixed fleet on the asynq layout: Go servers and asyncq worker processes consume the same
queues while Go's client and asyncq's fill them; one Go server and one asyncq worker are
SIGKILLed mid-run and restarted. Every process writes a ledger of its runs (one line when a
handler starts, one when it ends), and the union is asserted exactly: every task completed with
its exact payload, none lost, and a task ran more than once only where a killed process had
started it (each earlier start belongs to a killed process; the last one ended ok).

Recovery of the killed processes' runs, as each side does it: Go's recoverer (every minute,
for leases that ended 30 s ago or more, not configurable) and asyncq's (every second here; a
Go run's lease, too, only 30 s after it ended). Both retry at once (``-retry-delay 0s``, and
``asyncqpeer.process_config``), so a run is recovered about 60 s after a Go server's death and
12 s after an asyncq worker's (lease 10 s, grace 1 s): the test checks both bounds, the second
one being asyncq's own recovery on the asynq layout (Go's alone would take 40 s or more).

A small run on a 3-master Cluster checks that Go servers and asyncq workers share a queue there
too (no kills).
"""

from __future__ import annotations

import json
import shutil
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import interop_scenarios as sc
import pytest
from anyio.abc import Process
from asyncqpeer import process_env, worker_process_command
from goharness import GoPrograms, GoServer, Ledger, gen_payload, sha256_hex

from asyncq.testing import wait_until
from tests.helpers.processes import log_events, spawn
from tests.topology.cluster import LocalCluster

pytestmark = pytest.mark.anyio

N_EACH = 3000  # tasks each client enqueues
PAYLOAD = 64
TASK_TYPE = "sleep:5"  # each handler sleeps 5 ms
CONCURRENCY = 10
#: asyncq workers: leases of 10 s renewed every 3.3 s; a dead worker's runs are recovered
#: after 1 s more, looked for every second.
ASYNCQ_FLAGS = ("--concurrency", str(CONCURRENCY), "--lease-duration", "10",
                "--recover-interval", "1", "--recover-grace", "1", "--forward-interval", "0.1",
                "--idle-poll-interval", "0.2", "--shutdown-timeout", "5")
#: The whole run (start to the last task completed) stays under this.
RUN_BOUND = 150.0
KILL_AT = 2000  # runs ended (of 2 * N_EACH) when the two processes are killed
LEDGER_POLL = 0.2  # the ledgers hold thousands of lines: no need to read them every 5 ms


def go_flags(go: GoPrograms, queues: Sequence[str], concurrency: int = CONCURRENCY
             ) -> list[str]:
    flags = ["-queues", ",".join(f"{q}=1" for q in queues), "-concurrency", str(concurrency),
             "-delayed-check", "100ms", "-retry-delay", "0s", "-shutdown-timeout", "5s",
             "-ledger-payload-max", "0"]
    if go.version != "v0.24.1":
        flags += ["-task-check-interval", "100ms"]
    return flags


@dataclass
class AsyncqProcess:
    """An ``asyncq worker`` process on the asynq layout, its ledger and log."""

    proc: Process
    ledger_path: Path
    log_path: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_tail(self, lines: int = 30) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    async def wait_ready(self, timeout: float = 30.0) -> None:
        def ready() -> bool:
            if self.proc.returncode is not None:
                raise AssertionError(f"asyncq worker exited ({self.proc.returncode}):\n"
                                     f"{self.log_tail()}")
            return any(e["event"] == "worker ready" for e in log_events(self.log_path))

        await wait_until(ready, timeout=timeout, message="asyncq worker ready")

    async def kill(self) -> None:
        self.proc.kill()
        await self.proc.wait()

    async def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM: a graceful stop, exit 0."""
        self.proc.terminate()
        with anyio.fail_after(timeout):
            code = await self.proc.wait()
        assert code == 0, f"asyncq worker exited {code}:\n{self.log_tail()}"


@asynccontextmanager
async def asyncq_worker(url: str, queues: Sequence[str], workdir: Path, name: str,
                        *flags: str) -> AsyncIterator[AsyncqProcess]:
    ledger, log = workdir / f"{name}.ledger.jsonl", workdir / f"{name}.log"
    argv = worker_process_command(url, {q: 1 for q in queues}, *flags)
    async with spawn(argv, log, env=process_env(ledger)) as proc:
        worker = AsyncqProcess(proc, ledger, log)
        await worker.wait_ready()
        yield worker


class LedgerTail:
    """The runs every process of a test wrote so far, read incrementally from the ledger files
    (so polling thousands of lines stays cheap); a line cut by a SIGKILL is skipped."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self.paths = list(paths)
        self._offsets: dict[Path, int] = defaultdict(int)
        self._rest: dict[Path, bytes] = defaultdict(bytes)
        self.book = Ledger()

    def add(self, path: Path) -> None:
        self.paths.append(path)

    def read(self) -> Ledger:
        for path in self.paths:
            if not path.exists():
                continue
            with path.open("rb") as f:
                f.seek(self._offsets[path])
                data = self._rest[path] + f.read()
                self._offsets[path] = f.tell()
            *lines, self._rest[path] = data.split(b"\n")
            for line in lines:
                try:
                    doc = json.loads(line)
                except ValueError:
                    continue  # (a line cut by SIGKILL: only ever the last one of a process)
                if isinstance(doc, dict):
                    (self.book.starts if doc.get("event") == "start"
                     else self.book.ends).append(doc)
        return self.book

    def ok_ids(self) -> set[str]:
        return {e["id"] for e in self.read().ends if e["outcome"] == "ok"}


@dataclass
class Expected:
    """The tasks enqueued, by id: (queue, payload sha256)."""

    tasks: dict[str, tuple[str, str]] = field(default_factory=dict)

    def add(self, ids: Sequence[str], queue: str, seed: str) -> None:
        for i, task_id in enumerate(ids):
            self.tasks[task_id] = (queue, sha256_hex(gen_payload(seed, i, PAYLOAD)))


def unfinished_runs(book: Ledger, pid: int) -> set[str]:
    """The tasks whose run by ``pid`` started and never ended (it was killed in them)."""
    ended = {(e["id"], e["started"]) for e in book.ends if e["pid"] == pid}
    return {s["id"] for s in book.starts
            if s["pid"] == pid and (s["id"], s["started"]) not in ended}


def check_ledger(book: Ledger, expected: Expected, killed: set[int]) -> dict[str, int]:
    """The exact-ledger rules; returns counts for the report (runs, duplicates)."""
    starts: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for s in book.starts:
        starts[s["id"]].append(s)
    ends = {(e["id"], e["pid"], e["started"]): e for e in book.ends}
    assert set(starts) == set(expected.tasks), (
        f"lost: {len(set(expected.tasks) - set(starts))}, "
        f"foreign: {sorted(set(starts) - set(expected.tasks))[:5]}")
    assert {e["outcome"] for e in book.ends} == {"ok"}
    duplicates = 0
    for task_id, runs in starts.items():
        runs.sort(key=lambda r: r["started"])
        queue, digest = expected.tasks[task_id]
        assert {(r["queue"], r["payload_sha256"], r["type"]) for r in runs} == {
            (queue, digest, TASK_TYPE)}, task_id
        last = runs[-1]
        end = ends.get((task_id, last["pid"], last["started"]))
        assert end is not None and end["outcome"] == "ok", (
            f"{task_id}: its last run (pid {last['pid']}) did not complete: {runs}")
        earlier = [r["pid"] for r in runs[:-1]]
        assert set(earlier) <= killed, (
            f"{task_id} ran {len(runs)} times; an earlier run by a live process: {runs}")
        duplicates += len(runs) - 1
    return {"tasks": len(starts), "runs": len(book.starts), "duplicates": duplicates}


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_mixed_fleet_survives_sigkill_of_either_side(asynq_go: GoPrograms,
                                                          interop_redis: str,
                                                          asyncq_queue: str,
                                                          workdir: Path) -> None:
    url, go = interop_redis, asynq_go
    queues = [f"{asyncq_queue}-go", f"{asyncq_queue}-py"]  # what each client fills
    flags = go_flags(go, queues)
    began = time.monotonic()
    async with AsyncExitStack() as stack:

        async def go_server(name: str) -> GoServer:
            return await stack.enter_async_context(go.server(url, workdir, *flags, name=name))

        async def py_worker(name: str) -> AsyncqProcess:
            return await stack.enter_async_context(
                asyncq_worker(url, queues, workdir, name, *ASYNCQ_FLAGS))

        go_victim, go_survivor = await go_server("go-1"), await go_server("go-2")
        py_victim, py_survivor = await py_worker("py-1"), await py_worker("py-2")
        tail = LedgerTail([go_victim.ledger_path, go_survivor.ledger_path,
                           py_victim.ledger_path, py_survivor.ledger_path])
        expected = Expected()

        async def go_client() -> None:
            run = await go.produce(url, "-n", str(N_EACH), "-type", TASK_TYPE, "-queue",
                                   queues[0], "-payload-size", str(PAYLOAD), "-seed", "fleet-go",
                                   "-concurrency", "8", timeout=120)
            assert run.errors == []
            expected.add(run.ids, queues[0], "fleet-go")

        async def asyncq_client() -> None:
            ids = await sc.AsyncqProducer(url).enqueue_generated(N_EACH, TASK_TYPE, queues[1],
                                                                 PAYLOAD, "fleet-py")
            expected.add(ids, queues[1], "fleet-py")

        async with anyio.create_task_group() as tg:
            tg.start_soon(go_client)
            tg.start_soon(asyncq_client)
            victims = (go_victim.pid, py_victim.pid)

            def kill_time() -> bool:  # enough runs ended, and both victims inside runs now
                book = tail.read()
                return len(book.ends) >= KILL_AT and all(
                    unfinished_runs(book, pid) for pid in victims)

            await wait_until(kill_time, timeout=90, interval=LEDGER_POLL,
                             message=f"{KILL_AT} runs ended, both victims running tasks")
            await go_victim.kill()
            await py_victim.kill()
            killed_at, killed_wall = time.monotonic(), time.time()
        killed = {go_victim.pid, py_victim.pid}
        book = tail.read()
        cut = {pid: unfinished_runs(book, pid) for pid in killed}
        # the premise: both were killed in the middle of runs
        assert all(cut.values()), f"a victim was idle when killed: {cut}"

        go_again = await go_server("go-1-restarted")
        py_again = await py_worker("py-1-restarted")
        tail.add(go_again.ledger_path)
        tail.add(py_again.ledger_path)
        assert len(expected.tasks) == 2 * N_EACH
        await wait_until(lambda: tail.ok_ids() >= set(expected.tasks),
                         timeout=max(10.0, RUN_BOUND - (time.monotonic() - began)),
                         message="every task completed", interval=LEDGER_POLL)
        recovered_after = time.monotonic() - killed_at

        for queue in queues:
            info = await go.inspect(url, "queue", "-queue", queue)
            assert (info["pending"], info["active"], info["scheduled"], info["retry"],
                    info["archived"]) == (0, 0, 0, 0, 0), info
        for survivor in (go_survivor, go_again):
            await survivor.stop()
        for worker in (py_survivor, py_again):
            await worker.stop()

    book = tail.read()
    counts = check_ledger(book, expected, killed)
    rerun_after: dict[int, list[float]] = {}  # seconds from the kills to each re-run
    for pid, ids in cut.items():  # every run a kill cut short was run again, to completion
        again = {s["id"]: s["started"] - killed_wall for s in book.starts
                 if s["pid"] != pid and s["id"] in ids}
        assert set(again) == ids, f"pid {pid}: cut runs not run again: {ids - set(again)}"
        rerun_after[pid] = sorted(again.values())
    by_pid: dict[int, int] = defaultdict(int)
    for s in book.starts:
        by_pid[s["pid"]] += 1
    first = (go_victim.pid, go_survivor.pid, py_victim.pid, py_survivor.pid)
    assert all(by_pid[p] for p in first), f"a process of the fleet ran nothing: {by_pid}"
    print(f"mixed fleet: {counts}, cut short: { {p: len(i) for p, i in cut.items()} }, "
          f"re-run after the kills (s): "
          f"{ {p: (round(t[0], 1), round(t[-1], 1)) for p, t in rerun_after.items()} }, "
          f"runs per pid: {dict(by_pid)}, all done {recovered_after:.1f}s after the kills, "
          f"{time.monotonic() - began:.1f}s in all")
    # Nobody took a dead Go server's run while its lease could still have been live: Go renews
    # leases every 5 s to now + 30 s, so each lasted 25 s or more past the kill.
    assert rerun_after[go_victim.pid][0] >= 25, rerun_after
    # The asyncq worker's runs (leases of 10 s, renewed every 3.3 s) are recovered by the
    # asyncq workers once their lease ended (1 s grace, looked for every second), well before
    # Go's recoverer could (30 s after the lease ended, every minute): asyncq's recovery on the
    # asynq layout at work.
    assert rerun_after[py_victim.pid][-1] <= 30, rerun_after


# ---------------------------------------------------------------- Cluster

N_CLUSTER = 300


@pytest.fixture
def cluster() -> Iterator[LocalCluster]:
    if shutil.which("redis-cli") is None:
        pytest.fail("the Cluster interop test needs redis-cli (it comes with redis-server)")
    with LocalCluster(masters=3) as topo:
        yield topo


@pytest.mark.slow
async def test_mixed_fleet_on_cluster(asynq_go: GoPrograms, cluster: LocalCluster,
                                      asyncq_queue: str, workdir: Path) -> None:
    """A Go server and an asyncq worker process share one queue on a 3-master Cluster, filled
    by both clients: each task runs once, with its payload, and both consumers took part."""
    go_url, py_url = "cluster://" + ",".join(cluster.addresses), cluster.url
    queue = asyncq_queue
    expected = Expected()
    async with (asynq_go.server(go_url, workdir, *go_flags(asynq_go, [queue], 4),
                                name="go") as server,
                asyncq_worker(py_url, [queue], workdir, "py", "--concurrency", "4",
                              "--idle-poll-interval", "0.1") as worker):
        run = await asynq_go.produce(go_url, "-n", str(N_CLUSTER), "-type", "sleep:20",
                                     "-queue", queue, "-payload-size", str(PAYLOAD),
                                     "-seed", "cluster-go")
        assert run.errors == []
        expected.add(run.ids, queue, "cluster-go")
        ids = await sc.AsyncqProducer(py_url).enqueue_generated(N_CLUSTER, "sleep:20", queue,
                                                                PAYLOAD, "cluster-py")
        expected.add(ids, queue, "cluster-py")
        tail = LedgerTail([server.ledger_path, worker.ledger_path])
        await wait_until(lambda: tail.ok_ids() >= set(expected.tasks), timeout=60,
                         message="every task completed", interval=LEDGER_POLL)
        await server.stop()
        await worker.stop()
    book = tail.read()
    starts: dict[str, list[int]] = defaultdict(list)
    for s in book.starts:
        starts[s["id"]].append(s["pid"])
        assert (s["queue"], s["payload_sha256"]) == expected.tasks[s["id"]]
    assert set(starts) == set(expected.tasks)
    assert [i for i, pids in starts.items() if len(pids) != 1] == [], "ran more than once"
    ran = {pid: sum(1 for p in starts.values() if p == [pid])
           for pid in (server.pid, worker.pid)}
    assert all(ran.values()), f"a consumer ran nothing: {ran}"
    print(f"mixed fleet on a Cluster: runs by Go server / asyncq worker: {list(ran.values())}")
    info = await asynq_go.inspect(go_url, "queue", "-queue", queue)
    assert (info["pending"], info["active"], info["retry"], info["archived"]) == (0, 0, 0, 0)
