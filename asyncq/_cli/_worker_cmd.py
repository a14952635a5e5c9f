"""``asyncq worker module:attr``: run a worker process.

The parser is built from this module alone; the worker, the supervisor, the reloader and the
target loader are imported by the functions that run them, so ``asyncq --help`` needs none.
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
from typing import TYPE_CHECKING, Any, NoReturn

from .._defaults import (
    DEFAULT_REDIS_URL,
    HEALTH_HOST,
    METRICS_HOST,
    WORKER_CANCEL_GRACE,
    WORKER_CONCURRENCY,
    WORKER_DEQUEUE_BATCH,
    WORKER_FORWARD_INTERVAL,
    WORKER_GROUP_GRACE_PERIOD,
    WORKER_GROUP_MAX_DELAY,
    WORKER_GROUP_MAX_SIZE,
    WORKER_HEALTH_CHECK_INTERVAL,
    WORKER_HEARTBEAT_INTERVAL,
    WORKER_IDLE_POLL_INTERVAL,
    WORKER_JANITOR_BATCH,
    WORKER_JANITOR_INTERVAL,
    WORKER_LEASE_DURATION,
    WORKER_MAX_MEMORY_PER_CHILD,
    WORKER_MAX_TASKS_PER_CHILD,
    WORKER_ORPHAN_SCAN_COUNT,
    WORKER_PROCESS_KILL_GRACE,
    WORKER_QUEUE_SCAN_INTERVAL,
    WORKER_QUEUES,
    WORKER_RECOVER_GRACE,
    WORKER_RECOVER_INTERVAL,
    WORKER_SHUTDOWN_TIMEOUT,
    WORKER_STALL_TIMEOUT,
    WORKER_STALL_WARNING,
    WORKER_SYNC_HANDLERS,
    WORKER_TASK_LOGS,
    WORKER_TRACEBACK_ON,
    WORKER_UNKNOWN_TYPE,
    WORKER_WORKFLOW_INTERVAL,
)
from ._common import (
    REDIS_URL_ENV,
    CLIError,
    add_log_args,
    add_redis_args,
    parse_queue_weights,
)

if TYPE_CHECKING:
    import asyncio

    from .._service._health import ProbeServer
    from .._worker import Worker, WorkerConfig

#: WorkerConfig fields only the Python API can set (callables, objects): a factory target
#: returning a configured Worker, or ``--config`` naming a WorkerConfig, carries them.
CONFIG_ONLY = frozenset({"retry_delay", "is_failure", "error_handler", "on_state_change",
                         "health_check", "group_aggregator", "lifespan", "metrics"})
#: Flags of the worker command named otherwise than their WorkerConfig field: dest -> field.
RENAMED = {"queue": "queues", "log_success": "task_logs"}


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "worker", help="run a worker process",
        description="Run handlers for tasks. TARGET is module:attr naming a ServeMux, an "
                    "async handler function, a configured Worker, or a function without "
                    "arguments returning one. Each worker setting is a flag named as its "
                    "WorkerConfig field; the others (error_handler, group_aggregator, "
                    "retry_delay, lifespan...) come from --config or a Worker target, and the "
                    "flags given override them.")
    p.add_argument("target", metavar="TARGET",
                   help="module:attr of a ServeMux, a handler, a Worker or a factory "
                        "(e.g. app.tasks:mux)")
    p.add_argument("--factory", action="store_true",
                   help="TARGET is a factory to call (sync or async) for the ServeMux, "
                        "handler or Worker")
    p.add_argument("--config", metavar="MODULE:ATTR",
                   help="a WorkerConfig, or a function without arguments (sync or async) "
                        "returning one: the worker's settings, callables included; the flags "
                        "given override its values")
    p.add_argument("--traceback", action="store_true",
                   help="when importing TARGET fails, show the whole traceback")
    add_redis_args(p)
    _add_setting_flags(p)
    p.add_argument("--log-success", action="store_true",
                   help="log every task that succeeded at info level, as --task-logs info "
                        "(by default only failures are logged per task; --log-level debug "
                        "logs each start and finish)")
    p.add_argument("--metrics-port", type=int, metavar="PORT",
                   help="serve this worker's Prometheus metrics on PORT (needs "
                        "asyncq[prometheus]); with --processes one port serves every worker "
                        "process's, each labelled process=1..N")
    p.add_argument("--metrics-host", default=METRICS_HOST,
                   help=f"address of the metrics endpoint (default {METRICS_HOST})")
    p.add_argument("--wait-for-redis", choices=("auto", "yes", "no"), default="auto",
                   help="at start, when Redis does not answer: yes waits for it (alive, not "
                        "ready: /readyz fails until it answers), no exits with status 1; auto "
                        "(the default) waits when --health-port is given (a Kubernetes pod "
                        "started during an outage then waits instead of crash-looping)")
    p.add_argument("--metrics-queue-label", choices=("pattern", "name"), default="pattern",
                   help="the queue label of a queue a pattern serves (tenant:*): the pattern "
                        "(default: one series for all its queues) or the queue's own name "
                        "(one series per queue, unbounded)")
    p.add_argument("--metrics-task-types", type=_task_types, default=None, metavar="N|all",
                   help="label the first N task types a worker process runs by name and the "
                        "others 'other' (default 30), or 'all' (one series per type, "
                        "unbounded)")
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
    p.set_defaults(func=run, child_argv=functools.partial(_child_argv, p))


def _child_argv(parser: argparse.ArgumentParser, args: argparse.Namespace, *,
                endpoints: bool = False) -> list[str]:
    """The supervisor's ``child_argv`` (the arguments of a worker process), imported when a
    supervisor or a reloader asks for it."""
    from ._supervisor import child_argv

    return child_argv(parser, args, endpoints=endpoints)


def _add_setting_flags(p: argparse.ArgumentParser) -> None:
    """One flag per plain WorkerConfig field, named as the field (``--lease-duration``), its
    help giving the default of asyncq/_defaults.py. None of them has a default of its own: a
    flag not given leaves the field to WorkerConfig (or to --config / a Worker target)."""
    g = p.add_argument_group("worker settings (WorkerConfig fields; durations in seconds)")
    g.add_argument("--concurrency", "-c", type=int, metavar="N",
                   help=f"most handlers at once (default {WORKER_CONCURRENCY})")
    g.add_argument("--queue", "-q", action="append", metavar="NAME=WEIGHT",
                   help=f"queue to serve, repeatable: the queues field; a NAME with '*' is a "
                        f"pattern serving every matching queue, also those created later "
                        f"(quote it: -q 'tenant:*=1'); '\\*' is a literal '*' "
                        f"(-q 'star\\*q=1' serves the queue star*q) (default: "
                        f"{' '.join(f'{q}={w}' for q, w in WORKER_QUEUES)})")
    g.add_argument("--strict-priority", "--strict", action="store_true", default=None,
                   help="always drain higher-priority queues first instead of weighting them")
    g.add_argument("--shutdown-timeout", type=float, metavar="SECONDS",
                   help=f"seconds running tasks get to finish on shutdown "
                        f"(default {WORKER_SHUTDOWN_TIMEOUT:g})")
    g.add_argument("--lease-duration", type=float, metavar="SECONDS",
                   help=f"task lease in seconds (default {WORKER_LEASE_DURATION:g})")
    g.add_argument("--heartbeat-interval", type=float, metavar="SECONDS",
                   help=f"seconds between lease renewals and state updates (default: the "
                        f"smaller of {WORKER_HEARTBEAT_INTERVAL:g} and a third of the lease)")
    seconds = [
        ("--forward-interval", WORKER_FORWARD_INTERVAL,
         "longest wait between checks for due scheduled/retry tasks"),
        ("--recover-interval", WORKER_RECOVER_INTERVAL,
         "how often expired leases of dead workers are looked for"),
        ("--recover-grace", WORKER_RECOVER_GRACE,
         "how long after a lease expired its task is recovered"),
        ("--workflow-interval", WORKER_WORKFLOW_INTERVAL,
         "safety-net period of the workflow advancer"),
        ("--janitor-interval", WORKER_JANITOR_INTERVAL,
         "how often completed tasks past their retention are deleted"),
        ("--idle-poll-interval", WORKER_IDLE_POLL_INTERVAL,
         "safety net: an idle worker re-checks its queues at least this often"),
        ("--queue-scan-interval", WORKER_QUEUE_SCAN_INTERVAL,
         "with a queue pattern: how often the queue registry is read for new matching "
         "queues (a new queue is also announced at once)"),
        ("--cancel-grace", WORKER_CANCEL_GRACE,
         "how long a cancelled handler may take to stop"),
        ("--health-check-interval", WORKER_HEALTH_CHECK_INTERVAL,
         "how often the health_check callback is called"),
        ("--group-grace-period", WORKER_GROUP_GRACE_PERIOD,
         "a group is aggregated once no task was added to it for this long"),
        ("--group-max-delay", WORKER_GROUP_MAX_DELAY,
         "a group is aggregated once its oldest task waited this long (0: no limit)"),
        ("--stall-timeout", WORKER_STALL_TIMEOUT,
         "/livez fails once the event loop has not turned for this long"),
        ("--stall-warning", WORKER_STALL_WARNING,
         "a loop turn this long is logged, naming the task blocking it (0: never)"),
    ]
    for flag, default, text in seconds:
        g.add_argument(flag, type=float, metavar="SECONDS", help=f"{text} (default {default:g})")
    counts = [
        ("--janitor-batch", WORKER_JANITOR_BATCH, "most completed tasks deleted per call"),
        ("--orphan-scan-count", WORKER_ORPHAN_SCAN_COUNT,
         "keys the janitor examines per round for orphaned tasks (0 disables)"),
        ("--dequeue-batch", WORKER_DEQUEUE_BATCH, "most tasks leased per call"),
        ("--group-max-size", WORKER_GROUP_MAX_SIZE,
         "a group is aggregated once it holds this many tasks (0: no limit)"),
    ]
    for flag, count, text in counts:
        g.add_argument(flag, type=int, metavar="N", help=f"{text} (default {count})")
    g.add_argument("--prefetch", type=int, metavar="N",
                   help="tasks leased ahead of free slots (default: concurrency // 4; "
                        "0 disables)")
    g.add_argument("--sync-threads", type=int, metavar="N",
                   help="most threads running sync handlers at once (default: concurrency)")
    g.add_argument("--sync-handlers", choices=["thread", "process"],
                   help=f"where sync handlers registered without isolate= run: threads or "
                        f"the pool of handler processes (default {WORKER_SYNC_HANDLERS})")
    g.add_argument("--process-pool-size", type=int, metavar="N",
                   help="most handler processes at once (default: the number of cores)")
    g.add_argument("--max-tasks-per-child", type=int, metavar="N",
                   help=f"a handler process is replaced after this many tasks (default "
                        f"{WORKER_MAX_TASKS_PER_CHILD}: never)")
    g.add_argument("--max-memory-per-child", type=int, metavar="KIB",
                   help=f"a handler process whose resident memory exceeds this many KiB after "
                        f"a task is replaced (default {WORKER_MAX_MEMORY_PER_CHILD}: no limit)")
    g.add_argument("--process-kill-grace", type=float, metavar="S",
                   help=f"SIGTERM to SIGKILL of a handler process past its time limit "
                        f"(default {WORKER_PROCESS_KILL_GRACE:g})")
    g.add_argument("--preload", action="append", metavar="MODULE",
                   help="a module the handler processes' fork server imports once, before "
                        "their first task (e.g. one calling django.setup()); repeatable")
    g.add_argument("--task-logs", choices=["off", "debug", "info"],
                   help=f"per-task log lines (default {WORKER_TASK_LOGS}; --log-success is "
                        f"info, --log-level debug is debug)")
    g.add_argument("--unknown-type", choices=["retry", "archive"],
                   help=f"a task whose type has no handler: retried or archived at once "
                        f"(default {WORKER_UNKNOWN_TYPE})")
    g.add_argument("--traceback-on", choices=["archive", "failure", "off"],
                   help=f"when a failed run's log line carries its traceback: when the task "
                        f"is archived, on every failure, or never (default "
                        f"{WORKER_TRACEBACK_ON})")
    g.add_argument("--burst", action="store_true", default=None,
                   help="exit (status 0) once the queues have no pending tasks and none due "
                        "soon: for CI and batch jobs")
    g.add_argument("--server-id", metavar="ID",
                   help="identity of this worker in Redis (default host:pid:random; not with "
                        "--processes)")
    g.add_argument("--health-port", type=int, metavar="PORT",
                   help="serve GET /livez (the event loop turns) and GET /readyz (Redis "
                        "answers, the worker fetches) on PORT; with --processes one port "
                        "covers every worker process")
    g.add_argument("--health-host", metavar="ADDRESS",
                   help=f"address of the health probes (default {HEALTH_HOST})")
    g.add_argument("--extra", action="append", metavar="KEY=VALUE",
                   help="a label published with the worker's state, repeatable")


def _one_line_error(parser: argparse.ArgumentParser, message: str) -> NoReturn:
    """A bad flag: one line on stderr (not the whole usage), exit code 2."""
    parser.exit(2, f"{parser.prog}: error: {message} (see '{parser.prog} --help')\n")


def worker_options(args: argparse.Namespace) -> dict[str, Any]:
    """The WorkerConfig options the flags set. A flag not given is left out, so WorkerConfig
    applies (or derives) the same default as the Python API, or --config / a Worker target
    keeps its value."""
    import dataclasses

    from .._worker import WorkerConfig

    fields = {f.name for f in dataclasses.fields(WorkerConfig)}
    options = {name: getattr(args, name) for name in fields - CONFIG_ONLY - {"queues", "extra"}
               if getattr(args, name, None) is not None}
    queues = parse_queue_weights(getattr(args, "queue", None))
    if queues is not None:
        options["queues"] = queues
    if getattr(args, "extra", None):
        options["extra"] = _labels(args.extra)
    logs = options.get("task_logs")
    if getattr(args, "log_success", False):
        if logs not in (None, "info"):
            raise CLIError(f"--log-success is --task-logs info: drop one of them "
                           f"(--task-logs {logs} given)")
        options["task_logs"] = "info"
    elif logs is None and getattr(args, "log_level", None) == "debug":
        options["task_logs"] = "debug"
    return options


def _labels(items: list[str]) -> dict[str, str]:
    labels = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CLIError(f"--extra expects KEY=VALUE, got {item!r}")
        labels[key] = value
    return labels


def with_flags(config: WorkerConfig, options: dict[str, Any]) -> WorkerConfig:
    """``config`` with the settings the flags gave in place of its own. A setting derived
    from another (the heartbeat from the lease, prefetch from concurrency) is derived again
    from the new value unless the config or the flags set it to something else."""
    import dataclasses

    derived: dict[str, Any] = {}
    if ("lease_duration" in options and "heartbeat_interval" not in options
            and config.heartbeat_interval == min(WORKER_HEARTBEAT_INTERVAL,
                                                 config.lease_duration / 3)):
        derived["heartbeat_interval"] = None
    if ("concurrency" in options and "prefetch" not in options
            and config.prefetch == config.concurrency // 4):
        derived["prefetch"] = None
    return dataclasses.replace(config, **{**derived, **options})


def build_worker(args: argparse.Namespace, made: Any, config: WorkerConfig | None,
                 options: dict[str, Any]) -> Worker:
    """The Worker to run: the target's own (rebuilt with the flags' settings over its config
    when any is given), or one on --redis-url running the target's handler with --config's
    settings (if given) under the flags'."""
    from .._worker import Worker

    try:
        if isinstance(made, Worker):
            if config is not None:
                raise CLIError(f"{args.target} is a Worker, which has its settings: drop "
                               f"--config (or make TARGET the ServeMux)")
            if args.redis_url != redis_url_default():
                raise CLIError(f"{args.target} is a Worker, which has its own Redis "
                               f"connection: drop --redis-url (or make TARGET the ServeMux and "
                               f"pass its settings with --config)")
            if not options:
                return made
            return Worker(broker=made.broker, handler=made.handler, clock=made.clock,
                          config=with_flags(made.config, options))
        if config is not None:
            return Worker(args.redis_url, made, config=with_flags(config, options))
        return Worker(args.redis_url, made, **options)
    except (ValueError, TypeError) as exc:
        raise CLIError(str(exc)) from None


