"""A handler result that cannot be stored (issue 12 item 11): the run fails with
``ResultError`` recorded as the task's error and follows the retry path, instead of counting
as a success whose result silently vanished (or became ``null``)."""

from __future__ import annotations

import pytest

from asyncq import Client, Inspector, ServeMux, Task
from asyncq.testing import WorkerFactory

pytestmark = pytest.mark.anyio

RESULTS: dict[str, object] = {
    "set": {1, 2},
    "nan": {"score": float("nan")},
    "inf": [1.0, float("-inf")],
    "surrogate": {"file": b"a\xff".decode("utf-8", "surrogateescape")},
    "null": {"ok": None},
}


def result_mux() -> ServeMux:
    mux = ServeMux()

    @mux.handler("result")
    async def result(task: Task) -> object:
        return RESULTS[task.json()]

    return mux


async def test_a_result_that_cannot_be_stored_fails_the_run(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    asyncq_redis_url: str,
) -> None:
    infos = {name: await asyncq_client.enqueue("result", name, queue=asyncq_queue,
                                               max_retry=0, retention=60)
             for name in RESULTS}
    retried = await asyncq_client.enqueue("result", "nan", queue=asyncq_queue, max_retry=3,
                                          retention=60)
    async with asyncq_worker(result_mux(), queues={asyncq_queue: 1},
                             retry_delay=lambda n, exc, task: 3600) as w:
        await w.wait_drained(asyncq_queue, timeout=10)
        assert (w.worker.processor.processed, w.worker.processor.failed) == (6, 5)
    async with Inspector(asyncq_redis_url) as inspector:
        got = {name: await inspector.task_info(asyncq_queue, info.id)
               for name, info in infos.items()}
        again = await inspector.task_info(asyncq_queue, retried.id)
    assert got["null"].state.value == "completed"
    for name in ("set", "nan", "inf", "surrogate"):
        assert got[name].state.value == "archived", name
        assert (got[name].last_error or "").startswith(
            "ResultError: handler result cannot be stored"), got[name].last_error
    assert "nan" in (got["nan"].last_error or "")
    assert again.state.value == "retry" and again.retried == 1
