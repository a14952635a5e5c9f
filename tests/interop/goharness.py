"""Drives the Go programs of ``tests/interop/go`` (producer, server, inspector, built against
the real ``github.com/hibiken/asynq``) from pytest: builds them with the script
``make interop-bin`` runs, runs the producer and the inspector, starts and stops servers, and
reads the ledger each server writes (one JSON line per handler start and end).

The JSON the programs print is documented in their sources; times are Unix seconds (floats),
byte strings hex. The fixtures are in this directory's ``conftest.py``.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process

from asyncq.testing import wait_until
from tests.helpers.processes import ROOT, spawn

GO_DIR = Path(__file__).resolve().parent / "go"
BUILD_SCRIPT = GO_DIR / "build.sh"
BIN_ENV = "ASYNCQ_INTEROP_BIN"
#: The asynq releases the programs are built against: the latest, and the one asynqmon v0.7.2
#: links (the last with the v0.23 group layout unchanged and before task headers).
ASYNQ_VERSIONS = ("v0.26.0", "v0.24.1")
DEFAULT_ASYNQ = "v0.26.0"
BUILD_TIMEOUT = 900.0
GO_MISSING = ("Go is not installed (no `go` on PATH): the interop tests build Go programs "
              "against github.com/hibiken/asynq; install Go >= 1.24 (`make interop-bin` "
              "builds them once it is there)")


class GoBuildError(RuntimeError):
    """The Go programs could not be built (Go missing, too old, or the build failed)."""


class InspectorError(RuntimeError):
    """asynq's Inspector answered with an error; ``kind`` names asynq's sentinel
    (``task_not_found``, ``queue_not_found``...) or ``other``."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


def bin_root() -> Path:
    return Path(os.environ.get(BIN_ENV) or ROOT / ".cache" / "interop")


