"""One bad task fails alone (issue 12 C, 2, 12): a stored time out of range, a handler that
cannot be called (it takes no argument, the target is not a handler) or a handler raising
``SystemExit``/``KeyboardInterrupt`` fails that task with its error recorded, while the tasks
around it run and the worker lives on; a real SIGINT/SIGTERM still stops the worker gracefully
and leaves none of its tasks active."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from redis.asyncio import Redis

from asyncq import Client, Inspector, ServeMux, Task, TaskInfo
from asyncq._broker import _keys as K
from asyncq.testing import WorkerFactory, queue_counts, wait_until
from tests.helpers.processes import worker_process

pytestmark = pytest.mark.anyio

YEAR_10000_MS = 253_402_300_800_000


def hostile_worker(url: str, target: str, queue: str, log: Path) -> Any:
    """``python -m asyncq worker tests.apps.hostile:<target>`` serving ``queue``."""
    return worker_process(url, queue, log, "--shutdown-timeout", "0.5",
                          target=f"tests.apps.hostile:{target}",
                          env={**os.environ, "ASYNCQ_REDIS_URL": url})


async def infos(url: str, queue: str, ids: list[str]) -> list[TaskInfo]:
    async with Inspector(url) as inspector:
        return [await inspector.task_info(queue, task_id) for task_id in ids]


async def states_are(url: str, queue: str, ids: list[str], *states: str) -> bool:
    return [i.state.value for i in await infos(url, queue, ids)] == list(states)


async def rewrite_msg(redis: Redis, queue: str, task_id: str, **fields: Any) -> None:
    key = K.queue_keys(queue).task(task_id)
    doc = orjson.loads(await redis.hget(key, "msg"))
    await redis.hset(key, "msg", orjson.dumps(doc | fields))


async def test_a_stored_time_out_of_range_fails_its_task_alone(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    asyncq_redis_url: str, redis_client: Redis,
) -> None:
    good = [(await asyncq_client.enqueue("t", i, queue=asyncq_queue, retention=60)).id
            for i in range(20)]
    bad = [(await asyncq_client.enqueue("t", "bad", queue=asyncq_queue, retention=60)).id
           for _ in range(2)]
    await rewrite_msg(redis_client, asyncq_queue, bad[0], timeout=int(3e14))  # 3e11 s
    await rewrite_msg(redis_client, asyncq_queue, bad[1], timeout=0, deadline=YEAR_10000_MS + 1)
    ran: list[int] = []
    mux = ServeMux()

    @mux.handler("t")
    async def handler(task: Task) -> None:
        ran.append(task.json())

    async with asyncq_worker(mux, queues={asyncq_queue: 1}, concurrency=30) as w:
        await w.wait_drained(asyncq_queue, timeout=10)
    assert sorted(ran) == list(range(20))
    assert await states_are(asyncq_redis_url, asyncq_queue, good, *["completed"] * 20)
    for task_id in bad:  # (read raw: listing a time out of range is another fix's)
        state, error = await redis_client.hmget(K.queue_keys(asyncq_queue).task(task_id),
                                                "state", "error")
        assert state == b"archived"
        assert error.startswith(b"DecodeError: stored task cannot be started: ValueError: "
                                b"year 1") and b"out of range" in error, error


async def no_args() -> None:
    """Takes no task."""


class NotAHandler:
    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("never called with a task")


@pytest.mark.parametrize("target", [no_args, NotAHandler()], ids=["no-args", "asgi-app"])
async def test_a_handler_that_cannot_be_called_fails_each_task_with_its_error(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    asyncq_redis_url: str, redis_client: Redis, target: Any,
) -> None:
    ids = [(await asyncq_client.enqueue("t", i, queue=asyncq_queue, max_retry=1)).id
           for i in range(3)]
    async with asyncq_worker(target, queues={asyncq_queue: 1}) as w:
        await wait_until(lambda: states_are(asyncq_redis_url, asyncq_queue, ids,
                                            *["retry"] * 3), timeout=10)
        assert w.worker.processor.failed == 3
    for info in await infos(asyncq_redis_url, asyncq_queue, ids):
        assert (info.last_error or "").startswith("TypeError: "), info.last_error
        assert "argument" in (info.last_error or "")
    assert (await queue_counts(redis_client, asyncq_queue))["active"] == 0


async def test_system_exit_and_keyboard_interrupt_in_a_handler_fail_only_their_task(
    asyncq_client: Client, asyncq_queue: str, asyncq_redis_url: str, redis_client: Redis,
    tmp_path: Path,
) -> None:
    log = tmp_path / "worker.log"
    hostile = [(await asyncq_client.enqueue(kind, queue=asyncq_queue, max_retry=2)).id
               for kind in ("hostile:exit", "hostile:interrupt")]
    block = (await asyncq_client.enqueue("hostile:block", queue=asyncq_queue)).id
    ok = (await asyncq_client.enqueue("hostile:ok", queue=asyncq_queue, retention=60)).id
    async with hostile_worker(asyncq_redis_url, "mux", asyncq_queue, log) as proc:
        await wait_until(lambda: states_are(asyncq_redis_url, asyncq_queue,
                                            [*hostile, block, ok],
                                            "retry", "retry", "active", "completed"),
                         timeout=15, message="hostile tasks failed, the others ran")
        assert proc.returncode is None, log.read_text()
        errors = [i.last_error for i in await infos(asyncq_redis_url, asyncq_queue, hostile)]
        assert errors == ["SystemExit: 3", "KeyboardInterrupt"]
        proc.send_signal(signal.SIGINT)  # a real Ctrl-C still stops the worker gracefully
        with anyio.fail_after(10):
            code = await proc.wait()
    assert code == 0, log.read_text()
    assert await states_are(asyncq_redis_url, asyncq_queue, [block], "pending")


# (An `async def` without the task argument, `tests.apps.hostile:no_args`, and an ASGI app are
# refused by `asyncq worker` before it starts: tests/cli/test_cli_worker_target.py and
# test_cli_worker_config.py. A Worker built in Python with such a handler runs it: each call
# fails.)
@pytest.mark.parametrize("target", ["asgi_worker"])
async def test_a_worker_process_whose_target_cannot_be_called_leaves_nothing_active(
    asyncq_client: Client, asyncq_queue: str, asyncq_redis_url: str, redis_client: Redis,
    tmp_path: Path, target: str,
) -> None:
    log = tmp_path / "worker.log"
    ids = [(await asyncq_client.enqueue("t", i, queue=asyncq_queue, max_retry=3)).id
           for i in range(5)]
    async with hostile_worker(asyncq_redis_url, target, asyncq_queue, log) as proc:
        await wait_until(lambda: states_are(asyncq_redis_url, asyncq_queue, ids,
                                            *["retry"] * 5), timeout=15,
                         message="every task failed with its error", )
        proc.send_signal(signal.SIGTERM)
        with anyio.fail_after(10):
            code = await proc.wait()
    assert code == 0, log.read_text()
    assert (await queue_counts(redis_client, asyncq_queue))["active"] == 0
    for info in await infos(asyncq_redis_url, asyncq_queue, ids):
        assert (info.last_error or "").startswith("TypeError: "), info.last_error
    assert b"fetching tasks failed unexpectedly" not in log.read_bytes()


@pytest.mark.parametrize("sync", [True, False], ids=["sync-hook", "async-hook"])
async def test_an_error_handler_raising_system_exit_does_not_stop_the_worker(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    asyncq_redis_url: str, sync: bool,
) -> None:
    mux = ServeMux()

    @mux.handler("t")
    async def handler(task: Task) -> str:
        if task.json() == "fail":
            raise ValueError("boom")
        return "ok"

    def sync_hook(task: Task, exc: BaseException) -> None:
        raise SystemExit(4)

    async def async_hook(task: Task, exc: BaseException) -> None:
        raise SystemExit(5)

    failing = (await asyncq_client.enqueue("t", "fail", queue=asyncq_queue, max_retry=0)).id
    async with asyncq_worker(mux, queues={asyncq_queue: 1},
                             error_handler=sync_hook if sync else async_hook) as w:
        await w.wait_drained(asyncq_queue, timeout=10)
        later = (await asyncq_client.enqueue("t", "ok", queue=asyncq_queue, retention=60)).id
        await wait_until(lambda: states_are(asyncq_redis_url, asyncq_queue, [failing, later],
                                            "archived", "completed"), timeout=10)
