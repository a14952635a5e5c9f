"""Every example runs: the quickstart end to end, and the Starlette app with a worker."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import anyio
import httpx
import pytest
import uvicorn

import asyncq
from asyncq.testing import WorkerFactory, wait_until
from tests.helpers.ports import free_port

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_quickstart_demo_runs_end_to_end(asyncq_fresh_redis: str) -> None:
    # (fresh: the demo's queues have fixed names, which the docs' snippets enqueue into too)
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "quickstart" / "run_demo.py"),
         "--redis-url", asyncq_fresh_redis],
        capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("completed, result=") == 4
    assert "'sent_to': 'ada@example.com'" not in proc.stdout  # results are JSON, not reprs
    assert '{"sent_to":"ada@example.com"}' in proc.stdout
    assert "image:resize processed 15 bytes" in proc.stdout
    assert "worker stopped with exit code 0" in proc.stdout
    assert proc.stdout.count("worker: running") == 4  # the middleware saw every task


@pytest.mark.anyio
async def test_starlette_app_enqueues_and_worker_processes(
    asyncq_redis_url: str, asyncq_queue: str, asyncq_worker: WorkerFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ASYNCQ_REDIS_URL", asyncq_redis_url)
    monkeypatch.setenv("SIGNUP_QUEUE", asyncq_queue)
    app = load(EXAMPLES / "starlette_app" / "app.py", "example_app")
    tasks = load(EXAMPLES / "starlette_app" / "tasks.py", "example_tasks")

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app.app, log_level="warning", lifespan="on"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        await wait_until(lambda: server.started, timeout=10, message="uvicorn started")
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            ok = await http.post("/signup", json={"email": "ada@example.com"})
            bad = await http.post("/signup", json={})
        server.should_exit = True
    sock.close()
    assert ok.status_code == 202, ok.text
    assert ok.json()["state"] == asyncq.TaskState.PENDING.value
    assert bad.status_code == 400
    async with asyncq_worker(tasks.mux, queues={asyncq_queue: 1}) as w:
        await wait_until(lambda: tasks.sent == ["ada@example.com"], timeout=10)
        await w.wait_drained()
    assert os.environ["SIGNUP_QUEUE"] == asyncq_queue


@pytest.mark.anyio
async def test_the_readme_quickstart_path_works(asyncq_fresh_redis: str, tmp_path: Path) -> None:
    """The newcomer's path the README shows: a worker on examples/quickstart/tasks.py, then
    the README's one-line producer, which prints the README's output."""
    readme = (EXAMPLES.parent / "README.md").read_text(encoding="utf-8")
    start = readme.index("## Quickstart")
    quick = readme[start:readme.index("\n## ", start + 1)]
    lines = quick.splitlines()
    [worker_line] = [ln for ln in lines if ln.startswith("$ asyncq worker tasks:mux --redis-url")]
    [producer_i] = [i for i, ln in enumerate(lines) if ln.startswith('$ python -c "')]
    producer, expected = lines[producer_i], lines[producer_i + 1]
    readme_url = "redis://127.0.0.1:6379/0"
    assert readme_url in worker_line and readme_url in producer
    code = producer.removeprefix('$ python -c "').removesuffix('"')
    worker_args = worker_line.removeprefix("$ asyncq ").replace(readme_url, asyncq_fresh_redis)
    with (tmp_path / "worker.log").open("wb") as log:
        async with await anyio.open_process(
                [sys.executable, "-m", "asyncq", *worker_args.split()],
                cwd=EXAMPLES / "quickstart", stdout=log, stderr=log) as worker:
            try:
                done = await anyio.run_process(
                    [sys.executable, "-c", code.replace(readme_url, asyncq_fresh_redis)],
                    check=False)
            finally:
                worker.terminate()
                await worker.wait()
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().strip() == expected.strip()


@pytest.mark.anyio
async def test_fastapi_app_enqueues_typed_tasks_and_awaits_their_results(
    asyncq_fresh_redis: str, tmp_path: Path,
) -> None:
    """The FastAPI example as a user runs it: uvicorn serving the app and `asyncq worker
    tasks:mux` (typed tasks, a lifespan database, a sync task in a thread), over HTTP."""
    here = EXAMPLES / "fastapi_app"
    env = {**os.environ, "ASYNCQ_REDIS_URL": asyncq_fresh_redis}
    port = free_port()
    with (tmp_path / "web.log").open("wb") as web_log, \
            (tmp_path / "worker.log").open("wb") as worker_log:
        async with await anyio.open_process(
                [sys.executable, "-m", "uvicorn", "app:app", "--port", str(port)],
                cwd=here, env=env, stdout=web_log, stderr=web_log) as web:
            try:
                async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
                    async def up() -> bool:
                        try:
                            await http.get("/docs")
                        except httpx.TransportError:
                            return False
                        return True
                    await wait_until(up, timeout=20, message="uvicorn serving the example")
                    # No worker yet: the summary times out with 504, the text is accepted.
                    slow = await http.get("/reports/r1/summary", params={"timeout": 0.2})
                    added = await http.post("/reports/r1", json={"text": "b a b c b a"})
                    async with await anyio.open_process(
                            [sys.executable, "-m", "asyncq", "worker", "tasks:mux",
                             "--redis-url", asyncq_fresh_redis],
                            cwd=here, env=env, stdout=worker_log, stderr=worker_log) as worker:
                        try:
                            async with asyncq.Client(asyncq_fresh_redis) as client:
                                stored = await client.result(added.json()["task_id"],
                                                             timeout=20)
                            done = await http.get("/reports/r1/summary",
                                                  params={"timeout": 20})
                        finally:
                            worker.terminate()
                            await worker.wait()
            finally:
                web.terminate()
                await web.wait()
    logs = (tmp_path / "worker.log").read_text() + (tmp_path / "web.log").read_text()
    assert slow.status_code == 504, slow.text
    assert added.status_code == 202 and added.json()["state"] == "pending", added.text
    assert done.status_code == 200, done.text + logs
    # Both tasks saw the worker's lifespan database.
    assert stored == 6
    assert done.json() == {"report": "r1", "words": 6, "top": ["b", "a"]}, logs
    assert worker.returncode == 0, logs
