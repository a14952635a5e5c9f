"""``asyncq task ...``: list, inspect, cancel, run, archive, delete and enqueue tasks."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from . import _enqueue_cmd
from ._common import add_replaced, deprecated_parser
from ._output import (
    add_common_args,
    bytes_doc,
    compact_json,
    fmt_duration,
    fmt_limit,
    fmt_payload,
    fmt_run_length,
    fmt_run_time,
    fmt_time,
    print_fields,
    print_json,
    print_table,
    run_inspector,
    say,
    task_doc,
)

if TYPE_CHECKING:
    from .._inspector._inspector import Inspector
    from .._model._info import TaskInfo, TaskState

#: The states a queue lists: the task model's STORED_STATES, spelt out so that building the
#: parser does not import the model (tests/cli/test_startup.py checks that they agree).
STATES = ["pending", "active", "scheduled", "retry", "archived", "completed", "aggregating"]
_BULK = {
    "runall": ("run", ["scheduled", "retry", "archived", "completed", "aggregating"],
               "run every task of a state now", "made pending"),
    "archiveall": ("archive", ["pending", "scheduled", "retry", "completed", "aggregating"],
                   "archive every task of a state", "archived"),
    "deleteall": ("delete", [s for s in STATES if s != "active"],
                  "delete every task of a state", "deleted"),
}


def _queue_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--queue", "-q", required=True, help="queue name")


def _ids_arg(p: argparse.ArgumentParser, *, many: bool = True) -> None:
    """The task id(s), positional in every ``task`` subcommand, and the optional queue that
    holds them (without it the task is looked for in every queue)."""
    if many:
        p.add_argument("ids", nargs="+", metavar="ID", help="task id(s)")
    else:
        p.add_argument("ids", nargs=1, metavar="ID", help="task id")
    p.add_argument("--queue", "-q", help="the task's queue (default: look in every queue)")
    add_replaced(p, "--id", "-i", use=f"give the task id without an option: {p.prog} ID")


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("task", help="look at and manage tasks")
    tsub = p.add_subparsers(dest="task_command", metavar="SUBCOMMAND", required=True)

    ls = tsub.add_parser("ls", help="list the tasks of a queue in a state")
    _queue_arg(ls)
    ls.add_argument("--state", "-s", choices=STATES,
                    help="the state to list (default: every state that has tasks)")
    ls.add_argument("--page", type=int, default=1, help="page number, from 1 (default 1)")
    ls.add_argument("--size", type=int, default=30, help="tasks per page (default 30)")
    ls.add_argument("--group", "-g", help="group (required for aggregating tasks)")
    add_common_args(ls)
    ls.set_defaults(func=cmd_ls)

    inspect = tsub.add_parser("inspect", help="show one task")
    _ids_arg(inspect, many=False)
    add_common_args(inspect)
    inspect.set_defaults(func=cmd_inspect)

    cancel = tsub.add_parser("cancel", help="cancel tasks: one waiting to run is removed, a "
                                            "running one stopped")
    _ids_arg(cancel)
    add_common_args(cancel, json=False)
    cancel.set_defaults(func=cmd_cancel)

    recover = tsub.add_parser(
        "recover", help="send back active tasks whose worker is gone or whose lease expired")
    _ids_arg(recover)
    add_common_args(recover, json=False)
    recover.set_defaults(func=cmd_recover)

    for name, text in (("run", "run tasks now"), ("archive", "archive tasks"),
                       ("delete", "delete tasks")):
        cmd = tsub.add_parser(name, help=text)
        _ids_arg(cmd)
        add_common_args(cmd, json=False)
        cmd.set_defaults(func=cmd_one, op=name)
    for old in ("rm", "remove"):
        cmd = deprecated_parser(tsub, f"asyncq task {old}", "asyncq task delete")
        _ids_arg(cmd)
        add_common_args(cmd, json=False)
        cmd.set_defaults(func=cmd_one, op="delete")

    for name, (op, states, text, _) in _BULK.items():
        cmd = tsub.add_parser(name, help=text)
        _queue_arg(cmd)
        cmd.add_argument("--state", "-s", required=True, choices=states)
        cmd.add_argument("--group", "-g", help="only this group (aggregating; default: all)")
        add_common_args(cmd)
        cmd.set_defaults(func=cmd_bulk, op=op, verb=name)

    _enqueue_cmd.register(tsub)


def _columns(state: TaskState) -> tuple[list[str], Any]:
    """Extra columns for a state: headers and a function TaskInfo -> cells."""
    from .._model._info import TaskState

    # LIMIT: the timeout and deadline a run has (of tasks still to run or running); RAN: how
    # long the latest run took (of tasks done with).
    if state is TaskState.ACTIVE:
        return ["ORPHANED", "RUNNING", "LIMIT"], lambda t: [
            "yes" if t.is_orphaned else "no", fmt_run_length(t), fmt_limit(t)]
    if state is TaskState.SCHEDULED:
        return ["PROCESS AT", "LIMIT"], lambda t: [fmt_next(t), fmt_limit(t)]
    if state is TaskState.RETRY:
        return ["NEXT RETRY", "RETRIED", "LIMIT", "LAST ERROR"], lambda t: [
            fmt_time(t.next_process_at), f"{t.retried}/{t.max_retry}", fmt_limit(t),
            _short(t.last_error)]
    if state is TaskState.ARCHIVED:
        return ["LAST FAILED", "RETRIED", "RAN", "LAST ERROR"], lambda t: [
            fmt_time(t.last_failed_at), f"{t.retried}/{t.max_retry}", fmt_run_length(t),
            _short(t.last_error)]
    if state is TaskState.COMPLETED:
        return ["COMPLETED AT", "RAN", "RESULT"], lambda t: [
            fmt_time(t.completed_at), fmt_run_length(t),
            "-" if t.result is None else f"{len(t.result)} bytes"]
    if state is TaskState.AGGREGATING:
        return ["GROUP", "LIMIT"], lambda t: [t.group or "-", fmt_limit(t)]
    return ["RETRIED", "LIMIT"], lambda t: [f"{t.retried}/{t.max_retry}", fmt_limit(t)]


def fmt_next(t: TaskInfo) -> str:
    """When a scheduled task runs: its time, or ``waiting for a slot (queue concurrency
    limit)`` when a full concurrency limit holds it (it starts as soon as a slot frees)."""
    if t.waiting_for_slot:
        return f"waiting for a slot ({', '.join(t.limited_by)})"
    if t.limited_by:  # a rate limit: its time is when its token is due
        return f"{fmt_time(t.next_process_at)} ({', '.join(t.limited_by)})"
    return fmt_time(t.next_process_at)


def fmt_progress(t: TaskInfo) -> str:
    """The latest run's progress report: ``42% page 3 of 8``; ``-`` when it made none."""
    if t.progress is None:
        return "-"
    pct = f"{t.progress * 100:.0f}%"
    return f"{pct} {_short(t.progress_message, 200)}" if t.progress_message else pct


