"""asyncq's options on Django tasks: given where the task is defined (``@task(retry_on=...)``,
the framework passing the decorator's extra keywords to the backend's task class) and per
call (``.using(...)``), checked where they are given, and applied by the worker whatever
enqueued the call."""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta
from typing import Any

import pytest

pytest.importorskip("django")

from tests.contrib.django.harness import WAIT, Shop


def _defined(**options: Any) -> Any:
    from shop.tasks import QUEUE

    from asyncq.contrib.django._compat import Task

    try:
        from django.tasks import task
    except ImportError:
        from django_tasks import task
    made = task(queue_name=QUEUE, **options)(module_level)
    assert isinstance(made, Task)
    return made


def module_level(order: str) -> str:
    return order


def _result(result_id: str) -> Any:
    from asyncq.contrib.django._compat import task_backends

    return task_backends["default"].get_result(result_id)


def _ended(result_id: str, shop: Shop) -> Any:
    """The call's result once it finished (polled until then)."""
    from tests.helpers.polling import poll_until

    return poll_until(lambda: (r := _result(result_id)).is_finished and r, timeout=WAIT,
                      message=lambda: f"call {result_id} finished; worker log:\n"
                      f"{shop.log.read_text(errors='replace')[-3000:]}")


@pytest.mark.parametrize(("options", "error", "says"), [
    ({"max_retry": "3"}, TypeError, "max_retry must be an int"),
    ({"retry_on": "ConnectionError"}, TypeError, "retry_on must be an exception type"),
    ({"timeout": -1}, ValueError, "timeout"),
    ({"isolate": "fork"}, ValueError, "isolate must be 'thread' or 'process'"),
    ({"soft_timeout": 1}, ValueError, "soft_timeout needs isolate='process'"),
    ({"limits": ["5/s"]}, TypeError, "limit"),
    ({"unique": 0}, ValueError, "unique"),
    ({"expires_in": 0}, ValueError, "expires_in must be more than 0"),
])
def test_a_bad_option_fails_where_the_task_is_defined(
        shop: Shop, options: dict[str, Any], error: type[Exception], says: str) -> None:
    with pytest.raises(error, match=says):
        _defined(**options)


@pytest.mark.parametrize(("options", "error", "says"), [
    ({"retry_on": ValueError}, TypeError, "is set where the task is defined"),
    ({"isolate": "process"}, TypeError, "is set where the task is defined"),
    ({"process_in": 5}, TypeError, "use run_after= or queue_name="),
    ({"max_retries": 5}, TypeError, "unknown option 'max_retries'"),
    ({"timeout": "soon"}, (TypeError, ValueError), "timeout"),
])
def test_a_bad_call_option_fails_at_using(
        shop: Shop, options: dict[str, Any], error: Any, says: str) -> None:
    from shop.tasks import add

    with pytest.raises(error, match=says):
        add.using(**options)


def test_call_options_are_stored_with_the_call_and_win_over_the_definition(shop: Shop) -> None:
    """``.using(max_retry=, timeout=, retention=)`` is stored with the call as its producer's
    options; ``using`` again adds to them, and the framework's own options stay as given."""
    from shop.tasks import QUEUE, deliver

    later = deliver.using(max_retry=7).using(timeout=timedelta(seconds=9), priority=3)
    assert (later.priority, later.queue_name, later.max_retry) == (3, QUEUE, 3)
    assert later.enqueue_options() == {"max_retry": 7, "timeout": timedelta(seconds=9)}
    result = later.using(run_after=_in(3600)).enqueue("G-1", "smtp")
    info = asyncio.run(_stored(result.id, f"{QUEUE}:high"))
    assert (info.max_retry, info.timeout) == (7, timedelta(seconds=9))


async def _stored(task_id: str, queue: str) -> Any:
    """The stored task (then deleted: it was scheduled an hour ahead)."""
    from asyncq import Inspector

    async with Inspector(os.environ["SHOP_REDIS_URL"]) as inspector:
        info = await inspector.task_info(queue, task_id)
        await inspector.delete_task(queue, task_id)
    return info


def _in(seconds: float) -> Any:
    from django.utils import timezone

    return timezone.now() + timedelta(seconds=seconds)


