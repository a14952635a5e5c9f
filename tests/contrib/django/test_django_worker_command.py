"""``manage.py asyncq_worker`` is a whole ``asyncq worker``: it takes each of its flags, runs
several worker processes with Django set up in each, and a call whose worker was killed runs
again, as under Celery's ``acks_late``."""

from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("django")

from tests.contrib.django.harness import WAIT, Shop, manage_worker
from tests.helpers.polling import poll_until


def _flags(parser: Any) -> set[str]:
    return {flag for action in parser._actions for flag in action.option_strings}


def _worker_parser() -> Any:
    from asyncq._cli import build_parser

    commands = next(a for a in build_parser()._actions
                    if isinstance(a, argparse._SubParsersAction))
    return commands.choices["worker"]


def _sample(action: argparse.Action) -> list[str]:
    """A command line giving ``action`` a value other than its default."""
    flag = max(action.option_strings, key=len)
    if action.nargs == 0:
        return [flag]
    if action.choices:
        return [flag, str(list(action.choices)[-1])]
    if action.type in (int, float):
        return [flag, "7"]
    if callable(action.type):  # (a flag of its own type, e.g. N|all: a number if it takes one)
        try:
            action.type("7")
        except Exception:
            pass
        else:
            return [flag, "7"]
    return [flag, "x=7"]


def _parse(argv: list[str]) -> dict[str, Any]:
    from asyncq.contrib.django.management.commands.asyncq_worker import Command

    parser = Command().create_parser("manage.py", "asyncq_worker")
    return vars(parser.parse_args(argv))


#: asyncq worker's flags the command takes itself (and gives the worker in its own terms).
OWN = {"queue", "redis_url"}


def test_the_command_gives_every_flag_of_the_worker_command_to_the_worker(shop: Shop) -> None:
    """Each flag of ``asyncq worker`` reaches the worker the command starts, with its value
    (the queues and the Redis URL as the command's own flags say)."""
    from asyncq.contrib.django.management.commands.asyncq_worker import Command

    worker = _worker_parser()
    given = [a for a in worker._actions if a.option_strings and a.dest != "help"
             and a.dest not in OWN]
    assert {"processes", "process_pool_size", "max_memory_per_child", "max_tasks_per_child",
            "metrics_port", "health_port", "config", "reload", "log_format"} <= {
        a.dest for a in given}
    for action in given:
        argv = Command().worker_argv(_parse(["--backend", "spare", *_sample(action)]))
        assert argv[1:5] == ["-m", "asyncq", "worker", "asyncq.contrib.django.worker:mux"]
        parsed = worker.parse_args(argv[4:])
        assert getattr(parsed, action.dest) != action.default, (action.dest, argv)


def test_the_command_passes_its_flags_to_the_worker(shop: Shop) -> None:
    """What the command runs: the project's TaskMux (or ``--mux``), the backend's Redis URL
    and its queues with their bands, and the worker flags as given."""
    from asyncq.contrib.django.management.commands.asyncq_worker import Command

    argv = Command().worker_argv(_parse(["--backend", "spare", "--processes", "3",
                                         "--max-tasks-per-child", "9", "-c", "4",
                                         "--log-format", "json"]))
    args = _worker_parser().parse_args(argv[4:])
    spare = os.environ["SHOP_SPARE_QUEUE"]
    assert args.target == "asyncq.contrib.django.worker:mux"
    assert args.redis_url == os.environ["SHOP_REDIS_URL"]
    assert (args.processes, args.max_tasks_per_child, args.concurrency, args.log_format) == (
        3, 9, 4, "json")
    assert [q.partition("=")[0] for q in args.queue] == [f"{spare}:high", spare, f"{spare}:low"]
    assert args.strict_priority is True
    mine = Command().worker_argv(_parse(["--mux", "shop.asyncq_app:mux", "-u", "redis://x"]))
    assert mine[4:6] == ["shop.asyncq_app:mux", "--redis-url=redis://x"]


