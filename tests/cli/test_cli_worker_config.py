"""``asyncq worker`` checks its target and can build every worker: a typed task, a web app or
a function of the wrong arity is refused saying what to pass instead; every WorkerConfig
setting is a flag named as its field or comes from ``--config`` / a Worker target, and the
flags given override those."""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import sys
from pathlib import Path

import anyio
import pytest

from asyncq import Client, Inspector, TaskNotFoundError, WorkerConfig
from asyncq import _defaults as D
from asyncq._cli import build_parser
from asyncq._cli._worker_cmd import CONFIG_ONLY, RENAMED, with_flags, worker_options
from asyncq.testing import wait_until
from tests.helpers.cli import Ran, err, run_main
from tests.helpers.processes import ROOT, spawn, worker_process

pytestmark = pytest.mark.anyio

APP = "tests.apps.targets"
NOWHERE = "redis://127.0.0.1:1/0"  # never reached: the target is refused first


def run_cli(*args: str) -> Ran:
    """``asyncq worker ARGS`` in-process, ASYNCQ_REDIS_URL pointing nowhere."""
    return run_main(["worker", *args], env={"ASYNCQ_REDIS_URL": NOWHERE}, cwd=ROOT)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([f"{APP}:send_email"],
         f"{APP}:send_email is a task ('targets:send_email'), not a handler: pass the "
         f"ServeMux it is registered on: {APP}:mux"),
        ([f"{APP}:api"], f"{APP}:api is an ASGI web app, not a task handler: pass the "
                         f"ServeMux the tasks are registered on: {APP}:mux"),
        ([f"{APP}:create_api"], f"{APP}:create_api returned <fastapi.applications.FastAPI "),
        ([f"{APP}:wsgi_app"], f"{APP}:wsgi_app is a WSGI web app, not a task handler"),
        ([f"{APP}:two_arguments"],
         f"{APP}:two_arguments cannot take the task as its one argument (it takes (task, "
         f"other)); a handler is `async def handler(task)`"),
        ([f"{APP}:make_config"],
         f"{APP}:make_config returned a WorkerConfig, which names no handler: pass it as "
         f"--config {APP}:make_config, with the ServeMux as TARGET"),
        ([f"{APP}:mux", "--config", f"{APP}:send_email"],
         f"--config {APP}:send_email is "),
        ([f"{APP}:mux", "--config", f"{APP}:make_worker"],
         f"--config {APP}:make_worker returned "),
    ],
    ids=["typed task", "asgi app", "asgi app factory", "wsgi app", "two arguments",
         "config as target", "config not a config", "config returning a worker"],
)
def test_a_target_the_worker_cannot_run_is_refused_saying_what_to_pass(
    args: list[str], message: str,
) -> None:
    result = run_cli(*args, "--redis-url", NOWHERE)
    lines = err(result).splitlines()
    assert result.returncode == 1, err(result)
    assert len(lines) == 1 and message in lines[0], err(result)


@pytest.mark.parametrize(("flags", "message"), [
    (["--config", f"{APP}:make_config"], f"{APP}:make_worker is a Worker, which has its "
                                         f"settings: drop --config"),
    (["--redis-url", "redis://127.0.0.1:2/0"], "has its own Redis connection: drop "
                                               "--redis-url"),
    ([], f"the Worker of {APP}:make_worker: cannot reach Redis at 127.0.0.1:1"),
], ids=["with --config", "with --redis-url", "its redis unreachable"])
def test_a_worker_target_keeps_its_settings_source_and_its_redis(
    flags: list[str], message: str,
) -> None:
    result = run_cli(f"{APP}:make_worker", *flags)
    lines = err(result).splitlines()
    assert result.returncode == 1, err(result)
    assert len(lines) == 1 and message in lines[0], err(result)


def test_flags_override_a_config_and_derived_settings_follow_them() -> None:
    def flags(*argv: str) -> dict[str, object]:
        return worker_options(build_parser().parse_args(["worker", "app:mux", *argv]))

    base = WorkerConfig(concurrency=8, error_handler=print, group_max_size=5)
    config = with_flags(base, flags("--lease-duration", "3", "--concurrency", "20",
                                    "--group-max-size", "2"))
    assert (config.lease_duration, config.heartbeat_interval) == (3, 1)  # derived again
    assert (config.concurrency, config.prefetch, config.group_max_size) == (20, 5, 2)
    assert config.error_handler is print and config.server_id == base.server_id
    assert with_flags(base, {}) == base
    # what the config set itself stays unless a flag says otherwise
    fixed = WorkerConfig(lease_duration=10, heartbeat_interval=2, concurrency=8, prefetch=0)
    again = with_flags(fixed, flags("--lease-duration", "20", "--concurrency", "40"))
    assert (again.heartbeat_interval, again.prefetch) == (2, 0)


