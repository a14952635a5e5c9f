"""Task, TaskInfo, TaskState, options, messages and keys: unit tests and property tests.

The property tests (hypothesis) push payloads and options through a real enqueue and read the
task hash back, so they cover encoding, the Lua scripts and decoding together.
"""

from __future__ import annotations

import dataclasses
import hashlib
import string
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from redis.asyncio import Redis

from asyncq import AsyncqError, Client, DecodeError, FakeClock, Task, TaskInfo, TaskState
from asyncq._broker import Outcome, RedisBroker
from asyncq._broker import _keys as K
from asyncq._clock import datetime_to_ms, ms_to_datetime
from asyncq._defaults import DEFAULT_MAX_RETRY, DEFAULT_TIMEOUT_MS, RESULT_RETENTION
from asyncq._model._info import STORED_STATES, task_info
from asyncq._model._message import NO_TIMEOUT, TaskMessage, decode_message
from asyncq._model._options import UNSET, ParsedOptions, parse_options, resolve
from asyncq._model._payload import decode_json, encode_payload
from asyncq._model._rules import HandlerRules
from asyncq._model._task import task_for_handler
from asyncq._validate import to_ms
from tests.helpers.dataplane import lmembers, msg_doc, task_hash

PROPERTY = settings(max_examples=50, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow,
                                           HealthCheck.data_too_large])
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


# ------------------------------------------------------------------ TaskState


def test_task_states_are_the_names_stored_in_redis() -> None:
    assert {s.value for s in STORED_STATES} == {
        "pending", "active", "scheduled", "retry", "archived", "completed", "aggregating"}
    # "deleted" is only reported (events, Client.wait), never stored; a "waiting" workflow
    # step is stored in no list of its queue (its workflow lists it).
    assert set(TaskState) - set(STORED_STATES) == {TaskState.DELETED, TaskState.WAITING}
    assert TaskState("retry") is TaskState.RETRY
    with pytest.raises(ValueError):
        TaskState("done")


# ------------------------------------------------------------------ Task


def test_task_defaults() -> None:
    task = Task("email:send")
    assert task.type == "email:send"
    assert task.id is None
    assert task.queue == "default"
    assert task.max_retry == 25
    assert task.headers == {}
    assert task.retried == 0
    assert task.deadline is None
    assert task.payload == b""
    assert task.encoding == "n"
    assert task.json() is None
    assert task.options == ParsedOptions()
    assert "email:send" in repr(task)


def test_task_exposes_its_options() -> None:
    task = Task("t", {"a": 1}, queue="q1", max_retry=-3, task_id="id-1", headers={"k": "v"})
    assert (task.queue, task.max_retry, task.id, task.headers) == ("q1", 0, "id-1", {"k": "v"})
    assert task.options.queue == "q1"
    assert task.options.timeout_ms is UNSET


@pytest.mark.parametrize(
    ("payload", "raw", "enc"),
    [
        (b"\x00\x01", b"\x00\x01", "b"),
        (bytearray(b"ab"), b"ab", "b"),
        (memoryview(b"mv"), b"mv", "b"),
        (b"", b"", "b"),
        (None, b"", "n"),
        ({"a": 1}, b'{"a":1}', "j"),
        ([1, "x", None], b'[1,"x",null]', "j"),
        ("s", b'"s"', "j"),
        (0, b"0", "j"),
        (False, b"false", "j"),
        (2**64 - 1, b"18446744073709551615", "j"),
    ],
)
def test_payload_encoding(payload: Any, raw: bytes, enc: str) -> None:
    task = Task("t", payload)
    assert task.payload == raw
    assert task.encoding == enc
    assert encode_payload(payload) == (raw, enc)


@dataclasses.dataclass
class Point:
    x: int
    y: float
    label: str
    tags: list[str]
    extra: dict[str, int] | None = None


def test_dataclass_payload_is_json() -> None:
    task = Task("t", Point(1, 2.5, "p", ["a"], {"k": 3}))
    assert task.encoding == "j"
    assert task.json() == {"x": 1, "y": 2.5, "label": "p", "tags": ["a"], "extra": {"k": 3}}


