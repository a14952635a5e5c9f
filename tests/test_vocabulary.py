"""One word per concept on every surface: the command line, the public Python API, the
dashboard, the metrics and the docs say the same word for the same thing, and the retired
spellings still work for one release while saying which word replaced them.

The table below is the vocabulary; docs/architecture.md#vocabulary lists the same words for
readers. A retired word may appear only where the table names it as kept (``keep``)."""

from __future__ import annotations

import argparse
import html
import re
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

import asyncq
from asyncq._cli import build_parser
from tests.helpers.cli import Cli, err, js, out

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "asyncq" / "web" / "templates"


@dataclass(frozen=True)
class Concept:
    """A concept, its one word, the commands that spell it, and what is retired."""

    word: str
    commands: tuple[str, ...]  # current command spellings (``asyncq`` left out)
    retired_commands: tuple[tuple[str, str], ...]  # (old spelling, the one to use)
    retired_words: str  # a regex of the words no help text, page or metric help may use
    keep: str = r"(?!)"  # a regex of the uses of a retired word that stay (named in the docs)


VOCABULARY = [
    Concept("queue concurrency limit", ("queue concurrency",),
            (("queue limit --concurrency N", "queue concurrency --limit N"),),
            r"\b(caps?|capped)\b"),
    Concept("inspect (to show one thing in full; what it returns is an ...Info)",
            ("queue inspect", "task inspect", "workflow inspect"), (),
            r"(?!)"),  # nothing retired: test_inspect_shows_what_an_info_holds pins the pair
    Concept("delete", ("queue delete", "task delete", "task deleteall"),
            (("queue rm", "queue delete"), ("queue remove", "queue delete"),
             ("task rm", "task delete"), ("task remove", "task delete")),
            r"\b(rm|remove[ds]?)\b",
            # what a cancel does to a task waiting to run: CancelOutcome.REMOVED
            keep=r"waiting to run is removed|a cancel removes"),
    Concept("scheduler (the process; its registrations are scheduler entries)",
            ("scheduler", "scheduler ls", "scheduler history"),
            (("cron ls", "scheduler ls"), ("cron history", "scheduler history")),
            r"\b(periodic|cron)\b"),
    Concept("worker (a worker process)", ("worker", "worker ls"),
            (("server ls", "worker ls"),),
            r"\bservers?\b",
            # Redis and the fork server are other servers; the worker's id keeps asynq's
            # wire name (WorkerConfig.server_id, --server-id) this release
            keep=r"Redis server|fork server|server-id"),
]


