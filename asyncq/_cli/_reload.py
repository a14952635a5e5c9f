"""``asyncq worker --reload``: for development, run the worker as a child process and start a
new one whenever a ``.py`` file under the watched directories changes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Sequence
from pathlib import Path

from .._log import get_logger
from ._common import CLIError
from ._supervisor import StopRequests, describe_exit, send, spawn

INSTALL_HINT = "--reload needs the watchfiles package: pip install 'asyncq[reload]'"


def check_watchfiles() -> None:
    """Fail at once, in one line, when the optional ``reload`` extra is not installed."""
    try:
        import watchfiles  # noqa: F401  (the optional extra asyncq[reload])
    except ImportError:
        raise CLIError(INSTALL_HINT) from None


class Reloader:
    """Runs one worker process; on a change stops it gracefully (SIGTERM), waits for it and
    starts another. A worker that dies on its own (a syntax error being typed) is started
    again at the next change."""

    def __init__(self, argv: list[str], dirs: Sequence[str]) -> None:
        self._argv = argv
        self._dirs = [str(Path(d).resolve()) for d in dirs] or [os.getcwd()]
        self._proc: asyncio.subprocess.Process | None = None
        self._stops = StopRequests(lambda: [self._proc] if self._proc is not None else [])
        self._changed = asyncio.Event()
        self._log = get_logger("reloader")

    async def run(self) -> int:
        """Run until a stop signal; returns 0 (1 if the last worker did not stop cleanly)."""
        check_watchfiles()
        with self._stops.handlers():
            watcher = asyncio.create_task(self._watch())
            try:
                code = await self._serve()
            finally:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
        self._log.info("reloader stopped")
        return 0 if code in (None, 0, 130, -signal.SIGTERM, -signal.SIGINT) else 1

    async def _serve(self) -> int | None:
        code: int | None = None
        while not self._stops.event.is_set():
            self._changed.clear()
            proc = self._proc = await spawn(self._argv)
            if self._stops.event.is_set():
                send(proc, signal.SIGTERM)
            self._log.info("worker process started", pid=proc.pid, watching=self._dirs)
            ended = asyncio.create_task(proc.wait())
            await self._first(ended, self._changed, self._stops.event)
            if not ended.done() and self._changed.is_set() and not self._stops.event.is_set():
                self._log.info("code changed: restarting the worker process", pid=proc.pid)
                send(proc, signal.SIGTERM)
            code = await ended
            self._proc = None
            if self._stops.event.is_set():
                break
            if not self._changed.is_set():
                self._log.warning("worker process ended; it starts again at the next change",
                                  pid=proc.pid, status=describe_exit(code))
                await self._first(self._changed, self._stops.event)
        return code

    @staticmethod
    async def _first(*waitables: asyncio.Task[int] | asyncio.Event) -> None:
        """Wait until the first of these tasks is done or events is set."""
        waiters = [w if isinstance(w, asyncio.Task) else asyncio.create_task(w.wait())
                   for w in waitables]
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter, given in zip(waiters, waitables, strict=True):
                if waiter is not given:
                    waiter.cancel()

    async def _watch(self) -> None:
        from watchfiles import PythonFilter, awatch

        async for changes in awatch(*self._dirs, watch_filter=PythonFilter()):
            files = sorted(path for _, path in changes)
            self._log.info("files changed", files=files[:10], count=len(files))
            self._changed.set()
