"""End-to-end demo (``make run``): start a worker, enqueue tasks, watch them finish, stop.

    python examples/quickstart/run_demo.py --redis-url redis://127.0.0.1:6390/0
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from pathlib import Path

import redis.asyncio as aioredis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import enqueue  # noqa: E402


async def wait_completed(redis_url: str, ids: list[str], timeout: float) -> None:
    client = aioredis.Redis.from_url(redis_url)
    try:
        deadline = time.monotonic() + timeout
        while True:
            states = [await client.hget(f"asyncq:{{default}}:t:{i}", "state") for i in ids]
            done = sum(s == b"completed" for s in states)
            if done == len(ids):
                for i in ids:
                    result = await client.hget(f"asyncq:{{default}}:t:{i}", "result")
                    print(f"demo: {i} completed, result={result!r}")
                return
            if time.monotonic() > deadline:
                raise SystemExit(f"demo: only {done}/{len(ids)} tasks completed in {timeout}s")
            await asyncio.sleep(0.05)
    finally:
        await client.aclose()


async def main(redis_url: str) -> int:
    worker = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "asyncq", "worker", "tasks:mux", "--redis-url", redis_url,
        "--log-format", "console", cwd=HERE, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        ids = await enqueue.main(redis_url)
        await wait_completed(redis_url, ids, timeout=30)
    finally:
        worker.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(worker.wait(), timeout=20)
    print(f"demo: worker stopped with exit code {code}")
    return code


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6390/0")
    sys.exit(asyncio.run(main(parser.parse_args().redis_url)))
