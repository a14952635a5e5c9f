"""The asyncq side of the interop scenarios: asynq-wire URLs, and a ServeMux whose handlers
behave by task type exactly like the Go server's (``tests/interop/go/cmd/server``) and record
every run in the same ledger shape (``goharness.Ledger``), so one scenario can be asserted the
same way whichever side ran it."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from goharness import Ledger, sha256_hex

from asyncq import ServeMux, SkipRetry, Task, WorkerConfig
from asyncq.testing import wait_until

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
#: Payloads up to this size are kept in the ledger in hex (as the Go server's default).
PAYLOAD_MAX = 65536


def asynq_url(url: str) -> str:
    """``url`` with asyncq's asynq-layout option (``?wire=asynq``)."""
    return url + ("&" if "?" in url else "?") + "wire=asynq"


def _arg(task: Task, n: int) -> int:
    parts = task.type.split(":")
    if len(parts) <= n:
        raise SkipRetry(f"task type {task.type!r}: want an argument after ':'")
    return int(parts[n])


async def _ok(task: Task) -> None:
    return None


async def _fail(task: Task) -> None:
    raise RuntimeError("fail: the handler failed on purpose")


async def _failn(task: Task) -> None:
    n = _arg(task, 1)
    if task.retried < n:
        raise RuntimeError(f"failn: attempt {task.retried + 1} of {n} failing on purpose")


async def _skip(task: Task) -> None:
    raise SkipRetry("skip: no retry on purpose")


async def _sleep(task: Task) -> None:
    await asyncio.sleep(_arg(task, 1) / 1000)


async def _result(task: Task) -> None:
    await task.write_result(bytes(task.payload))


async def _hang(task: Task) -> None:
    await asyncio.Event().wait()


HANDLERS: dict[str, Callable[[Task], Awaitable[None]]] = {
    "ok": _ok, "aggregated": _ok, "fail": _fail, "failn:": _failn, "skip": _skip,
    "sleep:": _sleep, "result": _result, "hang": _hang,
}


def _recorded(ledger: Ledger, handler: Callable[[Task], Awaitable[None]]
              ) -> Callable[[Task], Awaitable[None]]:
    async def run(task: Task) -> None:
        payload = bytes(task.payload)
        deadline = task.deadline
        rec: dict[str, Any] = {
            "event": "start", "id": task.id, "type": task.type, "queue": task.queue,
            "payload_len": len(payload), "payload_sha256": sha256_hex(payload),
            "payload_hex": payload.hex() if len(payload) <= PAYLOAD_MAX else None,
            "headers": dict(task.headers) or None, "retried": task.retried,
            "max_retry": task.max_retry,
            "deadline": deadline.timestamp() if deadline is not None else None,
            "started": time.time(), "pid": os.getpid(),
        }
        ledger.starts.append(dict(rec))
        outcome, error = "ok", None
        try:
            await handler(task)
        except SkipRetry as exc:
            outcome, error = "skip", str(exc)
            raise
        except asyncio.CancelledError:
            # stopped from outside: at its deadline, or cancelled (Inspector, shutdown)
            late = deadline is not None and time.time() >= deadline.timestamp() - 0.05
            outcome = "deadline_exceeded" if late else "canceled"
            raise
        except Exception as exc:
            outcome, error = "error", str(exc)
            raise
        finally:
            ended = time.time()
            ledger.ends.append({**rec, "event": "end", "ended": ended,
                                "elapsed_s": ended - rec["started"], "outcome": outcome,
                                "error": error})

    return run


def recording_mux(ledger: Ledger) -> ServeMux:
    """A ServeMux with the Go server's behaviours (ok, fail, failn:<n>, skip, sleep:<ms>,
    result, hang, aggregated), each run appended to ``ledger``."""
    mux = ServeMux()
    for pattern, handler in HANDLERS.items():
        mux.handle(pattern, _recorded(ledger, handler))
    return mux


def aggregate(group: str, tasks: list[Task]) -> Task:
    """The Go server's aggregator, in Python: one "aggregated" task whose payload is JSON
    ``{"group", "count", "payloads_hex"}`` of the group's tasks."""
    doc = {"group": group, "count": len(tasks),
           "payloads_hex": [bytes(t.payload).hex() for t in tasks]}
    return Task("aggregated", json.dumps(doc).encode())


async def wait_ends(ledger: Ledger, n: int, timeout: float = 60.0) -> Ledger:
    """Wait until ``ledger`` (an in-process asyncq worker's) holds ``n`` run ends."""
    try:
        await wait_until(lambda: len(ledger.ends) >= n, timeout=timeout,
                         message=f"{n} asyncq runs ended")
    except TimeoutError:
        raise TimeoutError(f"{n} asyncq runs not ended within {timeout}s "
                           f"({len(ledger.ends)} did)") from None
    return ledger


async def wait_starts(ledger: Ledger, n: int, timeout: float = 60.0) -> Ledger:
    """Wait until ``ledger`` holds ``n`` run starts."""
    await wait_until(lambda: len(ledger.starts) >= n, timeout=timeout,
                     message=f"{n} asyncq runs started")
    return ledger


# ---------------------------------------------------------------- worker processes

#: Where ``ledger_file_mux`` (in a worker process) appends its run records.
LEDGER_ENV = "ASYNCQ_INTEROP_LEDGER"


class _FileRecords(list[dict[str, Any]]):
    """Run records appended to a file as JSON lines, not kept in memory: one ``write`` each on
    an O_APPEND descriptor, so a SIGKILL leaves whole lines only (the Go server's way)."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd

    def append(self, record: dict[str, Any]) -> None:
        os.write(self._fd, json.dumps(record).encode() + b"\n")


def file_ledger(path: str | os.PathLike[str]) -> Ledger:
    """A Ledger whose records go to ``path`` (read back with ``Ledger.read``)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    return Ledger(starts=_FileRecords(fd), ends=_FileRecords(fd))


def ledger_file_mux() -> ServeMux:
    """``asyncq worker asyncqpeer:ledger_file_mux --factory``: the recording handlers, each run
    appended to the file named by ``$ASYNCQ_INTEROP_LEDGER``."""
    return recording_mux(file_ledger(os.environ[LEDGER_ENV]))


def no_retry_delay(retried: int, error: BaseException, task: Task) -> float:
    """Retry at once, as the Go servers of the tests do (``-retry-delay 0s``)."""
    return 0.0


def process_config() -> WorkerConfig:
    """``--config asyncqpeer:process_config``: what a worker process takes from Python rather
    than flags (no retry delay, also for the runs its recoverer takes back)."""
    return WorkerConfig(retry_delay=no_retry_delay)


def worker_process_command(url: str, queues: dict[str, int], *flags: str) -> list[str]:
    """``python -m asyncq worker`` on the asynq layout of ``url`` running the recording handlers
    (its environment needs ``process_env``)."""
    argv = [sys.executable, "-m", "asyncq", "worker", "asyncqpeer:ledger_file_mux", "--factory",
            "--config", "asyncqpeer:process_config", "--redis-url", asynq_url(url),
            "--log-format", "json"]
    for queue, weight in queues.items():
        argv += ["--queue", f"{queue}={weight}"]
    return argv + list(flags)


def process_env(ledger: Path) -> dict[str, str]:
    """The environment of a ``worker_process_command`` process writing its runs to ``ledger``
    (this directory and the project root importable)."""
    path = os.pathsep.join([str(HERE), str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path.rstrip(os.pathsep), LEDGER_ENV: str(ledger)}
