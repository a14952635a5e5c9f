"""The key schema of wire=asynq, tied to the names Go asynq writes (internal/base/base.go)."""

from __future__ import annotations

import hashlib

from asyncq._broker._asynq import _keys as K


def test_per_queue_keys_are_asynqs() -> None:
    qk = K.queue_keys("critical")
    assert [qk.task("abc"), qk.pending, qk.active, qk.lease, qk.scheduled, qk.retry,
            qk.archived, qk.completed, qk.paused, qk.processed, qk.failed,
            qk.processed_day("2026-01-02"), qk.failed_day("2026-01-02"), qk.group("g1"),
            qk.aggregation_set("g1", "set-1"), qk.groups, qk.aggregation_sets] == [
        "asynq:{critical}:t:abc", "asynq:{critical}:pending", "asynq:{critical}:active",
        "asynq:{critical}:lease", "asynq:{critical}:scheduled", "asynq:{critical}:retry",
        "asynq:{critical}:archived", "asynq:{critical}:completed", "asynq:{critical}:paused",
        "asynq:{critical}:processed", "asynq:{critical}:failed",
        "asynq:{critical}:processed:2026-01-02", "asynq:{critical}:failed:2026-01-02",
        "asynq:{critical}:g:g1", "asynq:{critical}:g:g1:set-1", "asynq:{critical}:groups",
        "asynq:{critical}:aggregation_sets"]


def test_global_keys_are_asynqs() -> None:
    assert (K.QUEUES, K.SERVERS, K.WORKERS, K.SCHEDULERS, K.CANCEL_CHANNEL) == (
        "asynq:queues", "asynq:servers", "asynq:workers", "asynq:schedulers", "asynq:cancel")
    assert K.server_key("host", 42, "uuid") == "asynq:servers:{host:42:uuid}"
    assert K.workers_key("host", 42, "uuid") == "asynq:workers:{host:42:uuid}"
    assert K.scheduler_entries_key("s1") == "asynq:schedulers:{s1}"
    assert K.scheduler_history_key("e1") == "asynq:scheduler_history:e1"


def test_unique_locks_use_asynqs_md5_scheme() -> None:
    payload = b'{"user": 42}'
    digest = hashlib.md5(payload).hexdigest()
    go_name = f"asynq:{{q}}:unique:email:send:{digest}"
    assert K.queue_keys("q").unique("email:send", digest) == go_name
    # the lock of an asyncq task with the same bytes payload is exactly Go's
    assert K.lock_key("q", "email:send", payload, None) == go_name
    # no payload at all: the digest is empty, as Go's for a nil payload
    assert K.lock_key("q", "t", None, None) == "asynq:{q}:unique:t:"
    assert K.lock_key("q", "t", None, "order-7") == "asynq:{q}:unique:k:order-7"


def test_day_string_is_utc() -> None:
    assert K.day_string(1_767_225_599_999) == "2025-12-31"
    assert K.day_string(1_767_225_600_000) == "2026-01-01"