def redis_url_default() -> str:
    """The Redis URL of a command given no --redis-url."""
    return os.environ.get(REDIS_URL_ENV, DEFAULT_REDIS_URL)


def _imported(path: str, traceback: bool) -> Any:
    """The object ``path`` names (the whole traceback of a failing import with --traceback)."""
    from ._target import ImportFailed, import_target

    try:
        return import_target(path)
    except ImportFailed as exc:
        if traceback:
            raise exc.original from None
        raise


def run(args: argparse.Namespace) -> int:
    """Run the worker TARGET names (or a reloader or supervisor of worker processes)."""
    import asyncio

    from .._log_setup import configure_logging

    configure_logging(args.log_level, args.log_format)
    supervised = _check_supervisor_flags(args)
    if args.reload:
        from ._reload import Reloader

        return asyncio.run(Reloader(args.child_argv(args, endpoints=True),
                                    args.reload_dir or []).run())
    if supervised:
        from ._supervisor import Supervisor

        if args.metrics_port is not None:
            _worker_metrics()  # (the prometheus extra is there, or say so now)
        if args.wait_for_redis == "auto":  # (its worker processes have no --health-port)
            args.wait_for_redis = "yes" if args.health_port is not None else "no"
        return asyncio.run(Supervisor(
            args.child_argv(args), args.processes, burst=bool(args.burst),
            health=(None if args.health_port is None
                    else (args.health_host or HEALTH_HOST, args.health_port)),
            metrics=(None if args.metrics_port is None
                     else (args.metrics_host, args.metrics_port))).run())
    from .._worker import Worker
    from ._supervisor import METRICS_ENV, PROBES_ENV, watch_supervisor
    from ._target import resolve_config, resolve_target

    # Set by a supervisor for this process only (not for processes its handlers start).
    probes_path = os.environ.pop(PROBES_ENV, None)
    supervisor_metrics = os.environ.pop(METRICS_ENV, None) == "1"
    target = _imported(args.target, args.traceback)
    config_source = _imported(args.config, args.traceback) if args.config else None
    options = worker_options(args)
    if args.metrics_port is not None:
        _worker_metrics()  # (the prometheus extra is there, or say so now)

    async def main() -> None:
        made = await resolve_target(args.target, target, factory=args.factory)
        config = (await resolve_config(args.config, config_source)
                  if args.config else None)
        measured = _measuring(made, config)
        if args.metrics_port is not None:
            _serve_metrics(args.metrics_host, args.metrics_port, measured)
        if (args.metrics_port is not None or supervisor_metrics) and measured is None:
            options["metrics"] = _worker_metrics()(**_metrics_options(args))
        worker = build_worker(args, made, config, options)
        wait = (args.wait_for_redis == "yes"
                or (args.wait_for_redis == "auto" and args.health_port is not None))
        try:
            if isinstance(made, Worker):
                await _check_worker_redis(args.target, made)
            else:
                await _check_redis(args.redis_url)
        except _Unreachable as exc:
            if not wait:
                if isinstance(made, Worker):
                    await made.broker.close()
                raise CLIError(str(exc)) from None
            # The worker waits for Redis while subscribing (its outage logged once, its end
            # once); its probes answer meanwhile: alive, not ready.
            from .._log import get_logger

            get_logger("worker").warning(
                "Redis does not answer yet: waiting for it (not ready meanwhile)",
                error=str(exc), hint="--wait-for-redis no exits instead")
        # A task beside the worker, not a task group: an error of worker.run (a failing
        # start-up) must reach main() as itself for its one-line message, not in a group.
        watchdog = asyncio.ensure_future(watch_supervisor(worker.stop))  # ends unless supervised
        probes = _serve_supervisor(worker, probes_path) if probes_path else None
        frozen = asyncio.ensure_future(_freeze_startup_objects(worker))
        try:
            await worker.run()
        finally:
            frozen.cancel()
            gc.unfreeze()
            watchdog.cancel()
            if probes is not None:
                probes.close()
            if worker is not made and isinstance(made, Worker):
                await made.broker.close()  # the target's Worker made it; the rebuilt one ran

    _run_loop(main())
    return 0


