"""``asyncq worker TARGET``: factories, and one clear line for each wrong target."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from redis.asyncio import Redis

from asyncq import Client
from asyncq._broker import _keys as K
from asyncq.testing import wait_until
from tests.helpers.cli import err, run_main
from tests.helpers.processes import ROOT, log_events, worker_process

pytestmark = pytest.mark.anyio


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m asyncq worker ARGS``: the process, for what the interpreter prints."""
    return subprocess.run([sys.executable, "-m", "asyncq", "worker", *args], cwd=ROOT,
                          text=True, capture_output=True, timeout=60, check=False)


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("tests.apps.slow", "'tests.apps.slow' is a module; name the ServeMux or handler in it: "
                            "'tests.apps.slow:mux'"),
        ("tests/apps/slow.py:mux", "is a file path; name the module instead: "
                                   "'tests.apps.slow:mux'"),
        ("tests/apps/slow.py", "name the module instead: 'tests.apps.slow:mux'"),
        ("tests.apps.broken:mux", "importing 'tests.apps.broken' failed: KeyError: "
                                  "'DATABASE_URL' (tests/apps/broken.py:6); add --traceback"),
        ("tests.apps.slow:muxx", "has no attribute 'muxx'; it has the ServeMux mux"),
        ("tests.apps.factory:no_argument", "does not take the task as its argument"),
        ("tests.apps.factory:not_a_handler_maker",
         "returned 42, not a ServeMux, a handler or a Worker"),
    ],
    ids=["module without attribute", "file path", "file path without attribute",
         "module raises", "misspelt attribute", "handler without argument",
         "factory returning junk"],
)
def test_a_wrong_target_is_one_line_saying_what_to_do(target: str, message: str) -> None:
    result = run_main(["worker", target, "--redis-url", "redis://127.0.0.1:1/0"], cwd=ROOT)
    lines = err(result).splitlines()
    assert result.returncode == 1, err(result)
    assert len(lines) == 1 and message in lines[0], err(result)
    assert "Traceback" not in err(result)


def test_traceback_flag_shows_where_an_import_failed() -> None:
    result = run_cli("tests.apps.broken:mux", "--traceback")
    assert result.returncode != 0
    assert "Traceback" in result.stderr and "broken.py" in result.stderr
    assert "KeyError: 'DATABASE_URL'" in result.stderr


@pytest.mark.parametrize("target", ["tests.apps.factory:make_mux",
                                    "tests.apps.factory:make_mux_async --factory"])
async def test_a_factory_target_is_called_for_its_mux(
    target: str, asyncq_redis_url: str, asyncq_queue: str, tmp_path: Path,
) -> None:
    name, *flags = target.split()
    async with Client(asyncq_redis_url) as client, \
            worker_process(asyncq_redis_url, asyncq_queue, tmp_path / "w.log", *flags,
                           target=name) as proc:
        result = await client.apply("factory:echo", 7, queue=asyncq_queue, timeout=20)
        assert result == {"made_by": "factory", "got": 7}
        proc.send_signal(signal.SIGTERM)
        with anyio.fail_after(20):
            assert await proc.wait() == 0


async def test_ctrl_c_says_what_shutdown_waits_for_and_a_second_one_requeues_at_once(
    asyncq_redis_url: str, asyncq_queue: str, redis_client: Redis, tmp_path: Path,
) -> None:
    log = tmp_path / "w.log"
    async with Client(asyncq_redis_url) as client:
        info = await client.enqueue("slow:block", queue=asyncq_queue)
        async with worker_process(asyncq_redis_url, asyncq_queue, log,
                                  "--shutdown-timeout", "60") as proc:
            async def running() -> bool:  # the handler runs (active alone: leased)
                return await redis_client.hget(K.queue_keys(asyncq_queue).task(info.id),
                                               "result") is not None

            await wait_until(running, timeout=30)
            proc.send_signal(signal.SIGINT)

            def said(event: str) -> dict[str, object] | None:
                return next((e for e in log_events(log) if e["event"] == event), None)

            first = await wait_until(lambda: said("worker shutting down"), timeout=30)
            assert first["running"] == 1 and first["waiting_up_to_s"] == 60
            assert proc.returncode is None  # still waiting for the handler
            proc.send_signal(signal.SIGINT)
            with anyio.fail_after(40):  # not the 60 s shutdown timeout
                assert await proc.wait() == 0
        assert said("second stop request: cancelling and requeueing the running tasks now")
        state = await redis_client.hget(K.queue_keys(asyncq_queue).task(info.id), "state")
        assert state == b"pending"  # given back, next in line


@pytest.mark.parametrize(("flags", "expected"), [
    ((), set()),
    (("--log-success",), {("task succeeded", "info")}),
    (("--log-level", "debug"), {("task started", "debug"), ("task succeeded", "debug")}),
], ids=["default", "log-success", "debug"])
async def test_per_task_log_lines_only_when_asked(
    asyncq_redis_url: str, asyncq_queue: str, tmp_path: Path, flags: tuple[str, ...],
    expected: set[tuple[str, str]],
) -> None:
    log = tmp_path / "w.log"
    async with Client(asyncq_redis_url) as client, \
            worker_process(asyncq_redis_url, asyncq_queue, log, *flags) as proc:
        assert await client.apply("slow:echo", {"x": 1}, queue=asyncq_queue, timeout=20)
        proc.send_signal(signal.SIGTERM)
        with anyio.fail_after(20):
            await proc.wait()
    per_task = {(e["event"], e["level"]) for e in log_events(log)
                if e["event"].startswith("task ")}
    assert per_task == expected
    if expected:
        done = next(e for e in log_events(log) if e["event"] == "task succeeded")
        assert done["type"] == "slow:echo" and done["queue"] == asyncq_queue
        assert done["duration_s"] >= 0 and done["outcome"] == "complete"  # (its value is kept)
