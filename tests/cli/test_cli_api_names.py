"""The command line speaks the Python API: options named as the ``Client.enqueue`` keywords,
task ids positional in every ``task`` subcommand, ``--json`` documents with the fields and
encodings of the Python objects; an old or shortened spelling is refused with the usage of the
command it was given to."""

from __future__ import annotations

import argparse
import base64
import dataclasses
from collections.abc import Iterator

import pytest

import asyncq
from asyncq import Task, TaskInfo
from asyncq._broker import QueueInfo, ServerInfo
from asyncq._cli import Parser, build_parser, main
from asyncq._model._options import EnqueueOptions
from asyncq._workflow import WorkflowInfo
from asyncq.testing import WorkerFactory, wait_until
from tests.helpers.cli import Cli, err, gather, js, out
from tests.helpers.dataplane import dead_redis_url

DEAD = dead_redis_url()
#: ``task`` subcommands that act on no particular task.
TASKLESS = {"ls", "runall", "archiveall", "deleteall", "enqueue"}



def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands of ``parser`` by name, aliases left out."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if sub not in found.values():
                    found[name] = sub
    return found


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
          ) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every (sub)command of the ``asyncq`` command, nested ones included, with its argv."""
    yield path, parser
    for name, sub in _subparsers(parser).items():
        yield from _walk(sub, (*path, name))


def _sample(action: argparse.Action) -> str:
    """A value this argument accepts."""
    if action.choices:
        return str(next(iter(action.choices)))
    if action.type in (int, float):
        return "1"
    name = getattr(action.type, "__name__", "")
    return {"parse_duration": "1", "parse_time": "2030-01-01T00:00:00Z"}.get(name, "x")


def _required_argv(parser: argparse.ArgumentParser) -> list[str]:
    """The arguments ``parser`` requires, each given a value it accepts."""
    argv: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            continue
        if not action.option_strings:
            argv.append(_sample(action))
        elif action.required:
            argv += [action.option_strings[0], _sample(action)]
    return argv


COMMANDS = list(_walk(build_parser()))
LEAVES = [(path, p) for path, p in COMMANDS if not _subparsers(p)]


def test_every_parser_is_the_cli_parser_and_takes_no_abbreviation() -> None:
    assert len(LEAVES) >= 30  # (the walk does reach the nested subcommands)
    for path, parser in COMMANDS:
        assert type(parser) is Parser and parser.allow_abbrev is False, path


@pytest.mark.parametrize(("path", "parser"), LEAVES, ids=[" ".join(p) for p, _ in LEAVES])
def test_every_subcommand_refuses_a_typo_or_an_abbreviation_with_its_own_usage(
        path: tuple[str, ...], parser: argparse.ArgumentParser,
        capsys: pytest.CaptureFixture[str]) -> None:
    argv = [*path, *_required_argv(parser)]
    known = {s for a in parser._actions for s in a.option_strings}
    shortened = sorted(s[:-1] for a in parser._actions if a.help != argparse.SUPPRESS
                       for s in a.option_strings
                       if s.startswith("--") and s != "--help" and s[:-1] not in known)
    wrong = ["--no-such-option", *shortened]
    for arg in wrong:
        with pytest.raises(SystemExit) as exited:
            main([*argv, arg])
        assert exited.value.code == 2, arg
        text = capsys.readouterr().err  # that command's own answer, not the top-level one:
        assert f"{parser.prog}: error: unrecognized arguments: {arg}" in text, (arg, text)
        assert "usage: asyncq [-h]" not in text


GROUPS = [(path, p) for path, p in COMMANDS if _subparsers(p)]


@pytest.mark.parametrize(("path", "parser"), GROUPS,
                         ids=[" ".join(("asyncq", *p)) for p, _ in GROUPS])
def test_a_misspelt_subcommand_is_answered_with_its_parents_usage(
        path: tuple[str, ...], parser: argparse.ArgumentParser,
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*path, "lss"])
    assert exited.value.code == 2
    text = capsys.readouterr().err
    assert f"{parser.prog}: error: " in text and "invalid choice: 'lss'" in text
    assert text.startswith(f"usage: {parser.prog} ")


def test_enqueue_has_an_option_for_every_keyword_of_client_enqueue() -> None:
    enqueue = _subparsers(_subparsers(build_parser())["task"])["enqueue"]
    flags = {s for a in enqueue._actions if a.help != argparse.SUPPRESS
             for s in a.option_strings}
    for keyword in EnqueueOptions.__optional_keys__:
        flag = "--header" if keyword == "headers" else "--" + keyword.replace("_", "-")
        assert flag in flags, keyword


def test_every_task_subcommand_takes_its_task_ids_as_positional_arguments() -> None:
    task = _subparsers(build_parser())["task"]
    for name, sub in _subparsers(task).items():
        if name in TASKLESS:
            continue
        positional = [a for a in sub._actions if not a.option_strings]
        assert [a.metavar for a in positional] == ["ID"], name
        queue = next(a for a in sub._actions if "--queue" in a.option_strings)
        assert not queue.required, name  # found in every queue without -q


@pytest.mark.parametrize(("argv", "says"), [
    (["task", "enqueue", "-t", "x", "--retry", "3"], "--retry is no longer taken; use --max-retry"),
    (["task", "enqueue", "-t", "x", "--id", "a"], "--id is no longer taken; use --task-id"),
    (["task", "inspect", "-i", "a"], "-i is no longer taken; give the task id without an "
                                     "option: asyncq task inspect ID"),
    (["task", "inspect", "--id=a"], "--id is no longer taken"),
    (["task", "run", "-q", "q", "-i", "a"], "asyncq task run ID"),
    (["task", "archive", "-q", "q", "--id", "a"], "asyncq task archive ID"),
    (["task", "delete", "-q", "q", "-i", "a"], "asyncq task delete ID"),
])
def test_an_old_spelling_is_refused_naming_the_new_one(
        argv: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--redis-url", DEAD])
    assert exited.value.code == 2
    text = capsys.readouterr().err
    assert f"asyncq {' '.join(argv[:2])}: error: " in text and says in text


@pytest.mark.anyio
async def test_enqueue_sets_the_options_under_their_python_names(
        cli: Cli, asyncq_client: asyncq.Client, asyncq_queue: str) -> None:
    q = asyncq_queue
    doc = js(await cli("task", "enqueue", "-t", "t", "-l", '{"n": 1}', "-q", q,
                       "--max-retry", "3", "--task-id", "first", "--header", "trace=abc",
                       "--header", "query=a=b", "--header", "empty=", "--retention", "1h",
                       "--json"))
    assert (doc["id"], doc["max_retry"], doc["retention"]) == ("first", 3, 3600.0)
    assert doc["headers"] == {"trace": "abc", "query": "a=b", "empty": ""}
    async with asyncq.Inspector(asyncq_client.broker) as inspector:
        stored = await inspector.task_info(q, "first")
    assert (stored.max_retry, dict(stored.headers)) == (3, doc["headers"])

    unique = ("-t", "u", "-q", q, "--unique", "1h", "--unique-key", "k")
    await cli("task", "enqueue", *unique, "-l", "1")
    after, dup, other_key, no_ttl, twice = await gather(
        cli("task", "enqueue", "-t", "next", "-q", q, "--after", "first", "--json"),
        cli("task", "enqueue", *unique, "-l", "2", ok=False),
        cli("task", "enqueue", *unique[:-1], "k2", "-l", "2"),
        cli("task", "enqueue", "-t", "u", "-q", q, "--unique-key", "k", ok=False),
        cli("task", "enqueue", "-t", "h", "-q", q, "--header", "a=1", "--header", "a=2",
            ok=False))
    assert js(after)["state"] == "waiting"  # until "first" succeeds
    assert "already queued" in err(dup)  # same key, other payload
    assert out(other_key).startswith("enqueued task ")
    assert err(no_ttl) == ("asyncq: error: --unique-key needs --unique TTL (how long a "
                           "duplicate is refused)")
    assert "'a' is given twice" in err(twice)


@pytest.mark.anyio
async def test_task_subcommands_take_ids_and_find_their_queue(
        cli: Cli, asyncq_client: asyncq.Client, asyncq_queue: str) -> None:
    q = asyncq_queue
    a, b, c = [await asyncq_client.enqueue("s", n, queue=q, process_in=3600) for n in range(3)]
    assert out(await cli("task", "run", a.id, b.id)).splitlines() == [
        f"task {a.id} is now pending", f"task {b.id} is now pending"]
    assert js(await cli("task", "inspect", a.id, "--json"))["state"] == "pending"
    assert out(await cli("task", "archive", c.id, "-q", q)).strip() == f"archived task {c.id}"
    assert out(await cli("task", "delete", a.id, b.id, c.id)).count("deleted task") == 3
    assert "task 'missing' not found in any queue" in err(
        await cli("task", "run", "missing", ok=False))


@pytest.mark.anyio
async def test_json_has_the_fields_and_encodings_of_the_python_objects(
        cli: Cli, asyncq_client: asyncq.Client, asyncq_queue: str,
        asyncq_worker: WorkerFactory) -> None:
    q = asyncq_queue
    mux = asyncq.ServeMux()

    @mux.handler("json")
    async def as_json(task: Task) -> dict[str, object]:
        return {"total": 42}

    @mux.handler("raw")
    async def as_bytes(task: Task) -> bytes:
        return b"\x00\xff" + task.payload

    @mux.handler("flow")
    async def flow(task: Task) -> list[int]:
        return [1, 2]

    j = await asyncq_client.enqueue("json", {"n": 1}, queue=q, retention=600)
    b = await asyncq_client.enqueue("raw", b"\x01text", queue=q, retention=600)
    async with asyncq_worker(mux, queues={q: 1}) as w:
        handle = await asyncq_client.enqueue_workflow(Task("flow", queue=q))
        assert await handle.result(asyncq_client, timeout=30) == [1, 2]
        await w.wait_drained()
        server_id = w.worker.config.server_id

        async def listed() -> list[dict[str, object]]:
            return [s for s in js(await cli("worker", "ls", "--json"))
                    if s["id"] == server_id]

        [server] = await wait_until(listed, timeout=15, message="server listed")
    j_doc, b_doc, ls_doc, queue_docs, flow_doc = [js(p) for p in await gather(
        cli("task", "inspect", j.id, "--json"), cli("task", "inspect", b.id, "--json"),
        cli("task", "ls", "-q", q, "-s", "completed", "--json"),
        cli("queue", "inspect", q, "--json"),
        cli("workflow", "inspect", handle.id, "--json"))]

    def names(cls: type) -> set[str]:
        return {f.name for f in dataclasses.fields(cls)}

    for doc in (j_doc, b_doc, *ls_doc):
        assert set(doc) == names(TaskInfo)
    assert (j_doc["payload"], j_doc["encoding"]) == ({"n": 1}, "j")
    assert (j_doc["result"], j_doc["result_encoding"]) == ({"total": 42}, "j")
    assert (b_doc["encoding"], b_doc["result_encoding"]) == ("b", "b")
    assert base64.b64decode(b_doc["payload"]) == b"\x01text"
    assert base64.b64decode(b_doc["result"]) == b"\x00\xff\x01text"
    assert (j_doc["retention"], j_doc["state"]) == (600.0, "completed")
    assert set(queue_docs[0]) == names(QueueInfo) and set(server) == names(ServerInfo)
    assert set(flow_doc) == names(WorkflowInfo)
    assert (flow_doc["result"], flow_doc["result_encoding"]) == ([1, 2], "j")
