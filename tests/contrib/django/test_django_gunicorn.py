"""The shop as it runs in production: its views served by a real gunicorn (``--preload``, two
workers: the app is imported, then forked), its tasks run by the real ``manage.py
asyncq_worker`` of the package's fixture. A call retried on the one error its task names, a
process-isolated call, a call that returned None, each read back through a view, and every
signal the framework defines."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

pytest.importorskip("django")
pytest.importorskip("gunicorn")

from tests.contrib.django.harness import PROJECT, ROOT, WAIT, Shop
from tests.helpers.polling import poll_until

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def _gunicorn(shop: Shop) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = _free_port()
    log = shop.tmp / "gunicorn.log"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(PROJECT)]))
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "--preload", "--workers", "2", "--bind",
             f"127.0.0.1:{port}", "shopsite.wsgi"], cwd=PROJECT, env=env, stdout=out,
            stderr=out)
    url = f"http://127.0.0.1:{port}"
    try:
        poll_until(lambda: _answers(url, server), timeout=WAIT,
                   message=lambda: log.read_text(errors="replace")[-2000:])
        yield url, server
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _answers(url: str, server: subprocess.Popen[bytes]) -> bool:
    if server.poll() is not None:
        raise RuntimeError(f"gunicorn exited with {server.returncode}")
    try:
        urllib.request.urlopen(f"{url}/add?a=0&b=0", timeout=2).close()
    except OSError:
        return False
    return True


def _get(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=10) as response:
        body: dict[str, Any] = json.loads(response.read())
        return body


def _finished(url: str, result_id: str) -> dict[str, Any]:
    return poll_until(lambda: (b := _get(f"{url}/result/{result_id}"))["status"] in (
        "SUCCESSFUL", "FAILED") and b, timeout=WAIT, message=f"{result_id} finished")


def test_the_shop_under_gunicorn_preload(shop: Shop) -> None:
    with _gunicorn(shop) as (url, server):
        retried = _get(f"{url}/deliver?order=K-1&error=smtp")["id"]
        final = _get(f"{url}/deliver?order=K-2&error=value")["id"]
        isolated = _get(f"{url}/render?seconds=0.05")["id"]
        nothing = _get(f"{url}/forget?order=K-3")["id"]

        done = _finished(url, retried)
        failed = _finished(url, final)
        rendered = _finished(url, isolated)
        empty = _finished(url, nothing)

    assert (done["status"], done["return_value"]) == ("SUCCESSFUL", 2)
    assert failed["status"] == "FAILED"
    assert [e["class"] for e in failed["errors"]] == ["builtins.ValueError"]
    assert rendered["status"] == "SUCCESSFUL"
    child = rendered["return_value"]["pid"]
    assert child != shop.worker_pid
    assert (empty["status"], empty["return_value"]) == ("SUCCESSFUL", None)

    def sent(result_id: str) -> list[tuple[str, str]]:
        """The worker's signals for the call, in order, after the enqueuer's (which the
        worker may beat to the file: it is sent once the enqueue returned)."""
        signals = [(s["signal"], s["status"]) for s in shop.signals(result_id)]
        enqueued = [s for s in signals if s[0] == "task_enqueued"]
        return enqueued + [s for s in signals if s[0] != "task_enqueued"]

    poll_until(lambda: all(sent(i)[-1:] == [("task_finished", "SUCCESSFUL")]
                           or sent(i)[-1:] == [("task_finished", "FAILED")]
                           for i in (retried, final, isolated, nothing))
               and all(sent(i)[0][0] == "task_enqueued"
                       for i in (retried, final, isolated, nothing)),
               timeout=WAIT, message=lambda: f"every signal sent: "
               f"{[sent(i) for i in (retried, final, isolated, nothing)]}")
    assert sent(retried) == [("task_enqueued", "READY"), ("task_started", "RUNNING"),
                             ("task_started", "RUNNING"), ("task_finished", "SUCCESSFUL")]
    assert sent(final) == [("task_enqueued", "READY"), ("task_started", "RUNNING"),
                           ("task_finished", "FAILED")]
    for result_id in (isolated, nothing):
        assert sent(result_id) == [("task_enqueued", "READY"), ("task_started", "RUNNING"),
                                   ("task_finished", "SUCCESSFUL")]
    # Enqueued in gunicorn's forked workers (not its master); run by the worker, or by its
    # child for the isolated task.
    enqueuers = {s["pid"] for i in (retried, final, isolated, nothing)
                 for s in shop.signals(i) if s["signal"] == "task_enqueued"}
    assert server.pid not in enqueuers
    assert os.getpid() not in enqueuers
    ran = {i: {s["pid"] for s in shop.signals(i) if s["signal"] != "task_enqueued"}
           for i in (isolated, nothing)}
    assert ran == {isolated: {child}, nothing: {shop.worker_pid}}
