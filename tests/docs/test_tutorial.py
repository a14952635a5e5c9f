"""The tutorial followed from scratch: its files run as the page says (a uvicorn app, an
``asyncq worker`` process, the curl calls, the dashboard), and its own tests pass."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import pytest

from asyncq.testing import wait_until
from tests.helpers.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "examples" / "tutorial"
PAGE = ROOT / "docs" / "tutorial.md"


def _env(redis_url: str) -> dict[str, str]:
    """The reader's environment: this tree's asyncq, the test's Redis."""
    return {**os.environ, "ASYNCQ_REDIS_URL": redis_url,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def _page_output(after: str) -> str:
    """The output line the page shows right after the console line that contains ``after``."""
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    [i] = [i for i, ln in enumerate(lines) if ln.startswith("$ curl") and after in ln]
    return lines[i + 1]


def test_the_pages_commands_are_the_ones_tested() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert "$ uvicorn app:app\n$ asyncq worker tasks:mux\n" in text
    assert '-d \'{"customer": "ada", "items": []}\'' in text
    for name in ("tasks.py", "app.py", "test_invoices.py"):
        assert f'--8<-- "examples/tutorial/{name}"' in text


@pytest.mark.anyio
async def test_the_tutorial_app_runs_with_a_worker(asyncq_fresh_redis: str,
                                                   tmp_path: Path) -> None:
    env = _env(asyncq_fresh_redis)
    port = free_port()
    order = {"customer": "ada", "items": [{"name": "tea", "price_cents": 350, "quantity": 2},
                                          {"name": "cake", "price_cents": 420}]}
    with (tmp_path / "web.log").open("wb") as web_log, \
            (tmp_path / "worker.log").open("wb") as worker_log:
        async with await anyio.open_process(
                [sys.executable, "-m", "uvicorn", "app:app", "--port", str(port)],
                cwd=HERE, env=env, stdout=web_log, stderr=web_log) as web:
            try:
                async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}",
                                             timeout=30) as http:
                    async def up() -> bool:
                        try:
                            await http.get("/docs")
                        except httpx.TransportError:
                            return False
                        return True
                    await wait_until(up, timeout=20, message="uvicorn serving the tutorial")
                    # No worker yet: the task waits, the GET times out with 504.
                    waiting = await http.post("/invoices", json=order)
                    slow = await http.get(f"/invoices/{waiting.json()['task_id']}",
                                          params={"timeout": 0.2})
                    async with await anyio.open_process(
                            [sys.executable, "-m", "asyncq", "worker", "tasks:mux"],
                            cwd=HERE, env=env, stdout=worker_log,
                            stderr=worker_log) as worker:
                        try:
                            created = await http.post("/invoices", json=order)
                            done = await http.get(f"/invoices/{created.json()['task_id']}")
                            earlier = await http.get(f"/invoices/{waiting.json()['task_id']}")
                            empty = await http.post("/invoices",
                                                    json={"customer": "ada", "items": []})
                            failed = await http.get(f"/invoices/{empty.json()['task_id']}")
                            overview = await http.get("/admin/queues/")
                        finally:
                            worker.terminate()
                            await worker.wait()
            finally:
                web.terminate()
                await web.wait()
    logs = (tmp_path / "worker.log").read_text() + (tmp_path / "web.log").read_text()
    assert created.status_code == 202 and set(created.json()) == {"task_id"}, logs
    assert slow.status_code == 504 and "still pending" in slow.json()["detail"], slow.text
    assert done.status_code == 200, done.text + logs
    assert done.text == _page_output("/invoices/8c3f") == json.dumps(
        {"customer": "ada", "lines": 2, "total_cents": 1120}, separators=(",", ":"))
    assert earlier.status_code == 200, earlier.text
    assert failed.status_code == 422, failed.text
    assert failed.text == _page_output("/invoices/0e5d")
    assert overview.status_code == 200 and re.search(r">\s*default\s*<", overview.text), logs
    assert worker.returncode == 0, logs


def test_the_tutorials_own_tests_pass(asyncq_redis_url: str) -> None:
    """``pytest`` in the tutorial's directory, as the reader runs it (its Redis is the one of
    this session, so no second server is started)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         "-p", "no:xdist"],
        cwd=HERE, env={**_env(asyncq_redis_url), "ASYNCQ_TEST_REDIS_URL": asyncq_redis_url,
                       "ASYNCQ_TEST_ALLOW_FLUSH": "1"},
        capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 passed" in proc.stdout, proc.stdout
