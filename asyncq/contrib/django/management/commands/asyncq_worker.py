"""``manage.py asyncq_worker``: ``asyncq worker`` for the project's Django tasks. It takes every
flag of ``asyncq worker`` (processes, pool size, per-child caps, metrics and health ports,
--config, --reload, log format...), defined once by the worker command itself; Django is set
up once per process (here by manage.py; in each process of ``--processes`` or ``--reload``
and in the fork server of the process pool by importing ``asyncq.contrib.django.worker``).
Each Django queue is served with its priority bands (``<queue>:high``...), higher first."""

from __future__ import annotations

import os
import sys
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from asyncq._cli import _worker_cmd
from asyncq._cli._common import CLIError, parse_queue_weights
from asyncq.contrib.django._backend import AsyncqBackend
from asyncq.contrib.django._compat import DEFAULT_TASK_BACKEND_ALIAS, task_backends
from asyncq.contrib.django._priority import WEIGHT_STEP

WORKER_MODULE = "asyncq.contrib.django.worker"
"""Sets Django up when imported: the worker's target (``:mux``) and the module its process
pool preloads."""
DJANGO_FLAGS = ("backend", "priority_order", "mux")
"""This command's own flags (the others are ``asyncq worker``'s)."""


class Command(BaseCommand):
    help = ("Run an asyncq worker for this project's Django tasks (the queues of the asyncq "
            "task backend unless --queue is given). Takes every flag of 'asyncq worker'.")

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--backend", default=DEFAULT_TASK_BACKEND_ALIAS,
                            help="the TASKS alias of the asyncq backend: its URL (unless "
                                 "--redis-url is given) and QUEUES (default: %(default)s)")
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
        _worker_cmd.add_worker_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            code = _worker_cmd.run(self.worker_args(options))
        except CLIError as exc:
            raise CommandError(str(exc)) from None
        if code:
            raise SystemExit(code)

    def worker_args(self, options: dict[str, Any]) -> Any:
        """The ``asyncq worker`` arguments these options make: its flags as given, TARGET the
        mux, the backend's Redis URL and its queues with their priority bands."""
        alias = options["backend"]
        backend = task_backends[alias]
        if not isinstance(backend, AsyncqBackend):
            raise CommandError(f"TASKS[{alias!r}] is {type(backend).__name__}, not "
                               f"asyncq.contrib.django.AsyncqBackend")
        try:
            named = parse_queue_weights(options["queue"])
        except CLIError as exc:
            raise CommandError(str(exc)) from None
        queues = named or dict.fromkeys(backend.queues, 1)
        if not queues:
            raise CommandError(f"TASKS[{alias!r}] lists no QUEUES: name them with --queue")
        unknown = sorted(set(queues) - backend.queues) if backend.queues else []
        if unknown:
            raise CommandError(f"--queue {', '.join(unknown)}: not in TASKS[{alias!r}] QUEUES "
                               f"{sorted(backend.queues)} (name the Django queues: their "
                               f"priority bands are served with them)")
        parser = _worker_cmd.parser()
        worker = parser.parse_args([options["mux"]])
        for name, value in options.items():
            if hasattr(worker, name) and name not in ("target", "factory", "traceback"):
                setattr(worker, name, value)
        worker.traceback = bool(options.get("traceback"))
        if options["redis_url"] == _worker_cmd.redis_url_default():
            worker.redis_url = backend.url
        strict = options["priority_order"] == "strict"
        served = backend.bands.served(queues, strict=strict)
        worker.queue = [f"{name}={weight}" for name, weight in served.items()]
        if backend.bands.enabled:
            worker.strict_priority = strict
        if hasattr(worker, "preload"):  # (Django set up once in the process pool's fork server)
            worker.preload = [*(worker.preload or []), WORKER_MODULE]
        # The worker processes of --processes and --reload import the project as this one.
        if (worker.processes > 1 or worker.reload) and sys.path and sys.path[0]:
            os.environ["PYTHONPATH"] = os.pathsep.join(
                [sys.path[0], *filter(None, [os.environ.get("PYTHONPATH")])])
        return worker
