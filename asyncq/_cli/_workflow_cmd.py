"""``asyncq workflow ls|inspect|cancel``: workflows, their steps and their states."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ._output import (
    add_common_args,
    fmt_time,
    object_doc,
    print_fields,
    print_json,
    print_table,
    run_inspector,
    say,
)

if TYPE_CHECKING:
    from .._inspector._inspector import Inspector
    from .._workflow import WorkflowInfo


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("workflow", help="look at and cancel workflows")
    wsub = p.add_subparsers(dest="workflow_command", metavar="SUBCOMMAND", required=True)
    ls = wsub.add_parser("ls", help="list the newest workflows")
    ls.add_argument("--limit", type=int, default=50, help="most workflows listed (default 50)")
    add_common_args(ls)
    ls.set_defaults(func=cmd_ls)
    show = wsub.add_parser("inspect", help="a workflow with each step's state")
    show.add_argument("workflow_id")
    add_common_args(show)
    show.set_defaults(func=cmd_inspect)
    cancel = wsub.add_parser("cancel", help="cancel a workflow (its steps are deleted or "
                                            "cancelled)")
    cancel.add_argument("workflow_id")
    add_common_args(cancel, json=False)
    cancel.set_defaults(func=cmd_cancel)


def workflow_doc(info: WorkflowInfo) -> dict[str, Any]:
    return object_doc(info)


def cmd_ls(args: argparse.Namespace) -> int:
    async def body(inspector: Inspector) -> int:
        flows = await inspector.workflows(args.limit)
        if args.json:
            print_json([workflow_doc(w) for w in flows])
        elif not flows:
            say("no workflows")
        else:
            print_table(["ID", "STATE", "DONE", "CREATED", "ERROR"],
                        [[w.id, w.state.value, f"{w.done}/{w.steps}", fmt_time(w.created_at),
                          w.error or ""] for w in flows])
        return 0

    return run_inspector(args, body)


def cmd_inspect(args: argparse.Namespace) -> int:
    async def body(inspector: Inspector) -> int:
        info = await inspector.workflow(args.workflow_id)
        if args.json:
            print_json(workflow_doc(info))
            return 0
        print_fields([("id", info.id), ("state", info.state.value),
                      ("steps done", f"{info.done}/{info.steps}"),
                      ("created", fmt_time(info.created_at)),
                      ("failed step", info.failed_step or ""), ("error", info.error or "")])
        say()
        print_table(["NODE", "KIND", "STATE", "QUEUE", "TASK", "TYPE", "AFTER"],
                    [[n.node, n.kind, n.state, n.queue or "", n.task_id or "", n.type or "",
                      ",".join(n.depends_on)] for n in info.nodes])
        return 0

    return run_inspector(args, body)


def cmd_cancel(args: argparse.Namespace) -> int:
    async def body(inspector: Inspector) -> int:
        if await inspector.cancel_workflow(args.workflow_id):
            say(f"workflow {args.workflow_id} cancelled")
            return 0
        say(f"workflow {args.workflow_id} had already ended (or does not exist)")
        return 1

    return run_inspector(args, body)
