"""Recovery, janitor and aggregation with wire=asynq, step by step as Go's recoverer, janitor and
aggregator (rdb.go ListLeaseExpired, Retry, Archive, DeleteExpiredCompletedTasks,
AggregationCheck, ReadAggregationSet, DeleteAggregationSet, ReclaimStaleAggregationSets) on
records written the way Go writes them. A Go server's run is recovered only once its lease
ended 30 s ago (Go's own rule); a run an asyncq worker holds by asyncq's cutoff."""

from __future__ import annotations

from datetime import timedelta

import pytest
from redis.asyncio import Redis

from asyncq import Client, FakeClock, Task
from asyncq._broker import Outcome
from asyncq._broker._asynq import _broker as asynq_broker_module
from asyncq._broker._asynq import _codec, _recovery
from asyncq._broker._asynq import _keys as K
from asyncq._broker._asynq._broker import AsynqBroker
from asyncq._worker._retry import default_retry_delay

OWNER = "srv-r"
GRACE_MS = 5_000  # asyncq's recover_grace


async def go_leased(redis: Redis, queue: str, task_id: str, lease_s: int, *, retry: int = 25,
                    retried: int = 0, payload: bytes = b"go") -> None:
    """A task as a Go server leaves it after its Dequeue: msg, state active, in active, and a
    lease entry (Unix s) that Go's heartbeat extends while the server lives."""
    qk = K.queue_keys(queue)
    msg = _codec.encode(_codec.AsynqTask(type="go:t", payload=payload, id=task_id, queue=queue,
                                         retry=retry, retried=retried, timeout=1800))
    await redis.hset(qk.task(task_id), mapping={"msg": msg, "state": "active"})
    await redis.lpush(qk.active, task_id)
    await redis.zadd(qk.lease, {task_id: lease_s})


async def go_msg(redis: Redis, queue: str, task_id: str) -> _codec.AsynqTask:
    return _codec.decode(await redis.hget(K.queue_keys(queue).task(task_id), "msg"))


def cutoff(clock: FakeClock) -> int:
    return clock.now_ms() - GRACE_MS


async def test_a_go_run_is_listed_only_once_its_lease_ended_30s_ago(
        abroker: AsynqBroker, redis_client: Redis, clock: FakeClock, asyncq_queue: str) -> None:
    now_s = clock.now_ms() // 1000
    await go_leased(redis_client, asyncq_queue, "dead", now_s - 31)
    await go_leased(redis_client, asyncq_queue, "late", now_s - 10)  # heartbeat late: not dead
    await go_leased(redis_client, asyncq_queue, "live", now_s + 30)
    listed = await abroker.maintenance.list_lease_expired(asyncq_queue, cutoff(clock), 100)
    assert [t.id for t in listed] == ["dead"]
    m = listed[0].msg
    assert (m.type, m.max_retry, listed[0].payload) == ("go:t", 25, b"go")
    # even a caller asking for every lease up to now is held to Go's allowance for Go runs
    listed = await abroker.maintenance.list_lease_expired(asyncq_queue,
                                                          clock.now_ms() + 3_600_000, 100)
    assert [t.id for t in listed] == ["dead"]


async def test_an_asyncq_run_is_listed_by_the_asyncq_cutoff(
        abroker: AsynqBroker, aclient: Client, redis_client: Redis, clock: FakeClock,
        asyncq_queue: str) -> None:
    """(The listing by the cutoff: conformance/test_conf_transitions.py.)"""
    task = await aclient.enqueue("t", queue=asyncq_queue)
    await abroker.dequeue(asyncq_queue, 1, OWNER, 30_000, 1000)
    clock.advance(36)
    # renewed meanwhile: recovering it fails, nothing written
    await abroker.extend_leases(asyncq_queue, [task.id], OWNER, 30_000)
    lost = Outcome("retry", asyncq_queue, task.id, retry_at_ms=clock.now_ms(), error="e")
    await abroker.maintenance.recover(lost, cutoff(clock))
    assert await redis_client.hget(K.queue_keys(asyncq_queue).task(task.id), "state") == b"active"


