"""The Django tests' shop: the project's test client, its worker's log and the signals its
receivers recorded, and the one way these tests start ``manage.py asyncq_worker``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.helpers.polling import poll_until

ROOT = Path(__file__).resolve().parents[3]
PROJECT = Path(__file__).resolve().parent / "project"
WAIT = 20.0
CONCURRENCY = 8
"""The session worker's concurrency."""


class Shop:
    """The project's test client plus its worker's log, for reading results back."""

    def __init__(self, client: Any, log: Path, tmp: Path, signals: Path,
                 worker_pid: int) -> None:
        self.client = client
        self.worker_pid = worker_pid
        """The session worker's process (``manage.py asyncq_worker``)."""
        self.log = log
        self.tmp = tmp
        self.signals_file = signals

    def get(self, url: str) -> dict[str, Any]:
        response = self.client.get(url)
        assert response.status_code == 200, response.content
        body: dict[str, Any] = response.json()
        return body

    def finished(self, result_id: str, *, view: str = "result") -> dict[str, Any]:
        """The result once the worker finished the task (polled until then)."""
        last: dict[str, Any] = {}

        def ended() -> dict[str, Any] | None:
            last.update(self.get(f"/{view}/{result_id}"))
            return dict(last) if last["status"] in ("SUCCESSFUL", "FAILED") else None

        body: dict[str, Any] = poll_until(ended, timeout=WAIT, message=lambda: (
            f"task {result_id} still {last['status']}; worker log:\n"
            f"{self.log.read_text(errors='replace')[-3000:]}"))
        return body

    def signals(self, result_id: str) -> list[dict[str, Any]]:
        """The signals the project's receivers recorded for one task, in the order sent."""
        if not self.signals_file.exists():
            return []
        lines = [json.loads(line) for line in self.signals_file.read_text().splitlines()]
        return [line for line in lines if line["id"] == result_id]


@contextmanager
def manage_worker(args: list[str], log: Path, env: Mapping[str, str]) -> Iterator[Any]:
    """``manage.py asyncq_worker ARGS`` in the project, output to ``log``; terminated (then
    killed) when the block ends."""
    with _process(["manage.py", "asyncq_worker", *args], log, env) as worker:
        yield worker


@contextmanager
def cli_worker(args: list[str], log: Path, env: Mapping[str, str]) -> Iterator[Any]:
    """``asyncq worker ARGS`` (plain asyncq, a ServeMux of the project's as its target) in the
    project, as ``manage_worker``."""
    with _process(["-m", "asyncq", "worker", *args], log, env) as worker:
        yield worker


@contextmanager
def _process(args: list[str], log: Path, env: Mapping[str, str]) -> Iterator[Any]:
    worker_env = dict(env, PYTHONPATH=os.pathsep.join([str(ROOT), str(PROJECT)]))
    with log.open("wb") as out:
        worker = subprocess.Popen([sys.executable, *args], cwd=PROJECT, env=worker_env,
                                  stdout=out, stderr=out)
    try:
        yield worker
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=10)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
