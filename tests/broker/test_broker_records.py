"""The records of workers and schedulers in asyncq's layout: what an earlier version wrote (its
heartbeat's JSON documents, its scheduler's entry and event documents) still reads as the
typed records the seam carries, and what this version writes reads back as it was written."""

from __future__ import annotations

import uuid

import orjson
import pytest
from redis.asyncio import Redis

from asyncq import FakeClock, Inspector
from asyncq._broker import (
    RedisBroker,
    RunningTaskRecord,
    SchedulerEntryRecord,
    SchedulerEventRecord,
    WorkerRecord,
)
from asyncq._broker import _keys as K

pytestmark = pytest.mark.anyio


async def test_a_worker_state_an_earlier_version_wrote_still_reads(
        broker: RedisBroker, redis_client: Redis, clock: FakeClock) -> None:
    sid = f"host:1:{uuid.uuid4()}"
    now = clock.now_ms()
    # The documents as the heartbeat wrote them before the seam carried typed records.
    doc = {"server_id": sid, "host": "box", "pid": 7, "concurrency": 4,
           "queues": {"tenant:*": 2, "mail": 1}, "strict_priority": False, "status": "active",
           "started_at": now - 5000, "active_workers": 1, "processed": 9, "failed": 1,
           "extra": {"zone": "eu"}, "matched": {"tenant:*": ["tenant:a"]},
           "task_options": {"mail:": {"max_retry": 3}}}
    run = {"task_id": "t1", "type": "mail:send", "queue": "mail", "started_at": now - 100,
           "deadline": now + 60_000, "payload_size": 12}
    skey, wkey = K.server_key(sid), K.workers_key(sid)
    try:
        await redis_client.set(skey, orjson.dumps(doc), px=10_000)
        await redis_client.hset(wkey, "t1", orjson.dumps(run))
        await redis_client.zadd(K.SERVERS, {skey: now + 10_000})
        await redis_client.zadd(K.WORKERS, {wkey: now + 10_000})
        [found] = [r for r in await broker.inspect.servers(now) if r.server_id == sid]
        assert found == WorkerRecord(
            sid, "box", 7, 4, {"tenant:*": 2, "mail": 1}, False, "active", now - 5000,
            processed=9, failed=1, extra={"zone": "eu"}, matched={"tenant:*": ("tenant:a",)},
            task_options={"mail:": {"max_retry": 3}},
            running=(RunningTaskRecord("t1", "mail:send", "mail", now - 100, now + 60_000,
                                       12),))
        # and this version writes the same document back
        await broker.workers.write(found, 10_000)
        assert orjson.loads(await redis_client.get(skey) or b"") == doc
        assert orjson.loads(await redis_client.hget(wkey, "t1") or b"") == run
    finally:
        await broker.workers.clear(sid)


async def test_a_document_no_version_wrote_is_skipped(
        broker: RedisBroker, redis_client: Redis, clock: FakeClock) -> None:
    sid = f"host:1:{uuid.uuid4()}"
    skey = K.server_key(sid)
    try:
        await redis_client.set(skey, b"not json", px=10_000)
        await redis_client.zadd(K.SERVERS, {skey: clock.now_ms() + 10_000})
        assert sid not in [r.server_id for r in await broker.inspect.servers(clock.now_ms())]
    finally:
        await broker.workers.clear(sid)


async def test_scheduler_documents_an_earlier_version_wrote_still_read(
        broker: RedisBroker, redis_client: Redis, clock: FakeClock,
        asyncq_redis_url: str) -> None:
    sid, entry_id = f"sched-{uuid.uuid4()}", f"e-{uuid.uuid4()}"
    now = clock.now_ms()
    entry = {"id": entry_id, "spec": "@every 30s", "timezone": "UTC", "type": "report",
             "encoding": "j", "payload": {"day": 1}, "options": {"queue": "q", "timeout": 2.5},
             "next": now + 30_000, "prev": now, "scheduler_id": sid}
    event = {"entry_id": entry_id, "task_id": "t9", "queue": "q", "enqueued_at": now + 3,
             "tick": now}
    key, history = K.scheduler_entries_key(sid), K.scheduler_history_key(entry_id)
    try:
        await redis_client.rpush(key, orjson.dumps(entry))
        await redis_client.zadd(K.SCHEDULERS, {key: now + 60_000})
        await redis_client.zadd(history, {orjson.dumps(event): now + 3})
        record = SchedulerEntryRecord(entry_id, "@every 30s", "UTC", "report", "j",
                                      b'{"day":1}', {"queue": "q", "timeout": 2.5},
                                      now + 30_000, now, sid)
        assert [e for e in await broker.schedules.entries() if e.id == entry_id] == [record]
        assert await broker.schedules.events(entry_id, 0, -1) == [
            SchedulerEventRecord(entry_id, "t9", "q", now + 3, now)]
        async with Inspector(asyncq_redis_url, clock=clock) as inspector:
            [shown] = [e for e in await inspector.scheduler_entries() if e.id == entry_id]
            assert (shown.type, shown.json(), shown.timezone) == ("report", {"day": 1}, "UTC")
        # this version publishes the same document
        await broker.schedules.publish_entries(sid, [record], 60_000, now)
        assert [orjson.loads(d) for d in await redis_client.lrange(key, 0, -1)] == [entry]
    finally:
        await broker.schedules.clear_entries(sid)
        await redis_client.delete(history)
