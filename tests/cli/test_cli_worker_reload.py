"""``asyncq worker --reload``: a change to a .py file stops the worker gracefully and starts
a new one running the changed code; without the ``reload`` extra the flag fails at once."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import anyio
import psutil
import pytest

from asyncq import Client
from asyncq._cli import main
from asyncq.testing import wait_until
from tests.helpers.processes import log_events

# Each test starts several processes, which a loaded machine starts slowly: more than the
# default 60 s before a test counts as hung.
pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]

APP = '''
from asyncq import ServeMux

mux = ServeMux()


@mux.handler("reload:version")
async def version(task):
    return {version!r}
'''


async def test_a_changed_file_restarts_the_worker_with_the_new_code(
    asyncq_redis_url: str, asyncq_queue: str, tmp_path: Path,
) -> None:
    app = tmp_path / "reloadapp.py"
    app.write_text(APP.format(version="first"))
    log = tmp_path / "reload.log"
    command = [sys.executable, "-m", "asyncq", "worker", "reloadapp:mux", "--reload",
               "--redis-url", asyncq_redis_url, "--queue", f"{asyncq_queue}=1",
               "--log-format", "json"]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    with log.open("wb") as out:
        async with await anyio.open_process(command, cwd=tmp_path, stdout=out, stderr=out,
                                            env=env) as proc, Client(asyncq_redis_url) as client:
            try:
                assert await client.apply("reload:version", queue=asyncq_queue,
                                          timeout=30) == "first"
                app.write_text(APP.format(version="second"))

                async def new_code() -> bool:
                    result = await client.apply("reload:version", queue=asyncq_queue, timeout=20)
                    return bool(result == "second")

                await wait_until(new_code, timeout=40, message="the changed handler running")
                proc.send_signal(signal.SIGTERM)
                with anyio.fail_after(20):
                    assert await proc.wait() == 0
            finally:
                if proc.returncode is None:
                    for child in psutil.Process(proc.pid).children():
                        child.kill()
                    proc.kill()
    events = log_events(log)
    started = [e["pid"] for e in events if e["event"] == "worker process started"]
    servers = {e["server_id"] for e in events if e["event"] == "worker ready"}
    assert len(started) == 2 and started[0] != started[1]  # a new process, not a re-import
    assert len(servers) == 2
    assert next(e["files"] for e in events if e["event"] == "files changed") == [str(app)]
    # The first worker was stopped gracefully (SIGTERM), not killed.
    assert len([e for e in events if e["event"] == "worker stopped"]) == 2


def test_without_watchfiles_reload_fails_at_once_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setitem(sys.modules, "watchfiles", None)  # as if it were not installed
    assert main(["worker", "tests.apps.pids:mux", "--reload"]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == ["asyncq: error: --reload needs the watchfiles package: "
                     "pip install 'asyncq[reload]'"]
