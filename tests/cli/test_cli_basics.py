"""The ``asyncq`` command as a shell user meets it: --version, and output cut by a pipe."""

from __future__ import annotations

import subprocess
import sys

import anyio
import pytest

from asyncq import Client, ServeMux, Task, __version__
from asyncq._cli import main
from asyncq.testing import WorkerFactory

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(("argv", "unknown", "usage"), [
    (["worker", "app:mux", "--concurency", "5"], "--concurency 5", "asyncq worker"),  # a typo
    (["worker", "app:mux", "--conc", "5"], "--conc 5", "asyncq worker"),  # an abbreviation
    (["task", "ls", "-q", "q", "--stat", "pending"], "--stat pending", "usage: asyncq task ls"),
    (["queue", "inspect", "q", "--jso"], "--jso", "usage: asyncq queue inspect"),
])
def test_an_unknown_or_shortened_option_is_refused_with_its_commands_usage(
        argv: list[str], unknown: str, usage: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"unrecognized arguments: {unknown}" in err
    assert usage in err and "usage: asyncq [-h]" not in err  # not the top-level usage


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


async def test_task_inspect_finds_the_queue_and_shows_the_result(
    asyncq_client: Client, asyncq_queue: str, asyncq_redis_url: str,
    asyncq_worker: WorkerFactory,
) -> None:
    mux = ServeMux()

    @mux.handler("t")
    async def handler(task: Task) -> dict[str, object]:
        return {"total": 42, "items": ["a", "b"]}

    info = await asyncq_client.enqueue("t", queue=asyncq_queue, retention=60)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}) as w:
        await w.wait_drained()
    out = await anyio.run_process([sys.executable, "-m", "asyncq", "task", "inspect",
                                   info.id, "--redis-url", asyncq_redis_url], check=False)
    text = out.stdout.decode()
    assert out.returncode == 0, out.stderr.decode()
    assert "queue:" in text and asyncq_queue in text  # found without -q
    assert '{"total":42,"items":["a","b"]}' in text  # the decoded result, not "N bytes"
    missing = await anyio.run_process([sys.executable, "-m", "asyncq", "task", "inspect",
                                       "no-such-id", "--redis-url", asyncq_redis_url],
                                      check=False)
    assert missing.returncode == 1 and b"not found in any queue" in missing.stderr


async def test_task_ls_without_a_state_lists_every_state_with_tasks(
    asyncq_client: Client, asyncq_queue: str, asyncq_redis_url: str,
) -> None:
    await asyncq_client.enqueue("now", queue=asyncq_queue)
    await asyncq_client.enqueue("later", queue=asyncq_queue, process_in=3600)
    out = await anyio.run_process([sys.executable, "-m", "asyncq", "task", "ls", "-q",
                                   asyncq_queue, "--redis-url", asyncq_redis_url], check=False)
    text = out.stdout.decode()
    assert out.returncode == 0, out.stderr.decode()
    assert "pending (1)" in text and "scheduled (1)" in text
    assert "now" in text and "later" in text
