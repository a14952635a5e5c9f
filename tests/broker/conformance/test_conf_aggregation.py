"""Group aggregation on every broker: a group is staged in a set when it is ready (max size,
grace period, max delay), the set is read, deleted or given back, and a set whose deadline
passed returns to its group. Where each layout keeps groups and sets is its own module's."""

from __future__ import annotations

import pytest
from broker_helpers import add_group_tasks

from asyncq import Client, FakeClock
from asyncq._broker import Broker

pytestmark = pytest.mark.anyio

ON_CLUSTER = True


#: When a group's set is taken: (advance s, grace ms, max delay ms, max size, tasks taken).
GRACE_CASES = [
    # Tasks joined at t0, t0+10 s, t0+20 s; the check runs `advance` s after the last.
    (0, 60_000, 0, 0, 0),  # fresh, no size limit: wait
    (0, 60_000, 0, 10, 0),  # fresh, below max size: wait
    (0, 60_000, 0, 2, 2),  # over max size: the 2 oldest go at once, grace or not
    (59, 60_000, 0, 0, 0),  # newest 59 s old (< grace): wait
    (60, 60_000, 0, 0, 3),  # newest exactly the grace period old: go
    (61, 60_000, 0, 5, 3),  # past grace, under max size: the whole group
    (40, 60_000, 0, 0, 0),  # oldest 60 s old, but max delay 0 means none: grace only
    (40, 60_000, 60_000, 0, 3),  # oldest reached the max delay although newest is fresh
    (30, 60_000, 60_000, 0, 0),  # oldest 50 s old: below max delay and grace
]

async def test_aggregation_check_takes_the_whole_group_at_max_size(
    broker: Broker, client: Client, clock: FakeClock, asyncq_queue: str
) -> None:
    members = await add_group_tasks(client, clock, asyncq_queue, "g", 5)
    deadline = clock.now_ms() + 120_000
    assert await broker.aggregation.check(asyncq_queue, "g", "s1", 60_000, 0, 5,
                                          deadline) == 5
    raws = await broker.aggregation.read_set(asyncq_queue, "g", "s1")
    assert [r.id for r in raws] == list(members)
    assert [r.payload for r in raws] == [f"g{i}".encode() for i in range(5)]


async def test_aggregation_check_takes_the_oldest_when_over_max_size(
    broker: Broker, client: Client, clock: FakeClock, asyncq_queue: str
) -> None:
    await add_group_tasks(client, clock, asyncq_queue, "g", 5)
    assert await broker.aggregation.check(asyncq_queue, "g", "s1", 60_000, 0, 3,
                                          clock.now_ms() + 120_000) == 3


@pytest.mark.parametrize(
    ("advance", "grace_ms", "max_delay_ms", "max_size", "taken"), GRACE_CASES)
async def test_aggregation_check_grace_and_max_delay(
    broker: Broker, client: Client, clock: FakeClock, asyncq_queue: str, advance: float,
    grace_ms: int, max_delay_ms: int, max_size: int, taken: int
) -> None:
    await add_group_tasks(client, clock, asyncq_queue, "g", 3, step=10)
    clock.advance(advance)
    got = await broker.aggregation.check(asyncq_queue, "g", "s1", grace_ms, max_delay_ms,
                                         max_size, clock.now_ms() + 120_000)
    assert got == taken


async def test_delete_aggregation_set(
    broker: Broker, client: Client, clock: FakeClock, asyncq_queue: str
) -> None:
    await add_group_tasks(client, clock, asyncq_queue, "g", 2, unique=600)
    assert await broker.aggregation.check(asyncq_queue, "g", "s1", 0, 0, 0,
                                          clock.now_ms() + 1) == 2
    await add_group_tasks(client, clock, asyncq_queue, "g", 1)
    assert await broker.aggregation.check(asyncq_queue, "g", "s2", 0, 0, 0,
                                          clock.now_ms() + 1) == 1

    assert await broker.aggregation.delete_set(asyncq_queue, "g", "s1") == 2


async def test_reclaim_stale_aggregation_sets(
    broker: Broker, client: Client, clock: FakeClock, asyncq_queue: str
) -> None:
    await add_group_tasks(client, clock, asyncq_queue, "g:x", 2)  # ':' in the name
    assert await broker.aggregation.check(asyncq_queue, "g:x", "s1", 0, 0, 0,
                                          clock.now_ms() + 60_000) == 2
    await add_group_tasks(client, clock, asyncq_queue, "h", 1)
    assert await broker.aggregation.check(asyncq_queue, "h", "s2", 0, 0, 0,
                                          clock.now_ms() + 600_000) == 1

    assert await broker.aggregation.reclaim_stale_sets(asyncq_queue) == 0
    clock.advance(60)
    assert await broker.aggregation.reclaim_stale_sets(asyncq_queue) == 1
