"""mypy checks typed tasks through a SyncClient as it does through a Client: the call returns
a TaskInfo (not something to await), the result has the function's return type, and a wrong
argument is a type error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import asyncq

# Lines ending in "# E" must be flagged by mypy, and only those.
SNIPPET = '''\
import asyncq

mux = asyncq.ServeMux()


@mux.task("email:send")
async def send_email(to: str, subject: str) -> int:
    return 1


@mux.task("sync:add")
def add(a: int, b: int = 0) -> float:
    return a + b


def view(client: asyncq.SyncClient) -> None:
    info: asyncq.TaskInfo = send_email.enqueue(client, "a@b.c", "Hi")
    n: int = send_email.result(client, info, timeout=1)
    x: float = add.result(client, add.enqueue(client, 1, b=2))
    client.enqueue("t", 1, queue="q", max_retry=3)
    value = client.apply("t", timeout=5.0, queue="q")
    send_email.enqueue(client, "a@b.c")  # E
    send_email.enqueue(client, "a@b.c", 3)  # E
    s: str = send_email.result(client, info)  # E
    client.enqueue("t", 1, max_rety=3)  # E


async def handler(client: asyncq.Client) -> None:
    info: asyncq.TaskInfo = await send_email.enqueue(client, "a@b.c", "Hi")
    n: int = await send_email.result(client, info)
    send_email.enqueue(client, "a@b.c", "Hi").id  # E
'''


@pytest.mark.timeout(90)  # one mypy run, about 10 s with a fresh cache
def test_typed_tasks_type_check_with_a_sync_client(tmp_path: Path) -> None:
    snippet = tmp_path / "sync_client_snippet.py"
    snippet.write_text(SNIPPET)
    # The asyncq under test (this checkout), not whichever one the venv has installed.
    env = {**os.environ, "MYPYPATH": str(Path(asyncq.__file__).parent.parent)}
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"),
         "--no-error-summary", "--python-version", "3.11", str(snippet)],
        capture_output=True, text=True, timeout=80, check=False, env=env, cwd=tmp_path)
    errors = [line for line in out.stdout.splitlines() if ": error: " in line]
    expected = {i + 1 for i, line in enumerate(SNIPPET.splitlines()) if line.endswith("# E")}
    flagged = {int(line.split(":")[1]) for line in errors}
    assert flagged == expected, out.stdout + out.stderr