class _Unreachable(Exception):
    """Redis does not answer at start-up (the message says where and why)."""


async def _check_redis(url: str) -> None:
    """Check that Redis answers at start-up: _Unreachable when it does not, CLIError when
    the URL itself is wrong."""
    from .._broker import check_reachable  # (redis-py: only when a command runs)
    from .._errors import BrokerError

    try:
        await check_reachable(url)
    except (ValueError, TypeError) as exc:
        raise CLIError(str(exc)) from None
    except BrokerError as exc:
        raise _Unreachable(str(exc)) from None


async def _check_worker_redis(target: str, worker: Worker) -> None:
    """As ``_check_redis``, for the Redis of a Worker target."""
    from .._errors import BrokerError

    try:
        await worker.broker.ping()
    except BrokerError as exc:
        raise _Unreachable(f"the Worker of {target}: {exc}") from None


def _task_types(text: str) -> int | str:
    """--metrics-task-types: a number of task types, or ``all``."""
    if text == "all":
        return text
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number of task types or 'all', got {text!r}") from None
    if number < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more task types, got {number}")
    return number


def _metrics_options(args: argparse.Namespace) -> dict[str, Any]:
    """The WorkerMetrics arguments the --metrics-* flags give."""
    options: dict[str, Any] = {"queues": args.metrics_queue_label}
    if args.metrics_task_types is not None:
        options["task_types"] = args.metrics_task_types
    return options


