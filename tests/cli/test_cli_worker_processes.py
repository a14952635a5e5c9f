"""``asyncq worker --processes N``: a supervisor runs N worker processes, restarts one that
dies, passes stop signals on once, and gives up (exit 1, one line) when they keep crashing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import orjson
import psutil
import pytest
from anyio.abc import Process
from redis.asyncio import Redis

from asyncq import AsyncqError, Client, Inspector, Worker
from asyncq._broker import _keys as K
from asyncq._cli import build_parser, main
from asyncq._cli._supervisor import POLICY_ENV
from asyncq.testing import wait_until
from tests.helpers.cli import err, run_main
from tests.helpers.processes import ROOT, log_events

# Each test starts several processes, which a loaded machine starts slowly: more than the
# default 60 s before a test counts as hung.
pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]

APP = "tests.apps.pids:mux"
FAST_RESTARTS = "first_delay=0.05,max_delay=0.2,max_quick_crashes=3"


@asynccontextmanager
async def supervisor(url: str, queue: str, log: Path, *extra: str, target: str = APP,
                     processes: int = 2) -> AsyncIterator[Process]:
    """``asyncq worker TARGET --processes N`` leading its own process group (as a shell runs
    it), its and its workers' output to ``log``; killed with its workers if still running."""
    command = [sys.executable, "-m", "asyncq", "worker", target, "--redis-url", url,
               "--queue", f"{queue}=1", "--log-format", "json", "--processes", str(processes),
               *extra]
    env = {**os.environ, POLICY_ENV: FAST_RESTARTS}
    with log.open("wb") as out:
        async with await anyio.open_process(command, cwd=ROOT, stdout=out, stderr=out, env=env,
                                            start_new_session=True) as proc:
            try:
                yield proc
            finally:
                if proc.returncode is None:
                    for child in psutil.Process(proc.pid).children():
                        child.kill()
                    proc.kill()
                    await proc.wait()


async def serving(url: str, queue: str, count: int) -> dict[int, list[str]]:
    """pid -> ids of the running tasks of the live worker processes serving ``queue``, once
    there are at least ``count`` of them."""
    async with Inspector(url) as inspector:
        servers = [s for s in await inspector.workers() if queue in s.queues]
    alive = {s.pid: [w.task_id for w in s.active_workers] for s in servers
             if psutil.pid_exists(s.pid)}
    return alive if len(alive) >= count else {}


@pytest.mark.timeout(120)
async def test_a_killed_worker_process_is_restarted_and_no_task_is_lost(
    asyncq_redis_url: str, asyncq_queue: str, redis_client: Redis, tmp_path: Path,
) -> None:
    log = tmp_path / "sup.log"
    async with supervisor(asyncq_redis_url, asyncq_queue, log, "--lease-duration", "1",
                          "--concurrency", "2") as proc, Client(asyncq_redis_url) as client:
        first = await wait_until(lambda: serving(asyncq_redis_url, asyncq_queue, 2),
                                 timeout=30, message="two worker processes")
        infos = [await client.enqueue("pids:nap", {"s": 0.5}, queue=asyncq_queue,
                                      retention=600) for _ in range(12)]

        async def busy() -> tuple[int, list[str]] | None:
            now = await serving(asyncq_redis_url, asyncq_queue, 1)
            return next(((pid, ids) for pid, ids in now.items() if pid in first and ids), None)

        victim, its_tasks = await wait_until(busy, timeout=20, message="a task running")
        os.kill(victim, signal.SIGKILL)

        async def replaced() -> set[int]:
            return set(await serving(asyncq_redis_url, asyncq_queue, 2)) - set(first)

        assert await wait_until(replaced, timeout=30, message="a new worker process")

        # The tasks the killed process ran are recovered once their lease expired (the live
        # workers look every 10 s) into the retry state; run them now rather than after the
        # retry delay (15 s or more), as an operator would.
        async def recovered() -> bool:
            states = [await redis_client.hget(K.queue_keys(asyncq_queue).task(t), "state")
                      for t in its_tasks]
            return b"active" not in states

        await wait_until(recovered, timeout=40, message="the killed process's tasks recovered")
        async with Inspector(asyncq_redis_url) as inspector:
            await inspector.run_all(asyncq_queue, "retry")
        # Every task completes, those the killed process was running too.
        ran_by = {info.id: (await client.result(info, queue=asyncq_queue, timeout=60))["pid"]
                  for info in infos}
        assert len(ran_by) == 12
        assert all(ran_by[task_id] != victim for task_id in its_tasks)

        proc.send_signal(signal.SIGTERM)
        with anyio.fail_after(30):
            assert await proc.wait() == 0
    restarts = [e for e in log_events(log)
                if e["event"] == "worker process ended unexpectedly; restarting"]
    assert [(e["pid"], e["status"]) for e in restarts] == [(victim, "killed by SIGKILL")]


