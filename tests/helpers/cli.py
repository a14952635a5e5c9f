"""Running the ``asyncq`` command in tests, and reading what it printed.

Most tests call the command in-process, through ``asyncq._cli.main(argv)`` (the ``cli``
fixture of tests/conftest.py): the same parser, commands, output and exit codes as a user's
shell, without an interpreter start and the imports per call. The tests of the real entry
point (``python -m asyncq``, the console script, signals, worker processes) start a process.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
from collections.abc import Awaitable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import anyio
import anyio.to_thread
import orjson

from asyncq._cli import main
from asyncq._cli._common import REDIS_URL_ENV


class Output(Protocol):
    """What a run of the command left: a subprocess's CompletedProcess or an in-process Ran."""

    returncode: int

    @property
    def stdout(self) -> bytes: ...

    @property
    def stderr(self) -> bytes: ...


@dataclass(frozen=True)
class Ran:
    """One in-process run of the command: its exit code and what it wrote."""

    args: tuple[str, ...]
    returncode: int
    stdout: bytes
    stderr: bytes


#: main() writes to sys.stdout and sys.stderr and reads the environment and the working
#: directory: one in-process run at a time, whichever thread calls.
_ONE_AT_A_TIME = threading.Lock()


def run_main(args: Sequence[str], *, env: Mapping[str, str] | None = None,
             cwd: Path | None = None) -> Ran:
    """Run ``asyncq ARGS`` in this process with ``env`` added to the environment and ``cwd``
    as the working directory; what it wrote to stdout and stderr is captured. Sync: a command
    runs its own event loop, so call it where none runs (or in a thread: ``Cli``)."""
    with _ONE_AT_A_TIME, _environ(env or {}), _cwd(cwd), _captured() as (out, err):
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse: a usage error (2), --help or --version (0)
            code = _exit_code(exc.code)
        out.flush()
        err.flush()
        return Ran(tuple(args), code, out.buffer.getvalue(), err.buffer.getvalue())


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # (what the interpreter does with a non-int exit status)
    return 1


@contextlib.contextmanager
def _captured() -> Iterator[tuple[Any, Any]]:
    """sys.stdout and sys.stderr as UTF-8 text over bytes, like a pipe (not a terminal)."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        yield out, err
    finally:
        sys.stdout, sys.stderr = saved


@contextlib.contextmanager
def _environ(env: Mapping[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def _cwd(cwd: Path | None) -> Iterator[None]:
    """``cwd`` as the working directory; sys.path as it was afterwards (a command that imports
    a target puts the working directory on it)."""
    saved, path = os.getcwd(), list(sys.path)
    if cwd is not None:
        os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(saved)
        sys.path[:] = path


def _checked(ran: Ran, ok: bool | None) -> Ran:
    """``ok=True``: exit 0; ``ok=False``: exit 1 with one ``asyncq: error:`` line on stderr;
    ``ok=None``: nothing asserted."""
    if ok is True:
        assert ran.returncode == 0, (ran.args, ran.stderr.decode())
    elif ok is False:
        assert ran.returncode == 1, (ran.args, ran.returncode, ran.stdout.decode())
        lines = ran.stderr.decode().strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("asyncq: error: "), lines
    return ran


class Cli:
    """``await cli("queue", "ls")`` runs ``asyncq queue ls`` in-process (in a thread, since
    the command runs an event loop of its own) with ASYNCQ_REDIS_URL set to ``redis_url``;
    ``cli.sync(...)`` does the same from a test without an event loop."""

    def __init__(self, redis_url: str | None = None, *, cwd: Path | None = None) -> None:
        self.env = {} if redis_url is None else {REDIS_URL_ENV: redis_url}
        self.cwd = cwd

    async def __call__(self, *args: str, ok: bool | None = True,
                       env: Mapping[str, str] | None = None) -> Ran:
        run = partial(run_main, args, env={**self.env, **(env or {})}, cwd=self.cwd)
        return _checked(await anyio.to_thread.run_sync(run), ok)

    def sync(self, *args: str, ok: bool | None = True,
             env: Mapping[str, str] | None = None) -> Ran:
        return _checked(run_main(args, env={**self.env, **(env or {})}, cwd=self.cwd), ok)


def cli_runner(redis_url: str) -> Cli:
    """A ``Cli`` against ``redis_url`` (the ``cli`` fixture's, for a test's own server)."""
    return Cli(redis_url)


def out(proc: Output) -> str:
    return proc.stdout.decode()


def js(proc: Output) -> Any:
    return orjson.loads(proc.stdout)


def err(proc: Output) -> str:
    return proc.stderr.decode().strip()


async def gather(*calls: Awaitable[Ran]) -> list[Ran]:
    """Await independent CLI calls, in order (in-process runs take turns)."""
    return [await call for call in calls]