def build(version: str) -> Path:
    """Build (or find up to date: ``go build`` checks) the programs for one asynq release and
    return their directory. Concurrent pytest-xdist workers take turns through a file lock."""
    if shutil.which("go") is None:
        raise GoBuildError(GO_MISSING)
    root = bin_root()
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            proc = subprocess.run(["bash", str(BUILD_SCRIPT), version], capture_output=True,
                                  text=True, timeout=BUILD_TIMEOUT, check=False)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    if proc.returncode != 0:
        raise GoBuildError(f"building the interop programs for asynq {version} failed "
                           f"(exit {proc.returncode}): {proc.stderr.strip()[-4000:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


def gen_payload(seed: str, i: int, size: int) -> bytes:
    """The producer's deterministic payload number ``i`` (see harness.GenPayload in Go):
    SHA-256 of "<seed>:<i>", then SHA-256 of the previous block, concatenated, cut to size."""
    out = bytearray()
    block = hashlib.sha256(f"{seed}:{i}".encode()).digest()
    while len(out) < size:
        out += block
        block = hashlib.sha256(block).digest()
    return bytes(out[:size])


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def conn_flags(redis: str) -> list[str]:
    """``-redis URL``; ``cluster://h:p,h:p`` selects a Redis Cluster (``-cluster``)."""
    if redis.startswith("cluster://"):
        return ["-cluster", redis.removeprefix("cluster://")]
    return ["-redis", redis]


def json_lines(text: str) -> list[dict[str, Any]]:
    """The JSON objects among the lines of ``text`` (asynq's own log lines are skipped)."""
    docs = []
    for line in text.splitlines():
        if not line.startswith("{"):
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            continue  # (a line cut by SIGKILL)
        if isinstance(doc, dict):
            docs.append(doc)
    return docs


# ---------------------------------------------------------------- producer


@dataclass
class ProducerRun:
    """What one producer run printed: the TaskInfo of each enqueued task (by index), the
    enqueue errors, and the summary."""

    enqueued: list[dict[str, Any]]
    errors: list[dict[str, Any]]
    summary: dict[str, Any]

    @property
    def tasks(self) -> list[dict[str, Any]]:
        """The TaskInfo of each enqueued task, in index order."""
        return [e["task"] for e in self.enqueued]

    @property
    def ids(self) -> list[str]:
        return [t["id"] for t in self.tasks]


def spec(type: str, **fields: Any) -> dict[str, Any]:
    """One task for ``produce(specs=...)``: bytes ``payload`` becomes ``payload_hex``, float
    durations in seconds become Go durations; other fields as the producer's Spec names them
    (queue, max_retry, deadline, process_at (Unix s), task_id, group, headers...)."""
    doc: dict[str, Any] = {"type": type}
    for name, value in fields.items():
        if value is None:
            continue
        if name == "payload":
            doc["payload_hex"] = bytes(value).hex()
        elif name in ("timeout", "process_in", "unique", "retention"):
            doc[name] = go_duration(value)
        else:
            doc[name] = value
    return doc


def go_duration(seconds: float | str) -> str:
    """A Go duration string for a number of seconds (strings pass through)."""
    if isinstance(seconds, str):
        return seconds
    return f"{round(seconds * 1000)}ms"


# ---------------------------------------------------------------- server ledger


@dataclass
class Ledger:
    """A Go server's run records: ``starts`` and ``ends`` (one per handler entry and return),
    in the order written."""

    starts: list[dict[str, Any]] = field(default_factory=list)
    ends: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def read(cls, *paths: Path) -> Ledger:
        book = cls()
        for path in paths:
            if not path.exists():
                continue
            for doc in json_lines(path.read_text(errors="replace")):
                if doc.get("event") == "start":
                    book.starts.append(doc)
                elif doc.get("event") == "end":
                    book.ends.append(doc)
        return book

    def ends_by_id(self) -> dict[str, list[dict[str, Any]]]:
        runs: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for end in self.ends:
            runs[end["id"]].append(end)
        return dict(runs)

    def outcomes(self) -> Counter[str]:
        return Counter(end["outcome"] for end in self.ends)

    def ended_ids(self) -> set[str]:
        return {end["id"] for end in self.ends}

    def started_ids(self) -> set[str]:
        return {start["id"] for start in self.starts}


class GoServer:
    """A running ``server`` program: its process, its ledger and its lifecycle events."""

    def __init__(self, proc: Process, ledger_path: Path, log_path: Path) -> None:
        self.proc = proc
        self.ledger_path = ledger_path
        self.log_path = log_path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def ledger(self) -> Ledger:
        return Ledger.read(self.ledger_path)

    def events(self) -> list[dict[str, Any]]:
        """The lifecycle lines printed so far (started, health, stopping, stopped...)."""
        if not self.log_path.exists():
            return []
        return json_lines(self.log_path.read_text(errors="replace"))

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def _alive(self) -> None:
        if self.proc.returncode is not None:
            raise AssertionError(f"the Go server exited ({self.proc.returncode}):\n"
                                 f"{self.log_tail()}")

    async def wait_started(self, timeout: float = 30.0) -> dict[str, Any]:
        def started() -> dict[str, Any] | None:
            self._alive()
            return next((e for e in self.events() if e.get("event") == "started"), None)

        result: dict[str, Any] = await wait_until(started, timeout=timeout,
                                                  message="Go server started")
        return result

    async def wait_ends(self, n: int, timeout: float = 60.0) -> Ledger:
        """Wait until the ledger holds at least ``n`` run ends; return it."""
        def enough() -> Ledger | None:
            book = self.ledger()
            if len(book.ends) >= n:
                return book
            self._alive()
            return None

        try:
            result: Ledger = await wait_until(enough, timeout=timeout,
                                              message=f"{n} Go runs ended")
        except TimeoutError:
            raise TimeoutError(f"{n} Go runs not ended within {timeout}s "
                               f"({len(self.ledger().ends)} did); log:\n"
                               f"{self.log_tail()}") from None
        return result

    async def wait_starts(self, n: int, timeout: float = 60.0) -> Ledger:
        """Wait until the ledger holds at least ``n`` run starts; return it."""
        def enough() -> Ledger | None:
            book = self.ledger()
            if len(book.starts) >= n:
                return book
            self._alive()
            return None

        result: Ledger = await wait_until(enough, timeout=timeout,
                                          message=f"{n} Go runs started")
        return result

    async def stop(self, timeout: float = 30.0) -> dict[str, Any]:
        """SIGTERM (asynq's graceful shutdown), wait for the exit, return the "stopped"
        event; fails if the server did not exit 0."""
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        with anyio.fail_after(timeout):
            code = await self.proc.wait()
        assert code == 0, f"Go server exited {code}:\n{self.log_tail()}"
        stopped = [e for e in self.events() if e.get("event") == "stopped"]
        assert stopped, f"no stopped event:\n{self.log_tail()}"
        return stopped[-1]

    async def kill(self) -> None:
        """SIGKILL: no shutdown at all (its leases lapse, its server entry expires)."""
        if self.proc.returncode is None:
            self.proc.kill()
        await self.proc.wait()


# ---------------------------------------------------------------- the programs


@dataclass(frozen=True)
class GoPrograms:
    """The three programs built against one asynq ``version``, in ``bindir``."""

    version: str
    bindir: Path

    def path(self, program: str) -> Path:
        return self.bindir / program

    async def _run(self, argv: Sequence[str], stdin: bytes | None,
                   timeout: float) -> subprocess.CompletedProcess[bytes]:
        with anyio.fail_after(timeout):
            return await anyio.run_process(list(argv), input=stdin, check=False)

    async def versions(self) -> dict[str, Any]:
        """What the binaries report linking (asynq version, Go version, build tag)."""
        proc = await self._run([str(self.path("inspector")), "-version"], None, 30)
        doc: dict[str, Any] = json.loads(proc.stdout)
        return doc

    async def produce(self, redis: str, *flags: str,
                      specs: Iterable[Mapping[str, Any]] | None = None,
                      timeout: float = 120.0) -> ProducerRun:
        """Run the producer: with ``specs`` (see ``spec``) one task each, else tasks built from
        ``flags`` (``-n``, ``-type``, ``-payload-size``...). Enqueue errors are returned, not
        raised; bad arguments or no Redis raise."""
        argv = [str(self.path("producer")), *conn_flags(redis), *flags]
        stdin = None
        if specs is not None:
            argv.append("-stdin")
            stdin = "".join(json.dumps(s) + "\n" for s in specs).encode()
        proc = await self._run(argv, stdin, timeout)
        docs = json_lines(proc.stdout.decode())
        if proc.returncode != 0 or not docs or docs[-1].get("event") != "summary":
            raise RuntimeError(f"producer failed (exit {proc.returncode}): "
                               f"{proc.stdout.decode()[-2000:]}{proc.stderr.decode()[-2000:]}")
        enqueued = sorted((d for d in docs if d["event"] == "enqueued"), key=lambda d: d["i"])
        errors = sorted((d for d in docs if d["event"] == "error"), key=lambda d: d["i"])
        return ProducerRun(enqueued=enqueued, errors=errors, summary=docs[-1])

    async def inspect(self, redis: str, command: str, *flags: str,
                      timeout: float = 60.0) -> Any:
        """Run one inspector command and return its result; asynq's refusals raise
        InspectorError (with ``kind``), anything else RuntimeError."""
        argv = [str(self.path("inspector")), *conn_flags(redis), command, *flags]
        proc = await self._run(argv, None, timeout)
        docs = json_lines(proc.stdout.decode())
        if not docs or "ok" not in docs[-1]:
            raise RuntimeError(f"inspector {command} failed (exit {proc.returncode}): "
                               f"{proc.stdout.decode()[-2000:]}{proc.stderr.decode()[-2000:]}")
        doc = docs[-1]
        if not doc["ok"]:
            raise InspectorError(f"inspector {command}: {doc['error']}", doc["kind"])
        return doc["result"]

    @asynccontextmanager
    async def server(self, redis: str, workdir: Path, *flags: str, name: str = "go-server",
                     wait_started: bool = True) -> AsyncIterator[GoServer]:
        """Run a server (``flags``: ``-queues``, ``-concurrency``, ``-retry-delay``...) with its
        ledger in ``workdir/<name>.ledger.jsonl`` and its output in ``workdir/<name>.log``.
        When the block ends a server still running gets SIGTERM, then SIGKILL after 30 s."""
        ledger = workdir / f"{name}.ledger.jsonl"
        log = workdir / f"{name}.log"
        argv = [str(self.path("server")), *conn_flags(redis), "-ledger", str(ledger), *flags]
        async with spawn(argv, log, append=True) as proc:
            server = GoServer(proc, ledger, log)
            if wait_started:
                await server.wait_started()
            try:
                yield server
            finally:
                if proc.returncode is None:
                    proc.send_signal(signal.SIGTERM)
                    with anyio.move_on_after(30, shield=True):
                        await proc.wait()


# ---------------------------------------------------------------- asynqmon

ASYNQMON_BUILD_SCRIPT = Path(__file__).resolve().parent / "asynqmon" / "build.sh"
#: The asynqmon release built (the latest tag; it links asynq v0.24.1).
ASYNQMON_VERSION = "v0.7.2"


def build_asynqmon(version: str = ASYNQMON_VERSION) -> Path:
    """Build asynqmon (``tests/interop/asynqmon/build.sh``; ``go install`` is its own up-to-date
    check) and return the binary's path. Shares the interop programs' build lock."""
    if shutil.which("go") is None:
        raise GoBuildError(GO_MISSING)
    root = bin_root()
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            proc = subprocess.run(["bash", str(ASYNQMON_BUILD_SCRIPT), version],
                                  capture_output=True, text=True, timeout=BUILD_TIMEOUT,
                                  check=False)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    if proc.returncode != 0:
        raise GoBuildError(f"building asynqmon {version} failed (exit {proc.returncode}): "
                           f"{proc.stderr.strip()[-4000:]}")
    return Path(proc.stdout.strip().splitlines()[-1])
