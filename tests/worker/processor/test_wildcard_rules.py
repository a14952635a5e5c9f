"""Wildcard queues without Redis: what a pattern matches, how its queues are ordered in a
fetch round, how the worker's queue set follows the registry, and the names refused."""

from __future__ import annotations

from collections import Counter

import pytest

import asyncq
from asyncq import ServeMux, Worker, WorkerConfig
from asyncq._broker._asynq._guarded import GuardedRedisBroker
from asyncq._cli import build_parser
from asyncq._cli._worker_cmd import worker_options
from asyncq._validate import (
    check_own_layout_queue,
    is_queue_pattern,
    literal_queue_spec,
    match_queue_patterns,
    served_queue_name,
    validate_queue_name,
    validate_served_queue,
)
from asyncq._worker._queues import ServedQueues
from asyncq._worker._retry import QueueOrder

URL = "redis://127.0.0.1:1/0"  # never connected to


# ---------------------------------------------------------------- names and patterns


def test_a_star_in_a_queue_name_is_refused_by_asyncqs_own_layout_saying_it_is_a_pattern() -> None:
    with pytest.raises(ValueError, match=r"must not contain '\*'.*pattern.*'\\\*'"):
        check_own_layout_queue("tenant:*")
    # (Go's rules, which every layout shares: Go's layout takes the name)
    assert validate_queue_name("a*b") == asyncq.Task("t", queue="a*b").queue == "a*b"


def test_a_literal_star_is_written_with_a_backslash_among_a_workers_queues() -> None:
    assert (is_queue_pattern("star\\*q"), served_queue_name("star\\*q")) == (False, "star*q")
    assert literal_queue_spec("a*b\\c") == "a\\*b\\\\c"
    assert served_queue_name(literal_queue_spec("a*b\\c")) == "a*b\\c"
    assert is_queue_pattern("star\\**")  # a literal star, then any run
    assert match_queue_patterns(["star\\**"], ["star*q", "starq"]) == {"star\\**": ["star*q"]}
    assert ServedQueues({"star\\*q": 1, "t:*": 1}).exact == ["star*q"]
    assert QueueOrder({"star\\*q": 1}, strict=True)() == ["star*q"]
    assert Counter(q for _ in range(50) for q in QueueOrder(
        {"star\\*q": 1, "b": 1}, strict=False)()) == {"star*q": 50, "b": 50}
    assert WorkerConfig(queues={"star\\*q": 1, "we{ird} x": 2}).queues == {
        "star\\*q": 1, "we{ird} x": 2}


@pytest.mark.anyio
async def test_enqueue_refuses_a_star_in_the_queue_before_reaching_redis() -> None:
    async with asyncq.Client(URL) as client:  # never connects: refused while validating
        with pytest.raises(ValueError, match=r"must not contain '\*'.*pattern"):
            await client.enqueue("t", queue="tenant:*")


@pytest.mark.parametrize("pattern", ["tenant:*", "*", "*:eu", "a*b*c", "t-*-x"])
def test_a_worker_takes_patterns_among_its_queues(pattern: str) -> None:
    assert validate_served_queue(pattern) == pattern
    assert WorkerConfig(queues={pattern: 2, "critical": 6}).queues == {pattern: 2, "critical": 6}


