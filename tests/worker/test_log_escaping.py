"""Worker logs a handler cannot forge: console lines escape control characters (in messages
and tracebacks), JSON logs stay one line per event, whatever the message holds."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import anyio
import pytest

from asyncq import Client, configure_logging
from asyncq.testing import wait_until
from tests.helpers.processes import ROOT, spawn

pytestmark = pytest.mark.anyio

FORGED = "bad input\n2026-11-23T00:00:00Z [info     ] payment accepted \x1b[2J"


@pytest.mark.parametrize("fmt", ["console", "json"])
async def test_a_handler_error_cannot_forge_a_log_line(
    asyncq_client: Client, asyncq_queue: str, asyncq_redis_url: str, tmp_path: Path, fmt: str,
) -> None:
    app = tmp_path / "forging_app.py"
    app.write_text(
        "import asyncq\nmux = asyncq.ServeMux()\n\n@mux.handler('forge')\n"
        "async def forge(task):\n    raise ValueError(task.json())\n")
    log = tmp_path / "w.log"
    await asyncq_client.enqueue("forge", FORGED, queue=asyncq_queue, max_retry=0)
    async with spawn([sys.executable, "-m", "asyncq", "worker", "forging_app:mux",
                      "--redis-url", asyncq_redis_url, "--queue", f"{asyncq_queue}=1",
                      "--log-format", fmt],
                     log, cwd=tmp_path, env={"PYTHONPATH": str(ROOT)}) as proc:
        await wait_until(lambda: b"task archived" in log.read_bytes(), timeout=20)
        proc.send_signal(signal.SIGTERM)
        await proc.wait()
    text = log.read_text()
    assert "\x1b" not in text
    lines = text.splitlines()
    assert not any(line.startswith("2026-11-23T00:00:00Z") for line in lines), text
    if fmt == "json":
        docs = [json.loads(line) for line in lines]  # every line is one whole event
        assert any(FORGED in json.dumps(d) or "payment accepted" in str(d) for d in docs)
    else:
        assert any("bad input\\n2026-11-23T00:00:00Z" in line for line in lines), text


async def test_a_script_can_log_like_the_cli(tmp_path: Path, asyncq_redis_url: str) -> None:
    script = tmp_path / "script.py"
    script.write_text(
        "import asyncio, asyncq\n"
        "asyncq.configure_logging('info')  # stderr is a pipe here: JSON lines\n"
        f"w = asyncq.Worker({asyncq_redis_url!r}, asyncq.ServeMux())\n"
        "async def main():\n    async with w:\n        pass\n"
        "asyncio.run(main())\n")
    out = await anyio.run_process([sys.executable, str(script)], check=False,
                                  env={"PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr.decode()
    events = [json.loads(line)["event"] for line in out.stderr.decode().splitlines()]
    assert "worker ready" in events and events[-1] == "worker stopped"
    with pytest.raises(ValueError, match="level must be one of"):
        configure_logging("verbose")  # refused before anything is configured