@pytest.mark.parametrize("payload", [object(), {1, 2}, 2**64, "\ud800", {"k": object()}])
def test_unencodable_payload_is_a_value_error(payload: Any) -> None:
    with pytest.raises(ValueError, match="cannot be encoded as JSON"):
        Task("t", payload)


def test_bytes_payload_json_decodes_the_text() -> None:
    assert Task("t", b'{"a": [1]}').json() == {"a": [1]}
    with pytest.raises(DecodeError):
        Task("t", b"\xff not json").json()
    assert decode_json(b"", "n") is None


@pytest.mark.parametrize("bad", ["", "  ", "\t\n"])
def test_blank_task_type_is_rejected(bad: str) -> None:
    with pytest.raises(ValueError, match="blank"):
        Task(bad)


def test_non_str_task_type_is_rejected() -> None:
    with pytest.raises(TypeError):
        Task(b"t")  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_write_result_needs_a_running_handler() -> None:
    with pytest.raises(RuntimeError, match="handler"):
        await Task("t").write_result(b"x")


@pytest.mark.anyio
async def test_write_result_encodes_like_payloads() -> None:
    written: list[tuple[bytes, str]] = []

    async def writer(data: bytes, encoding: str) -> int:
        written.append((data, encoding))
        return len(data)

    msg = TaskMessage(id="i", type="t", queue="q")
    task = task_for_handler(msg, b"", 0, 0, writer)
    assert await task.write_result(b"raw") == 3
    assert await task.write_result({"ok": True}) == len(b'{"ok":true}')
    assert written == [(b"raw", "b"), (b'{"ok":true}', "j")]  # the encoding is stored too


def test_task_from_message_carries_the_stored_fields() -> None:
    msg = TaskMessage(id="i", type="t", queue="q", max_retry=4, headers={"h": "v"}, enc="j")
    task = task_for_handler(msg, b'{"n":1}', 2, 1_700_000_000_000, None)
    assert (task.id, task.type, task.queue, task.max_retry, task.retried) == (
        "i", "t", "q", 4, 2)
    assert task.headers == {"h": "v"}
    assert task.json() == {"n": 1}
    assert task.deadline == datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    assert task_for_handler(msg, b"{}", 0, 0, None).deadline is None


# ------------------------------------------------------------------ TaskInfo


def test_task_info_from_message() -> None:
    msg = TaskMessage(id="i", type="t", queue="q", max_retry=3, timeout_ms=1500,
                      deadline_ms=1_700_000_000_000, retention_ms=60_000, group="g",
                      headers={"a": "b"}, enc="j")
    info = task_info(msg, b"[1]", TaskState.RETRY, retried=2, last_error="boom",
                     last_failed_at_ms=1_700_000_000_500, next_process_at_ms=1_700_000_001_000,
                     completed_at_ms=0, result=b"r")
    assert info.state is TaskState.RETRY
    assert (info.retried, info.max_retry, info.last_error) == (2, 3, "boom")
    assert info.timeout == timedelta(milliseconds=1500)
    assert info.deadline == ms_to_datetime(1_700_000_000_000)
    assert info.last_failed_at == ms_to_datetime(1_700_000_000_500)
    assert info.next_process_at == ms_to_datetime(1_700_000_001_000)
    assert info.retention == timedelta(minutes=1)
    assert (info.group, info.completed_at, info.result) == ("g", None, b"r")
    assert info.json() == [1]
    bare = task_info(TaskMessage(id="i", type="t", queue="q"), b"", TaskState.PENDING,
                     last_error="")
    assert (bare.last_error, bare.deadline, bare.group) == (None, None, None)
    assert (bare.last_failed_at, bare.next_process_at, bare.is_orphaned) == (None, None, False)
    # What the producer left unset shows what will apply: the defaults...
    assert (bare.max_retry, bare.timeout, bare.retention) == (
        DEFAULT_MAX_RETRY, timedelta(milliseconds=DEFAULT_TIMEOUT_MS),
        timedelta(seconds=RESULT_RETENTION))
    # ... or the handler's registration; an option the producer set wins over it.
    rules = HandlerRules(max_retry=1, timeout_ms=5000, retention_ms=0)
    registered = task_info(TaskMessage(id="i", type="t", queue="q"), b"", TaskState.PENDING,
                           rules=rules)
    assert (registered.max_retry, registered.timeout, registered.retention) == (
        1, timedelta(seconds=5), timedelta(0))
    assert task_info(msg, b"", TaskState.PENDING, rules=rules).max_retry == 3
    # A deadline alone limits a run: no default timeout then.
    assert task_info(TaskMessage(id="i", type="t", queue="q", deadline_ms=5), b"",
                     TaskState.PENDING).timeout is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.retried = 5  # type: ignore[misc]


