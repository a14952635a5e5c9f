"""Worker processes are SIGKILLed again and again while a chord of 10 000 members fans in:
no member is lost, the callback runs exactly once with all 10 000 results. A member may run
twice only when it was running in the killed process (its lease expires and it is retried:
at-least-once, as for any task); the workflow itself never repeats a step it released."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections import Counter
from pathlib import Path

import anyio
import pytest
from anyio.abc import Process
from redis.asyncio import Redis

from asyncq import Client, Task, chain, group
from asyncq._broker import _keys as K

pytestmark = [pytest.mark.anyio, pytest.mark.chaos, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
RUNNER = Path(__file__).with_name("run_flow_worker.py")
LEDGER = "test:wf:ledger"
N = 10_000
OPTIONS = {"concurrency": 20, "lease_duration": 2.0, "recover_interval": 0.5,
           "recover_grace": 0.2, "workflow_interval": 0.3, "shutdown_timeout": 1.0,
           "retry_delay_s": 0.1}
KILLS = 6


async def spawn(url: str, log: Path) -> Process:
    env = {**os.environ, "WF_REDIS_URL": url, "PYTHONPATH": str(ROOT)}
    with log.open("ab") as out:
        return await anyio.open_process([sys.executable, str(RUNNER), url,
                                         json.dumps(OPTIONS)], cwd=ROOT, stdout=out,
                                        stderr=out, env=env)


async def test_sigkill_during_fan_in_loses_nothing_and_runs_the_callback_once(
        asyncq_fresh_redis: str, tmp_path: Path) -> None:
    url = asyncq_fresh_redis
    redis = Redis.from_url(url)
    log = tmp_path / "workers.log"
    procs = [await spawn(url, log), await spawn(url, log)]
    kills = 0
    try:
        async with Client(url) as client:
            flow = chain(group(*(Task("wf:ledger", i) for i in range(N))), Task("wf:count"))
            handle = await client.enqueue_workflow(flow)
            outbox = K.queue_keys("default").wf_outbox
            deadline = time.monotonic() + 50
            # Kill a worker whenever the fan-in is under way (members done, outcomes queued
            # in the outbox or being applied), restart it, until the workflow has ended.
            while time.monotonic() < deadline and kills < KILLS:
                record = await redis.hget(K.workflow_keys(handle.id).record, "wstate")
                if record != b"running" and record != b"starting":
                    break
                await anyio.sleep(0.25 + 0.1 * (kills % 3))
                if await redis.llen(LEDGER) or await redis.hlen(outbox):
                    victim = kills % 2
                    procs[victim].send_signal(signal.SIGKILL)
                    await procs[victim].wait()
                    procs[victim] = await spawn(url, log)
                    kills += 1
            try:
                value = await client.result(handle.id,
                                            timeout=max(1.0, deadline - time.monotonic()))
            except TimeoutError:
                wk = K.workflow_keys(handle.id)
                qk = K.queue_keys("default")
                print("DIAG", await redis.hgetall(wk.record), await redis.hget(wk.count, "g0"),
                      await redis.hlen(wk.state), await redis.scard(wk.ready),
                      await redis.hlen(outbox), await redis.llen(qk.pending),
                      await redis.llen(qk.active), await redis.zcard(qk.retry),
                      await redis.zcard(qk.archived), await redis.llen(LEDGER),
                      await redis.get(qk.wf_lock), await redis.exists(qk.wf_idle), kills)
                raise
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    runs = Counter(x.decode() for x in await redis.lrange(LEDGER, 0, -1))
    await redis.aclose()
    assert kills >= 2
    assert value == N
    callback = f"{handle.id}.{N}"
    assert runs[callback] == 1
    members = {f"{handle.id}.{i}" for i in range(N)}
    assert members <= set(runs), "a member was lost"
    twice = sum(1 for m in members if runs[m] > 1)
    # only handlers running in a killed process run again (concurrency + prefetch each)
    assert twice <= kills * 2 * OPTIONS["concurrency"], (twice, kills)
    print(f"kills={kills} members run twice={twice}")
