"""One set of rules per task: the task options a handler is registered with (``max_retry``,
``timeout``, ``retention``, ``retry_delay``, ``retry_on``) apply to every task of its type,
whatever door it came in by — Client.enqueue by name, apply, a typed task, the CLI, a
workflow step — and an option the producer set explicitly wins. The Inspector shows the
values that will apply."""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta
from typing import Any

import pytest
from redis.asyncio import Redis

from asyncq import (
    Client,
    Inspector,
    Retry,
    ServeMux,
    Task,
    TaskFailedError,
    TaskState,
    chain,
)
from asyncq._broker import _keys as K
from asyncq._cli import main as cli_main
from asyncq.testing import WorkerFactory, wait_until
from tests.helpers.dataplane import task_hash

pytestmark = pytest.mark.anyio


def rules_mux() -> tuple[ServeMux, dict[str, int]]:
    """Handlers registered with task options, and how often each ran."""
    mux = ServeMux()
    runs: dict[str, int] = {}

    def ran(task: Task) -> None:
        runs[task.id or ""] = runs.get(task.id or "", 0) + 1

    @mux.handler("always:fail", max_retry=0, retry_delay=0.05)
    async def always_fail(task: Task) -> None:
        ran(task)
        raise ValueError("no")

    @mux.handler("slow", timeout=0.2, max_retry=0)
    async def slow(task: Task) -> None:
        ran(task)
        await asyncio.sleep(5)

    @mux.handler("keep", retention=0)
    async def keep(task: Task) -> str:
        return "value"

    @mux.task("typed:fail", max_retry=0)
    async def typed_fail() -> None:
        raise ValueError("typed no")

    return mux, runs


async def test_a_registered_max_retry_applies_whatever_door_the_task_came_in_by(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    asyncq_redis_url: str, capsys: pytest.CaptureFixture[str],
) -> None:
    mux, runs = rules_mux()
    q = asyncq_queue
    async with asyncq_worker(mux, queues={q: 1}):
        by_name = await asyncq_client.enqueue("always:fail", queue=q)
        with pytest.raises(TaskFailedError, match="ValueError: no"):
            await asyncq_client.apply("always:fail", queue=q, timeout=10)
        capsys.readouterr()
        assert await asyncio.to_thread(cli_main, [
            "task", "enqueue", "--redis-url", asyncq_redis_url, "--queue", q, "--json",
            "--type", "always:fail"]) == 0
        out = capsys.readouterr().out  # (the worker's log lines come out here too)
        found = re.search(r'^\s*"id":\s*"([^"]+)"', out, re.MULTILINE)
        assert found is not None, out
        cli_id = found.group(1)
        flow = await asyncq_client.enqueue_workflow(chain(Task("always:fail", queue=q)))
        with pytest.raises(TaskFailedError):
            await asyncq_client.result(flow.id, timeout=10)
        # The producer's explicit option wins over the registration.
        explicit = await asyncq_client.enqueue("always:fail", queue=q, max_retry=1,
                                               retention=60)
        for info in (by_name, explicit):
            with pytest.raises(TaskFailedError):
                await asyncq_client.result(info, timeout=20)
        final = await asyncq_client.wait(cli_id, queue=q, timeout=10)
    assert final.state is TaskState.ARCHIVED and final.retried == 0
    assert runs[by_name.id] == 1 and runs[cli_id] == 1
    assert runs[explicit.id] == 2  # (one retry, as the producer asked)


