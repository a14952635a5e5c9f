"""``asyncq worker module:attr``: run a worker process."""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
from typing import Any, NoReturn

from .._defaults import (
    METRICS_HOST,
    WORKER_CONCURRENCY,
    WORKER_HEARTBEAT_INTERVAL,
    WORKER_LEASE_DURATION,
    WORKER_QUEUES,
    WORKER_SHUTDOWN_TIMEOUT,
)
from .._log import get_logger
from .._log_setup import configure_logging
from .._worker import Worker
from ._common import (
    CLIError,
    add_log_args,
    add_redis_args,
    check_redis,
    parse_queue_weights,
)
from ._reload import Reloader, check_watchfiles
from ._supervisor import Supervisor, child_argv, watch_supervisor
from ._target import ImportFailed, import_target, resolve_handler


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "worker", help="run a worker process",
        description="Run handlers for tasks. TARGET is module:attr naming a ServeMux, an "
                    "async handler function, or a function without arguments returning one.")
    p.add_argument("target", metavar="TARGET",
                   help="module:attr of a ServeMux, a handler or a factory (e.g. app.tasks:mux)")
    p.add_argument("--factory", action="store_true",
                   help="TARGET is a factory to call (sync or async) for the ServeMux/handler")
    p.add_argument("--traceback", action="store_true",
                   help="when importing TARGET fails, show the whole traceback")
    add_redis_args(p)
    p.add_argument("--concurrency", "-c", type=int,
                   help=f"most handlers at once (default {WORKER_CONCURRENCY})")
    p.add_argument("--queue", "-q", action="append", metavar="NAME=WEIGHT",
                   help=f"queue to serve, repeatable (default: "
                        f"{' '.join(f'{q}={w}' for q, w in WORKER_QUEUES)})")
    p.add_argument("--strict", action="store_true", help="strict queue priority")
    p.add_argument("--shutdown-timeout", type=float,
                   help=f"seconds running tasks get to finish on shutdown "
                        f"(default {WORKER_SHUTDOWN_TIMEOUT:g})")
    p.add_argument("--lease-duration", type=float,
                   help=f"task lease in seconds (default {WORKER_LEASE_DURATION:g})")
    p.add_argument("--heartbeat-interval", type=float,
                   help=f"seconds between lease renewals and state updates (default: the "
                        f"smaller of {WORKER_HEARTBEAT_INTERVAL:g} and a third of the lease)")
    p.add_argument("--log-success", action="store_true",
                   help="log every task that succeeded at info level (by default only "
                        "failures are logged per task; --log-level debug logs each start and "
                        "finish)")
    p.add_argument("--metrics-port", type=int, metavar="PORT",
                   help="serve this worker's Prometheus metrics on PORT (needs "
                        "asyncq[prometheus]; one port per worker process)")
    p.add_argument("--metrics-host", default=METRICS_HOST,
                   help=f"address of the metrics endpoint (default {METRICS_HOST})")
    p.add_argument("--burst", action="store_true",
                   help="exit (status 0) once the queues have no pending tasks and none due "
                        "soon: for CI and batch jobs")
    p.add_argument("--processes", "-p", type=int, default=1, metavar="N",
                   help="run N worker processes under a supervisor that restarts one that "
                        "dies and passes SIGTERM/SIGINT on (default 1: no supervisor)")
    p.add_argument("--reload", action="store_true",
                   help="development: restart the worker when a .py file changes (needs "
                        "pip install 'asyncq[reload]')")
    p.add_argument("--reload-dir", action="append", metavar="DIR",
                   help="directory --reload watches, repeatable (default: the current one)")
    add_log_args(p)
    p.error = functools.partial(_one_line_error, p)  # type: ignore[method-assign]
    p.set_defaults(func=run, child_argv=functools.partial(child_argv, p))


def _one_line_error(parser: argparse.ArgumentParser, message: str) -> NoReturn:
    """A bad flag: one line on stderr (not the whole usage), exit code 2."""
    parser.exit(2, f"{parser.prog}: error: {message} (see '{parser.prog} --help')\n")


def worker_options(args: argparse.Namespace) -> dict[str, Any]:
    """The WorkerConfig options the flags set. A flag not given is left out, so WorkerConfig
    applies (or derives) the same default as the Python API."""
    flags: dict[str, Any] = {
        "concurrency": args.concurrency, "strict_priority": args.strict or None,
        "shutdown_timeout": args.shutdown_timeout, "lease_duration": args.lease_duration,
        "heartbeat_interval": args.heartbeat_interval, "queues": parse_queue_weights(args.queue),
        "task_logs": ("info" if getattr(args, "log_success", False)
                      else "debug" if getattr(args, "log_level", None) == "debug" else None),
        "burst": True if getattr(args, "burst", False) else None,
    }
    return {name: value for name, value in flags.items() if value is not None}