# ------------------------------------------------------------------ options


def test_to_ms() -> None:
    assert to_ms(1, "x") == 1000
    assert to_ms(0.0015, "x") == 2
    assert to_ms(timedelta(minutes=2), "x") == 120_000
    assert to_ms(0, "x") == 0
    with pytest.raises(ValueError, match="> 0"):
        to_ms(0, "x", allow_zero=False)
    for bad in (-0.001, float("nan"), float("inf"), float("-inf"), 1e16):
        with pytest.raises(ValueError):
            to_ms(bad, "x")
    for wrong in ("1", None, True, [1]):
        with pytest.raises(TypeError):
            to_ms(wrong, "x")


def test_parse_options_validates_and_normalises() -> None:
    at = datetime(2030, 1, 1, tzinfo=UTC)
    opts = parse_options({
        "queue": "q", "max_retry": -1, "timeout": 2, "deadline": at,
        "process_at": at + timedelta(hours=1), "unique": 60, "unique_key": "k",
        "task_id": "id", "retention": timedelta(days=1), "group": "g", "headers": {"h": "v"},
    })
    assert opts == ParsedOptions(
        queue="q", max_retry=0, timeout_ms=2000, deadline_ms=datetime_to_ms(at),
        process_at_ms=datetime_to_ms(at) + 3_600_000, unique_ms=60_000, unique_key="k",
        task_id="id", retention_ms=86_400_000, group="g", headers={"h": "v"})
    # None means "not given", so optional values can be forwarded as they are.
    assert parse_options({"queue": None, "timeout": None}) == ParsedOptions()


def test_merged_options_last_wins_and_headers_merge() -> None:
    task_opts = parse_options({"queue": "a", "max_retry": 2, "headers": {"x": "1", "y": "1"},
                               "process_in": 10})
    call_opts = parse_options({"max_retry": 10, "headers": {"y": "2"}, "process_at":
                               datetime(2030, 1, 1, tzinfo=UTC)})
    merged = task_opts.merged(call_opts)
    assert merged.queue == "a"
    assert merged.max_retry == 10
    assert merged.headers == {"x": "1", "y": "2"}
    assert merged.process_in_ms is UNSET  # process_at and process_in are one option
    assert merged.process_at_ms == datetime_to_ms(datetime(2030, 1, 1, tzinfo=UTC))
    back = merged.merged(parse_options({"process_in": 5}))
    assert (back.process_at_ms, back.process_in_ms) == (UNSET, 5000)
    assert task_opts.merged(ParsedOptions()) == task_opts


