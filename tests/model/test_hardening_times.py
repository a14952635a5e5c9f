"""Times stay ones a datetime can hold: refused before anything is written, and a stored one
beyond the year 9999 (written by hand or by an older version) never breaks a listing."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from asyncq import Client, Inspector, Retry, TaskState
from asyncq._broker import _keys as K
from tests.helpers.cli import Cli, err, out

pytestmark = pytest.mark.anyio

YEARS_9000 = 9000 * 365.25 * 86_400


@pytest.mark.parametrize("options", [{"process_in": YEARS_9000}, {"timeout": 3e11}],
                         ids=["process_in of 9000 years", "timeout of 9500 years"])
async def test_a_time_past_the_year_9999_is_refused_before_anything_is_written(
    asyncq_client: Client, asyncq_queue: str, redis_client: Redis, options: dict[str, float],
) -> None:
    with pytest.raises(ValueError, match="after the year 9999"):
        await asyncq_client.enqueue("t", queue=asyncq_queue, **options)
    assert [k async for k in redis_client.scan_iter(
        match=K.queue_keys(asyncq_queue).base + "*")] == []


def test_the_cli_refuses_it_in_one_line(cli: Cli, asyncq_queue: str) -> None:
    ran = cli.sync("task", "enqueue", "--type", "t", "--queue", asyncq_queue, "--process-in",
                   str(YEARS_9000), ok=False)
    assert "after the year 9999" in err(ran) and "Traceback" not in err(ran)


async def test_a_stored_time_beyond_9999_does_not_break_listings(
    asyncq_client: Client, asyncq_queue: str, redis_client: Redis, cli: Cli,
) -> None:
    qk = K.queue_keys(asyncq_queue)
    bad = await asyncq_client.enqueue("t", 1, queue=asyncq_queue, process_in=60)
    good = await asyncq_client.enqueue("t", 2, queue=asyncq_queue, process_in=60)
    await redis_client.zadd(qk.scheduled, {bad.id: 10**15})  # year ~33658
    await redis_client.hset(qk.task(bad.id), "failed_at", str(10**15))
    async with Inspector(asyncq_client.broker) as inspector:
        listed = {t.id: t for t in await inspector.list_tasks(asyncq_queue, "scheduled")}
        assert set(listed) == {bad.id, good.id}
        assert listed[bad.id].next_process_at is None  # shown without a time
        assert listed[good.id].next_process_at is not None
        assert (await inspector.task_info(asyncq_queue, bad.id)).state is TaskState.SCHEDULED
    assert bad.id in out(await cli("task", "ls", "-q", asyncq_queue, "-s", "scheduled"))


def test_a_retry_delay_of_ten_thousand_years_is_valid() -> None:
    assert Retry(delay=10_000 * 365 * 86_400).delay > 0  # (the retry time is capped at 9999)
