"""mypy checks the keyword options of enqueue (``EnqueueOptions``): a misspelt name or a value
of the wrong type is a type error, a correct call is not; at run time the same mistakes raise."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import asyncq

# Lines ending in "# E" must be flagged by mypy, and only those.
SNIPPET = '''\
from datetime import UTC, datetime, timedelta

import asyncq

mux = asyncq.ServeMux()


@mux.task("add")
async def add(a: int, b: int) -> int:
    return a + b


async def main(client: asyncq.Client, info: asyncq.TaskInfo) -> None:
    await client.enqueue("t", 1, queue="q", max_retry=3, timeout=5, deadline=datetime.now(UTC))
    await client.enqueue("t", 1, unique=timedelta(hours=1), unique_key="k", task_id="i")
    await client.enqueue("t", 1, process_at=datetime.now(UTC), retention=60.0, group="g")
    await client.enqueue("t", 1, process_in=10, headers={"a": "b"}, queue=None)
    await client.enqueue("t", after=[info, ("q", "id"), "id"])
    opts: asyncq.EnqueueOptions = {"queue": "q", "max_retry": 3}
    await client.enqueue(asyncq.Task("t", 1, timeout=timedelta(minutes=1)), **opts)
    await client.apply("t", 1, timeout=5.0, queue="q", after=[info])
    add.options(queue="q", retention=10)
    await client.enqueue("t", 1, max_rety=3)  # E
    await client.enqueue("t", 1, queue=3)  # E
    await client.enqueue("t", 1, timeout="5m")  # E
    await client.enqueue("t", 1, deadline=5)  # E
    await client.enqueue("t", 1, headers={"a": 1})  # E
    asyncq.Task("t", max_rety=3)  # E
    asyncq.Task("t", after=[info])  # E
    add.options(queu="q")  # E
    bad: asyncq.EnqueueOptions = {"queue": 3}  # E
'''


@pytest.mark.timeout(90)  # one mypy run, about 10 s with a fresh cache
def test_mypy_flags_exactly_the_wrong_options(tmp_path: Path) -> None:
    snippet = tmp_path / "enqueue_options_snippet.py"
    snippet.write_text(SNIPPET)
    # The asyncq under test (this checkout), not whichever one the venv has installed.
    env = {**os.environ, "MYPYPATH": str(Path(asyncq.__file__).parent.parent)}
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"),
         "--no-error-summary", "--python-version", "3.11", str(snippet)],
        capture_output=True, text=True, timeout=80, check=False, env=env, cwd=tmp_path)
    errors = [line for line in out.stdout.splitlines() if ": error: " in line]
    expected = {i + 1 for i, line in enumerate(SNIPPET.splitlines())
                if line.endswith("# E")}
    flagged = {int(line.split(":")[1]) for line in errors}
    assert flagged == expected, out.stdout + out.stderr
    assert re.search(r'Unexpected keyword argument "max_rety"', out.stdout), out.stdout
    assert out.returncode == 1


def test_the_same_mistakes_raise_at_run_time() -> None:
    with pytest.raises(TypeError, match="max_rety"):
        asyncq.Task("t", max_rety=3)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="queue"):
        asyncq.Task("t", queue=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="after"):
        asyncq.Task("t", after=["x"])  # type: ignore[call-arg]