async def test_ctrl_c_reaches_each_worker_once_and_they_stop_gracefully(
    asyncq_redis_url: str, asyncq_queue: str, redis_client: Redis, tmp_path: Path,
) -> None:
    log = tmp_path / "sup.log"
    async with supervisor(asyncq_redis_url, asyncq_queue, log) as proc, \
            Client(asyncq_redis_url) as client:
        workers = await wait_until(lambda: serving(asyncq_redis_url, asyncq_queue, 2),
                                   timeout=30, message="two worker processes")
        info = await client.enqueue("pids:nap", {"s": 2}, queue=asyncq_queue, retention=600)

        async def running() -> bool:
            state = await redis_client.hget(K.queue_keys(asyncq_queue).task(info.id), "state")
            return state == b"active"

        await wait_until(running, timeout=20, message="the task running")
        os.killpg(proc.pid, signal.SIGINT)  # what a Ctrl-C in the terminal does
        with anyio.fail_after(30):
            assert await proc.wait() == 0
        # The running task was finished, not requeued: one Ctrl-C is a graceful stop.
        assert (await client.result(info, queue=asyncq_queue, timeout=30))["pid"] in workers
    events = log_events(log)
    stopped = {e["server_id"] for e in events if e["event"] == "worker stopped"}
    assert len(stopped) == 2 and all(str(pid) in " ".join(stopped) for pid in workers)
    assert not [e for e in events if e["event"].startswith("second stop request")]
    assert not any(psutil.pid_exists(pid) for pid in workers)


async def test_worker_processes_stop_when_the_supervisor_is_killed(
    asyncq_redis_url: str, asyncq_queue: str, tmp_path: Path,
) -> None:
    async with supervisor(asyncq_redis_url, asyncq_queue, tmp_path / "sup.log") as proc:
        workers = await wait_until(lambda: serving(asyncq_redis_url, asyncq_queue, 2),
                                   timeout=30, message="two worker processes")
        proc.kill()
        await proc.wait()
        await wait_until(lambda: not any(psutil.pid_exists(pid) for pid in workers),
                         timeout=20, message="the orphaned workers stopped")
    assert await serving(asyncq_redis_url, asyncq_queue, 1) == {}  # each cleared its state


def test_a_target_that_keeps_crashing_makes_the_supervisor_give_up(tmp_path: Path) -> None:
    result = subprocess.run(  # (a supervisor restarting for ever would meet the timeout)
        [sys.executable, "-m", "asyncq", "worker", "tests.apps.broken:mux", "--processes", "2",
         "--log-format", "json"],
        cwd=ROOT, text=True, capture_output=True, timeout=150, check=False,
        env={**os.environ, POLICY_ENV: FAST_RESTARTS})
    assert result.returncode == 1, result.stderr
    last = orjson.loads(result.stderr.strip().splitlines()[-1])  # (--log-format json)
    assert last["level"] == "error"
    said = last["event"]
    assert said.startswith("worker process ")
    assert "crashed 3 times in a row" in said and "exited with status 1" in said
    assert "stopped all worker processes" in said


def test_each_worker_process_gets_the_flags_of_the_supervisor_but_its_own() -> None:
    argv = ["worker", "app:mux", "--processes", "3", "-c", "4", "-q", "a=2", "--queue=-odd=1",
            "--strict", "--lease-duration", "1.5", "--burst", "--log-format", "json"]
    args = build_parser().parse_args(argv)
    child = args.child_argv(args)
    assert child == ["app:mux", "--concurrency=4", "--queue=a=2", "--queue=-odd=1",
                     "--strict-priority",
                     "--lease-duration=1.5", "--burst", "--log-format=json"]
    again = build_parser().parse_args(["worker", *child])
    same = {k: v for k, v in vars(args).items() if k not in {"processes", "child_argv"}}
    assert {k: v for k, v in vars(again).items() if k in same} == same


@pytest.mark.parametrize(("flags", "message"), [
    (["--processes", "0"], "--processes must be at least 1, got 0"),
    (["--processes", "2", "--reload"], "--reload runs one worker process"),
    (["--reload-dir", "."], "--reload-dir needs --reload"),
    (["--reload", "--burst"], "--reload and --burst do not go together"),
    (["--reload", "--reload-dir", "no/such/dir"], "is not a directory"),
])
def test_flags_that_do_not_go_together_are_one_line(flags: list[str], message: str) -> None:
    result = run_main(["worker", APP, *flags], cwd=ROOT)
    lines = err(result).splitlines()
    assert result.returncode == 1
    assert len(lines) == 1 and lines[0].startswith("asyncq: error: ") and message in lines[0]


def test_a_worker_that_fails_to_start_is_one_line_and_exit_1(
    asyncq_redis_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    # What a failing lifespan start-up raises from Worker.run: the command's one-line error,
    # not a traceback (a supervisor counts that exit 1 as a crash).
    async def failing_start(self: Worker, **_: object) -> None:
        raise AsyncqError("worker start-up failed: database unreachable")

    monkeypatch.setattr(Worker, "run", failing_start)
    assert main(["worker", APP, "--redis-url", asyncq_redis_url, "--log-level", "error"]) == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        "asyncq: error: worker start-up failed: database unreachable"]