async def test_a_go_run_recovered_as_gos_recoverer_retries_it(
        abroker: AsynqBroker, redis_client: Redis, clock: FakeClock, asyncq_queue: str) -> None:
    now_s = clock.now_ms() // 1000
    qk = K.queue_keys(asyncq_queue)
    await go_leased(redis_client, asyncq_queue, "dead", now_s - 60, retried=2)
    retry_at = clock.now_ms() + 20_500
    outcome = Outcome("retry", asyncq_queue, "dead", retry_at_ms=retry_at,
                      error="LeaseExpiredError: task lease expired")
    assert await abroker.maintenance.recover(outcome, cutoff(clock)) is True
    assert await redis_client.lrange(qk.active, 0, -1) == []
    assert await redis_client.zscore(qk.lease, "dead") is None
    assert await redis_client.zscore(qk.retry, "dead") == -(-retry_at // 1000)
    assert await redis_client.hget(qk.task("dead"), "state") == b"retry"
    m = await go_msg(redis_client, asyncq_queue, "dead")
    assert (m.retried, m.error_msg, m.last_failed_at) == (3, "task lease expired", now_s)
    # (Go's text in its message; asyncq's whole text, with the type, in its own field)
    assert await redis_client.hget(qk.task("dead"), K.F_ERROR) == (
        b"LeaseExpiredError: task lease expired")
    day = K.day_string(clock.now_ms())
    for key in (qk.processed, qk.failed, qk.processed_day(day), qk.failed_day(day)):
        assert await redis_client.get(key) == b"1"
    assert await abroker.maintenance.recover(outcome, cutoff(clock)) is False  # once only


async def test_a_go_run_out_of_retries_is_archived_and_a_late_one_is_not_taken(
        abroker: AsynqBroker, redis_client: Redis, clock: FakeClock, asyncq_queue: str) -> None:
    now_s = clock.now_ms() // 1000
    qk = K.queue_keys(asyncq_queue)
    await go_leased(redis_client, asyncq_queue, "spent", now_s - 60, retry=3, retried=3)
    await go_leased(redis_client, asyncq_queue, "late", now_s - 10)
    assert await abroker.maintenance.recover(
        Outcome("archive", asyncq_queue, "spent", error="gone"), cutoff(clock)) is True
    assert await redis_client.zscore(qk.archived, "spent") == now_s
    m = await go_msg(redis_client, asyncq_queue, "spent")
    assert (m.retried, m.error_msg) == (3, "gone")
    late = Outcome("archive", asyncq_queue, "late", error="x")
    assert await abroker.maintenance.recover(late, clock.now_ms()) is False
    assert await redis_client.hget(qk.task("late"), "state") == b"active"
    with pytest.raises(ValueError, match="retried or archived"):
        await abroker.maintenance.recover(Outcome("done", asyncq_queue, "late"), clock.now_ms())


async def test_stale_lease_entries_are_dropped(abroker: AsynqBroker, redis_client: Redis,
                                               clock: FakeClock, asyncq_queue: str) -> None:
    qk = K.queue_keys(asyncq_queue)
    now_s = clock.now_ms() // 1000
    await redis_client.zadd(qk.lease, {"ghost": now_s - 60, "young-ghost": now_s - 5})
    await redis_client.lpush(qk.active, "ghost")
    assert await abroker.maintenance.list_lease_expired(asyncq_queue, cutoff(clock), 100) == []
    assert await redis_client.zrange(qk.lease, 0, -1) == [b"young-ghost"]
    assert await redis_client.llen(qk.active) == 0


async def test_listing_looks_past_runs_it_may_not_take(
        abroker: AsynqBroker, aclient: Client, redis_client: Redis, clock: FakeClock,
        asyncq_queue: str) -> None:
    """Go runs within their 30 s allowance sort first but do not hide a later asyncq run."""
    start_s = clock.now_ms() // 1000
    await aclient.enqueue("t", queue=asyncq_queue)
    await abroker.dequeue(asyncq_queue, 1, OWNER, 30_000, 1000)  # lease: start + 30
    clock.advance(40)
    for i in range(5):
        await go_leased(redis_client, asyncq_queue, f"late{i}", start_s + 20)
    listed = await abroker.maintenance.list_lease_expired(asyncq_queue, cutoff(clock), 2)
    assert len(listed) == 1 and not listed[0].id.startswith("late")


async def test_orphans_get_a_lease_recovered_by_gos_rule(
        abroker: AsynqBroker, redis_client: Redis, clock: FakeClock, asyncq_queue: str) -> None:
    qk = K.queue_keys(asyncq_queue)
    await go_leased(redis_client, asyncq_queue, "orphan", 0)
    await redis_client.zrem(qk.lease, "orphan")
    assert await abroker.maintenance.reclaim_orphans(asyncq_queue, 100) == 1
    assert await redis_client.zscore(qk.lease, "orphan") == clock.now_ms() // 1000
    assert await abroker.maintenance.reclaim_orphans(asyncq_queue, 100) == 0
    clock.advance(29)
    assert await abroker.maintenance.list_lease_expired(asyncq_queue, cutoff(clock), 100) == []
    clock.advance(1)
    expired = await abroker.maintenance.list_lease_expired(asyncq_queue, cutoff(clock), 100)
    assert [t.id for t in expired] == ["orphan"]


async def test_no_orphan_scan_in_this_layout(abroker: AsynqBroker, asyncq_queue: str) -> None:
    """asynq has no repair of task records found in no list: a whole pass, nothing done."""
    assert await abroker.maintenance.scan_task_keys(0, 100) == (0, [])
    assert await abroker.maintenance.repair_tasks(asyncq_queue, ["a", "b"], 10) == ["", ""]


async def test_expired_completed_tasks_are_deleted_in_batches(
        abroker: AsynqBroker, redis_client: Redis, clock: FakeClock, asyncq_queue: str) -> None:
    qk = K.queue_keys(asyncq_queue)
    now_s = clock.now_ms() // 1000
    for i in range(5):
        await redis_client.hset(qk.task(f"c{i}"), mapping={"msg": b"", "state": "completed"})
    await redis_client.zadd(qk.completed, {"c0": now_s - 9, "c1": now_s - 1, "c2": now_s,
                                           "c3": now_s + 1, "c4": now_s + 100})
    assert await abroker.maintenance.delete_expired_completed(asyncq_queue, 2) == 2
    assert await abroker.maintenance.delete_expired_completed(asyncq_queue, 2) == 1
    assert await abroker.maintenance.delete_expired_completed(asyncq_queue, 2) == 0
    assert await redis_client.zrange(qk.completed, 0, -1) == [b"c3", b"c4"]
    assert [await redis_client.exists(qk.task(f"c{i}")) for i in range(5)] == [0, 0, 0, 1, 1]


async def test_a_kept_task_completed_by_asyncq_expires_with_its_retention(
        abroker: AsynqBroker, aclient: Client, redis_client: Redis, clock: FakeClock,
        asyncq_queue: str) -> None:
    task = await aclient.enqueue("t", queue=asyncq_queue, retention=timedelta(seconds=10))
    await abroker.dequeue(asyncq_queue, 1, OWNER, 30_000, 1000)
    assert await abroker.finish([Outcome("complete", asyncq_queue, task.id,
                                         retention_ms=10_000)], OWNER) == [True]
    clock.advance(9)
    assert await abroker.maintenance.delete_expired_completed(asyncq_queue, 100) == 0
    clock.advance(1)
    assert await abroker.maintenance.delete_expired_completed(asyncq_queue, 100) == 1
    assert not await redis_client.exists(K.queue_keys(asyncq_queue).task(task.id))


# ---------------------------------------------------------------- groups


async def go_grouped(redis: Redis, queue: str, task_id: str, group: str, at_s: int) -> None:
    """A task as Go's AddToGroup stores it."""
    qk = K.queue_keys(queue)
    msg = _codec.encode(_codec.AsynqTask(type="go:g", payload=task_id.encode(), id=task_id,
                                         queue=queue, group_key=group, timeout=1800))
    await redis.hset(qk.task(task_id), mapping={"msg": msg, "state": "aggregating",
                                                "group": group})
    await redis.zadd(qk.group(group), {task_id: at_s})
    await redis.sadd(qk.groups, group)


async def test_a_group_is_staged_as_gos_aggregation_check_does(
        abroker: AsynqBroker, aclient: Client, redis_client: Redis, clock: FakeClock,
        asyncq_queue: str) -> None:
    qk = K.queue_keys(asyncq_queue)
    now_s = clock.now_ms() // 1000
    await go_grouped(redis_client, asyncq_queue, "g1", "grp", now_s - 50)
    await go_grouped(redis_client, asyncq_queue, "g2", "grp", now_s - 30)
    mine = await aclient.enqueue("t", b"mine", queue=asyncq_queue, group="grp")
    assert await abroker.aggregation.list_groups(asyncq_queue) == ["grp"]
    deadline = clock.now_ms() + 120_000
    # newest task 0 s old, grace 60 s, no max delay/size: not ready
    assert await abroker.aggregation.check(asyncq_queue, "grp", "s1", 60_000, 0, 0,
                                           deadline) == 0
    # oldest waited 50 s >= max delay 45.9 s (whole seconds, as Go passes them: 45)
    assert await abroker.aggregation.check(asyncq_queue, "grp", "s1", 60_000, 45_900, 0,
                                           deadline) == 3
    set_key = qk.aggregation_set("grp", "s1")
    assert await redis_client.zscore(qk.aggregation_sets, set_key) == deadline // 1000
    assert await redis_client.smembers(qk.groups) == set()
    tasks = await abroker.aggregation.read_set(asyncq_queue, "grp", "s1")
    assert [t.id for t in tasks] == ["g1", "g2", mine.id]
    assert [t.payload for t in tasks] == [b"g1", b"g2", b"mine"]
    assert tasks[0].msg.group == "grp"
    assert await abroker.aggregation.delete_set(asyncq_queue, "grp", "s1") == 3
    assert not await redis_client.exists(set_key, qk.task("g1"), qk.task(mine.id))
    assert await redis_client.zscore(qk.aggregation_sets, set_key) is None


async def test_max_size_takes_the_oldest_and_a_failed_set_goes_back(
        abroker: AsynqBroker, redis_client: Redis, clock: FakeClock, asyncq_queue: str) -> None:
    qk = K.queue_keys(asyncq_queue)
    now_s = clock.now_ms() // 1000
    for i in range(3):
        await go_grouped(redis_client, asyncq_queue, f"g{i}", "grp", now_s - 3 + i)
    assert await abroker.aggregation.check(asyncq_queue, "grp", "s1", 60_000, 0, 2,
                                           clock.now_ms() + 120_000) == 2
    assert await redis_client.zrange(qk.aggregation_set("grp", "s1"), 0, -1) == [b"g0", b"g1"]
    assert await redis_client.smembers(qk.groups) == {b"grp"}  # g2 is still in the group
    assert await abroker.aggregation.return_set(asyncq_queue, "grp", "s1") == 2
    assert await redis_client.zrange(qk.group("grp"), 0, -1, withscores=True) == [
        (b"g0", now_s - 3), (b"g1", now_s - 2), (b"g2", now_s - 1)]


async def test_a_stale_set_returns_to_its_group(abroker: AsynqBroker, redis_client: Redis,
                                                clock: FakeClock, asyncq_queue: str) -> None:
    """As Go's recoverer does for a set whose aggregating server died (and listed again)."""
    qk = K.queue_keys(asyncq_queue)
    now_s = clock.now_ms() // 1000
    await go_grouped(redis_client, asyncq_queue, "g0", "a:b", now_s - 100)
    assert await abroker.aggregation.check(asyncq_queue, "a:b", "s1", 1000, 0, 0,
                                           clock.now_ms() + 120_000) == 1
    assert await abroker.aggregation.reclaim_stale_sets(asyncq_queue) == 0
    clock.advance(120)
    assert await abroker.aggregation.reclaim_stale_sets(asyncq_queue) == 1
    assert await redis_client.zrange(qk.group("a:b"), 0, -1) == [b"g0"]
    assert await redis_client.smembers(qk.groups) == {b"a:b"}
    assert not await redis_client.exists(qk.aggregation_set("a:b", "s1"))
    assert await redis_client.zcard(qk.aggregation_sets) == 0


# ---------------------------------------------------------------- retry delay


def test_the_default_retry_delay_is_asynqs() -> None:
    """The worker's default (used on both layouts) is Go's DefaultRetryDelayFunc below its
    cap (DEFAULT_RETRY_DELAY_MAX, which Go's lacks: tests/test_defaults.py)."""
    for retried in (0, 1, 5, 7):
        delays = {default_retry_delay(retried, RuntimeError(), Task("t")) for _ in range(300)}
        low = retried**4 + 15
        assert min(delays) >= low and max(delays) <= low + 29 * (retried + 1)
        assert len(delays) > 10  # random within the range, as Go's rand.Intn(30)


def test_the_recovery_constants_are_gos() -> None:
    assert _recovery.GO_RECOVER_GRACE_MS == 30_000
    assert _recovery.STATS_TTL_S == asynq_broker_module.STATS_TTL_S
    assert _recovery.ARCHIVE_MAX_SIZE == asynq_broker_module.ARCHIVE_MAX_SIZE
    assert _recovery.ARCHIVE_MAX_AGE_S == asynq_broker_module.ARCHIVE_MAX_AGE_S