def test_the_defaults_of_a_django_task(shop: Shop) -> None:
    """Neither the definition nor the backend says how to retry: an exception fails the call
    at once (the framework's contract), but a run its worker lost is run again, up to
    ``DJANGO_MAX_RETRY`` times; ``max_retry`` alone (here the backend's ``MAX_RETRY``)
    retries every error; ``retry_on`` alone keeps ``DJANGO_MAX_RETRY``."""
    from shop.tasks import add, deliver, give_up

    from asyncq import Retry
    from asyncq.contrib.django import DJANGO_MAX_RETRY
    from asyncq.contrib.django._rules import rules_of

    assert rules_of(add) == {"max_retry": DJANGO_MAX_RETRY, "retry_on": (Retry,),
                             "retention": 600}
    assert rules_of(give_up) == {"max_retry": 2, "retention": 600}  # (MAX_RETRY 2)
    assert rules_of(_defined(retry_on=KeyError)) == {
        "max_retry": DJANGO_MAX_RETRY, "retry_on": KeyError, "retention": 600}
    assert rules_of(deliver)["max_retry"] == 3


def test_a_task_is_retried_on_the_one_error_it_names(shop: Shop) -> None:
    """``retry_on=SMTPError``: the mail server's error is retried (SUCCESSFUL on the second
    attempt); any other error FAILS the call at once."""
    from shop.tasks import deliver

    retried = deliver.enqueue("H-1", "smtp").id
    final = deliver.enqueue("H-2", "value").id

    done = _ended(retried, shop)
    assert (done.status, done.return_value, done.attempts) == ("SUCCESSFUL", 2, 2)
    failed = _ended(final, shop)
    assert failed.status == "FAILED"
    assert [e.exception_class_path for e in failed.errors] == ["builtins.ValueError"]
    assert failed.attempts == 1


@pytest.mark.slow
def test_a_rate_limit_defined_on_a_task_holds(shop: Shop) -> None:
    """``limits=[RateLimit("2/s")]``: 6 calls start at most 2 a second."""
    _check_paced(shop, [0] * 6)


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="each priority band (an asyncq queue) still gets a "
                   "budget of its own: fixed with the rate limit shared across a queue's bands")
def test_a_rate_limit_is_shared_by_every_priority(shop: Shop) -> None:
    """The same, 2 calls at each of three priorities (three asyncq queues)."""
    _check_paced(shop, [5, 0, -5] * 2)


def _check_paced(shop: Shop, priorities: list[int]) -> None:
    from shop.tasks import call_partner

    ids = [call_partner.using(priority=p).enqueue(f"P-{i}-{p}").id
           for i, p in enumerate(priorities)]
    starts = sorted(_ended(i, shop).started_at for i in ids)
    assert all(_result(i).status == "SUCCESSFUL" for i in ids)
    # 6 starts at 2 per second: the 1st and the 5th are at least ~2 s apart.
    assert (starts[4] - starts[0]).total_seconds() >= 1.8, starts


@pytest.mark.slow
def test_a_process_isolated_task_runs_in_a_child_with_its_context_and_signals(
        shop: Shop) -> None:
    """``isolate="process"``: the call runs in a child process of the worker (not the worker),
    with its TaskContext, and the child sends ``task_started`` / ``task_finished``; a call
    running past its 1 s limit is killed and FAILED with a TimeoutError, and the next one
    runs; a None result reads back."""
    from shop.tasks import nothing_back, render_pdf, runaway

    first = render_pdf.enqueue(0.05).id
    killed = runaway.enqueue(30).id
    done = _ended(first, shop)
    assert done.status == "SUCCESSFUL"
    child = done.return_value["pid"]
    assert done.return_value["id"] == first
    ran = [(s["signal"], s["pid"]) for s in shop.signals(first)
           if s["signal"] != "task_enqueued"]  # (sent once the enqueue returned: maybe last)
    assert ran == [("task_started", child), ("task_finished", child)]
    assert child != shop.worker_pid

    failed = _ended(killed, shop)
    assert failed.status == "FAILED"
    assert failed.errors[0].exception_class_path.endswith("TimeoutError")
    after = _ended(render_pdf.enqueue(0.05).id, shop)
    assert after.status == "SUCCESSFUL"
    empty = _ended(nothing_back.enqueue().id, shop)
    assert (empty.status, empty.return_value) == ("SUCCESSFUL", None)