@pytest.mark.parametrize(("pattern", "why"), [
    ("wf:*", "reserved for workflows"), ("", "blank"), ("t\n*", "control characters"),
])
def test_a_pattern_follows_the_queue_name_rules(pattern: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        WorkerConfig(queues={pattern: 1})


def test_a_star_stands_for_any_run_of_characters_colons_included() -> None:
    names = ["tenant:a", "tenant:", "tenant:eu:b", "tenants", "xtenant:a", "critical"]
    assert match_queue_patterns(["tenant:*"], names) == {
        "tenant:*": ["tenant:", "tenant:a", "tenant:eu:b"]}
    assert match_queue_patterns(["*:b"], names) == {"*:b": ["tenant:eu:b"]}
    assert match_queue_patterns(["t*s"], names) == {"t*s": ["tenants"]}
    assert match_queue_patterns(["*"], ["a", "b"]) == {"*": ["a", "b"]}


def test_a_configured_name_wins_over_a_pattern_and_the_first_pattern_over_later_ones() -> None:
    names = ["tenant:vip", "tenant:eu:1", "tenant:us:1"]
    assert match_queue_patterns(["tenant:vip", "tenant:eu:*", "tenant:*"], names) == {
        "tenant:eu:*": ["tenant:eu:1"], "tenant:*": ["tenant:us:1"]}


def test_registered_names_the_layout_refuses_are_served_by_no_pattern() -> None:
    # (asyncq's own layout, a registry edited by hand: a brace breaks its hash tag) ...
    own = ServedQueues({"t*": 1}, GuardedRedisBroker.accepts_queue)
    assert own.add(["t{1}", "t 2", "t*3", "t4"]) == ["t4"]
    # ... while Go's layout serves every name Go accepts
    assert sorted(ServedQueues({"t*": 1}).add(["t{1}", "t 2", "t*3", "t4"])) == [
        "t 2", "t*3", "t4", "t{1}"]


# ---------------------------------------------------------------- the worker's queue set


def test_the_served_queues_follow_what_is_added_and_removed_in_one_shared_list() -> None:
    served = ServedQueues({"critical": 6, "tenant:*": 1})
    names = served.names
    assert served.dynamic and names == ["critical"] and served.exact == ["critical"]
    assert served.add(["tenant:b", "other", "critical", "tenant:a"]) == ["tenant:a", "tenant:b"]
    assert served.add(["tenant:a"]) == []  # already served
    assert names is served.names and names == ["critical", "tenant:a", "tenant:b"]
    assert served.wanted == {"critical", "tenant:a", "tenant:b"}
    assert served.matched == {"tenant:*": ["tenant:a", "tenant:b"]}
    assert served.remove(["tenant:a", "critical"]) == ["tenant:a"]  # a configured name stays
    assert names == ["critical", "tenant:b"] and served.wanted == {"critical", "tenant:b"}
    assert served.add(["tenant:a", "other"]) == ["tenant:a"]  # found again after removal
    assert not ServedQueues({"a": 1}).dynamic


# ---------------------------------------------------------------- fetch order


def test_a_pattern_stands_in_the_order_for_its_queues_in_turn() -> None:
    matched = {"tenant:*": ["tenant:a", "tenant:b", "tenant:c"]}
    order = QueueOrder({"critical": 6, "tenant:*": 1}, strict=True, matched=matched)
    assert order() == ["critical", "tenant:a", "tenant:b", "tenant:c"]
    order.took("tenant:a")  # a gave tasks: the next round of the pattern starts after it
    assert order() == ["critical", "tenant:b", "tenant:c", "tenant:a"]
    order.took("critical")  # (a configured queue moves nothing)
    order.took("tenant:c")
    assert order() == ["critical", "tenant:a", "tenant:b", "tenant:c"]
    matched["tenant:*"][1:1] = ["tenant:aa"]  # found later: takes its turn in name order
    order.took("tenant:a")
    assert order() == ["critical", "tenant:aa", "tenant:b", "tenant:c", "tenant:a"]
    matched["tenant:*"].remove("tenant:a")  # removed: the turn goes on after where it was
    assert order() == ["critical", "tenant:aa", "tenant:b", "tenant:c"]


def test_queues_just_found_come_first_in_their_patterns_next_round_only() -> None:
    matched = {"t:*": ["t:a", "t:b", "t:c", "t:d"]}
    order = QueueOrder({"critical": 6, "t:*": 1}, strict=True, matched=matched)
    order.took("t:a")
    order.found(["t:d", "other", "critical"])  # (only a pattern's queues are concerned)
    assert order() == ["critical", "t:d", "t:b", "t:c", "t:a"]
    assert order() == ["critical", "t:b", "t:c", "t:d", "t:a"]


def test_a_pattern_with_no_queue_yet_leaves_only_the_others() -> None:
    assert QueueOrder({"tenant:*": 1}, strict=False, matched={"tenant:*": []})() == []
    assert QueueOrder({"tenant:*": 1, "a": 1}, strict=True)() == ["a"]


def test_a_patterns_weight_is_shared_among_its_queues_as_one_entry() -> None:
    """Weighted: the pattern comes first as often as a queue of its weight would; within
    it, its queues take turns, so each gets a third of the pattern's first places."""
    matched = {"tenant:*": ["tenant:a", "tenant:b", "tenant:c"]}
    order = QueueOrder({"critical": 3, "tenant:*": 1}, strict=False, matched=matched)
    firsts: Counter[str] = Counter()
    for _ in range(4000):
        first = order()[0]
        firsts[first] += 1
        if first != "critical":
            order.took(first)
    assert 2700 < firsts["critical"] < 3300  # 3/4
    for tenant in matched["tenant:*"]:
        assert 250 < firsts[tenant] < 420, firsts  # 1/4 shared by 3: 1/12 each


def test_without_a_pattern_the_order_is_unchanged() -> None:
    order = QueueOrder({"low": 1, "high": 5}, strict=True)
    assert order() == ["high", "low"]
    order.took("low")
    assert order() == ["high", "low"]


# ---------------------------------------------------------------- the command line


def _config(*flags: str, url: str = URL) -> WorkerConfig:
    args = build_parser().parse_args(["worker", "app:mux", *flags])
    return Worker(url, ServeMux(), **worker_options(args), server_id="s").config


def test_the_worker_command_takes_a_pattern_and_the_scan_interval() -> None:
    config = _config("-q", "tenant:*=1", "--queue", "critical=6", "--queue-scan-interval", "2")
    assert config.queues == {"tenant:*": 1, "critical": 6}
    assert config.queue_scan_interval == 2
    assert _config("-q", "eu:*").queues == {"eu:*": 1}
    with pytest.raises(ValueError, match="reserved for workflows"):
        _config("-q", "wf:*=1")
    assert _config("-q", "we{ird} x=1", "-q", "star\\*q=2", url=URL + "?wire=asynq").queues == {
        "we{ird} x": 1, "star\\*q": 2}
    with pytest.raises(ValueError, match="in asyncq's own layout"):  # (refused by its broker)
        _config("-q", "we{ird} x=1")
    with pytest.raises(ValueError, match="queue_scan_interval must be > 0"):
        _config("-q", "t:*", "--queue-scan-interval", "0")
