"""The processor: running handlers and what each way of ending does to the task (spec items 1-17).

Every test runs a real worker against Redis and checks what ended up stored there.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from typing import Any

import anyio
import anyio.lowlevel
import pytest
import structlog.testing
from dataplane_helpers import task_hash
from redis.asyncio import Redis

import asyncq
from asyncq import Client, Retry, RevokeTask, ServeMux, SkipRetry, Task, Worker
from asyncq import _keys as K
from asyncq._message import TaskMessage
from asyncq._worker._outcomes import error_text
from asyncq._worker._retry import QueueOrder, normalize_priorities
from asyncq._worker._running import compute_deadline
from asyncq.testing import WorkerFactory, queue_counts, wait_until

pytestmark = pytest.mark.anyio

NO_RETRY_SOON = 3600.0  # a retry delay long enough that the forwarder never brings it back


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def never_soon(retried: int, exc: BaseException, task: Task) -> float:
    return NO_RETRY_SOON


def failing_mux(exc_factory: Any, calls: list[Task] | None = None) -> ServeMux:
    mux = ServeMux()

    @mux.handler("fail")
    async def fail(task: Task) -> None:
        if calls is not None:
            calls.append(task)
        raise exc_factory(task)

    return mux


# ----------------------------------------------------------------- running (items 1-3)


async def test_pending_and_newly_enqueued_tasks_are_all_processed(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    seen: list[int] = []
    mux = ServeMux()

    @mux.handler("count")
    async def count(task: Task) -> None:
        seen.append(task.json()["n"])

    for n in range(10):
        await asyncq_client.enqueue("count", {"n": n}, queue=asyncq_queue)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, concurrency=3) as w:
        for n in range(10, 20):
            await asyncq_client.enqueue("count", {"n": n}, queue=asyncq_queue)
        await w.wait_drained()
        assert w.worker.processor.processed == 20
    assert sorted(seen) == list(range(20))
    counts = await queue_counts(redis_client, asyncq_queue)
    assert counts["active"] == counts["pending"] == 0
    assert await redis_client.zcard(K.queue_keys(asyncq_queue).lease) == 0


async def test_tasks_of_every_configured_queue_are_processed(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    queues = {f"{asyncq_queue}-critical": 6, f"{asyncq_queue}-default": 3,
              f"{asyncq_queue}-low": 1}
    seen: Counter[str] = Counter()
    mux = ServeMux()

    @mux.handler("job")
    async def job(task: Task) -> None:
        seen[task.queue] += 1

    for queue in queues:
        for _ in range(4):
            await asyncq_client.enqueue("job", queue=queue)
    async with asyncq_worker(mux, queues=queues, concurrency=2) as w:
        await w.wait_drained()
    assert seen == {queue: 4 for queue in queues}
    for queue in queues:
        assert (await queue_counts(redis_client, queue))["active"] == 0


async def test_big_integers_in_a_json_payload_round_trip_exactly(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    payload = {"id": 9_007_199_254_740_993, "max": 2**63 - 1, "umax": 2**64 - 1, "neg": -(2**63)}
    got: list[Any] = []
    mux = ServeMux()

    @mux.handler("big")
    async def big(task: Task) -> None:
        got.append(task.json())

    await asyncq_client.enqueue("big", payload, queue=asyncq_queue)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}) as w:
        await w.wait_drained()
    assert got == [payload]
    assert all(type(v) is int for v in got[0].values())


async def test_handler_gets_task_metadata(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    got: list[Task] = []
    mux = ServeMux()

    @mux.handler("meta")
    async def meta(task: Task) -> None:
        got.append(task)

    info = await asyncq_client.enqueue("meta", b"\x00raw", queue=asyncq_queue, max_retry=7,
                                       timeout=60, headers={"trace": "abc"})
    before = now_ms()
    async with asyncq_worker(mux, queues={asyncq_queue: 1}) as w:
        await w.wait_drained()
    [task] = got
    assert (task.id, task.type, task.queue, task.payload) == (info.id, "meta", asyncq_queue,
                                                             b"\x00raw")
    assert (task.max_retry, task.retried, task.headers) == (7, 0, {"trace": "abc"})
    assert task.deadline is not None
    assert before + 59_000 <= task.deadline.timestamp() * 1000 <= now_ms() + 60_000


@pytest.mark.parametrize("kind", ["async function", "sync function"])
async def test_a_plain_function_works_as_the_handler(
    kind: str, asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    seen: list[str] = []

    async def async_handler(task: Task) -> None:
        seen.append(task.type)

    def sync_handler(task: Task) -> None:
        seen.append(task.type)

    handler: Any = async_handler if kind == "async function" else sync_handler
    await asyncq_client.enqueue("anything", queue=asyncq_queue)
    async with asyncq_worker(handler, queues={asyncq_queue: 1}) as w:
        await w.wait_drained()
    assert seen == ["anything"]


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
        await wait_until(lambda: len(calls) >= 4, timeout=5)
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


# ----------------------------------------------------------------- retention (item 9)


async def test_retention_keeps_completed_tasks_with_their_result(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    queues = [f"{asyncq_queue}-a", f"{asyncq_queue}-b"]
    mux = ServeMux()

    @mux.handler("returns")
    async def returns(task: Task) -> Any:
        return {"sum": 3}

    @mux.handler("writes")
    async def writes(task: Task) -> None:
        assert await task.write_result(b"partial") == 7

    @mux.handler("plain")
    async def plain(task: Task) -> str:
        return "not kept"

    kept: dict[str, tuple[str, str]] = {}
    dropped: list[tuple[str, str]] = []
    for queue in queues:
        kept[(await asyncq_client.enqueue("returns", queue=queue, retention=60)).id] = (
            queue, "returns")
        kept[(await asyncq_client.enqueue("writes", queue=queue, retention=3600)).id] = (
            queue, "writes")
        dropped.append((queue, (await asyncq_client.enqueue("plain", queue=queue)).id))
    before = now_ms()
    async with asyncq_worker(mux, queues=dict.fromkeys(queues, 1)) as w:
        await w.wait_drained()
    after = now_ms()
    for task_id, (queue, kind) in kept.items():
        fields = await task_hash(redis_client, queue, task_id)
        assert fields["state"] == b"completed"
        completed_at = int(fields["completed_at"])
        assert before <= completed_at <= after
        retention = 60_000 if kind == "returns" else 3_600_000
        score = await redis_client.zscore(K.queue_keys(queue).completed, task_id)
        assert score == completed_at + retention
        assert fields["result"] == (b'{"sum":3}' if kind == "returns" else b"partial")
    for queue, task_id in dropped:
        assert await task_hash(redis_client, queue, task_id) == {}
    for queue in queues:
        assert (await queue_counts(redis_client, queue))["completed"] == 2


# ----------------------------------------------------------------- queue order (items 11-16)


async def test_strict_priority_drains_higher_queues_first_in_fifo_order(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    names = {"critical": f"{asyncq_queue}-critical", "default": f"{asyncq_queue}-default",
             "low": f"{asyncq_queue}-low"}
    order: list[tuple[str, int]] = []
    mux = ServeMux()

    @mux.handler("job")
    async def job(task: Task) -> None:
        order.append((task.queue, task.json()))

    for level in ("low", "default", "critical"):
        for n in range(3):
            await asyncq_client.enqueue("job", n, queue=names[level])
    priorities = {names["critical"]: 3, names["default"]: 2, names["low"]: 1}
    async with asyncq_worker(mux, queues=priorities, strict_priority=True, concurrency=1) as w:
        await w.wait_drained()
    assert order == [(names[level], n) for level in ("critical", "default", "low")
                     for n in range(3)]


def test_weighted_order_lists_each_queue_once_in_proportion() -> None:
    weights = {"high": 6, "default": 3, "low": 1}
    order = QueueOrder(weights, strict=False)
    first: Counter[str] = Counter()
    rounds = 20_000
    for _ in range(rounds):
        queues = order()
        assert sorted(queues) == sorted(weights)
        first[queues[0]] += 1
    for queue, weight in weights.items():
        assert abs(first[queue] / rounds - weight / 10) < 0.02, first


def test_weighted_order_is_random_but_strict_order_is_fixed() -> None:
    weights = {"a": 1, "b": 1, "c": 1}
    weighted = QueueOrder(weights, strict=False)
    assert len({tuple(weighted()) for _ in range(500)}) == 6
    strict = QueueOrder({"low": 1, "high": 5, "mid": 3}, strict=True)
    assert strict() == strict() == ["high", "mid", "low"]


@pytest.mark.parametrize("strict", [False, True])
def test_single_queue_order(strict: bool) -> None:
    assert QueueOrder({"only": 7}, strict=strict)() == ["only"]


@pytest.mark.parametrize(
    ("priorities", "gcd"),
    [([6, 2, 12], 2), ([3, 3, 3], 3), ([6, 3, 1], 1), ([1], 1), ([1, 0, 2], 1), ([8, 0, 4], 4),
     ([9, 12, 18, 30], 3)],
)
def test_priorities_are_divided_by_their_gcd(priorities: list[int], gcd: int) -> None:
    queues = {f"q{i}": p for i, p in enumerate(priorities)}
    assert normalize_priorities(queues) == {q: p // gcd for q, p in queues.items()}


@pytest.mark.parametrize(
    ("given", "normalized"),
    [({"a": 100, "b": 20, "c": 5}, {"a": 20, "b": 4, "c": 1}), ({"a": 10}, {"a": 1}),
     ({"a": 5, "b": 1}, {"a": 5, "b": 1}), ({"a": 6, "b": 3, "c": 0}, {"a": 2, "b": 1, "c": 0})],
)
def test_normalize_priorities(given: dict[str, int], normalized: dict[str, int]) -> None:
    assert normalize_priorities(given) == normalized


def test_weighted_order_follows_normalized_weights_deterministically() -> None:
    random.seed(12345)
    a = [QueueOrder({"x": 100, "y": 20}, strict=False)() for _ in range(50)]
    random.seed(12345)
    b = [QueueOrder({"x": 5, "y": 1}, strict=False)() for _ in range(50)]
    assert a == b


# ----------------------------------------------------------------- deadlines (item 17)


def _msg(timeout_ms: int = 0, deadline_ms: int = 0) -> TaskMessage:
    return TaskMessage(id="i", type="t", queue="q", timeout_ms=timeout_ms,
                       deadline_ms=deadline_ms)


@pytest.mark.parametrize(
    ("timeout_ms", "deadline_ms", "expected"),
    [
        (5_000, 0, 1_005_000),           # timeout only: now + timeout
        (0, 2_000_000, 2_000_000),       # deadline only: the deadline
        (5_000, 1_003_000, 1_003_000),   # both: the deadline comes first
        (5_000, 9_000_000, 1_005_000),   # both: now + timeout comes first
        (5_000, 1_005_000, 1_005_000),   # both, equal
        (0, 0, 1_000_000 + 30 * 60_000),  # neither: 30 minutes
    ],
)
def test_compute_deadline(timeout_ms: int, deadline_ms: int, expected: int) -> None:
    assert compute_deadline(1_000_000, _msg(timeout_ms, deadline_ms)) == expected


async def test_timeout_cancels_the_handler_and_retries(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    saw_cancel = asyncio.Event()
    mux = ServeMux()

    @mux.handler("slow")
    async def slow(task: Task) -> None:
        try:
            await anyio.Event().wait()  # runs until cancelled
        except asyncio.CancelledError:
            saw_cancel.set()
            raise

    info = await asyncq_client.enqueue("slow", queue=asyncq_queue, timeout=0.3)
    started = time.monotonic()
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, retry_delay=never_soon) as w:
        await w.wait_drained(timeout=5)
    assert saw_cancel.is_set()
    assert time.monotonic() - started < 3
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    assert (fields["state"], fields["retried"]) == (b"retry", b"1")
    assert fields["error"] == b"TimeoutError: task deadline exceeded"


async def test_a_deadline_already_passed_fails_without_running_the_handler(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    from datetime import UTC, datetime, timedelta

    ran: list[str] = []
    mux = ServeMux()

    @mux.handler("late")
    async def late(task: Task) -> None:
        ran.append(task.type)

    info = await asyncq_client.enqueue(
        "late", queue=asyncq_queue, deadline=datetime.now(UTC) + timedelta(milliseconds=50))
    qk = K.queue_keys(asyncq_queue)
    assert info.deadline is not None
    deadline_ms = info.deadline.timestamp() * 1000
    await wait_until(lambda: now_ms() > deadline_ms + 10, timeout=2)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, retry_delay=never_soon) as w:
        await w.wait_drained()
    assert ran == []
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    assert fields["error"] == b"TimeoutError: task deadline exceeded"
    assert await redis_client.zscore(qk.retry, info.id) is not None


# ----------------------------------------------------------------- robustness


async def test_unknown_task_type_follows_the_retry_path(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    mux = ServeMux()
    mux.handle("known", lambda task: asyncio.sleep(0))
    info = await asyncq_client.enqueue("unknown:type", queue=asyncq_queue)
    async with asyncq_worker(mux, queues={asyncq_queue: 1}, retry_delay=never_soon) as w:
        await w.wait_drained()
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    assert (fields["state"], fields["retried"]) == (b"retry", b"1")
    assert fields["error"] == (
        b"HandlerNotFoundError: no handler registered for task type 'unknown:type'")


async def test_paused_queue_is_skipped_and_unpausing_wakes_the_worker(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    paused, other = f"{asyncq_queue}-paused", f"{asyncq_queue}-other"
    seen: list[str] = []
    mux = ServeMux()

    @mux.handler("job")
    async def job(task: Task) -> None:
        seen.append(task.queue)

    async with asyncq_worker(mux, queues={paused: 5, other: 1}, idle_poll_interval=30) as w:
        await w.worker.broker.pause(paused)
        await asyncq_client.enqueue("job", queue=paused)
        await asyncq_client.enqueue("job", queue=other)
        await w.wait_drained(other)
        assert seen == [other]
        assert (await queue_counts(redis_client, paused))["pending"] == 1
        # The worker is idle now; only the pub/sub wake can bring it back within a second.
        started = time.monotonic()
        assert await w.worker.broker.unpause(paused)
        await wait_until(lambda: paused in seen, timeout=2)
        assert time.monotonic() - started < 1
        await w.wait_drained()
    assert seen == [other, paused]


async def test_an_idle_worker_starts_a_new_task_at_once(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str,
) -> None:
    started: list[float] = []
    mux = ServeMux()

    @mux.handler("ping")
    async def ping(task: Task) -> None:
        started.append(time.monotonic())

    async with asyncq_worker(mux, queues={asyncq_queue: 1}, idle_poll_interval=30) as w:
        latencies = []
        for n in range(20):
            sent = time.monotonic()
            await asyncq_client.enqueue("ping", queue=asyncq_queue)
            await wait_until(lambda n=n: len(started) > n, timeout=2)
            latencies.append(started[n] - sent)
        await w.wait_drained()
    assert max(latencies) < 0.5, latencies


async def test_undecodable_message_is_archived_and_the_worker_carries_on(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    qk = K.queue_keys(asyncq_queue)
    await redis_client.hset(qk.task("garbage"), mapping={"msg": b"\xff not json",
                                                         "state": "pending"})
    await redis_client.lpush(qk.pending, "garbage")
    seen: list[str] = []
    mux = ServeMux()

    @mux.handler("good")
    async def good(task: Task) -> None:
        seen.append(task.type)

    async with asyncq_worker(mux, queues={asyncq_queue: 1}) as w:
        await w.wait_drained()
        await asyncq_client.enqueue("good", queue=asyncq_queue)
        await w.wait_drained()
    fields = await task_hash(redis_client, asyncq_queue, "garbage")
    assert fields["state"] == b"archived"
    assert fields["error"].startswith(b"DecodeError: task message is not valid JSON")
    assert seen == ["good"]


async def test_message_naming_another_task_is_archived(
    asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    qk = K.queue_keys(asyncq_queue)
    msg = TaskMessage(id="other-id", type="t", queue=asyncq_queue).encode()
    await redis_client.hset(qk.task("real-id"), mapping={"msg": msg, "state": "pending"})
    await redis_client.lpush(qk.pending, "real-id")
    async with asyncq_worker(ServeMux(), queues={asyncq_queue: 1}) as w:
        await w.wait_drained()
    fields = await task_hash(redis_client, asyncq_queue, "real-id")
    assert fields["state"] == b"archived"
    assert fields["error"].startswith(b"DecodeError: message names task 'other-id'")


def test_worker_config_rejects_bad_priorities() -> None:
    with pytest.raises(ValueError, match="priority"):
        asyncq.WorkerConfig(queues={"q": 0})
    with pytest.raises(ValueError, match="non-empty"):
        asyncq.WorkerConfig(queues={})


async def test_a_cancel_arriving_after_the_handler_returned_does_not_fail_the_task(
    asyncq_client: Client, asyncq_worker: WorkerFactory, asyncq_queue: str, redis_client: Redis,
) -> None:
    """The handler has returned but its completion is not processed yet when a cancellation
    (or the deadline timer) fires: the task succeeded and must be recorded as such."""
    mux = ServeMux()
    cancel_results: list[bool] = []
    holder: dict[str, Worker] = {}

    @mux.handler("racy")
    async def racy(task: Task) -> str:
        processor = holder["w"].processor

        def cancel() -> None:
            assert task.id is not None
            cancel_results.append(processor.cancel(task.id, "cancel"))

        asyncio.get_running_loop().call_soon(cancel)  # runs before the done callback
        return "finished"

    async with asyncq_worker(mux, queues={asyncq_queue: 1}) as w:
        holder["w"] = w.worker
        info = await asyncq_client.enqueue("racy", queue=asyncq_queue, retention=60)
        await w.wait_drained()
    assert cancel_results == [False]
    fields = await task_hash(redis_client, asyncq_queue, info.id)
    assert (fields["state"], fields["result"]) == (b"completed", b'"finished"')


@pytest.mark.parametrize(
    ("exc", "text"),
    [(ValueError("bad value"), "ValueError: bad value"), (ValueError(), "ValueError"),
     (KeyError("k"), "KeyError: 'k'"),
     (asyncq.HandlerNotFoundError("x"), "HandlerNotFoundError: x")],
)
def test_stored_error_text_is_type_and_message(exc: BaseException, text: str) -> None:
    assert error_text(exc) == text
