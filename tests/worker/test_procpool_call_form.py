"""A typed task registered by the call form, ``mux.task(name, isolate="process")(fn)``, as
for a function that lives in another module: the child finds the module's attribute is the
undecorated function and runs it as the task (its arguments decoded from the payload), as it
runs a decorated one (issue 38: it called ``fn(task)`` and the task failed)."""

from __future__ import annotations

import os

import pytest

from asyncq import Client, ServeMux
from asyncq.testing import WorkerFactory
from tests.worker import procpool_handlers as h

pytestmark = pytest.mark.anyio


async def test_a_call_form_typed_task_runs_in_a_child(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    mux = ServeMux()
    double = mux.task("double", isolate="process")(h.double)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, process_pool_size=1):
        info = await double.options(queue=asyncq_queue, max_retry=0).enqueue(
            asyncq_client, 21)
        result = await double.result(asyncq_client, info, timeout=30)
    assert result["double"] == 42 and result["pid"] != os.getpid()


async def test_a_call_form_sync_task_runs_in_a_child_with_sync_handlers_process(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    mux = ServeMux()
    double = mux.task("double")(h.double)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, process_pool_size=1,
                             sync_handlers="process"):
        info = await double.options(queue=asyncq_queue, max_retry=0).enqueue(
            asyncq_client, 4)
        result = await double.result(asyncq_client, info, timeout=30)
    assert result["double"] == 8 and result["pid"] != os.getpid()
