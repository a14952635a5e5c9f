"""One rule for every setting: durations (seconds or timedelta) are converted the same way by the
enqueue options, WorkerConfig and ConnectionOptions, and the CLI shares the Python API's
defaults."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from asyncq import ConnectionOptions, FakeClock, ServeMux, Worker, WorkerConfig
from asyncq._cli import build_parser
from asyncq._cli._worker_cmd import worker_options
from asyncq._clock import datetime_to_ms
from asyncq._validate import MAX_DURATION_MS, field_kinds, to_int, to_ms, to_seconds

BAD_DURATIONS = [float("nan"), float("inf"), float("-inf"), True, False, -1, -0.5,
                 timedelta(seconds=-1), "5", 10**400]


def duration_fields(cls: type) -> list[str]:
    names = [name for name, kind in field_kinds(cls).items() if kind.base is float]
    assert names
    return names


def test_durations_are_seconds_or_timedeltas_as_float_seconds() -> None:
    assert to_seconds(2, "x") == 2.0
    assert to_seconds(0.25, "x") == 0.25
    assert to_seconds(timedelta(minutes=1, milliseconds=500), "x") == 60.5
    assert to_seconds(0, "x") == 0.0
    assert to_seconds(None, "x", allow_none=True) is None
    assert to_ms(timedelta(days=1), "x") == 86_400_000
    assert to_ms(MAX_DURATION_MS / 1000, "x") == MAX_DURATION_MS
    with pytest.raises(ValueError, match="x must be > 0, got 0"):
        to_seconds(0, "x", allow_zero=False)
    with pytest.raises(ValueError, match="at most 10000 years"):
        to_seconds(MAX_DURATION_MS / 1000 + 1, "x")
    with pytest.raises(TypeError, match="or None"):
        to_seconds("1", "x", allow_none=True)


@pytest.mark.parametrize("value", BAD_DURATIONS, ids=repr)
def test_every_bad_duration_is_refused_naming_the_setting(value: object) -> None:
    with pytest.raises((TypeError, ValueError), match=r"^my_timeout must be"):
        to_seconds(value, "my_timeout")
    with pytest.raises((TypeError, ValueError), match=r"^my_timeout must be"):
        to_ms(value, "my_timeout")


def test_non_finite_durations_are_value_errors_and_bools_type_errors() -> None:
    for value in (float("nan"), float("inf"), float("-inf")):
        with pytest.raises(ValueError, match="finite number of seconds"):
            to_seconds(value, "x")
    with pytest.raises(TypeError, match="seconds"):
        to_seconds(True, "x")


def test_counts_are_ints_not_bools() -> None:
    assert to_int(3, "n", minimum=1) == 3
    assert to_int(None, "n", allow_none=True) is None
    for bad in (0, True, 1.0, "1", None):
        with pytest.raises(ValueError, match="n must be an int >= 1"):
            to_int(bad, "n", minimum=1)


@pytest.mark.parametrize("name", duration_fields(WorkerConfig))
@pytest.mark.parametrize("value", [float("nan"), float("inf"), True, -1], ids=repr)
def test_worker_config_refuses_bad_durations(name: str, value: object) -> None:
    with pytest.raises((TypeError, ValueError), match=name):
        WorkerConfig(**{name: value})
    with pytest.raises((TypeError, ValueError), match=name):
        Worker("redis://127.0.0.1:1/0", ServeMux(), **{name: value})


@pytest.mark.parametrize("name", duration_fields(ConnectionOptions))
@pytest.mark.parametrize("value", [float("nan"), float("inf"), True, -1], ids=repr)
def test_connection_options_refuse_bad_durations(name: str, value: object) -> None:
    with pytest.raises(ValueError, match=name):
        ConnectionOptions(**{name: value})


def test_both_take_timedeltas_and_store_float_seconds() -> None:
    config = WorkerConfig(shutdown_timeout=timedelta(seconds=3), cancel_grace=1)
    assert (config.shutdown_timeout, config.cancel_grace) == (3.0, 1.0)
    assert isinstance(config.cancel_grace, float)
    opts = ConnectionOptions(socket_timeout=timedelta(milliseconds=1500), health_check_interval=0)
    assert (opts.socket_timeout, opts.health_check_interval) == (1.5, 0.0)


def test_worker_config_counts_and_flags_are_validated() -> None:
    for name in ("concurrency", "dequeue_batch", "janitor_batch"):
        with pytest.raises(ValueError, match=f"{name} must be an int >= 1"):
            WorkerConfig(**{name: 0})
    with pytest.raises(ValueError, match="group_max_size must be an int >= 0"):
        WorkerConfig(group_max_size=True)
    with pytest.raises(TypeError, match="strict_priority must be a bool"):
        WorkerConfig(strict_priority="yes")


def test_heartbeat_interval_follows_the_lease_unless_given() -> None:
    assert WorkerConfig().heartbeat_interval == 5.0
    assert WorkerConfig(lease_duration=3).heartbeat_interval == 1.0
    assert WorkerConfig(lease_duration=60).heartbeat_interval == 5.0
    assert WorkerConfig(lease_duration=3, heartbeat_interval=1.5).heartbeat_interval == 1.5
    assert Worker("redis://127.0.0.1:1/0", ServeMux(), lease_duration=3).config.lease_ms == 3000
    assert WorkerConfig(lease_duration=8.2).lease_ms == 8200  # 8.2 * 1000 is 8199.999...
    with pytest.raises(ValueError, match="at most half of lease_duration"):
        WorkerConfig(lease_duration=3, heartbeat_interval=2)
    with pytest.raises(ValueError, match="heartbeat_interval must be > 0"):
        WorkerConfig(heartbeat_interval=0)


def cli_config(*flags: str) -> WorkerConfig:
    args = build_parser().parse_args(["worker", "app:mux", *flags])
    return WorkerConfig(**worker_options(args), server_id="s")


def test_the_worker_command_has_the_python_api_defaults() -> None:
    assert cli_config() == WorkerConfig(server_id="s")
    assert cli_config("--lease-duration", "3") == WorkerConfig(lease_duration=3, server_id="s")
    config = cli_config("-c", "4", "--strict", "-q", "a=2", "-q", "b", "--shutdown-timeout", "1",
                        "--lease-duration", "10", "--heartbeat-interval", "2")
    assert (config.concurrency, config.strict_priority, config.queues) == (
        4, True, {"a": 2, "b": 1})
    assert (config.shutdown_timeout, config.lease_duration, config.heartbeat_interval) == (
        1.0, 10.0, 2.0)


@pytest.mark.parametrize("text", ["nan", "inf", "-5", "1e20"])
def test_the_enqueue_command_refuses_bad_durations_before_connecting(
    text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["task", "enqueue", "-t", "x", "--timeout", text])
    assert exit_.value.code == 2
    assert f"invalid duration {text!r}: duration must be" in capsys.readouterr().err


def test_the_enqueue_command_reads_units() -> None:
    args = build_parser().parse_args(["task", "enqueue", "-t", "x", "--timeout", "1h30m",
                                      "--process-in", "250ms", "--retention", "2d"])
    assert (args.timeout, args.process_in, args.retention) == (5400.0, 0.25, 172_800.0)


def test_datetimes_become_the_exact_milliseconds() -> None:
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    # Times where float seconds times 1000 falls just below the exact millisecond.
    for when in (datetime(2039, 6, 12, 10, 34, 30, 265000, tzinfo=UTC),
                 datetime(2108, 8, 4, 20, 35, 54, 407000, tzinfo=UTC)):
        exact = (when - epoch) // timedelta(milliseconds=1)
        assert datetime_to_ms(when) == exact
        assert FakeClock(when).now_ms() == exact
