"""Retry delays (issue 12 items 4, 5): ``Retry(delay=...)`` is validated like the enqueue
durations, and a bad delay reaching the worker anyway (changed after construction, or returned
by ``retry_delay``) falls back to the default delay with one warning, never stranding the task
in ``active``."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
import structlog

from asyncq import Client, Inspector, Retry, ServeMux, Task
from asyncq.testing import WorkerFactory, wait_until

pytestmark = pytest.mark.anyio

FALLBACK = "bad retry delay; using the default retry delay"


@pytest.mark.parametrize("delay", [float("nan"), float("inf"), float("-inf"), -1, 1e12, 1e300,
                                   pytest.param(10**400, id="int-beyond-float"),
                                   timedelta(days=366 * 10_001), True, "5"])
def test_retry_refuses_a_delay_enqueue_would_refuse(delay: Any) -> None:
    with pytest.raises(ValueError, match="Retry delay"):
        Retry(delay=delay)


def test_retry_accepts_what_enqueue_accepts() -> None:
    assert Retry(delay=0).delay == 0.0
    assert Retry(delay=timedelta(minutes=2)).delay == 120.0
    assert Retry(delay=86_400 * 366 * 9_999).delay == 86_400 * 366 * 9_999


def bad_value(task: Task) -> Any:
    """The bad delay the test put in the payload (a NaN travels as text: JSON has no NaN)."""
    doc = task.json()
    return float(doc["float"]) if "float" in doc else doc["value"]


def corrupted_retry(task: Task) -> Retry:
    retry = Retry(delay=1)
    retry.delay = bad_value(task)  # e.g. a subclass or code that changes it after validation
    return retry


@pytest.mark.parametrize("where", ["Retry.delay", "retry_delay"])
@pytest.mark.parametrize("bad", [float("nan"), 1e300, -5, "soon"])
async def test_a_bad_delay_at_the_worker_falls_back_to_the_default_delay(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    asyncq_redis_url: str, where: str, bad: Any,
) -> None:
    mux = ServeMux()

    @mux.handler("t")
    async def handler(task: Task) -> None:
        if where == "Retry.delay":
            raise corrupted_retry(task)
        raise RuntimeError("boom")

    config: dict[str, Any] = {}
    if where == "retry_delay":
        config["retry_delay"] = lambda n, exc, task: bad_value(task)
    payload = ({"float": str(bad)} if isinstance(bad, float) and bad != bad
               else {"value": bad})
    info = await asyncq_client.enqueue("t", payload, queue=asyncq_queue, max_retry=3)
    before = time.time()
    with structlog.testing.capture_logs() as logs:
        async with asyncq_worker(mux, queues={asyncq_queue: 1}, **config) as w:
            async with Inspector(asyncq_redis_url) as inspector:

                async def retrying() -> Any:
                    got = await inspector.task_info(asyncq_queue, info.id)
                    return got if got.state.value == "retry" else None

                got = await wait_until(retrying, timeout=10)
            await w.wait_drained(asyncq_queue, timeout=10)
    assert got.retried == 1 and got.next_process_at is not None
    due_in = got.next_process_at.timestamp() - before
    assert 14 <= due_in <= 46, due_in  # the default schedule: 15-44 s for a first retry
    assert [e["log_level"] for e in logs if e["event"] == FALLBACK] == ["warning"]


@pytest.mark.parametrize("hook", ["retry_delay", "is_failure"])
async def test_a_policy_hook_raising_system_exit_fails_no_worker(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    asyncq_redis_url: str, hook: str,
) -> None:
    mux = ServeMux()

    @mux.handler("t")
    async def handler(task: Task) -> None:
        raise RuntimeError("boom")

    def exits(*args: Any) -> Any:
        raise SystemExit(6)

    info = await asyncq_client.enqueue("t", queue=asyncq_queue, max_retry=3)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, **{hook: exits}) as w:
        await w.wait_drained(asyncq_queue, timeout=10)
        async with Inspector(asyncq_redis_url) as inspector:
            got = await inspector.task_info(asyncq_queue, info.id)
    assert (got.state.value, got.last_error) == ("retry", "RuntimeError: boom")