def run(args: argparse.Namespace) -> int:
    configure_logging(args.log_level, args.log_format)
    supervised = _check_supervisor_flags(args)
    if args.reload:
        return asyncio.run(Reloader(args.child_argv(args), args.reload_dir or []).run())
    if supervised:
        return asyncio.run(Supervisor(args.child_argv(args), args.processes,
                                      burst=args.burst).run())
    try:
        target = import_target(args.target)
    except ImportFailed as exc:
        if args.traceback:
            raise exc.original from None
        raise
    options = worker_options(args)
    if args.metrics_port is not None:
        options["metrics"] = _serve_metrics(args.metrics_host, args.metrics_port)

    async def main() -> None:
        handler = await resolve_handler(args.target, target, factory=args.factory)
        try:
            worker = Worker(args.redis_url, handler, **options)
        except (ValueError, TypeError) as exc:
            raise CLIError(str(exc)) from None
        await check_redis(args.redis_url)
        # A task beside the worker, not a task group: an error of worker.run (a failing
        # start-up) must reach main() as itself for its one-line message, not in a group.
        watchdog = asyncio.ensure_future(watch_supervisor(worker.stop))  # ends unless supervised
        try:
            await worker.run()
        finally:
            watchdog.cancel()

    _run_loop(main())
    return 0


def _serve_metrics(host: str, port: int) -> Any:
    """This worker's metrics on http://host:port/metrics (prometheus_client's server)."""
    try:
        from prometheus_client import start_http_server

        from ..metrics import WorkerMetrics
    except ImportError as exc:
        raise CLIError("--metrics-port needs the prometheus extra: pip install "
                       f"'asyncq[prometheus]' ({exc})") from exc
    try:
        start_http_server(port, addr=host)
    except OSError as exc:
        raise CLIError(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}") from exc
    return WorkerMetrics()


def _check_supervisor_flags(args: argparse.Namespace) -> bool:
    """Reject combinations of --processes/--reload that make no sense (before anything
    starts); True when a supervisor runs the workers."""
    if args.processes < 1:
        raise CLIError(f"--processes must be at least 1, got {args.processes}")
    if args.reload_dir and not args.reload:
        raise CLIError("--reload-dir needs --reload")
    if args.metrics_port is not None and args.processes > 1:
        raise CLIError("--metrics-port serves one process: with several, run one "
                       "'asyncq worker' per process, each with its own --metrics-port")
    if args.reload:
        if args.processes > 1:
            raise CLIError("--reload runs one worker process: drop --processes (or --reload)")
        if args.burst:
            raise CLIError("--reload and --burst do not go together: a burst worker exits "
                           "when its queues are empty")
        check_watchfiles()
        for directory in args.reload_dir or []:
            if not os.path.isdir(directory):
                raise CLIError(f"--reload-dir {directory!r} is not a directory")
    return bool(args.processes > 1)


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop


def _run_loop(coro: Any, *, leftover_grace: float = 1.0) -> None:
    """Run ``coro`` to completion on a fresh event loop (uvloop when installed), then exit
    even if some tasks refuse to end.

    ``asyncio.run`` would cancel the tasks left over and wait for them forever: a handler that
    ignores cancellation — one the worker already abandoned at shutdown — would keep the process
    alive after the worker stopped. Here leftovers get ``leftover_grace`` seconds to end; the
    rest are logged and dropped with the loop.
    """
    loop = _new_loop()
    try:
        loop.run_until_complete(coro)
    finally:
        try:
            _cancel_leftovers(loop, leftover_grace)
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()


def _cancel_leftovers(loop: asyncio.AbstractEventLoop, grace: float) -> None:
    tasks = asyncio.all_tasks(loop)
    if not tasks:
        return
    for task in tasks:
        task.cancel()
    _, stuck = loop.run_until_complete(asyncio.wait(tasks, timeout=grace))
    if stuck:
        get_logger("worker").error("exiting with tasks that ignore cancellation",
                                   count=len(stuck),
                                   tasks=sorted(t.get_name() for t in stuck)[:10])
        # Their destruction with the loop is expected: don't report each one again.
        for task in stuck:
            task._log_destroy_pending = False  # type: ignore[attr-defined]