def test_resolve_defaults() -> None:
    r = resolve(ParsedOptions(), 1_000)
    # What applies when the producer says nothing is the worker's to decide (its handler's
    # registration, else the defaults): nothing is written for it.
    assert (r.queue, r.max_retry, r.timeout_ms, r.deadline_ms) == ("default", None, 0, 0)
    assert (r.process_at_ms, r.unique_ms, r.unique_key, r.task_id) == (0, 0, None, None)
    assert (r.retention_ms, r.group, r.headers) == (None, "", {})
    explicit = resolve(parse_options({"max_retry": 0, "retention": 0}), 0)
    assert (explicit.max_retry, explicit.retention_ms) == (0, 0)
    # An explicit timeout of 0 with no deadline means no limit (as documented).
    assert resolve(parse_options({"timeout": 0}), 0).timeout_ms == NO_TIMEOUT
    deadline_only = resolve(parse_options({"deadline": datetime(2030, 1, 1, tzinfo=UTC)}), 0)
    assert deadline_only.timeout_ms == 0
    assert resolve(parse_options({"process_in": 5}), 1_000).process_at_ms == 6_000
    with pytest.raises(ValueError, match="unique_key needs"):
        resolve(parse_options({"unique_key": "k"}), 0)


# ------------------------------------------------------------------ message encoding


def test_message_round_trip() -> None:
    full = TaskMessage(id="i", type="t", queue="q", max_retry=0, timeout_ms=1, deadline_ms=2,
                       retention_ms=3, unique_key="u", group="g", headers={"h": "v"}, enc="j",
                       enqueued_at_ms=4)
    assert decode_message(full.encode()) == full
    bare = TaskMessage(id="i", type="t", queue="q")
    assert decode_message(bare.encode()) == bare
    assert set(orjson.loads(bare.encode())) == {"id", "type", "queue", "enc", "enqueued_at"}
    # An option set to 0 is written (it was given); one not given is not.
    zeros = TaskMessage(id="i", type="t", queue="q", max_retry=0, retention_ms=0)
    assert decode_message(zeros.encode()) == zeros
    assert {"max_retry", "retention"} <= set(orjson.loads(zeros.encode()))


@pytest.mark.parametrize(
    "raw",
    [
        None,
        b"not json",
        b"[1, 2]",
        b'{"type": "t", "queue": "q"}',
        b'{"id": "i", "type": "", "queue": "q"}',
        b'{"id": 1, "type": "t", "queue": "q"}',
        b'{"id": "i", "type": "t", "queue": "q", "max_retry": "many"}',
        b'{"id": "i", "type": "t", "queue": "q", "enc": "pickle"}',
        b'{"id": "i", "type": "t", "queue": "q", "headers": {"k": 1}}',
        b'{"id": "i", "type": "t", "queue": "q", "headers": ["k"]}',
    ],
)
def test_decode_message_rejects_bad_documents(raw: bytes | None) -> None:
    with pytest.raises(DecodeError):
        decode_message(raw)
    assert issubclass(DecodeError, AsyncqError)


# ------------------------------------------------------------------ keys


def test_queue_keys_share_one_hash_tag() -> None:
    qk = K.queue_keys("emails")
    names = [qk.pending, qk.active, qk.lease, qk.scheduled, qk.retry, qk.archived,
             qk.completed, qk.paused, qk.waiters, qk.processed, qk.failed, qk.groups,
             qk.aggregation_sets, qk.task("id"), qk.group("g"), qk.processed_day("2030-01-01"),
             qk.unique("t", b"p"), qk.unique("t", None, "k")]
    for name in names:
        assert name.startswith("asyncq:{emails}:")
        assert name[name.index("{") + 1:name.index("}")] == "emails"
    assert len(set(names)) == len(names)
    assert qk.task("id") == "asyncq:{emails}:t:id"
    assert qk.state_key("retry") == qk.retry


def test_unique_key_names() -> None:
    qk = K.queue_keys("q")
    assert qk.unique("t", None) == "asyncq:{q}:unique:t:t:"
    assert qk.unique("t", b"") == f"asyncq:{{q}}:unique:t:t:{hashlib.md5(b'').hexdigest()}"
    assert qk.unique("t", b"p") == f"asyncq:{{q}}:unique:t:t:{hashlib.md5(b'p').hexdigest()}"
    assert qk.unique("t", b"p", "mine") == "asyncq:{q}:unique:k:mine"


