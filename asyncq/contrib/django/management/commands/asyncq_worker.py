"""``manage.py asyncq_worker``: ``asyncq worker`` for the project's Django tasks. Its own flags
say which backend (its Redis URL and queues, each served with its priority bands, higher
first), the mux and the priority order; every other flag is ``asyncq worker``'s (processes,
pool size, per-child caps, metrics and health ports, --config, --reload, log format...) and is
passed to it as given. The worker runs as ``python -m asyncq worker
asyncq.contrib.django.worker:mux`` in this process (exec) or, from ``call_command``, in a
child it waits for; importing that module sets Django up, once per worker process."""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from asyncq import WorkerConfig
from asyncq.contrib.django._backend import AsyncqBackend
from asyncq.contrib.django._compat import DEFAULT_TASK_BACKEND_ALIAS, task_backends
from asyncq.contrib.django._priority import WEIGHT_STEP

WORKER_MODULE = "asyncq.contrib.django.worker"
"""Sets Django up when imported: the worker's target (``:mux``) and the module its process
pool preloads."""
WORKER_FLAGS = "worker_flags"
"""Where the parser puts the flags it leaves to ``asyncq worker``."""


class Command(BaseCommand):
    help = ("Run an asyncq worker for this project's Django tasks (the queues of the asyncq "
            "task backend unless --queue is given). Every other flag is one of 'asyncq "
            "worker' (see asyncq worker --help): --processes, --concurrency, "
            "--process-pool-size, --max-memory-per-child, --metrics-port, --health-port, "
            "--config, --reload, --log-format...")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._exec = False

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> Any:
        """Django's parser for this command, which leaves the flags it does not know to
        ``asyncq worker`` (in ``options["worker_flags"]``) instead of refusing them."""
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.allow_abbrev = False  # (asyncq worker takes a long flag only spelt in full)

        def parse_args(args: Any = None, namespace: Any = None) -> argparse.Namespace:
            options, rest = parser.parse_known_args(args, namespace)
            setattr(options, WORKER_FLAGS, rest)
            return options  # type: ignore[no-any-return]

        parser.parse_args = parse_args
        return parser

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--backend", default=DEFAULT_TASK_BACKEND_ALIAS,
                            help="the TASKS alias of the asyncq backend: its URL (unless "
                                 "--redis-url is given) and QUEUES (default: %(default)s)")
        parser.add_argument("--queue", "-q", action="append", default=[],
                            metavar="NAME[=WEIGHT]",
                            help="a Django queue to serve, with its weight, repeatable: its "
                                 "priority bands are served with it (default: the backend's "
                                 "QUEUES, weight 1 each)")
        parser.add_argument("--redis-url", "-u", default=None,
                            help="Redis URL (default: the backend's OPTIONS['URL'])")
        parser.add_argument("--mux", metavar="MODULE:ATTR", default=f"{WORKER_MODULE}:mux",
                            help="the ServeMux to run, e.g. an asyncq.contrib.django.TaskMux "
                                 "with handlers of your own (default: %(default)s, every "
                                 "Django task of the project)")
        parser.add_argument("--priority-order", choices=["strict", "weighted"],
                            default="strict",
                            help=f"strict: a higher priority band always runs first (as "
                                 f"Django's database backend orders by priority), the queues' "
                                 f"weights ordering queues within a band; weighted: a band is "
                                 f"tried first {WEIGHT_STEP}x as often as the one below it, "
                                 f"times its queue's weight, so low priorities never starve "
                                 f"(default: %(default)s)")

    def run_from_argv(self, argv: list[str]) -> None:
        self._exec = True  # (from the command line: the worker takes this process over)
        super().run_from_argv(argv)

    def handle(self, *args: Any, **options: Any) -> None:
        argv = self.worker_argv(options)
        env = dict(os.environ)
        # The worker imports the project as manage.py does (its directory, --pythonpath).
        if sys.path and sys.path[0]:
            env["PYTHONPATH"] = os.pathsep.join(
                [sys.path[0], *filter(None, [env.get("PYTHONPATH")])])
        sys.stdout.flush()
        sys.stderr.flush()
        if self._exec:
            os.execve(sys.executable, argv, env)
        code = subprocess.run(argv, env=env, check=False).returncode
        if code:
            raise CommandError(f"asyncq worker {_ended(code)}", returncode=code)

    def worker_argv(self, options: dict[str, Any]) -> list[str]:
        """The ``python -m asyncq worker`` command line these options make: the mux, the
        backend's Redis URL and its queues with their bands, then the flags left to it."""
        alias = options["backend"]
        backend = task_backends[alias]
        if not isinstance(backend, AsyncqBackend):
            raise CommandError(f"TASKS[{alias!r}] is {type(backend).__name__}, not "
                               f"asyncq.contrib.django.AsyncqBackend")
        queues = dict(_queue(q) for q in options["queue"]) or dict.fromkeys(backend.queues, 1)
        if not queues:
            raise CommandError(f"TASKS[{alias!r}] lists no QUEUES: name them with --queue")
        unknown = sorted(set(queues) - backend.queues) if backend.queues else []
        if unknown:
            raise CommandError(f"--queue {', '.join(unknown)}: not in TASKS[{alias!r}] QUEUES "
                               f"{sorted(backend.queues)} (name the Django queues: their "
                               f"priority bands are served with them)")
        strict = options["priority_order"] == "strict"
        argv = [sys.executable, "-m", "asyncq", "worker", options["mux"],
                f"--redis-url={options['redis_url'] or backend.url}"]
        argv += [f"--queue={name}={weight}"
                 for name, weight in backend.bands.served(queues, strict=strict).items()]
        if backend.bands.enabled and strict:
            argv.append("--strict-priority")
        if _PRELOAD:  # (Django set up once in the process pool's fork server)
            argv.append(f"--preload={WORKER_MODULE}")
        if options.get("traceback"):
            argv.append("--traceback")
        return argv + list(options.get(WORKER_FLAGS) or [])


_PRELOAD = "preload" in {f.name for f in dataclasses.fields(WorkerConfig)}
"""Whether the worker takes modules for its fork server to import."""


def _queue(text: str) -> tuple[str, int]:
    name, sep, weight = text.partition("=")
    if not sep:
        return name, 1
    try:
        value = int(weight)
    except ValueError:
        value = 0
    if value < 1:
        raise CommandError(f"--queue {text!r}: the weight after '=' must be an int >= 1")
    return name, value


def _ended(code: int) -> str:
    return f"exited with status {code}" if code > 0 else f"was killed by signal {-code}"
