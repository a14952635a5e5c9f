"""Real worker processes for tests: the one way to start ``python -m asyncq worker`` (or a
runner script) as a subprocess with its output in a log file, and the JSON events it logged.

In-process workers are built by the ``asyncq_worker`` fixture of ``asyncq.testing`` instead.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process

ROOT = Path(__file__).resolve().parents[2]
SLOW_APP = "tests.apps.slow:mux"


@asynccontextmanager
async def spawn(command: Sequence[str], log: Path, *, env: Mapping[str, str] | None = None,
                append: bool = False, cwd: Path = ROOT) -> AsyncIterator[Process]:
    """Run ``command`` (from the project root unless ``cwd``) with stdout and stderr to ``log``
    (appended to with ``append``); killed, and waited for, if still running when the block
    ends."""
    with log.open("ab" if append else "wb") as out:
        async with await anyio.open_process(list(command), cwd=cwd, stdout=out, stderr=out,
                                            env=env) as proc:
            try:
                yield proc
            finally:
                if proc.returncode is None:
                    proc.kill()
                    with anyio.CancelScope(shield=True):
                        await proc.wait()


def worker_command(url: str, queue: str, *extra: str, target: str = SLOW_APP) -> list[str]:
    """``python -m asyncq worker <target>`` serving ``queue`` with JSON logs."""
    return [sys.executable, "-m", "asyncq", "worker", target, "--redis-url", url,
            "--queue", f"{queue}=1", "--log-format", "json", *extra]


def worker_process(url: str, queue: str, log: Path, *extra: str, target: str = SLOW_APP,
                   env: Mapping[str, str] | None = None,
                   append: bool = False) -> Any:
    """``python -m asyncq worker <target>`` serving ``queue`` with JSON logs to ``log``, as an
    async context manager (see ``spawn``)."""
    return spawn(worker_command(url, queue, *extra, target=target), log, env=env,
                 append=append)


def log_events(log: Path) -> list[dict[str, Any]]:
    """The JSON log lines a worker process wrote (other lines skipped)."""
    events = []
    for line in log.read_text(errors="replace").splitlines():
        with suppress(ValueError):
            doc = json.loads(line)
            if isinstance(doc, dict) and "event" in doc:
                events.append(doc)
    return events
