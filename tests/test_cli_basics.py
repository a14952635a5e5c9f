"""The ``asyncq`` command as a shell user meets it: --version, and output cut by a pipe."""

from __future__ import annotations

import subprocess
import sys

import anyio
import pytest

from asyncq import Client, Task, __version__

pytestmark = pytest.mark.anyio


def test_version() -> None:
    out = subprocess.run([sys.executable, "-m", "asyncq", "--version"], capture_output=True,
                         text=True, timeout=30, check=True)
    assert out.stdout.strip() == f"asyncq {__version__}"


async def test_a_listing_cut_short_by_head_prints_no_traceback(
    asyncq_client: Client, asyncq_queue: str, asyncq_redis_url: str,
) -> None:
    await asyncq_client.enqueue_many([Task("t", "x" * 50, queue=asyncq_queue)
                                      for _ in range(3000)])
    cmd = (f"{sys.executable} -m asyncq task ls -q {asyncq_queue} -s pending --size 3000 "
           f"--redis-url {asyncq_redis_url} | head -2")
    out = await anyio.run_process(["bash", "-o", "pipefail", "-c", cmd], check=False)
    assert len(out.stdout.decode().splitlines()) == 2
    assert out.stderr.decode() == "", out.stderr
    assert out.returncode == 141  # the shell's status for a reader that went away
