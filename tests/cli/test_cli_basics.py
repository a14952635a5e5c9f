"""The ``asyncq`` command as a shell user meets it: the real entry points (``python -m asyncq``
and the console script: --version, exit codes, output cut by a pipe), unknown options."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from asyncq import Client, ServeMux, Task, __version__
from asyncq._cli import main
from asyncq.testing import WorkerFactory
from tests.helpers.cli import Cli, err, out

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


@pytest.mark.parametrize("command", [[sys.executable, "-m", "asyncq"],
                                     [str(Path(sys.executable).with_name("asyncq"))]],
                         ids=["python -m asyncq", "the asyncq script"])
def test_version_from_the_real_entry_points(command: list[str]) -> None:
    out = subprocess.run([*command, "--version"], capture_output=True, text=True, timeout=60,
                         check=True)
    assert out.stdout.strip() == f"asyncq {__version__}"


def test_exit_codes_of_the_real_entry_point(asyncq_queue: str) -> None:
    """The process exits with main()'s code: 1 and one line for an error, 2 for a usage error."""
    dead = ["--redis-url", "redis://127.0.0.1:1/0"]
    failed = subprocess.run([sys.executable, "-m", "asyncq", "queue", "inspect", asyncq_queue,
                             *dead], capture_output=True, text=True, timeout=60, check=False)
    assert failed.returncode == 1 and failed.stdout == ""
    assert failed.stderr.startswith("asyncq: error: ") and failed.stderr.count("\n") == 1
    usage = subprocess.run([sys.executable, "-m", "asyncq", "queue", "nope"],
                           capture_output=True, text=True, timeout=60, check=False)
    assert usage.returncode == 2 and "usage: asyncq queue" in usage.stderr


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
    asyncq_client: Client, asyncq_queue: str, cli: Cli,
    asyncq_worker: WorkerFactory,
) -> None:
    mux = ServeMux()

    @mux.handler("t")
    async def handler(task: Task) -> dict[str, object]:
        return {"total": 42, "items": ["a", "b"]}

    info = await asyncq_client.enqueue("t", queue=asyncq_queue, retention=60)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}) as w:
        await w.wait_drained()
    text = out(await cli("task", "inspect", info.id))
    assert "queue:" in text and asyncq_queue in text  # found without -q
    assert '{"total":42,"items":["a","b"]}' in text  # the decoded result, not "N bytes"
    missing = await cli("task", "inspect", "no-such-id", ok=False)
    assert "not found in any queue" in err(missing)


async def test_task_ls_without_a_state_lists_every_state_with_tasks(
    asyncq_client: Client, asyncq_queue: str, cli: Cli,
) -> None:
    await asyncq_client.enqueue("now", queue=asyncq_queue)
    await asyncq_client.enqueue("later", queue=asyncq_queue, process_in=3600)
    text = out(await cli("task", "ls", "-q", asyncq_queue))
    assert "pending (1)" in text and "scheduled (1)" in text
    assert "now" in text and "later" in text
