"""Running the ``asyncq`` command as a user does (``python -m asyncq`` in a subprocess against the
test Redis), and reading what it printed."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import orjson

Cli = Callable[..., Awaitable[subprocess.CompletedProcess[bytes]]]


def cli_runner(redis_url: str) -> Cli:
    """``await cli("queue", "ls")`` runs ``python -m asyncq queue ls`` with ASYNCQ_REDIS_URL
    set; ``ok=True`` asserts exit 0, ``ok=False`` exit 1 with one ``asyncq: error:`` line,
    ``ok=None`` asserts nothing."""
    env = {**os.environ, "ASYNCQ_REDIS_URL": redis_url}

    async def run(*args: str, ok: bool | None = True) -> subprocess.CompletedProcess[bytes]:
        proc = await anyio.run_process([sys.executable, "-m", "asyncq", *args], env=env,
                                       check=False)
        if ok is True:
            assert proc.returncode == 0, (args, proc.stderr.decode())
        elif ok is False:
            assert proc.returncode == 1, (args, proc.returncode, proc.stdout.decode())
            lines = proc.stderr.decode().strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("asyncq: error: "), lines
        return proc

    return run


def out(proc: subprocess.CompletedProcess[bytes]) -> str:
    return proc.stdout.decode()


def js(proc: subprocess.CompletedProcess[bytes]) -> Any:
    return orjson.loads(proc.stdout)


def err(proc: subprocess.CompletedProcess[bytes]) -> str:
    return proc.stderr.decode().strip()


async def gather(*calls: Awaitable[subprocess.CompletedProcess[bytes]],
                 ) -> list[subprocess.CompletedProcess[bytes]]:
    """Run independent CLI calls concurrently (each is a separate process)."""
    results: list[Any] = [None] * len(calls)

    async def one(i: int, call: Awaitable[subprocess.CompletedProcess[bytes]]) -> None:
        results[i] = await call

    async with anyio.create_task_group() as tg:
        for i, call in enumerate(calls):
            tg.start_soon(one, i, call)
    return results