async def test_a_registered_timeout_stops_a_task_enqueued_by_name(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    mux, _ = rules_mux()
    async with asyncq_worker(mux, queues={asyncq_queue: 1}):
        with pytest.raises(TaskFailedError, match="timeout exceeded"):
            await asyncq_client.apply("slow", queue=asyncq_queue, timeout=10)
        # An explicit timeout wins (here: a longer one, which the handler also exceeds only
        # after it; a deadline alone keeps the registered timeout too).
        info = await asyncq_client.enqueue("slow", queue=asyncq_queue, timeout=0.5,
                                           retention=60)
        with pytest.raises(TaskFailedError, match="timeout exceeded"):
            await asyncq_client.result(info, timeout=10)


async def test_a_registered_retention_applies_and_the_producer_can_override_it(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis,
) -> None:
    mux, _ = rules_mux()
    async with asyncq_worker(mux, queues={asyncq_queue: 1}) as w:
        dropped = await asyncq_client.enqueue("keep", queue=asyncq_queue)
        kept = await asyncq_client.enqueue("keep", queue=asyncq_queue, retention=60)
        await w.wait_drained()
    assert await task_hash(redis_client, asyncq_queue, dropped.id) == {}
    assert (await task_hash(redis_client, asyncq_queue, kept.id))["result"] == b'"value"'


async def test_typed_task_options_apply_to_tasks_enqueued_by_name(
    asyncq_client: Client, asyncq_worker: WorkerFactory,
) -> None:
    mux, _ = rules_mux()
    async with asyncq_worker(mux):
        with pytest.raises(TaskFailedError, match="typed no"):
            await asyncq_client.apply("typed:fail", {}, timeout=10)


async def test_registration_options_are_checked_when_registered() -> None:
    mux = ServeMux()

    async def h(task: Task) -> None:
        return None

    for bad, kind, match in (({"max_retry": "3"}, TypeError, "max_retry must be an int"),
                             ({"max_retry": -1}, ValueError, "max_retry"),
                             ({"timeout": -1}, ValueError, "timeout"),
                             ({"retention": "1h"}, TypeError, "retention"),
                             ({"retry_delay": -2}, ValueError, "retry_delay"),
                             ({"retry_on": "ValueError"}, TypeError, "retry_on"),
                             ({"retry_on": ()}, TypeError, "retry_on"),
                             ({"retry_on": (ValueError, int)}, TypeError, "retry_on")):
        with pytest.raises(kind, match=match):
            mux.handle("x", h, **bad)
        with pytest.raises(kind, match=match):
            mux.handler("x", **bad)
        with pytest.raises(kind, match=match):
            mux.task("x", **bad)
    assert mux.patterns() == []  # nothing registered by a refused call


async def test_the_inspector_shows_the_values_that_will_apply(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    asyncq_redis_url: str,
) -> None:
    mux = ServeMux()
    nested = ServeMux()

    @nested.handler("img:resize", timeout=7)
    async def resize(task: Task) -> None:
        return None

    mux.handle("img:", nested, max_retry=3, retention=120)

    @mux.handler("img:exact")
    async def exact(task: Task) -> None:
        return None

    q = asyncq_queue
    ids = {name: (await asyncq_client.enqueue(name, queue=q, process_in=3600)).id
           for name in ("img:resize", "img:other", "img:exact", "unknown")}
    explicit = await asyncq_client.enqueue("img:resize", queue=q, process_in=3600,
                                           max_retry=9, timeout=0)
    async with Inspector(asyncq_redis_url) as inspector:
        before = await inspector.task_info(q, ids["img:resize"])
        assert (before.max_retry, before.timeout) == (25, timedelta(minutes=30))
        async with asyncq_worker(mux, queues={q: 1}, heartbeat_interval=0.1) as w:
            del w

            async def published() -> bool:
                # (an inspector reuses the registrations it read for up to 2 s)
                info = await inspector.task_info(q, ids["img:resize"])
                return info.max_retry == 3

            await wait_until(published, timeout=10)
            listed = {t.id: t for t in await inspector.list_tasks(q, "scheduled")}
            resize_info = listed[ids["img:resize"]]
            assert (resize_info.max_retry, resize_info.timeout, resize_info.retention) == (
                3, timedelta(seconds=7), timedelta(seconds=120))
            other = listed[ids["img:other"]]
            assert (other.max_retry, other.timeout) == (3, timedelta(minutes=30))
            # A type routed to its own handler does not take a shorter prefix's options.
            assert listed[ids["img:exact"]].max_retry == 25
            assert listed[ids["unknown"]].max_retry == 25
            mine = listed[explicit.id]
            assert (mine.max_retry, mine.timeout) == (9, None)


# -- retry policy per handler


async def test_retry_delay_and_retry_on_per_handler(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis,
) -> None:
    mux = ServeMux()
    calls: list[tuple[int, str]] = []
    failed_at: dict[str, list[float]] = {}

    def policy(retried: int, error: BaseException, task: Task) -> float:
        calls.append((retried, type(error).__name__))
        return 0.05 * (retried + 1)

    @mux.handler("flaky", retry_delay=policy, retry_on=(ConnectionError,), max_retry=3)
    async def flaky(task: Task) -> str:
        kind = task.json()
        if kind == "conn" and task.retried < 2:
            raise ConnectionError("down")
        if kind == "key":
            raise KeyError("not retried")
        if kind == "asked" and task.retried == 0:
            raise Retry(delay=0.01)  # (Retry always retries, with its own delay)
        return f"ok after {task.retried}"

    @mux.handler("fixed", retry_delay=timedelta(milliseconds=80), max_retry=1)
    async def fixed(task: Task) -> None:
        failed_at.setdefault(task.id or "", []).append(asyncio.get_running_loop().time())
        raise ValueError("again")

    q = asyncq_queue
    async with asyncq_worker(mux, queues={q: 1}, forward_interval=0.02):
        assert await asyncq_client.apply("flaky", "conn", queue=q, timeout=30) == "ok after 2"
        with pytest.raises(TaskFailedError, match="KeyError") as err:
            await asyncq_client.apply("flaky", "key", queue=q, timeout=10)
        assert err.value.info.retried == 0  # archived at once: not in retry_on
        assert await asyncq_client.apply("flaky", "asked", queue=q, timeout=10) == "ok after 1"
        info = await asyncq_client.enqueue("fixed", queue=q)
        with pytest.raises(TaskFailedError):
            await asyncq_client.result(info, timeout=10)
    assert calls == [(0, "ConnectionError"), (1, "ConnectionError")]
    times = failed_at[info.id]
    assert len(times) == 2 and times[1] - times[0] >= 0.08  # the handler's delay, not 15 s


async def test_a_retry_policy_that_raises_falls_back_to_the_default_delay(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis,
) -> None:
    mux = ServeMux()

    def broken(retried: int, error: BaseException, task: Task) -> Any:
        raise RuntimeError("policy bug")

    @mux.handler("t", retry_delay=broken)
    async def t(task: Task) -> None:
        raise ValueError("x")

    async with asyncq_worker(mux, queues={asyncq_queue: 1}):
        info = await asyncq_client.enqueue("t", queue=asyncq_queue)

        async def retrying() -> bool:
            return await redis_client.zscore(K.queue_keys(asyncq_queue).retry,
                                              info.id) is not None

        await wait_until(retrying, timeout=30)
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    retry_at = await redis_client.zscore(K.queue_keys(asyncq_queue).retry, info.id)
    # (the default delay is 15 s at least; failed_at may be a millisecond later than the
    # clock reading the delay was added to)
    assert retry_at is not None and retry_at - int(fields["failed_at"]) >= 14_900
