"""A failed run's traceback is stored with the task, bounded (its last TASK_TRACEBACK_MAX
bytes), written by the same script as its error (retry and archive), and shown: the task
page, ``TaskInfo.last_traceback``, ``asyncq task inspect``."""

from __future__ import annotations

import pytest

from asyncq import Client, Inspector, ServeMux, Task
from asyncq._defaults import TASK_TRACEBACK_FRAMES, TASK_TRACEBACK_MAX
from asyncq._worker._outcomes import error_traceback
from asyncq.testing import WorkerFactory
from tests.helpers.cli import Cli, out
from tests.web.web_helpers import WebFactory


def parse_invoice(number: object) -> None:
    raise ValueError(f"invoice {number} has no total")


async def billing(task: Task) -> None:
    parse_invoice(task.json())


def deep(n: int) -> None:
    if n == 0:
        raise RuntimeError("bottom of a deep stack")
    deeper(n - 1)  # two functions in turn: no "previous line repeated" folding


def deeper(n: int) -> None:
    deep(n)


async def recursive(task: Task) -> None:
    try:
        deep(300)
    except RuntimeError:
        try:
            deep(300)
        except RuntimeError as again:
            raise LookupError("gave up after two deep failures") from again


@pytest.mark.anyio
async def test_the_traceback_of_a_failure_is_stored_bounded_and_shown(
        web: WebFactory, asyncq_client: Client, asyncq_inspector: Inspector,
        asyncq_worker: WorkerFactory, asyncq_queue: str, cli: Cli) -> None:
    mux = ServeMux()
    mux.handle("billing", billing, retry_delay=3600)
    mux.handle("deep", recursive)
    retried = await asyncq_client.enqueue("billing", 7, queue=asyncq_queue, max_retry=1)
    archived = await asyncq_client.enqueue("billing", 8, queue=asyncq_queue, max_retry=0)
    long = await asyncq_client.enqueue("deep", None, queue=asyncq_queue, max_retry=0)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}) as w:
        await w.wait_drained(asyncq_queue)
    infos = {t.id: await asyncq_inspector.task_info(asyncq_queue, t.id)
             for t in (retried, archived, long)}
    assert infos[retried.id].state.value == "retry"
    for task_id, number in ((retried.id, 7), (archived.id, 8)):
        tb = infos[task_id].last_traceback
        assert tb is not None and tb.startswith("Traceback (most recent call last):")
        assert "in parse_invoice" in tb and "in billing" in tb
        assert tb.rstrip().endswith(f"ValueError: invoice {number} has no total")
    deep_tb = infos[long.id].last_traceback
    assert deep_tb is not None and deep_tb.startswith("[first ")
    assert len(deep_tb.split("\n", 1)[1].encode()) <= TASK_TRACEBACK_MAX
    assert deep_tb.rstrip().endswith("LookupError: gave up after two deep failures")
    # lists do not carry it (a page of 25 tasks stays small)
    listed = await asyncq_inspector.list_tasks(asyncq_queue, "archived")
    assert {t.last_traceback for t in listed} == {None}

    async with web() as http:
        page = await http.get("/task", params={"q": asyncq_queue, "id": archived.id})
    assert 'id="last-traceback"' in page.text and "in parse_invoice" in page.text

    text = out(await cli("task", "inspect", "-q", asyncq_queue, archived.id))
    assert "last traceback:" in text and "in parse_invoice" in text
    assert text.rstrip().endswith("ValueError: invoice 8 has no total")

    # run again, then failing without a traceback (a lost lease, recovered): the old one goes
    await asyncq_inspector.run_task(asyncq_queue, retried.id)
    async with asyncq_worker(ServeMux(), queues={asyncq_queue: 1},
                             unknown_type="archive") as w:
        await w.wait_drained(asyncq_queue)
    again = await asyncq_inspector.task_info(asyncq_queue, retried.id)
    assert again.state.value == "archived" and "parse_invoice" not in (again.last_error or "")
    assert again.last_traceback is None


def test_a_runaway_recursion_keeps_its_innermost_frames_only() -> None:
    try:
        deep(350)
    except RuntimeError as exc:
        stored = error_traceback(exc, limit=1_000_000)
    assert stored.count('  File "') == TASK_TRACEBACK_FRAMES
    assert stored.rstrip().endswith("RuntimeError: bottom of a deep stack")
    assert error_traceback(RuntimeError("never raised")) == ""