def _worker_metrics() -> Any:
    """The WorkerMetrics class; CLIError without the prometheus extra."""
    try:
        from ..metrics import WorkerMetrics
    except ImportError as exc:
        raise CLIError("--metrics-port needs the prometheus extra: pip install "
                       f"'asyncq[prometheus]' ({exc})") from exc
    return WorkerMetrics


def _measuring(made: Any, config: WorkerConfig | None) -> Any:
    """The metrics the target's Worker or --config already has (None: it measures nothing).
    Kept as they are: measuring again in the same registry would register every series
    twice."""
    from .._worker import Worker

    if isinstance(made, Worker):
        return made.config.metrics
    return config.metrics if config is not None else None


def _serve_supervisor(worker: Worker, path: str) -> ProbeServer:
    """In a supervised process: its probes (and metrics, when measured) on the unix socket
    ``path``, for the supervisor to gather."""
    from .._service._health import ProbeServer

    routes = dict(worker.probes.routes())
    if worker.config.metrics is not None:
        from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
        registry = getattr(worker.config.metrics, "registry", None) or REGISTRY
        routes["/metrics"] = lambda: (200, CONTENT_TYPE_LATEST, generate_latest(registry))
    return ProbeServer(routes, path=path)


def _serve_metrics(host: str, port: int, metrics: Any) -> None:
    """This worker's metrics on http://host:port/metrics (prometheus_client's server): those
    of ``metrics`` (the registry it registered in), or of the default registry when None."""
    from prometheus_client import REGISTRY, start_http_server

    registry = (getattr(metrics, "registry", None) or REGISTRY) if metrics is not None \
        else REGISTRY
    try:
        start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise CLIError(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}") from exc