def _worker_parser() -> dict[str, list[str]]:
    """dest -> option strings of the worker command's flags."""
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    worker = sub.choices["worker"]  # type: ignore[index]
    return {a.dest: a.option_strings for a in worker._actions if a.option_strings}


def test_every_worker_setting_is_a_flag_named_as_its_field_or_comes_from_a_config() -> None:
    flags = _worker_parser()
    for field in dataclasses.fields(WorkerConfig):
        if field.name in CONFIG_ONLY:
            continue
        dest = next((d for d, f in RENAMED.items() if f == field.name), field.name)
        assert dest in flags, f"WorkerConfig.{field.name} has no flag"
        if dest == field.name:
            assert "--" + field.name.replace("_", "-") in flags[dest], flags[dest]
    assert {f.name for f in dataclasses.fields(WorkerConfig)} >= CONFIG_ONLY


def test_setting_flags_show_the_python_defaults() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    worker = sub.choices["worker"]  # type: ignore[index]
    helps = {a.dest: a.help or "" for a in worker._actions}
    for name, value in vars(D).items():
        if not name.startswith("WORKER_") or name in ("WORKER_QUEUES",
                                                     "WORKER_HEARTBEAT_INTERVAL"):
            continue
        dest = name.removeprefix("WORKER_").lower()
        shown = f"{value:g}" if isinstance(value, float) else str(value)
        assert re.search(rf"default\b.*(?<![\d.]){re.escape(shown)}(?![\d.])",
                         helps[dest]), (dest, helps[dest])
        assert next(a for a in worker._actions if a.dest == dest).default is None


@pytest.mark.timeout(60)
async def test_a_config_gives_the_callables_and_the_flags_override_its_values(
    asyncq_redis_url: str, asyncq_queue: str, tmp_path: Path,
) -> None:
    async with Client(asyncq_redis_url) as client:
        # Enqueued before the worker starts: its aggregator's first look finds two tasks.
        for n in (1, 2):
            await client.enqueue("targets:part", n, queue=asyncq_queue, group="g")
        async with worker_process(asyncq_redis_url, asyncq_queue, tmp_path / "w.log",
                                  "--config", f"{APP}:make_config", "--concurrency", "5",
                                  "--group-max-size", "2", "--extra", "zone=a",
                                  target=f"{APP}:mux") as proc:
            # lifespan
            state = await client.apply("targets:state", queue=asyncq_queue, timeout=20)
            assert state == {"from": "lifespan", "pid": proc.pid}
            # retry_delay (the default waits 15 s or more) and error_handler
            flaky = await client.apply("targets:flaky", queue=asyncq_queue, timeout=30)
            assert flaky == {"retried": 1, "errors": [["targets:flaky", "first run fails"]]}
            # group_aggregator, with --group-max-size over the config's 60 s grace period
            async with Inspector(asyncq_redis_url) as inspector:
                async def combined() -> object:
                    try:
                        info = await inspector.task_info(asyncq_queue, "combined-g")
                    except TaskNotFoundError:
                        return None
                    return info.result_json() if info.result is not None else None

                assert await wait_until(combined, timeout=10) == [1, 2]
                # plain settings: the flag's concurrency over the config's 3
                server = next(s for s in await inspector.workers()
                              if asyncq_queue in s.queues)
            assert (server.pid, server.concurrency, server.extra) == (
                proc.pid, 5, {"zone": "a"})
            proc.send_signal(signal.SIGTERM)
            with anyio.fail_after(20):
                assert await proc.wait() == 0


@pytest.mark.timeout(90)
async def test_a_factory_returning_a_worker_builds_each_supervised_process(
    asyncq_redis_url: str, asyncq_queue: str, tmp_path: Path,
) -> None:
    command = [sys.executable, "-m", "asyncq", "worker", f"{APP}:make_worker",
               "--queue", f"{asyncq_queue}=1", "--concurrency", "4", "--processes", "2",
               "--log-format", "json"]
    env = {**os.environ, "ASYNCQ_REDIS_URL": asyncq_redis_url}
    async with spawn(command, tmp_path / "sup.log", env=env) as proc, \
            Client(asyncq_redis_url) as client, Inspector(asyncq_redis_url) as inspector:
        async def two_servers() -> list[tuple[int, int]]:
            servers = [(s.pid, s.concurrency) for s in await inspector.workers()
                       if asyncq_queue in s.queues]
            return servers if len(servers) == 2 else []

        servers = await wait_until(two_servers, timeout=30, message="two worker processes")
        assert {concurrency for _, concurrency in servers} == {4}  # the flag over the 3
        state = await client.apply("targets:state", queue=asyncq_queue, timeout=20)
        assert state["from"] == "lifespan" and state["pid"] in {pid for pid, _ in servers}
        flaky = await client.apply("targets:flaky", queue=asyncq_queue, timeout=30)
        assert flaky["retried"] == 1  # the factory's retry_delay
        proc.send_signal(signal.SIGTERM)
        with anyio.fail_after(30):
            assert await proc.wait() == 0
