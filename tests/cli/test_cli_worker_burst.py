"""``asyncq worker --burst``: the worker exits 0 once its queues are drained (CI, batch jobs);
under a supervisor (``--processes N``) the supervisor exits 0 once every worker has."""

from __future__ import annotations

import os
import sys

import anyio
import pytest

from asyncq import Client
from asyncq._cli import build_parser
from asyncq._cli._supervisor import POLICY_ENV
from asyncq._cli._worker_cmd import worker_options
from tests.helpers.processes import ROOT

pytestmark = pytest.mark.anyio

N = 8


def test_the_burst_flag_asks_the_worker_for_burst_mode() -> None:
    parse = build_parser().parse_args
    assert worker_options(parse(["worker", "app:mux", "--burst"]))["burst"] is True
    assert "burst" not in worker_options(parse(["worker", "app:mux"]))  # WorkerConfig decides


@pytest.mark.parametrize("processes", [1, 2])
async def test_a_burst_worker_exits_0_once_every_task_is_done(
    asyncq_redis_url: str, asyncq_queue: str, processes: int,
) -> None:
    async with Client(asyncq_redis_url) as client:
        infos = [await client.enqueue("pids:nap", {"s": 0.05}, queue=asyncq_queue,
                                      retention=600) for _ in range(N)]
        with anyio.fail_after(45):
            result = await anyio.run_process(
                [sys.executable, "-m", "asyncq", "worker", "tests.apps.pids:mux", "--burst",
                 "--redis-url", asyncq_redis_url, "--queue", f"{asyncq_queue}=1",
                 "--log-format", "json", "--processes", str(processes)],
                cwd=ROOT, check=False,
                env={**os.environ, POLICY_ENV: "first_delay=0.05,max_quick_crashes=2"})
        assert result.returncode == 0, result.stderr.decode()[-2000:]
        for info in infos:  # all completed: each result is there at once
            assert "pid" in await client.result(info, queue=asyncq_queue, timeout=30)