def _check_supervisor_flags(args: argparse.Namespace) -> bool:
    """Reject combinations of --processes/--reload that make no sense (before anything
    starts); True when a supervisor runs the workers."""
    if args.processes < 1:
        raise CLIError(f"--processes must be at least 1, got {args.processes}")
    if args.reload_dir and not args.reload:
        raise CLIError("--reload-dir needs --reload")
    if args.server_id is not None and args.processes > 1:
        raise CLIError("--server-id names one worker process: with --processes each process "
                       "has its own (host:pid:random)")
    if args.reload:
        if args.processes > 1:
            raise CLIError("--reload runs one worker process: drop --processes (or --reload)")
        if args.burst:
            raise CLIError("--reload and --burst do not go together: a burst worker exits "
                           "when its queues are empty")
        from ._reload import check_watchfiles

        check_watchfiles()
        for directory in args.reload_dir or []:
            if not os.path.isdir(directory):
                raise CLIError(f"--reload-dir {directory!r} is not a directory")
    return bool(args.processes > 1)


async def _freeze_startup_objects(worker: Any) -> None:
    """Once the worker is ready, move every object alive then (modules, the app, its handlers)
    out of the garbage collector's reach: a full collection then scans only what tasks create.

    Measured on a no-op drain: full collections of 47-78 ms per 20 000 tasks became 4 ms, worker
    CPU per task 31 -> 27.5 us. Done only here, in the process this command owns; undone when
    the worker stops, so a caller running the command in-process gets its collector back.
    """
    await worker.wait_ready()
    gc.collect()
    gc.freeze()


def _new_loop() -> asyncio.AbstractEventLoop:
    """A new event loop: uvloop's when it is installed, else asyncio's."""
    import asyncio

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
    """Cancel the tasks left on ``loop``, give them ``grace`` seconds, log those still stuck."""
    import asyncio

    from .._log import get_logger

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
