"""``AsyncqBackend``: the Django Tasks framework's backend that stores each enqueued call as an
asyncq task, so ``@task`` functions run on asyncq workers (``manage.py asyncq_worker``)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured

from asyncq._client._client import Client
from asyncq._defaults import RESULT_RETENTION
from asyncq._errors import TaskNotFoundError
from asyncq._inspector._inspector import Inspector
from asyncq._model._flow import Flow
from asyncq._model._info import TaskInfo
from asyncq._model._rules import handler_rules
from asyncq._validate import validate_queue_name
from asyncq._workflow import WorkflowHandle

from ._bridge import LoopBridge
from ._compat import (
    BaseTaskBackend,
    InvalidTaskError,
    Task,
    TaskResult,
    TaskResultDoesNotExist,
    normalize_json,
    task_enqueued,
)
from ._priority import DEFAULT_PRIORITIES, Bands, parse_priorities
from ._results import result_of, task_payload
from ._task import AsyncqTask

#: How long a completed call is kept (seconds) unless OPTIONS say RETENTION: as asyncq keeps
#: a task that returned a value, and the same for one that returned None (asyncq would leave
#: only a completion mark, without the call's arguments), so ``get_result`` reads either.
_RETENTION = RESULT_RETENTION

_OPTION_NAMES = {"URL", "MAX_RETRY", "TIMEOUT", "RETENTION", "PRIORITIES"}


class AsyncqBackend(BaseTaskBackend):
    """Enqueues to asyncq and reads results back from it.

    ``TASKS = {"default": {"BACKEND": "asyncq.contrib.django.AsyncqBackend", "QUEUES":
    ["default"], "OPTIONS": {"URL": "redis://..."}}}``. Each call becomes an asyncq task whose
    type is the function's dotted path, whose payload is its arguments (JSON) and whose asyncq
    queue is its ``queue_name`` (``<queue_name>:<band>`` for a priority band); its result id
    is the asyncq task id; its options are its definition's (``AsyncqTask``, the backend's
    ``task_class``). OPTIONS: ``URL`` (required); ``MAX_RETRY``, ``TIMEOUT`` (seconds) and
    ``RETENTION`` (seconds a completed call is kept, whether it returned a value or None;
    default 600), the defaults of its tasks' definitions, which the worker applies however a
    call was enqueued (see ``_rules.rules_of``); ``PRIORITIES`` (band name -> threshold,
    default ``{"high": 1, "low": -1}``; ``{}`` turns priority off, and ``supports_priority``
    with it: see ``_priority``).
    """

    task_class = AsyncqTask

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True
    """True unless OPTIONS["PRIORITIES"] is empty (set per backend)."""

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        unknown = set(self.options) - _OPTION_NAMES
        if unknown:
            raise ImproperlyConfigured(
                f"TASKS[{alias!r}] OPTIONS has unknown keys {sorted(unknown)}: use "
                f"{sorted(_OPTION_NAMES)}")
        url = self.options.get("URL")
        if not isinstance(url, str) or not url:
            raise ImproperlyConfigured(
                f"TASKS[{alias!r}] needs OPTIONS['URL'], the Redis URL of asyncq (e.g. "
                f"'redis://localhost:6379/0')")
        for queue in self.queues:
            try:
                validate_queue_name(queue)
            except ValueError as exc:
                raise ImproperlyConfigured(f"TASKS[{alias!r}] QUEUES: {exc}") from None
        try:
            self.bands: Bands = parse_priorities(
                self.options.get("PRIORITIES", DEFAULT_PRIORITIES), self.queues)
        except ValueError as exc:
            raise ImproperlyConfigured(f"TASKS[{alias!r}] OPTIONS {exc}") from None
        self.supports_priority = self.bands.enabled
        self.url: str = url
        self.rule_defaults: dict[str, Any] = {
            "retention": self.options.get("RETENTION", _RETENTION)}
        """The ``ServeMux.handle`` options of its tasks that their definitions leave out."""
        if "MAX_RETRY" in self.options:
            self.rule_defaults["max_retry"] = self.options["MAX_RETRY"]
        if "TIMEOUT" in self.options:
            self.rule_defaults["timeout"] = self.options["TIMEOUT"]
        try:
            handler_rules(**self.rule_defaults, what=f"TASKS[{alias!r}] OPTIONS")
        except (TypeError, ValueError) as exc:
            raise ImproperlyConfigured(str(exc)) from None
        self._bridge = LoopBridge(lambda: Client(self.url))

    def validate_task(self, task: Task[Any, Any]) -> None:
        super().validate_task(task)
        try:
            validate_queue_name(self.bands.queue_for(task.queue_name, task.priority))
        except ValueError as exc:
            raise InvalidTaskError(str(exc)) from None

    def prepare(self, task: Task[Any, Any], args: Any, kwargs: Any
                ) -> tuple[dict[str, Any], dict[str, Any]]:
        """A call's asyncq payload and enqueue options (its queue: the priority band's)."""
        self.validate_task(task)
        try:
            payload = normalize_json(task_payload(args, kwargs, task.priority, task.run_after,
                                                  task.queue_name, task.backend))
        except TypeError as exc:
            raise TypeError(f"the arguments of {task.module_path} must be JSON values "
                            f"(str, int, float, bool, None, list, dict): {exc}") from None
        options = task.enqueue_options() if isinstance(task, AsyncqTask) else {}
        options["queue"] = self.bands.queue_for(task.queue_name, task.priority)
        if task.run_after is not None:
            options["process_at"] = task.run_after
        return payload, options

    def enqueue(self, task: Task[Any, Any], args: Any, kwargs: Any) -> TaskResult[Any]:
        """Store the call as an asyncq task (scheduled when ``run_after`` is set)."""
        payload, options = self.prepare(task, args, kwargs)
        info = self._bridge.run(lambda c: c.enqueue(task.module_path, payload, **options))
        result = result_of(info, self.alias, task=task)
        task_enqueued.send(type(self), task_result=result)
        return result

    async def aenqueue(self, task: Task[Any, Any], args: Any, kwargs: Any) -> TaskResult[Any]:
        """``enqueue`` from async code, without a thread per call; ``task_enqueued`` is sent
        with ``asend``, so sync receivers run in a thread and may use the database."""
        payload, options = self.prepare(task, args, kwargs)
        info = await self._bridge.arun(
            lambda c: c.enqueue(task.module_path, payload, **options))
        result = result_of(info, self.alias, task=task)
        await task_enqueued.asend(type(self), task_result=result)
        return result

    def enqueue_workflow(self, flow: Flow[Any, Any], **options: Any) -> WorkflowHandle[Any]:
        """Start an asyncq workflow (``chain``/``group``/``chord`` of ``step``/``pipe`` steps
        of Django tasks, or of any asyncq steps) from sync code: ``Client.enqueue_workflow``
        with its options."""
        return self._bridge.run(lambda c: c.enqueue_workflow(flow, **options))

    async def aenqueue_workflow(self, flow: Flow[Any, Any], **options: Any
                                ) -> WorkflowHandle[Any]:
        """``enqueue_workflow`` from async code."""
        return await self._bridge.arun(lambda c: c.enqueue_workflow(flow, **options))

    def get_result(self, result_id: str) -> TaskResult[Any]:
        """The task's status, return value and errors as asyncq holds them now;
        TaskResultDoesNotExist once it is gone (after its retention)."""
        return result_of(self._bridge.run(lambda c: _find(c, result_id)), self.alias)

    async def aget_result(self, result_id: str) -> TaskResult[Any]:
        """``get_result`` from async code."""
        return result_of(await self._bridge.arun(lambda c: _find(c, result_id)), self.alias)


async def _find(client: Client, result_id: str) -> TaskInfo:
    """The stored call ``result_id``; TaskResultDoesNotExist when asyncq no longer keeps it,
    nor when only its completion mark is left: a task that returned None without a retention
    (not enqueued by this backend, which sets one) keeps neither its type nor its arguments."""
    try:
        info = await Inspector(client.broker).find_task(result_id)
    except (TaskNotFoundError, ValueError, TypeError):
        raise TaskResultDoesNotExist(result_id) from None
    if not info.type:
        raise TaskResultDoesNotExist(result_id)
    return info