def _short(text: str | None, width: int = 40) -> str:
    if not text:
        return "-"
    text = text.replace("\n", " ")
    return text if len(text) <= width else text[: width - 3] + "..."


def cmd_ls(args: argparse.Namespace) -> int:
    from .._model._info import TaskState

    async def body(inspector: Inspector) -> int:
        if args.state is None:
            return await list_every_state(inspector, args)
        state = TaskState(args.state)
        tasks = await inspector.list_tasks(args.queue, state, args.page, args.size, args.group)
        if args.json:
            print_json([task_doc(t) for t in tasks])
            return 0
        if not tasks:
            say(f"no {state.value} tasks in queue {args.queue} (page {args.page})")
            return 0
        headers, extra = _columns(state)
        print_table(["ID", "TYPE", "PAYLOAD", *headers],
                    [[t.id, t.type, fmt_payload(t), *extra(t)] for t in tasks])
        return 0

    return run_inspector(args, body)


async def list_every_state(inspector: Inspector, args: argparse.Namespace) -> int:
    """``task ls -q Q`` without ``-s``: a section per state that has tasks."""
    from .._model._info import TaskState

    info = await inspector.queue_info(args.queue)
    docs: dict[str, list[dict[str, Any]]] = {}
    for state in (TaskState.ACTIVE, TaskState.PENDING, TaskState.SCHEDULED, TaskState.RETRY,
                  TaskState.ARCHIVED, TaskState.COMPLETED):
        if not getattr(info, state.value):
            continue
        tasks = await inspector.list_tasks(args.queue, state, args.page, args.size)
        if args.json:
            docs[state.value] = [task_doc(t) for t in tasks]
            continue
        say(f"{state.value} ({getattr(info, state.value)})")
        headers, extra = _columns(state)
        print_table(["ID", "TYPE", "PAYLOAD", *headers],
                    [[t.id, t.type, fmt_payload(t), *extra(t)] for t in tasks])
        say()
    if args.json:
        print_json(docs)
    elif not any(getattr(info, s) for s in ("active", "pending", "scheduled", "retry",
                                            "archived", "completed")):
        say(f"no tasks in queue {args.queue}")
    return 0


def fmt_result(t: TaskInfo) -> str:
    """A task's result for people: JSON as compact JSON, text as text, other bytes counted."""
    if t.result is None:
        return "-"
    value, kind = bytes_doc(t.result, t.result_encoding)
    if kind == "json":
        text = compact_json(value)
    elif kind == "text":
        text = repr(value)
    else:
        return f"<{len(t.result)} bytes of binary data>"
    return text if len(text) <= 300 else text[:297] + f"... ({len(t.result)} bytes)"


