"""Helpers of the worker tests: a mux whose tasks block until released, and real worker
processes (``python -m asyncq worker``) with their JSON logs."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process

from asyncq import ServeMux, Task

ROOT = Path(__file__).resolve().parent.parent
SLOW_APP = "tests.apps.slow:mux"


def blocking_mux(started: list[str], release: asyncio.Event,
                 cancelled: list[str] | None = None) -> ServeMux:
    """A mux whose "block" handler reports it started, then waits for ``release`` (noting in
    ``cancelled`` when it is cancelled instead); "quick" reports it started and returns."""
    mux = ServeMux()

    @mux.handler("block")
    async def block(task: Task) -> None:
        assert task.id is not None
        started.append(task.id)
        try:
            await release.wait()
        except asyncio.CancelledError:
            if cancelled is not None:
                cancelled.append(task.id)
            raise

    @mux.handler("quick")
    async def quick(task: Task) -> None:
        assert task.id is not None
        started.append(task.id)

    return mux


@asynccontextmanager
async def worker_process(url: str, queue: str, log: Path, *extra: str,
                         target: str = SLOW_APP) -> AsyncIterator[Process]:
    """``python -m asyncq worker <target>`` serving ``queue`` with JSON logs to ``log``;
    killed if still running when the block ends."""
    command = [sys.executable, "-m", "asyncq", "worker", target, "--redis-url", url,
               "--queue", f"{queue}=1", "--log-format", "json", *extra]
    with log.open("wb") as out:
        async with await anyio.open_process(command, cwd=ROOT, stdout=out, stderr=out) as proc:
            try:
                yield proc
            finally:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()


def log_events(log: Path) -> list[dict[str, Any]]:
    """The JSON log lines a worker process wrote (other lines skipped)."""
    events = []
    for line in log.read_text(errors="replace").splitlines():
        with suppress(ValueError):
            doc = json.loads(line)
            if isinstance(doc, dict) and "event" in doc:
                events.append(doc)
    return events


def gate_dequeues(broker: Any) -> asyncio.Event:
    """Hold every dequeue of ``broker`` until the returned event is set: from then on only a
    one-hop hand-off can bring a task to that worker."""
    gate = asyncio.Event()
    real = broker.dequeue

    async def gated(*args: Any, **kwargs: Any) -> Any:
        await gate.wait()
        return await real(*args, **kwargs)

    broker.dequeue = gated
    return gate
