"""PeriodicTaskManager: provider syncs add and remove entries; bad rounds change nothing."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
import structlog
from redis.asyncio import Redis

import asyncq
from asyncq import PeriodicTaskConfig
from asyncq._broker import _keys as K
from asyncq.testing import wait_until

pytestmark = pytest.mark.anyio

START = datetime(2030, 1, 1, tzinfo=UTC)


class Provider:
    """A provider whose configs the test changes between syncs."""

    def __init__(self, configs: list[PeriodicTaskConfig]) -> None:
        self.configs = configs
        self.calls = 0

    def __call__(self) -> list[PeriodicTaskConfig]:
        self.calls += 1
        return list(self.configs)


def entry_types(m: asyncq.PeriodicTaskManager) -> list[str]:
    return sorted(e.type for e in m.scheduler.entries())


async def test_sync_registers_new_and_unregisters_removed_configs(asyncq_queue: str) -> None:
    a = PeriodicTaskConfig("@every 3s", "a", {"n": 1}, {"queue": asyncq_queue})
    b = PeriodicTaskConfig("@hourly", "b")
    c = PeriodicTaskConfig("0 3 * * *", "c", options={"max_retry": 2})
    provider = Provider([a, b])
    m = asyncq.PeriodicTaskManager("redis://127.0.0.1:1/0", provider)
    added, removed = await m.sync()
    assert (len(added), removed) == (2, [])
    assert entry_types(m) == ["a", "b"]
    kept = {e.type: e.id for e in m.scheduler.entries()}

    provider.configs = [a, c]
    added, removed = await m.sync()
    assert removed == [kept["b"]] and len(added) == 1
    assert entry_types(m) == ["a", "c"]
    assert {e.type: e.id for e in m.scheduler.entries()}["a"] == kept["a"]  # untouched
    assert m.entry_ids == {e.id for e in m.scheduler.entries()}

    assert await m.sync() == ([], [])  # nothing changed
    provider.configs = []
    await m.sync()
    assert m.scheduler.entries() == []
    await m.scheduler.close()


async def test_identity_ignores_option_order_and_duration_spelling() -> None:
    provider = Provider([PeriodicTaskConfig("*/5 * * * *", "t", {"x": 1, "y": [1, 2]},
                                            {"queue": "q", "max_retry": 3, "timeout": 60})])
    m = asyncq.PeriodicTaskManager("redis://127.0.0.1:1/0", provider)
    [first] = (await m.sync())[0]
    provider.configs = [PeriodicTaskConfig("*/5 * * * *", "t", {"y": [1, 2], "x": 1},
                                           {"timeout": timedelta(seconds=60), "max_retry": 3,
                                            "queue": "q"})]
    assert await m.sync() == ([], [])
    assert m.entry_ids == {first}
    # Identical configs in one list collapse into one entry.
    provider.configs = provider.configs * 2
    assert await m.sync() == ([], [])
    await m.scheduler.close()


async def test_an_invalid_config_skips_the_whole_round() -> None:
    good = PeriodicTaskConfig("@hourly", "good")
    provider = Provider([good])
    m = asyncq.PeriodicTaskManager("redis://127.0.0.1:1/0", provider)
    await m.sync()
    before = m.entry_ids

    provider.configs = [PeriodicTaskConfig("@daily", "new"), PeriodicTaskConfig("* * *", "bad")]
    with pytest.raises(ValueError, match=r"config 1 .*expected 5 fields"):
        await m.sync()
    with structlog.testing.capture_logs() as logs:
        assert await m.tick() is False
    assert m.entry_ids == before and entry_types(m) == ["good"]
    [event] = [e for e in logs if e["log_level"] == "error"]
    assert "expected 5 fields" in event["error"]

    provider.configs = [good, PeriodicTaskConfig("@daily", "new", options={"retries": 1})]
    assert await m.tick() is False  # an unknown option is invalid too
    provider.configs = [good, "not a config"]  # type: ignore[list-item]
    assert await m.tick() is False
    assert entry_types(m) == ["good"]

    provider.configs = [good, PeriodicTaskConfig("@daily", "new")]
    assert await m.tick() is True
    assert entry_types(m) == ["good", "new"]
    await m.scheduler.close()


async def test_async_provider_and_a_failing_provider() -> None:
    calls = 0

    async def provider() -> list[PeriodicTaskConfig]:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0)
        if calls > 1:
            raise ConnectionError("config service down")
        return [PeriodicTaskConfig("@hourly", "x")]

    m = asyncq.PeriodicTaskManager("redis://127.0.0.1:1/0", provider)
    await m.sync()
    assert entry_types(m) == ["x"]
    assert await m.tick() is False  # logged; the entries stay
    assert entry_types(m) == ["x"]
    await m.scheduler.close()


async def test_initial_sync_failure_is_raised_by_run(asyncq_redis_url: str) -> None:
    m = asyncq.PeriodicTaskManager(
        asyncq_redis_url, lambda: [PeriodicTaskConfig("@every 0s", "x")])
    with pytest.raises(ValueError, match="at least 1s"):
        await m.run(handle_signals=False)
    with pytest.raises(ValueError, match="at least 1s"):
        async with m:
            pass


def test_constructor_validation() -> None:
    with pytest.raises(TypeError, match="provider"):
        asyncq.PeriodicTaskManager("redis://127.0.0.1:1/0", [])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="sync_interval"):
        asyncq.PeriodicTaskManager("redis://127.0.0.1:1/0", list, sync_interval=0)
    with pytest.raises(TypeError):
        asyncq.PeriodicTaskManager("redis://127.0.0.1:1/0", list, heartbeat=3)


async def test_run_resyncs_every_interval(
    asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str,
) -> None:
    provider = Provider([PeriodicTaskConfig("@hourly", "first", options={"queue": asyncq_queue})])
    m = asyncq.PeriodicTaskManager(asyncq_redis_url, provider, sync_interval=0.05)
    async with m:
        assert entry_types(m) == ["first"]
        provider.configs = [PeriodicTaskConfig("@hourly", "second",
                                               options={"queue": asyncq_queue})]
        await wait_until(lambda: entry_types(m) == ["second"], timeout=30,
                         message="provider change applied")
        key = K.scheduler_entries_key(m.scheduler.id)
        await wait_until(lambda: redis_client.exists(key), timeout=30, message="entries published")
    assert not await redis_client.exists(key)


async def test_two_managers_enqueue_each_tick_once(
    asyncq_redis_url: str, redis_client: Redis, asyncq_queue: str,
) -> None:
    clock = asyncq.FakeClock(START)
    configs = [PeriodicTaskConfig("@every 3s", "report", options={"queue": asyncq_queue})]
    managers = [asyncq.PeriodicTaskManager(asyncq_redis_url, lambda: configs, clock=clock)
                for _ in range(2)]
    for m in managers:
        await m.sync()
    assert managers[0].entry_ids == managers[1].entry_ids
    for _ in range(10):
        clock.advance(1)
        for m in managers:
            await m.scheduler.tick()
    assert await redis_client.llen(K.queue_keys(asyncq_queue).pending) == 3
    for m in managers:
        await m.scheduler.close()
