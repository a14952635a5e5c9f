"""Hostile records in Go asynq's layout (issue 40, item 5): every TaskMessage field a Go client
(or anything writing Go's keys) can set, at its extremes, written as hand-built protobuf bytes
exactly where a Go client writes them. A real worker, its forwarder and its recoverer must end
each bad record as that one task archived with the reason, while every good task beside it (in
the same dequeue batch, the same forward, the same recoverer round) completes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import structlog
from redis.asyncio import Redis

from asyncq import ServeMux, Task, Worker
from asyncq._broker._asynq import _codec
from asyncq._broker._asynq import _keys as K
from asyncq.testing import wait_until

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
INT32_MAX = 2**31 - 1


def varint(n: int) -> bytes:
    """A protobuf varint; a negative number as Go writes it (two's complement, 10 bytes)."""
    n &= 2**64 - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def f_int(num: int, value: int) -> bytes:
    return varint(num << 3) + varint(value)


def f_bytes(num: int, value: bytes) -> bytes:
    return varint(num << 3 | 2) + varint(len(value)) + value


def go_message(task_id: str, queue: str, *, task_type: bytes = b"go:t", payload: bytes = b"p",
               extra: bytes = b"", **ints: int) -> bytes:
    """A TaskMessage as a Go client writes it (Go's defaults: retry 25, timeout 1800 s), with
    ``ints`` (field name -> value) replacing those fields and ``extra`` appended."""
    nums = {"retry": 5, "retried": 6, "timeout": 8, "deadline": 9, "last_failed_at": 11,
            "retention": 12, "completed_at": 13}
    values = {"retry": 25, "timeout": 1800, **ints}
    out = f_bytes(1, task_type) + f_bytes(2, payload) + f_bytes(3, task_id.encode()) + f_bytes(
        4, queue.encode())
    for name, value in values.items():
        if value:
            out += f_int(nums[name], value)
    return out + extra


def good(task_id: str, queue: str) -> bytes:
    return go_message(task_id, queue)


#: name -> message maker. Each is a record asyncq cannot honour as Go would: archived with the
#: reason (checked to name what is wrong).
HOSTILE: dict[str, tuple[Callable[[str, str], bytes], str]] = {
    "deadline-int64-max": (lambda i, q: go_message(i, q, deadline=INT64_MAX), "deadline"),
    "deadline-negative": (lambda i, q: go_message(i, q, deadline=-5), "deadline"),
    "deadline-int64-min": (lambda i, q: go_message(i, q, deadline=INT64_MIN), "deadline"),
    "timeout-int64-max-deadline": (
        lambda i, q: go_message(i, q, timeout=INT64_MAX, deadline=INT64_MAX), "deadline"),
    "timeout-negative": (lambda i, q: go_message(i, q, timeout=-1), "timeout"),
    "timeout-int64-min": (lambda i, q: go_message(i, q, timeout=INT64_MIN), "timeout"),
    "retention-int64-max": (lambda i, q: go_message(i, q, retention=INT64_MAX), "retention"),
    "retention-negative": (lambda i, q: go_message(i, q, retention=-3), "retention"),
    "retry-negative": (lambda i, q: go_message(i, q, retry=-1), "retry"),
    "retried-negative": (lambda i, q: go_message(i, q, retried=-7), "retried -7"),
    "empty-type": (lambda i, q: go_message(i, q, task_type=b""), "type"),
    "type-not-utf8": (lambda i, q: go_message(i, q, task_type=b"\xff\xfe"), "TaskMessage"),
    "truncated": (lambda i, q: good(i, q)[:-1], "TaskMessage"),
    "garbage": (lambda i, q: b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", "TaskMessage"),
    "group-wire-type": (lambda i, q: good(i, q) + varint(16 << 3 | 3), "TaskMessage"),
    "empty": (lambda i, q: b"", "message"),
}

#: Records that look odd but are Go's own and run: unknown fields (a later asynq's), extreme
#: values asyncq can honour.
ODD_BUT_FINE: dict[str, Callable[[str, str], bytes]] = {
    "unknown-fields": lambda i, q: good(i, q) + f_int(99, 7) + f_bytes(100, b"later")
    + varint(101 << 3 | 1) + b"\x00" * 8 + varint(102 << 3 | 5) + b"\x00" * 4,
    "timeout-int64-max": lambda i, q: go_message(i, q, timeout=INT64_MAX),
    "retry-int32-max": lambda i, q: go_message(i, q, retry=INT32_MAX),
    "retried-int32-max": lambda i, q: go_message(i, q, retried=INT32_MAX - 1, retry=INT32_MAX),
    "huge-payload": lambda i, q: go_message(i, q, payload=b"x" * (4 << 20)),
    "completed-at-int64-max": lambda i, q: go_message(i, q, completed_at=INT64_MAX),
    "last-failed-negative": lambda i, q: go_message(i, q, last_failed_at=-1),
}


async def write_pending(redis: Redis, queue: str, task_id: str, msg: bytes) -> None:
    """Where Go's client writes an enqueued task: the hash, then the pending list."""
    qk = K.queue_keys(queue)
    await redis.hset(qk.task(task_id), mapping={"msg": msg, "state": "pending",
                                                "pending_since": 1})
    await redis.lpush(qk.pending, task_id)
    await redis.sadd(K.QUEUES, queue)


async def write_waiting(redis: Redis, queue: str, task_id: str, msg: bytes, state: str) -> None:
    """Where Go's client (scheduled) or server (retry) leaves a waiting task, due now."""
    qk = K.queue_keys(queue)
    await redis.hset(qk.task(task_id), mapping={"msg": msg, "state": state})
    await redis.zadd(qk.state_key(state), {task_id: 1})
    await redis.sadd(K.QUEUES, queue)


async def write_active(redis: Redis, queue: str, task_id: str, msg: bytes) -> None:
    """Where a Go server that died mid-run leaves its task: active, with a lease long ended."""
    qk = K.queue_keys(queue)
    await redis.hset(qk.task(task_id), mapping={"msg": msg, "state": "active"})
    await redis.lpush(qk.active, task_id)
    await redis.zadd(qk.lease, {task_id: 1})
    await redis.sadd(K.QUEUES, queue)


async def archived_reason(redis: Redis, queue: str, task_id: str) -> str | None:
    """The reason an archived task carries (Go's error_msg, or asyncq's own field when the
    message cannot carry one), None when the task is not archived."""
    qk = K.queue_keys(queue)
    if await redis.zscore(qk.archived, task_id) is None:
        return None
    h = await redis.hgetall(qk.task(task_id))
    assert h[b"state"] == b"archived"
    try:
        return _codec.decode(h[b"msg"]).error_msg or h.get(b"error", b"").decode()
    except Exception:
        return h.get(b"error", b"").decode()


async def test_hostile_records_are_archived_alone_by_worker_forwarder_and_recoverer(
        asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str) -> None:
    queue = asyncq_queue
    ran: set[str] = set()
    mux = ServeMux()

    @mux.handler("go:t")
    async def handle(task: Task) -> None:
        ran.add(task.id)

    expect_run: list[str] = []
    expect_archived: dict[str, str] = {}
    where = {"pending": 0, "scheduled": 1, "retry": 2, "active": 3}
    for place, n in where.items():
        for name, (make, word) in HOSTILE.items():
            bad = f"bad-{place}-{name}"
            ok = f"ok-{place}-{name}"
            for task_id, msg in ((ok, good(ok, queue)), (bad, make(bad, queue))):
                if place == "pending":
                    await write_pending(redis_client, queue, task_id, msg)
                elif place == "active":
                    await write_active(redis_client, queue, task_id, msg)
                else:
                    await write_waiting(redis_client, queue, task_id, msg, place)
            expect_run.append(ok)
            expect_archived[bad] = word
        for name, make in ODD_BUT_FINE.items():
            task_id = f"odd-{place}-{name}"
            if place == "pending":
                await write_pending(redis_client, queue, task_id, make(task_id, queue))
            elif place == "active":
                await write_active(redis_client, queue, task_id, make(task_id, queue))
            else:
                await write_waiting(redis_client, queue, task_id, make(task_id, queue), place)
            expect_run.append(task_id)
        assert n >= 0

    qk = K.queue_keys(queue)
    reasons: dict[str, str | None] = {}

    async def settled() -> bool:
        for task_id in expect_archived:
            if reasons.get(task_id) is None:
                reasons[task_id] = await archived_reason(redis_client, queue, task_id)
        return set(expect_run) <= ran and all(reasons.get(t) for t in expect_archived)

    with structlog.testing.capture_logs() as logs:
        await run_worker(asyncq_redis_url, mux, queue, settled, expect_run, expect_archived, ran,
                         reasons)
    # No round of the forwarder or the recoverer failed, nor anything else but the archiving.
    assert [e for e in logs if e["log_level"] in ("error", "critical")
            and e["event"] != "undecodable task archived"] == []
    for task_id, word in expect_archived.items():
        assert task_id not in ran, task_id
        assert word in (reasons[task_id] or ""), (task_id, reasons[task_id])
    assert await redis_client.llen(qk.active) == 0
    assert await redis_client.zcard(qk.lease) == 0


async def run_worker(url: str, mux: ServeMux, queue: str, settled: Callable[[], Awaitable[bool]],
                     expect_run: list[str], expect_archived: dict[str, str], ran: set[str],
                     reasons: dict[str, str | None]) -> None:
    """A real worker (processor, forwarder, recoverer) on ``queue`` until ``settled``."""
    async with Worker(url + "?wire=asynq", mux, queues={queue: 1}, concurrency=8,
                      prefetch=8, idle_poll_interval=0.05, forward_interval=0.1,
                      recover_interval=0.2, recover_grace=0.0, heartbeat_interval=1.0,
                      retry_delay=lambda n, exc, task: 0.0):
        try:
            await wait_until(settled, timeout=30)
        finally:
            missing = sorted(set(expect_run) - ran)
            unarchived = sorted(t for t in expect_archived if not reasons.get(t))
            print("not run:", missing, "\nnot archived:", unarchived)