@pytest.mark.parametrize("name", ["default", "Q", "a:b", "a.b-c_d", "ünïcode", "x" * 200])
def test_valid_queue_names(name: str) -> None:
    assert K.validate_queue_name(name) == name


# (braces and spaces are Go's rules too: asyncq's own layout refuses them at its broker)
@pytest.mark.parametrize("name", ["", " ", "a\nb", "\u00a0", "wf:x"])
def test_invalid_queue_names(name: str) -> None:
    with pytest.raises(ValueError):
        K.validate_queue_name(name)


def test_day_string_is_utc() -> None:
    late = datetime(2030, 1, 1, 23, 30, tzinfo=timezone(timedelta(hours=-5)))  # 04:30 UTC next day
    assert K.day_string(datetime_to_ms(late)) == "2030-01-02"
    assert K.day_string(0) == "1970-01-01"


# ------------------------------------------------------------------ clock


def test_fake_clock() -> None:
    start = datetime(2030, 1, 1, tzinfo=UTC)
    clock = FakeClock(start=start)
    assert clock.now_ms() == datetime_to_ms(start)
    clock.advance(1.5)
    assert clock.now_ms() == datetime_to_ms(start) + 1500
    clock.set(start + timedelta(days=1))
    assert ms_to_datetime(clock.now_ms()) == start + timedelta(days=1)
    assert FakeClock(start=10).now_ms() == 10_000
    with pytest.raises(ValueError):
        FakeClock(start=datetime(2030, 1, 1))


# ------------------------------------------------------------------ properties (real Redis)


async def _roundtrip(redis: Redis, queue: str, payload: object) -> tuple[TaskInfo, bytes]:
    """Enqueue ``payload``, check the hash and a dequeue agree, then delete the task."""
    client = Client(redis)  # the caller's connection: not closed by the client
    info = await client.enqueue("prop", payload, queue=queue)
    stored = (await task_hash(redis, queue, info.id))["payload"]
    broker = client.broker
    assert isinstance(broker, RedisBroker)
    raws, _ = await broker.dequeue(queue, 1, "prop-owner", 30_000, 1_000)
    assert [r.id for r in raws] == [info.id]
    msg = raws[0].msg
    handler_task = task_for_handler(msg, raws[0].payload, raws[0].retried, 0, None)
    assert handler_task.payload == stored
    assert await broker.finish([Outcome("done", queue, info.id)], "prop-owner") == [True]
    return info, stored


BIG_BLOBS = st.builds(lambda chunk, n: chunk * n, st.binary(min_size=1, max_size=64),
                      st.integers(min_value=1, max_value=100_000))


@pytest.mark.anyio
@PROPERTY
@given(data=st.binary(max_size=4096) | BIG_BLOBS)
@example(data=bytes(range(256)) * 20_000)  # 5 MB of every byte value
@example(data=b"")
async def test_bytes_payload_round_trip(redis_client: Redis, asyncq_queue: str,
                                        data: bytes) -> None:
    info, stored = await _roundtrip(redis_client, asyncq_queue, data)
    assert stored == data
    assert info.payload == data
    assert info.encoding == "b"


JSON_SCALARS = (st.none() | st.booleans() | INT64
                | st.floats(allow_nan=False, allow_infinity=False) | st.text())
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda children: st.lists(children, max_size=8)
    | st.dictionaries(st.text(max_size=20), children, max_size=8),
    max_leaves=40,
)


@pytest.mark.anyio
@PROPERTY
@given(value=JSON_VALUES)
@example(value={"big": 2**63 - 1, "small": -(2**63), "f": 1e308, "tiny": 5e-324})
@example(value="x" * 3_000_000)
async def test_json_payload_round_trip(redis_client: Redis, asyncq_queue: str,
                                       value: Any) -> None:
    info, stored = await _roundtrip(redis_client, asyncq_queue, value)
    # None is "no payload" (stored empty); everything else is stored as JSON text.
    assert (stored == b"") if value is None else (orjson.loads(stored) == value)
    assert info.json() == value
    assert info.encoding == ("n" if value is None else "j")


