"""A real pre-fork server: gunicorn with two workers and ``--preload`` imports a WSGI app whose
SyncClient is created (and used) at import, in the master, before the workers are forked.
Each worker enqueues on request and reads results, without any fork hook of the app's."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from anyio import to_thread

import asyncq
from asyncq import ServeMux, Task
from asyncq.testing import WorkerFactory
from tests.helpers.polling import answers, poll_until
from tests.helpers.ports import free_port

pytest.importorskip("gunicorn")

APP = """
import json, os
import asyncq

QUEUE = os.environ["ASYNCQ_TEST_QUEUE"]
client = asyncq.SyncClient(os.environ["ASYNCQ_TEST_URL"])
client.ping()  # the master's loop thread and connection exist before the fork


def app(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/enqueue":
        info = client.enqueue("web:echo", {"pid": os.getpid()}, queue=QUEUE)
        body = {"id": info.id, "pid": os.getpid()}
    else:
        body = {"result": client.result(path.rsplit("/", 1)[1], queue=QUEUE, timeout=20)}
    start_response("200 OK", [("Content-Type", "application/json")])
    return [json.dumps(body).encode()]
"""


def _get(url: str) -> dict[str, object]:
    with urllib.request.urlopen(url, timeout=30) as reply:
        body: dict[str, object] = json.loads(reply.read())
        return body


@pytest.fixture
def gunicorn(tmp_path: Path, asyncq_redis_url: str, asyncq_queue: str) -> Iterator[str]:
    (tmp_path / "sync_app.py").write_text(APP)
    port = free_port()
    root = str(Path(asyncq.__file__).parent.parent)  # the asyncq under test
    env = {**os.environ, "ASYNCQ_TEST_URL": asyncq_redis_url, "ASYNCQ_TEST_QUEUE": asyncq_queue,
           "PYTHONPATH": os.pathsep.join([str(tmp_path), root])}
    log = tmp_path / "gunicorn.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "--workers", "2", "--preload", "--timeout", "60",
             "--graceful-timeout", "5", "--bind", f"127.0.0.1:{port}", "sync_app:app"],
            cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True)  # its own process group: the workers go with it
    base = f"http://127.0.0.1:{port}"
    try:
        def up() -> bool:
            if proc.poll() is not None:
                pytest.fail(f"gunicorn exited:\n{log.read_text()}")
            return answers(lambda: socket.create_connection(("127.0.0.1", port), timeout=1)
                           .close(), (OSError,))

        poll_until(up, timeout=60, message=lambda: f"gunicorn did not start:\n{log.read_text()}")
        yield base
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.anyio
@pytest.mark.timeout(180)
async def test_forked_gunicorn_workers_enqueue_and_read_results(
    gunicorn: str, asyncq_queue: str, asyncq_worker: WorkerFactory,
) -> None:
    mux = ServeMux()

    async def echo(task: Task) -> dict[str, object]:
        return {"enqueued_by": task.json()["pid"]}

    mux.handle("web:echo", echo)

    def requests() -> list[tuple[dict[str, object], dict[str, object]]]:
        # Concurrent requests until both workers answered (the kernel picks which accepts).
        seen: dict[object, list[dict[str, object]]] = {}
        with ThreadPoolExecutor(8) as pool:
            for _ in range(25):
                for reply in pool.map(_get, [f"{gunicorn}/enqueue"] * 8):
                    seen.setdefault(reply["pid"], []).append(reply)
                if len(seen) == 2:
                    break
        assert len(seen) == 2, f"only worker(s) {list(seen)} answered"
        enqueued = [replies[0] for replies in seen.values()]
        return [(e, _get(f"{gunicorn}/result/{e['id']}")) for e in enqueued]

    async with asyncq_worker(mux, queues={asyncq_queue: 1}):
        pairs = await to_thread.run_sync(requests)
    for enqueued, result in pairs:
        assert result == {"result": {"enqueued_by": enqueued["pid"]}}
