"""What each way of failing does to the task: retry, archive, skip, revoke (items 4-8)."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest
import structlog.testing
from processor_helpers import (
    NO_RETRY_SOON,
    failing_mux,
    never_soon,
    now_ms,
)
from redis.asyncio import Redis

from asyncq import Client, Retry, RevokeTask, ServeMux, SkipRetry, Task
from asyncq._broker import _keys as K
from asyncq.testing import WorkerFactory, queue_counts, wait_until
from tests.helpers.dataplane import task_hash

pytestmark = pytest.mark.anyio


# ----------------------------------------------------------------- failures (items 4-8)


async def test_failure_with_retries_left_goes_to_retry(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    delays: list[tuple[int, BaseException, str | None]] = []

    def retry_delay(retried: int, exc: BaseException, task: Task) -> float:
        delays.append((retried, exc, task.id))
        return 100.0

    info = await asyncq_client.enqueue("fail", queue=asyncq_queue, max_retry=3)
    before = now_ms()
    async with asyncq_worker(failing_mux(lambda t: ValueError("boom")), queues={asyncq_queue: 1},
                             retry_delay=retry_delay) as w:
        await w.wait_drained()
    after = now_ms()
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    assert fields["state"] == b"retry"
    assert fields["retried"] == b"1"
    assert fields["error"] == b"ValueError: boom"
    failed_at = int(fields["failed_at"])
    assert before <= failed_at <= after
    score = await redis_client.zscore(K.queue_keys(asyncq_queue).retry, info.id)
    assert score is not None
    assert abs(score - (failed_at + 100_000)) < 1000
    [(retried, exc, task_id)] = delays
    assert (retried, task_id) == (0, info.id)
    assert isinstance(exc, ValueError)
    assert await redis_client.get(K.queue_keys(asyncq_queue).failed) == b"1"


async def test_failure_with_no_retry_left_is_archived(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    info = await asyncq_client.enqueue("fail", queue=asyncq_queue, max_retry=0)
    before = now_ms()
    async with asyncq_worker(failing_mux(lambda t: KeyError("gone")), queues={asyncq_queue: 1},
                             retry_delay=never_soon) as w:
        await w.wait_drained()
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    assert fields["state"] == b"archived"
    assert fields.get("retried", b"0") == b"0"
    assert fields["error"] == b"KeyError: 'gone'"
    score = await redis_client.zscore(K.queue_keys(asyncq_queue).archived, info.id)
    assert score is not None and before <= score <= now_ms()
    assert (await queue_counts(redis_client, asyncq_queue))["retry"] == 0


async def test_a_task_retried_until_max_retry_is_then_archived(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    runs: list[int] = []
    mux = ServeMux()

    @mux.handler("flaky")
    async def flaky(task: Task) -> None:
        runs.append(task.retried)
        raise RuntimeError(f"attempt {task.retried}")

    info = await asyncq_client.enqueue("flaky", queue=asyncq_queue, max_retry=2)
    async with asyncq_worker(mux, queues={asyncq_queue: 1},
                             retry_delay=lambda n, e, t: 0) as w:
        await wait_until(lambda: len(runs) == 3, timeout=10)
        await w.wait_drained(include_scheduled=True)
    assert runs == [0, 1, 2]
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    assert (fields["state"], fields["retried"]) == (b"archived", b"2")
    assert fields["error"] == b"RuntimeError: attempt 2"


@pytest.mark.parametrize("hook_kind", ["sync", "async"])
async def test_error_handler_is_called_once_per_failure(
    hook_kind: str, asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    calls: list[tuple[str | None, BaseException]] = []

    def sync_hook(task: Task, exc: BaseException) -> None:
        calls.append((task.id, exc))

    async def async_hook(task: Task, exc: BaseException) -> None:
        await anyio.lowlevel.checkpoint()
        calls.append((task.id, exc))

    ids = {(await asyncq_client.enqueue("fail", queue=asyncq_queue)).id for _ in range(4)}
    async with asyncq_worker(failing_mux(lambda t: ValueError(t.id)), queues={asyncq_queue: 1},
                             retry_delay=never_soon,
                             error_handler=sync_hook if hook_kind == "sync" else async_hook) as w:
        await w.wait_drained()
        await wait_until(lambda: len(calls) >= 4, timeout=30)
    assert len(calls) == 4
    assert {task_id for task_id, _ in calls} == ids
    assert all(isinstance(exc, ValueError) and str(exc) == task_id for task_id, exc in calls)


async def test_an_error_handler_that_raises_does_not_stop_the_worker(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    def bad_hook(task: Task, exc: BaseException) -> None:
        raise RuntimeError("hook bug")

    for _ in range(3):
        await asyncq_client.enqueue("fail", queue=asyncq_queue)
    async with asyncq_worker(failing_mux(lambda t: ValueError("x")), queues={asyncq_queue: 1},
                             retry_delay=never_soon, error_handler=bad_hook) as w:
        await w.wait_drained()
    assert (await queue_counts(redis_client, asyncq_queue))["retry"] == 3


def _wrapped_skip(task: Task) -> BaseException:
    try:
        raise ValueError("payload has no 'to'")
    except ValueError as exc:
        try:
            raise SkipRetry(f"invalid payload: {exc}") from exc
        except SkipRetry as wrapped:
            return wrapped


@pytest.mark.parametrize(
    ("make_exc", "text"),
    [
        (lambda t: SkipRetry("give up"), b"SkipRetry: give up"),
        (_wrapped_skip, b"SkipRetry: invalid payload: payload has no 'to'"),
    ],
    ids=["bare", "wrapped"],
)
async def test_skip_retry_archives_at_once(
    make_exc: Any, text: bytes, asyncq_client: Client, asyncq_worker: WorkerFactory,
    asyncq_queue: str, redis_client: Redis,
) -> None:
    hooked: list[BaseException] = []
    info = await asyncq_client.enqueue("fail", queue=asyncq_queue, max_retry=10)
    async with asyncq_worker(failing_mux(make_exc), queues={asyncq_queue: 1},
                             retry_delay=never_soon,
                             error_handler=lambda t, e: hooked.append(e)) as w:
        await w.wait_drained()
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    assert fields["state"] == b"archived"
    assert fields["error"] == text
    assert fields.get("retried", b"0") == b"0"
    assert [type(e) for e in hooked] == [SkipRetry]


def _wrapped_revoke(task: Task) -> BaseException:
    try:
        raise LookupError("user deleted")
    except LookupError as exc:
        try:
            raise RevokeTask("no longer needed") from exc
        except RevokeTask as wrapped:
            return wrapped


@pytest.mark.parametrize("make_exc", [lambda t: RevokeTask(), _wrapped_revoke],
                         ids=["bare", "wrapped"])
async def test_revoke_task_deletes_it(
    make_exc: Any, asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis,
) -> None:
    hooked: list[BaseException] = []
    info = await asyncq_client.enqueue("fail", queue=asyncq_queue, max_retry=10)
    async with asyncq_worker(failing_mux(make_exc), queues={asyncq_queue: 1},
                             retry_delay=never_soon,
                             error_handler=lambda t, e: hooked.append(e)) as w:
        await w.wait_drained()
    assert await task_hash(redis_client, asyncq_queue, info.id) == {}
    counts = await queue_counts(redis_client, asyncq_queue)
    assert counts["retry"] == counts["archived"] == 0
    assert [type(e) for e in hooked] == [RevokeTask]
    assert await redis_client.get(K.queue_keys(asyncq_queue).failed) is None


async def test_retry_signal_uses_its_own_delay_and_counts_a_retry(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    info = await asyncq_client.enqueue("fail", queue=asyncq_queue)
    async with asyncq_worker(failing_mux(lambda t: Retry(delay=2)), queues={asyncq_queue: 1},
                             retry_delay=never_soon) as w:
        await w.wait_drained()
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    assert (fields["state"], fields["retried"]) == (b"retry", b"1")
    assert fields["error"] == b"Retry: retry requested in 2s"
    score = await redis_client.zscore(K.queue_keys(asyncq_queue).retry, info.id)
    assert score is not None
    assert abs(score - (int(fields["failed_at"]) + 2000)) < 500


async def test_non_failure_errors_do_not_use_up_retries(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    class RateLimited(Exception):
        pass

    info = await asyncq_client.enqueue("fail", queue=asyncq_queue)
    async with asyncq_worker(failing_mux(lambda t: RateLimited("slow down")),
                             queues={asyncq_queue: 1}, retry_delay=never_soon,
                             is_failure=lambda e: not isinstance(e, RateLimited)) as w:
        await w.wait_drained()
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    assert fields["state"] == b"retry"
    assert fields.get("retried", b"0") == b"0"
    assert fields["error"] == b"RateLimited: slow down"
    qk = K.queue_keys(asyncq_queue)
    assert await redis_client.get(qk.failed) is None
    assert await redis_client.get(qk.processed) is None


@pytest.mark.parametrize("broken", ["retry_delay", "is_failure"])
async def test_a_retry_policy_hook_that_raises_falls_back_to_the_default(
    broken: str, asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
    redis_client: Redis,
) -> None:
    """A raising retry_delay means the default schedule (15-44 s for a first retry); a raising
    is_failure means the error counts as a failure. The other hook still applies."""
    def bug(*args: Any) -> Any:
        raise RuntimeError("policy bug")

    hooks: dict[str, Any] = ({"retry_delay": bug, "is_failure": lambda e: False}
                             if broken == "retry_delay" else
                             {"retry_delay": never_soon, "is_failure": bug})
    info = await asyncq_client.enqueue("fail", queue=asyncq_queue)
    with structlog.testing.capture_logs() as logs:
        async with asyncq_worker(failing_mux(lambda t: ValueError("boom")),
                                 queues={asyncq_queue: 1}, **hooks) as w:
            await w.wait_drained()
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    assert (fields["state"], fields["error"]) == (b"retry", b"ValueError: boom")
    score = await redis_client.zscore(K.queue_keys(asyncq_queue).retry, info.id)
    assert score is not None
    delay = score - int(fields["failed_at"])
    failed = await redis_client.get(K.queue_keys(asyncq_queue).failed)
    if broken == "retry_delay":
        assert 15_000 - 1000 <= delay <= 44_000 + 1000
        assert failed is None  # is_failure still said no
    else:
        assert abs(delay - NO_RETRY_SOON * 1000) < 1000  # retry_delay still applied
        assert failed == b"1"
    assert [e["event"] for e in logs if e["log_level"] == "error"] == [
        f"{broken} raised; " + ("using the default retry delay" if broken == "retry_delay"
                                else "counting the error as a failure")]


