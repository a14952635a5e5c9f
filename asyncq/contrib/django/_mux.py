"""How a worker runs Django tasks: ``register(mux, task)`` puts a framework task on a ServeMux
under its dotted path with the options of its definition over its backend's and Django's
defaults (``_rules.rules_of``); ``TaskMux`` registers each Django task the first time the worker
meets its type, so ``manage.py asyncq_worker`` needs no list of tasks."""

from __future__ import annotations

from typing import Any

from asyncq._log import get_logger
from asyncq._worker._mux import ServeMux

from ._compat import Task
from ._results import framework_task
from ._rules import rules_of
from ._task import DEFINED


def register(mux: ServeMux, *tasks: Task[Any, Any] | str) -> None:
    """Register each Django task (the ``@task`` object or its dotted path) on ``mux`` under
    its dotted path, with the options its definition gives (``rules_of``): sync functions
    run in the worker's threads, async ones on its loop, ``isolate="process"`` ones in its
    pool of child processes (Django is set up there on first use, or once in the fork server
    when the worker preloads ``asyncq.contrib.django.worker``). A path that is not a task is
    a TypeError, a task registered twice a ValueError."""
    from ._child import run_in_child
    from ._runner import run_django_task

    for item in tasks:
        task = framework_task(item) if isinstance(item, str) else item
        if not isinstance(task, Task):
            raise TypeError(f"register takes Django tasks (decorated with @task) or their "
                            f"dotted paths, got {item!r}")
        options = rules_of(task)
        handler = run_in_child if options.get("isolate") == "process" else run_django_task
        mux.handle(task.module_path, handler, **options)


class TaskMux(ServeMux):
    """A ServeMux that runs every Django task. Made, it imports the ``tasks`` module of each
    installed app (as Celery's autodiscovery does) and registers (``register``) every task of
    an asyncq backend defined so far; a task type met later that names a ``@task`` object
    elsewhere is registered before its first run (its rate and concurrency limits, if any,
    apply from the next tasks the worker fetches: define such a task where it is
    discovered). Anything else has no handler, as with a plain ServeMux. Add handlers of your
    own and middlewares as to any ServeMux."""

    def __init__(self, **kwargs: Any) -> None:
        from django.utils.module_loading import autodiscover_modules

        super().__init__(**kwargs)
        self._looked_up: set[str] = set()
        autodiscover_modules("tasks")
        for path in list(DEFINED):
            self._discover(path)

    def _discover(self, task_type: str) -> None:
        if task_type in self._looked_up or len(self._looked_up) >= 10_000:
            return
        self._looked_up.add(task_type)
        if ServeMux.match(self, task_type) is not None:
            return
        try:
            task = framework_task(task_type)
        except (ImportError, TypeError, ValueError):
            return  # not a Django task: no handler (the worker says so)
        except Exception as exc:  # its module fails to import: say why, once
            get_logger("django").error("a task type names a module that fails to import",
                                       task_type=task_type,
                                       error=f"{type(exc).__name__}: {exc}")
            return
        register(self, task)

    def match(self, task_type: str) -> Any:
        self._discover(task_type)
        return ServeMux.match(self, task_type)

    def rules_for(self, task_type: str) -> Any:
        self._discover(task_type)
        return ServeMux.rules_for(self, task_type)
