"""Poisoned outcomes (issue 12 B): handlers whose error message or result cannot be stored as
they are (a lone surrogate, as ``os.listdir`` returns for a file name that is not UTF-8; a
value JSON cannot hold) are mixed with healthy tasks. Every task gets exactly one outcome and
none runs twice: a poisoned outcome never holds up the others, nor is it left active."""

from __future__ import annotations

import chaosapp
import pytest
from chaoslib import Ledger, build_report, task_ids, wait_settled
from redis.asyncio import Redis

from asyncq import Client, ServeMux, Task
from asyncq.testing import WorkerFactory

pytestmark = [pytest.mark.anyio, pytest.mark.chaos]

N = 400
BAD_NAME = b"report-\xff.csv".decode("utf-8", "surrogateescape")


def poisoned_mux() -> ServeMux:
    mux = ServeMux()
    mux.handle("chaos:work", chaosapp.work)

    @mux.handler("chaos:bad-error")
    async def bad_error(task: Task) -> None:
        await chaosapp._record(task.json(), started=1, finished=1)
        raise ValueError(f"cannot parse {BAD_NAME}")

    @mux.handler("chaos:bad-result")
    async def bad_result(task: Task) -> object:
        await chaosapp._record(task.json(), started=1, finished=1)
        return {"file": BAD_NAME} if task.json()["n"] % 2 else {float("nan")}

    return mux


def kind(i: int) -> str:
    return {3: "chaos:bad-error", 5: "chaos:bad-result"}.get(i % 7, "chaos:work")


async def test_poisoned_outcomes_never_block_the_others(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis, ledger: Ledger,
) -> None:
    ids = task_ids("poisoned", N)
    for i, task_id in enumerate(ids):
        await asyncq_client.enqueue(kind(i), chaosapp.payload(ledger.key, i), task_id=task_id,
                                    queue=asyncq_queue, max_retry=0, retention=600)
    async with asyncq_worker(poisoned_mux(), queues={asyncq_queue: 1}, concurrency=50,
                             shutdown_timeout=5) as w:
        await wait_settled(redis_client, [asyncq_queue], timeout=40)
        await w.wait_drained(asyncq_queue, timeout=10)
    report = await build_report("poisoned-outcome", redis_client, asyncq_queue, ledger, ids)
    report.publish()
    poisoned = sum(1 for i in range(N) if kind(i) != "chaos:work")
    assert (report.lost, report.duplicates) == (0, 0), report
    assert report.archived == poisoned and report.completed == N - poisoned, report
    assert set(report.archived_reasons) == {"ValueError", "ResultError"}, report
