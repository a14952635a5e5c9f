"""The Inspector applies the handler options workers published to a queue they serve through a
pattern ("tenant:*") as to a queue they list by name."""

from __future__ import annotations

from datetime import UTC, datetime

from asyncq._broker import PublishedRules, ServerInfo


def server(sid: str, queues: dict[str, int], options: dict[str, dict[str, int]]) -> ServerInfo:
    return ServerInfo(id=sid, host="h", pid=1, concurrency=1, queues=queues,
                      strict_priority=False, status="active", started=datetime.now(UTC),
                      task_options=options)


def test_a_queue_matched_by_a_pattern_gets_the_published_options() -> None:
    rules = PublishedRules([server("a", {"tenant:*": 1}, {"report": {"max_retry": 2}}),
                            server("b", {"critical": 1}, {"report": {"max_retry": 9}})])
    found = rules("tenant:eu:7", "report")
    assert found is not None and found.max_retry == 2
    exact = rules("critical", "report")
    assert exact is not None and exact.max_retry == 9
    assert rules("tenants", "report") is None  # the pattern needs its ':' too
    assert rules("tenant:eu:7", "other") is None