def _attempts(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


@pytest.mark.slow
def test_a_call_whose_worker_was_killed_runs_again(shop: Shop) -> None:
    """SIGKILL the worker running a call: another worker recovers its lease and runs it again
    (the default of a Django task: a lost run is retried, an error is not), SUCCESSFUL on its
    second attempt."""
    from shop.tasks import hold

    from asyncq.contrib.django._compat import task_backends

    path = shop.tmp / "held"
    result_id = hold.enqueue(str(path), 60).id
    quick = ["--backend", "spare", "--lease-duration", "2", "--recover-interval", "0.2",
             "--recover-grace", "0.2"]
    with manage_worker(quick, shop.tmp / "lost.log", os.environ) as lost:
        poll_until(lambda: _attempts(path) == ["1"], timeout=WAIT,
                   message=lambda: (shop.tmp / "lost.log").read_text()[-2000:])
        os.kill(lost.pid, signal.SIGKILL)
        lost.wait()
    with manage_worker(quick, shop.tmp / "heir.log", os.environ):
        backend = task_backends["spare"]
        result = poll_until(lambda: (r := backend.get_result(result_id)).is_finished and r,
                            timeout=WAIT, message=lambda: (
                                shop.tmp / "heir.log").read_text()[-2000:])
    assert (result.status, result.return_value) == ("SUCCESSFUL", 2)
    assert _attempts(path) == ["1", "2"]


@pytest.mark.slow
def test_processes_run_the_tasks_in_as_many_worker_processes(shop: Shop) -> None:
    """``--processes 2 -c 1``: two calls that each wait for the other run at once, so in two
    worker processes, each with Django set up (the signal receivers use the database)."""
    from shop.tasks import rendezvous

    spare = rendezvous.using(backend="spare", queue_name=os.environ["SHOP_SPARE_QUEUE"])
    folder = shop.tmp / "meet"
    folder.mkdir()
    ids = [spare.enqueue(str(folder), 2).id for _ in range(2)]
    with manage_worker(["--backend", "spare", "--processes", "2", "-c", "1"],
                       shop.tmp / "two.log", os.environ):
        for result_id in ids:
            poll_until(lambda rid=result_id: any(
                s["signal"] == "task_finished" for s in shop.signals(rid)),
                timeout=WAIT, message=lambda: (shop.tmp / "two.log").read_text()[-2000:])
    finished = [s for i in ids for s in shop.signals(i) if s["signal"] == "task_finished"]
    assert [s["status"] for s in finished] == ["SUCCESSFUL", "SUCCESSFUL"]
    assert len({s["pid"] for s in finished}) == 2


@pytest.mark.slow
def test_a_test_runs_the_calls_it_enqueued_with_a_burst_worker(shop: Shop) -> None:
    """Testing without an eager mode: the test enqueues as the app does, then
    ``call_command("asyncq_worker", "--burst")`` runs every waiting call to its end in the
    test's process and returns; the results read back as the app reads them."""
    from django.core.management import call_command
    from shop.tasks import add, forget

    spare = {"backend": "spare", "queue_name": os.environ["SHOP_SPARE_QUEUE"]}
    summed = add.using(**spare).enqueue(2, 3)
    nothing = forget.using(**spare).enqueue("B-1")

    call_command("asyncq_worker", "--backend", "spare", "--burst", "--log-level", "warning")

    summed.refresh()
    nothing.refresh()
    assert (summed.status, summed.return_value) == ("SUCCESSFUL", 5)
    assert (nothing.status, nothing.return_value) == ("SUCCESSFUL", None)
    assert [s["signal"] for s in shop.signals(summed.id)] == [
        "task_enqueued", "task_started", "task_finished"]


@pytest.mark.slow
def test_the_process_pool_has_django_set_up_before_it_forks_a_child(shop: Shop) -> None:
    """The command preloads ``asyncq.contrib.django.worker`` in the process pool's fork
    server: Django's settings are read there once, not in each child that runs a
    process-isolated call."""
    from shop.tasks import render_pdf

    if "--preload" not in _flags(_worker_parser()):
        pytest.skip("asyncq worker has no --preload flag")
    spare = render_pdf.using(backend="spare", queue_name=os.environ["SHOP_SPARE_QUEUE"])
    result = spare.enqueue(0.01)
    with manage_worker(["--backend", "spare"], shop.tmp / "preload.log", os.environ):
        done = poll_until(lambda: (r := spare.get_result(result.id)).is_finished and r,
                          timeout=WAIT, message=lambda: (
                              shop.tmp / "preload.log").read_text()[-2000:])
    assert done.status == "SUCCESSFUL"
    setups = {int(pid) for pid in Path(os.environ["SHOP_SETUPS"]).read_text().split()}
    assert done.return_value["pid"] not in setups


@pytest.mark.slow
def test_a_process_pool_of_two_holds_each_calls_limit_from_its_start(shop: Shop) -> None:
    """16 process-isolated calls of ~0.4 s with a 2 s limit, a pool of 2 and ``-c 20``: none
    is killed while it waits for a free child (each limit counts from its own start), and a
    runaway call among them is killed at its 1 s limit."""
    from shop.tasks import render_pdf, runaway

    from asyncq.contrib.django._compat import task_backends

    spare = {"backend": "spare", "queue_name": os.environ["SHOP_SPARE_QUEUE"]}
    ids = [render_pdf.using(**spare).enqueue(0.4).id for _ in range(16)]
    killed = runaway.using(**spare).enqueue(30).id
    backend = task_backends["spare"]
    log = shop.tmp / "pool.log"
    with manage_worker(["--backend", "spare", "--process-pool-size", "2", "-c", "20"], log,
                       os.environ):
        results = [poll_until(lambda i=i: (r := backend.get_result(i)).is_finished and r,
                              timeout=60, message=lambda: log.read_text()[-2000:])
                   for i in [*ids, killed]]
    assert [r.status for r in results[:-1]] == ["SUCCESSFUL"] * 16
    assert len({r.return_value["pid"] for r in results[:-1]}) <= 3  # (2 children, 1 replaced)
    assert results[-1].status == "FAILED"
    assert results[-1].errors[0].exception_class_path.endswith("TimeoutError")