POINTS = st.builds(
    Point, x=INT64, y=st.floats(allow_nan=False, allow_infinity=False), label=st.text(),
    tags=st.lists(st.text(max_size=10), max_size=5),
    extra=st.none() | st.dictionaries(st.text(max_size=10), INT64, max_size=5))


@pytest.mark.anyio
@PROPERTY
@given(point=POINTS)
async def test_dataclass_payload_round_trip(redis_client: Redis, asyncq_queue: str,
                                            point: Point) -> None:
    info, stored = await _roundtrip(redis_client, asyncq_queue, point)
    assert orjson.loads(stored) == dataclasses.asdict(point)
    assert Point(**info.json()) == point


QUEUE_SUFFIX = st.text(alphabet=string.ascii_letters + string.digits + "-_:.", min_size=1,
                       max_size=30)
MILLIS = st.integers(min_value=1, max_value=10**12)
DURATIONS = MILLIS.flatmap(lambda ms: st.sampled_from(
    [(ms / 1000, ms), (timedelta(milliseconds=ms), ms)]))
HEADERS = st.dictionaries(st.text(max_size=20), st.text(max_size=50), max_size=8)


@pytest.mark.anyio
@PROPERTY
@given(max_retry=st.integers(min_value=-1000, max_value=2**63 - 1),
       timeout=DURATIONS, retention=st.none() | DURATIONS, headers=HEADERS,
       suffix=QUEUE_SUFFIX)
async def test_options_round_trip(
    redis_client: Redis, asyncq_queue: str, max_retry: int, timeout: tuple[Any, int],
    retention: tuple[Any, int] | None, headers: dict[str, str], suffix: str,
) -> None:
    queue = f"{asyncq_queue}-{suffix}"
    info = await Client(redis_client).enqueue(
        "prop", queue=queue, max_retry=max_retry, timeout=timeout[0],
        retention=None if retention is None else retention[0], headers=headers)
    retention_ms = RESULT_RETENTION * 1000 if retention is None else retention[1]
    assert info.queue == queue
    assert info.max_retry == max(0, max_retry)
    assert info.timeout == timedelta(milliseconds=timeout[1])
    assert info.retention == timedelta(milliseconds=retention_ms)
    assert info.headers == headers
    fields = await task_hash(redis_client, queue, info.id)
    doc = msg_doc(fields)
    assert doc["queue"] == queue
    assert doc["max_retry"] == max(0, max_retry)
    assert doc["timeout"] == timeout[1]
    assert doc.get("retention") == (None if retention is None else retention_ms)
    assert doc.get("headers", {}) == headers
    assert decode_message(fields["msg"]).headers == headers
    assert (await lmembers(redis_client, K.queue_keys(queue).pending))[0] == info.id


OFFSETS = st.integers(min_value=-23 * 60, max_value=23 * 60).map(
    lambda m: timezone(timedelta(minutes=m)))


@pytest.mark.anyio
@PROPERTY
@given(when=st.datetimes(min_value=datetime(2001, 1, 1), max_value=datetime(2200, 1, 1),
                         timezones=OFFSETS))
async def test_deadline_and_process_at_round_trip(redis_client: Redis, asyncq_queue: str,
                                                  when: datetime) -> None:
    clock = FakeClock(start=datetime(2000, 6, 1, tzinfo=UTC))  # every `when` is in the future
    client = Client(redis_client, clock=clock)
    info = await client.enqueue("prop", queue=asyncq_queue, deadline=when, process_at=when)
    expected_ms = round(when.timestamp() * 1000)
    assert info.state is TaskState.SCHEDULED
    assert abs(info.deadline - when) <= timedelta(microseconds=500)  # type: ignore[operator]
    assert info.next_process_at == info.deadline
    doc = msg_doc(await task_hash(redis_client, asyncq_queue, info.id))
    assert doc["deadline"] == expected_ms
    score = await redis_client.zscore(K.queue_keys(asyncq_queue).scheduled, info.id)
    assert score == expected_ms