def _visible_commands() -> dict[str, argparse.ArgumentParser]:
    """Every command ``--help`` shows, by its words after ``asyncq`` (retired ones left out)."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        if parser.get_default("deprecated") is not None and not path.endswith(" "):
            return
        found[path.strip()] = parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    if child.get_default("deprecated") is None:
                        walk(child, f"{path} {name}")

    walk(build_parser(), "")
    return found


def _uses(text: str, concept: Concept) -> list[str]:
    """The uses of a retired word in ``text`` the concept does not keep."""
    kept = re.sub(concept.keep, "", text)
    return [kept[max(0, m.start() - 30):m.end() + 30]
            for m in re.finditer(concept.retired_words, kept, re.I)]


@pytest.mark.parametrize("concept", VOCABULARY, ids=lambda c: c.word.split()[0])
def test_the_command_line_uses_the_word(concept: Concept) -> None:
    commands = _visible_commands()
    for command in concept.commands:
        assert command in commands, command
    for old, _new in concept.retired_commands:
        assert old.split(" -")[0] not in commands, old
    for name, parser in commands.items():
        assert _uses(parser.format_help(), concept) == [], name


def test_retired_commands_are_hidden_and_listed_in_the_reference() -> None:
    listing = build_parser().format_help()
    for group in ("server", "cron"):
        assert not re.search(rf"^\s+{group}\b", listing, re.M), group
    queue = next(a for a in build_parser()._actions
                 if isinstance(a, argparse._SubParsersAction)).choices["queue"]
    assert "rm" not in queue.format_help() and "remove" not in queue.format_help()
    sys.path.insert(0, str(ROOT / "docs" / "_hooks"))
    try:
        import asyncq_docs
    finally:
        sys.path.remove(str(ROOT / "docs" / "_hooks"))
    retired = dict(asyncq_docs.retired())
    for concept in VOCABULARY:
        for old, new in concept.retired_commands:
            assert retired[f"asyncq {old}"] == f"asyncq {new}", old


def test_the_public_api_uses_the_word() -> None:
    deprecated_aliases = {"servers"}
    methods = {m for m in dir(asyncq.Inspector) if not m.startswith("_")}
    assert {"workers", "queue_info", "task_info", "delete_queue", "delete_task", "delete_all",
            "set_queue_concurrency", "clear_queue_concurrency", "queue_concurrency",
            "scheduler_entries", "scheduler_history"} <= methods
    for concept in VOCABULARY:
        for name in methods - deprecated_aliases:
            assert _uses(name.replace("_", " "), concept) == [], name
    # Kept public names: asynq's own (PeriodicTaskManager, PeriodicTaskConfig), and the worker
    # state type ServerInfo whose rename waits for the worker life-cycle work (the docs say so).
    kept = {"PeriodicTaskManager", "PeriodicTaskConfig", "ServerInfo"}
    for name in set(asyncq.__all__) - kept:
        spaced = re.sub(r"(?<=[a-z])(?=[A-Z])|_", " ", name)
        for concept in VOCABULARY:
            assert _uses(spaced, concept) == [], name


def test_inspect_shows_what_an_info_holds() -> None:
    """``inspect`` is the verb (the Inspector, ``asyncq queue|task|workflow inspect``); what it
    returns is a ...Info, and the Inspector's methods are named after what they return (as
    asynq's GetQueueInfo): no second verb (info, show, describe, get) beside it."""
    import typing

    words = {name.split()[-1] for name in _visible_commands() if name}
    assert "inspect" in words and not words & {"info", "show", "describe", "get", "details"}
    methods = [m for m in dir(asyncq.Inspector) if not m.startswith("_")]
    assert not [m for m in methods if re.match(r"(inspect|get|describe|show)_", m)]
    for method, returned in (("queue_info", asyncq.QueueInfo), ("task_info", asyncq.TaskInfo),
                             ("find_task", asyncq.TaskInfo)):
        hints = typing.get_type_hints(getattr(asyncq.Inspector, method))
        assert hints["return"] is returned, method


def _page_text(template: str) -> str:
    """What a template shows: its text and attribute-free words, without Jinja code, markup,
    element ids, classes and form values (names a reader never sees)."""
    text = re.sub(r"\{%.*?%\}|\{\{.*?\}\}|\{#.*?#\}", " ", template, flags=re.S)
    text = re.sub(r"<[^>]*>", " ", text)
    return html.unescape(text)


@pytest.mark.parametrize("concept", VOCABULARY, ids=lambda c: c.word.split()[0])
def test_the_dashboard_uses_the_word(concept: Concept) -> None:
    for path in sorted(TEMPLATES.glob("*.html")):
        assert _uses(_page_text(path.read_text(encoding="utf-8")), concept) == [], path.name
    # Words the templates take from Python: button labels and the limit actions' messages.
    for path in (ROOT / "asyncq" / "web").glob("*.py"):
        strings = re.findall(r'"([^"\n]*)"', path.read_text(encoding="utf-8"))
        shown = " | ".join(s for s in strings if " " in s)  # phrases, not names
        assert _uses(shown, concept) == [], path.name
    nav = (TEMPLATES / "base.html").read_text(encoding="utf-8")
    assert '/workers"' in nav and '/scheduler"' in nav


def test_metric_help_and_alerts_use_the_word() -> None:
    from asyncq.metrics._queue_exporter import _queue_metrics, _server_metrics

    helps = " | ".join(m.documentation for m in [
        *_queue_metrics([]), *_server_metrics([], False), *_server_metrics([], True)])
    assert "concurrency limit" in helps
    rules = (ROOT / "asyncq" / "metrics" / "alerts.yml").read_text(encoding="utf-8")
    for concept in VOCABULARY:
        assert _uses(helps, concept) == []
        for old, _new in concept.retired_commands:
            assert f"asyncq {old.split(' -')[0]}" not in rules, old