def test_a_chord_of_django_tasks_started_from_django_code(shop: Shop) -> None:
    """``step`` / ``pipe`` make workflow steps of Django tasks: a chord of 8 ``add`` calls
    whose callback ``total`` gets their results; the callback's result is read back by its
    step's id with ``get_result``, its first argument being the group's results."""
    from shop.tasks import add, total

    from asyncq import chord
    from asyncq.contrib.django import pipe, step
    from asyncq.contrib.django._compat import task_backends

    callback = pipe(total, extra=100)
    handle = task_backends["default"].enqueue_workflow(
        chord([step(add, i, i) for i in range(8)], callback))

    done = _ended(callback.task.id, shop)
    assert (done.status, done.return_value) == ("SUCCESSFUL", 156)
    assert done.args == [[0, 2, 4, 6, 8, 10, 12, 14]]
    assert done.kwargs == {"extra": 100}
    assert handle.steps == 9


@pytest.mark.slow
def test_a_periodic_call_of_a_django_task(shop: Shop) -> None:
    """``call(task, *args)`` registered on asyncq's Scheduler: each firing is a call of the
    Django task, run by the worker with its signals."""
    from shop.tasks import add

    from asyncq import Scheduler
    from asyncq.contrib.django import call
    from asyncq.testing import wait_until

    def ran() -> list[dict[str, Any]]:
        return [s for s in _all_signals(shop) if s["signal"] == "task_finished"
                and s["task"] == "shop.tasks.add" and s["args"] == [1000, 7]]

    async def fire() -> None:
        scheduler = Scheduler(os.environ["SHOP_REDIS_URL"])
        scheduler.register("@every 1s", call(add, 1000, 7))
        async with scheduler:
            await wait_until(lambda: len(ran()) >= 2, timeout=WAIT, message="two firings run")

    asyncio.run(fire())
    assert [(s["status"], s["return_value"]) for s in ran()[:2]] == [
        ("SUCCESSFUL", 1007), ("SUCCESSFUL", 1007)]


def _all_signals(shop: Shop) -> list[dict[str, Any]]:
    import json

    if not shop.signals_file.exists():
        return []
    return [json.loads(line) for line in shop.signals_file.read_text().splitlines()]


def test_a_unique_definition_refuses_an_equal_call_while_one_waits(shop: Shop) -> None:
    from asyncq import DuplicateTaskError

    unique = _defined(unique=60)
    later = unique.using(run_after=_in(3600))
    first = later.enqueue("U-1")
    with pytest.raises(DuplicateTaskError):
        later.enqueue("U-1")
    asyncio.run(_stored(first.id, os.environ["SHOP_QUEUE"]))


def test_a_task_mux_runs_django_tasks_beside_handlers_of_its_own(shop: Shop) -> None:
    """``TaskMux``: the apps' tasks modules registered when it is made, a task of another
    module when first met, with their definitions' options; handlers of its own as on any
    ServeMux; a type that names no task has no handler."""
    import sys

    from asyncq.contrib.django import TaskMux

    async def resize(task: Any) -> None: ...

    mux = TaskMux()
    mux.handle("images:resize", resize)
    assert "shop.tasks.deliver" in mux.patterns()
    assert "shop.reports.nightly" not in mux.patterns()
    assert "shop.reports" not in sys.modules
    rules = mux.rules_for("shop.reports.nightly")
    assert rules is not None and rules.max_retry == 4
    assert mux.match("shop.reports.nightly") is not None
    assert mux.match("images:resize") is not None
    assert mux.match("shop.tasks.QUEUE") is None
    assert mux.match("no.such.module") is None


def test_asyncq_task_decorator_gives_the_options_on_any_django(shop: Shop) -> None:
    """``asyncq.contrib.django.task``: the framework's ``@task`` (its own options) plus
    asyncq's, checked the same way; without asyncq options it is the framework's task."""
    from shop.tasks import QUEUE

    from asyncq.contrib.django import AsyncqTask, task
    from asyncq.contrib.django._rules import rules_of

    made = task(queue_name=QUEUE, priority=2, retry_on=KeyError, timeout=5)(module_level)
    assert isinstance(made, AsyncqTask)
    assert (made.queue_name, made.priority, made.retry_on, made.timeout) == (
        QUEUE, 2, KeyError, 5)
    assert rules_of(made)["retry_on"] is KeyError
    plain = task(backend="spare", queue_name=os.environ["SHOP_SPARE_QUEUE"])(module_level)
    assert (plain.backend, plain.defined()) == ("spare", {})
    with pytest.raises(ValueError, match="isolate must be"):
        task(queue_name=QUEUE, isolate="fork")(module_level)
