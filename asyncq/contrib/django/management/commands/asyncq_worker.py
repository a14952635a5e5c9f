"""``manage.py asyncq_worker``: an asyncq worker for the project's ``@task`` functions, with
Django set up once (by manage.py) for the whole process; each Django queue is served with its
priority bands (``<queue>:high``...), higher bands first."""

from __future__ import annotations

import asyncio
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from asyncq._worker import Worker
from asyncq.contrib.django._backend import AsyncqBackend
from asyncq.contrib.django._compat import DEFAULT_TASK_BACKEND_ALIAS, task_backends
from asyncq.contrib.django._priority import WEIGHT_STEP
from asyncq.contrib.django._runner import run_django_task


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


class Command(BaseCommand):
    help = ("Run an asyncq worker for this project's Django tasks (the queues of the asyncq "
            "task backend unless --queue is given).")

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--backend", default=DEFAULT_TASK_BACKEND_ALIAS,
                            help="the TASKS alias of the asyncq backend (default: %(default)s)")
        parser.add_argument("--queue", "-q", action="append", default=[],
                            metavar="NAME[=WEIGHT]",
                            help="a queue to serve, with its weight (repeatable; default: the "
                                 "backend's QUEUES, weight 1 each)")
        parser.add_argument("--concurrency", "-c", type=int, default=None,
                            help="most tasks running at once (default: asyncq's)")
        parser.add_argument("--priority-order", choices=["strict", "weighted"],
                            default="strict",
                            help=f"strict: a higher priority band always runs first (as "
                                 f"Django's database backend orders by priority), the queues' "
                                 f"weights ordering queues within a band; weighted: a band is "
                                 f"tried first {WEIGHT_STEP}x as often as the one below it, "
                                 f"times its queue's weight, so low priorities never starve "
                                 f"(default: %(default)s)")

    def handle(self, *args: Any, **options: Any) -> None:
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
        config: dict[str, Any] = {"queues": backend.bands.served(queues, strict=strict)}
        if backend.bands.enabled:
            config["strict_priority"] = strict
        if options["concurrency"] is not None:
            config["concurrency"] = options["concurrency"]
        try:
            worker = Worker(backend.url, run_django_task, **config)
        except (TypeError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        asyncio.run(worker.run())