def test_the_docs_use_the_word_and_list_it() -> None:
    glossary = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = glossary[glossary.index("## Vocabulary"):]
    for concept in VOCABULARY:
        assert concept.word.split(" (")[0] in section, concept.word
    pages = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
    for page in pages:
        text = page.read_text(encoding="utf-8")
        if "## Vocabulary" in text:  # the glossary names the retired spellings
            start = text.index("## Vocabulary")
            text = text[:start] + text[text.index("\n## ", start + 1):]
        for concept in VOCABULARY:
            for old, _new in concept.retired_commands:
                retired = re.escape(f"asyncq {old.split(' -')[0]}")
                assert not re.search(rf"{retired}\b", text), (page.name, old)
        assert "servers()" not in text and "concurrency cap" not in text, page.name


# -- the retired spellings still work, and say which word replaced them

def _said(ran: Any, new: str) -> None:
    """One line on stderr naming the spelling to use."""
    lines = [ln for ln in err(ran).splitlines() if "deprecated" in ln]
    assert len(lines) == 1 and f"'asyncq {new}'" in lines[0], err(ran)


@pytest.mark.anyio
async def test_retired_commands_work_and_name_the_new_one(
        cli: Cli, asyncq_client: asyncq.Client, asyncq_queue: str) -> None:
    q = asyncq_queue
    for old, new in ((("server", "ls"), "worker ls"), (("cron", "ls"), "scheduler ls")):
        ran = await cli(*old, "--json")
        _said(ran, new)
        assert isinstance(js(ran), list)
        assert err(await cli(*new.split(), "--json")) == ""
    ran = await cli("cron", "history", "no-such-entry")
    _said(ran, "scheduler history")
    assert "no enqueue events" in out(ran)

    ran = await cli("queue", "limit", q, "--concurrency", "2")
    _said(ran, "queue concurrency --limit N")
    assert "concurrency limit at most 2 at once" in out(ran)
    assert (await asyncq.Inspector(asyncq_client.broker).queue_concurrency(q)) is not None
    assert "concurrency limit none" in out(await cli("queue", "concurrency", q, "--clear"))

    for old in ("rm", "remove"):
        info = await asyncq_client.enqueue("t", queue=q)
        ran = await cli("task", old, info.id, "-q", q)
        _said(ran, "task delete")
        assert out(ran).strip() == f"deleted task {info.id}"
    for old in ("rm", "remove"):
        await asyncq_client.enqueue("t", queue=f"{q}-{old}")
        ran = await cli("queue", old, f"{q}-{old}", "--force")
        _said(ran, "queue delete")
        assert out(ran).strip() == f"deleted queue {q}-{old}"
        assert f"{q}-{old}" not in js(await cli("queue", "ls", "--json"))


@pytest.mark.anyio
async def test_inspector_servers_warns_and_returns_the_workers(
        asyncq_client: asyncq.Client) -> None:
    inspector = asyncq.Inspector(asyncq_client.broker)
    with pytest.warns(DeprecationWarning, match=r"Inspector\.servers\(\).*Inspector\.workers"):
        old = await inspector.servers()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = await inspector.workers()
    assert [s.id for s in old] == [s.id for s in new]


@pytest.mark.anyio
@pytest.mark.parametrize("root", ["", "/admin/queues"])
async def test_retired_dashboard_addresses_redirect(root: str) -> None:
    from asyncq.web import create_app

    app = create_app("redis://127.0.0.1:1/0")  # a redirect reads nothing from Redis
    transport = httpx.ASGITransport(app=app, root_path=root)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            for old, new in (("/servers", "/workers"), ("/periodic", "/scheduler")):
                got = await http.get(f"{root}{old}?x=1")
                assert (got.status_code, got.headers["location"]) == (308, f"{root}{new}?x=1")
    finally:
        await app.state.dashboard.close()
