"""Scheduler records of wire=asynq: enqueue options written as Go's ``Option.String()`` writes
them (what Go's Inspector parses back), read back from Go's strings, and asyncq's extras riding
in a protobuf field Go's readers skip."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from asyncq._broker import SchedulerEntryRecord
from asyncq._broker._asynq import _schedules as S
from asyncq._broker._asynq._schema import SchedulerEntryPB
from asyncq._model._options import parse_options
from asyncq._scheduler._entry import options_from_json, options_to_json


@pytest.mark.parametrize(("ms", "go"), [
    (0, "0s"), (1, "1ms"), (500, "500ms"), (1000, "1s"), (1500, "1.5s"), (1250, "1.25s"),
    (60_000, "1m0s"), (61_500, "1m1.5s"), (90_000, "1m30s"), (3_600_000, "1h0m0s"),
    (86_400_000, "24h0m0s"), (90_061_001, "25h1m1.001s"), (-2_000, "-2s"),
])
def test_durations_as_go_prints_them(ms: int, go: str) -> None:
    assert S.go_duration(ms) == go
    assert S.parse_go_duration(go) == pytest.approx(ms / 1000)


@pytest.mark.parametrize(("go", "seconds"), [
    ("0", 0.0), ("1h30m", 5400.0), ("1.5h", 5400.0), ("300us", 0.0003), ("2µs", 2e-6),
    ("10ns", 1e-8), ("+3s", 3.0),
])
def test_any_go_duration_parses(go: str, seconds: float) -> None:
    assert S.parse_go_duration(go) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["", "1", "1x", "h", "1h 2m", "-"])
def test_what_is_no_go_duration_is_a_value_error(bad: str) -> None:
    with pytest.raises(ValueError, match="not a Go duration"):
        S.parse_go_duration(bad)


def test_times_as_gos_unix_date() -> None:
    assert S.go_unix_date("2030-01-02T03:04:05+00:00") == "Wed Jan  2 03:04:05 UTC 2030"
    assert S.go_unix_date("2030-11-22T01:00:00+02:00") == "Thu Nov 21 23:00:00 UTC 2030"
    assert S.parse_go_unix_date("Wed Jan  2 03:04:05 UTC 2030") == "2030-01-02T03:04:05+00:00"
    # another zone's abbreviation reads as offset 0, as Go's parser reads one it does not know
    assert S.parse_go_unix_date("Thu Nov 21 23:00:00 JST 2030") == "2030-11-21T23:00:00+00:00"


@pytest.mark.parametrize(("text", "go"), [
    ("default", '"default"'), ('a"b\\c', '"a\\"b\\\\c"'), ("tab\there\n", '"tab\\there\\n"'),
    ("bell\a\x7f\x01", '"bell\\a\\x7f\\x01"'), ("é日本", '"é日本"'),
    ("\u200b", '"\\u200b"'), ("\U000e0001", '"\\U000e0001"'),
])
def test_strings_quoted_as_gos_percent_q(text: str, go: str) -> None:
    assert S.go_quote(text) == go
    assert S.options_from_go([f"Queue({go})"]) == {"queue": text}


def test_every_asyncq_option_as_go_writes_it_and_back() -> None:
    opts = parse_options({
        "queue": "critical", "max_retry": 3, "timeout": timedelta(seconds=90),
        "deadline": datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC),
        "process_at": datetime(2030, 6, 1, tzinfo=UTC), "unique": timedelta(hours=1),
        "task_id": "id-1", "retention": timedelta(days=1), "group": "g1",
        "headers": {"b": "2", "a<&>": "1"}, "unique_key": "k",
    })
    json_form = options_to_json(opts)
    go = S.go_options(json_form)
    assert go == ['Queue("critical")', "MaxRetry(3)", "Timeout(1m30s)",
                  "Deadline(Wed Jan  2 03:04:05 UTC 2030)",
                  "ProcessAt(Sat Jun  1 00:00:00 UTC 2030)",
                  "Unique(1h0m0s)", 'TaskID("id-1")', "Retention(24h0m0s)", 'Group("g1")',
                  'Header(["a\\u003c\\u0026\\u003e","1"])', 'Header(["b","2"])']
    back = S.options_from_go(go)
    assert back == {k: v for k, v in json_form.items() if k != "unique_key"}  # no Go option
    assert options_from_json(back)["deadline"] == datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert S.go_options(options_to_json(parse_options({"process_in": 2.5}))) == \
        ["ProcessIn(2.5s)"]


def test_strings_no_option_matches_are_skipped() -> None:
    assert S.options_from_go(["Weird(", "NoParen", "Nonsense(1)", "MaxRetry(x)",
                              "Queue(unquoted)", 'Header(["only one"])', "Timeout(1h)"]) == \
        {"timeout": 3600.0}


def test_extras_ride_in_a_field_protobuf_readers_skip() -> None:
    entry = SchedulerEntryRecord(id="e1", spec="0 3 * * *", timezone="Asia/Tokyo",
                                 task_type="t", encoding="j", payload=b'{"a":1}',
                                 options={"unique_key": "k"}, next_ms=1_900_000_000_500,
                                 prev_ms=None, scheduler_id="s")
    raw = S.encode_entry(entry)
    pb = SchedulerEntryPB.FromString(raw)  # a reader knowing only asynq's fields
    assert (pb.id, pb.spec, pb.task_type, pb.task_payload, list(pb.enqueue_options)) == (
        "e1", "CRON_TZ=Asia/Tokyo 0 3 * * *", "t", b'{"a":1}', [])
    assert (pb.next_enqueue_time.seconds, pb.next_enqueue_time.nanos) == (1_900_000_000,
                                                                          500_000_000)
    assert pb.prev_enqueue_time.seconds == S.GO_ZERO_TIME_S
    clean = SchedulerEntryPB()
    clean.CopyFrom(pb)
    clean.DiscardUnknownFields()
    assert len(clean.SerializeToString()) < len(raw)  # field 1000 is there, and only extra
    assert S.decode_entry(raw, "s") == entry
    assert S.decode_entry(b"\xff\xff", "s") is None
    assert S.decode_event(b"\xff\xff", "e") is None