def print_task(t: TaskInfo) -> None:
    print_fields([
        ("id", t.id), ("queue", t.queue), ("type", t.type),
        ("state", f"{t.state.value}, waiting for a slot" if t.waiting_for_slot
         else t.state.value),
        *([("limited by", ", ".join(t.limited_by))] if t.limited_by else []),
        ("payload", fmt_payload(t, 200)),
        ("headers", ", ".join(f"{k}={v}" for k, v in sorted(t.headers.items())) or "-"),
        ("retried", f"{t.retried}/{t.max_retry}"),
        ("last error", t.last_error or "-"), ("last failed at", fmt_time(t.last_failed_at)),
        ("timeout", fmt_duration(t.timeout)), ("deadline", fmt_time(t.deadline)),
        ("expires at", fmt_time(t.expires_at)),
        ("group", t.group or "-"), ("next process at",
         f"as soon as a slot frees (at the latest {fmt_time(t.next_process_at)})"
         if t.waiting_for_slot else fmt_time(t.next_process_at)),
        ("orphaned", "yes" if t.is_orphaned else "no"),
        ("retention", fmt_duration(t.retention)),
        ("enqueued at", fmt_time(t.enqueued_at)), ("started at", fmt_time(t.started_at)),
        ("completed at", fmt_time(t.completed_at)), ("run time", fmt_run_time(t)),
        ("progress", fmt_progress(t)),
        *([("progress data", compact_json(t.progress_data)[:300])]
          if t.progress_data is not None else []),
        *([("progress at", fmt_time(t.progress_at))] if t.progress is not None else []),
        ("result", fmt_result(t)),
    ])
    if t.last_traceback:  # the failure's traceback, as stored (bounded), under the fields
        say("last traceback:")
        for line in t.last_traceback.splitlines():
            say(f"  {line}")


async def _queue_of(inspector: Inspector, args: argparse.Namespace, task_id: str) -> str:
    """The queue given with ``-q``, else the one queue that holds ``task_id``."""
    if args.queue:
        return str(args.queue)
    return (await inspector.find_task(task_id)).queue


def cmd_inspect(args: argparse.Namespace) -> int:
    async def body(inspector: Inspector) -> int:
        [task_id] = args.ids
        t = (await inspector.task_info(args.queue, task_id) if args.queue
             else await inspector.find_task(task_id))
        if args.json:
            print_json(task_doc(t))
        else:
            print_task(t)
        return 0

    return run_inspector(args, body)


def cmd_cancel(args: argparse.Namespace) -> int:
    async def body(inspector: Inspector) -> int:
        for task_id in args.ids:
            say((await inspector.cancel(task_id, queue=args.queue)).told(task_id))
        return 0

    return run_inspector(args, body)



def cmd_recover(args: argparse.Namespace) -> int:
    async def body(inspector: Inspector) -> int:
        for task_id in args.ids:
            queue = await _queue_of(inspector, args, task_id)
            await inspector.recover_task(queue, task_id)
            state = (await inspector.task_info(queue, task_id)).state
            say(f"recovered task {task_id}: now {state.value}")
        return 0

    return run_inspector(args, body)


def cmd_one(args: argparse.Namespace) -> int:
    """``task run|archive|delete ID...``: each id in turn; the first error stops the rest."""
    async def body(inspector: Inspector) -> int:
        for task_id in args.ids:
            queue = await _queue_of(inspector, args, task_id)
            if args.op == "run":
                await inspector.run_task(queue, task_id)
                say(f"task {task_id} is now pending")
            elif args.op == "archive":
                trimmed = await inspector.archive_task(queue, task_id)
                say(f"archived task {task_id}" + (
                    f" (the archive limits deleted the {trimmed} oldest archived task(s))"
                    if trimmed else ""))
            else:
                await inspector.delete_task(queue, task_id)
                say(f"deleted task {task_id}")
        return 0

    return run_inspector(args, body)


def cmd_bulk(args: argparse.Namespace) -> int:
    async def body(inspector: Inspector) -> int:
        method = {"run": inspector.run_all, "archive": inspector.archive_all,
                  "delete": inspector.delete_all}[args.op]
        count = await method(args.queue, args.state, args.group)
        trimmed = getattr(count, "trimmed", 0)
        if args.json:
            print_json({"queue": args.queue, "state": args.state, "group": args.group,
                        "count": int(count), "archive_trimmed": trimmed})
        else:
            say(f"{count} {args.state} task(s) {_BULK[args.verb][3]}")
            if trimmed:
                say(f"the archive is capped (asyncq queue archive-limits {args.queue}): the "
                    f"{trimmed} oldest archived task(s) were deleted")
        return 0

    return run_inspector(args, body)
