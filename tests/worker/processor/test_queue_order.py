"""Which queue the worker leases from next: strict and weighted priorities (items 11-16)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from asyncq import Client, ServeMux, Task
from asyncq._worker._retry import QueueOrder, normalize_priorities
from asyncq.testing import WorkerFactory

pytestmark = pytest.mark.anyio


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


