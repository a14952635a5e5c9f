"""MkDocs hook: pages generated from the code, so they cannot drift from it.

``<!-- asyncq:cli -->`` becomes the reference of every ``asyncq`` command, read from the
argparse parser the command itself uses; ``<!-- asyncq:defaults -->`` becomes the table of
every default in ``asyncq/_defaults.py``, with its value, its note and where it applies.
tests/docs/test_reference_pages.py checks that both list everything.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # document the tree being built, not another installed copy
    sys.path.insert(0, str(ROOT))

CLI_MARKER = "<!-- asyncq:cli -->"
DEFAULTS_MARKER = "<!-- asyncq:defaults -->"
HELP_WIDTH = "100"


@dataclasses.dataclass(frozen=True)
class Command:
    """One ``asyncq`` (sub)command: its words, its parser, its one-line help, its aliases."""

    path: tuple[str, ...]
    parser: argparse.ArgumentParser
    help: str
    aliases: tuple[str, ...]

    @property
    def name(self) -> str:
        return " ".join(self.path)

    @property
    def is_group(self) -> bool:
        return _subparsers(self.parser) is not None


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction[Any] | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def commands() -> list[Command]:
    """Every command and subcommand of ``asyncq``, in the order ``--help`` lists them; an
    alias is named on its command, not listed again, and a retired spelling (``asyncq server
    ls``, hidden from ``--help``) is left out: :func:`retired` lists those."""
    return _walk()[0]


def retired() -> list[tuple[str, str]]:
    """Each retired command spelling that still works, with the one to use instead."""
    return _walk()[1]


def _walk() -> tuple[list[Command], list[tuple[str, str]]]:
    from asyncq._cli import build_parser

    out: list[Command] = []
    old: dict[str, str] = {}

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...], help_: str,
             aliases: tuple[str, ...]) -> None:
        sub = _subparsers(parser)
        deprecated = parser.get_default("deprecated")
        if deprecated is not None:
            if sub is None:
                old.setdefault(*deprecated)
        else:
            out.append(Command(path, parser, help_, aliases))
        if sub is None:
            return
        helps = {a.dest: a.help or "" for a in sub._choices_actions}
        by_parser: dict[int, list[str]] = {}
        for name, child in sub.choices.items():
            by_parser.setdefault(id(child), []).append(name)
        for names in by_parser.values():
            main, *others = names
            walk(sub.choices[main], (*path, main), helps.get(main, ""), tuple(others))

    walk(build_parser(), ("asyncq",), "", ())
    return out, sorted(old.items())


def _help_text(parser: argparse.ArgumentParser) -> str:
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_WIDTH
    try:
        return parser.format_help()
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def cli_markdown() -> str:
    """The reference of every command: a heading each, its summary and its ``--help``."""
    lines: list[str] = []
    for cmd in commands():
        level = "#" * min(len(cmd.path) + 1, 4)
        lines.append(f"{level} `{cmd.name}`")
        lines.append("")
        if cmd.aliases:
            also = ", ".join(f"`{' '.join((*cmd.path[:-1], a))}`" for a in cmd.aliases)
            lines += [f"Also spelt {also}.", ""]
        if cmd.help:
            lines += [cmd.help[0].upper() + cmd.help[1:].rstrip(".") + ".", ""]
        lines += ["```text", _help_text(cmd.parser).rstrip(), "```", ""]
    lines += ["## Retired spellings", "",
              "These still work for one release, each saying on stderr which spelling to use:",
              "", "| retired | use |", "| --- | --- |",
              *(f"| `{old}` | `{new}` |" for old, new in retired()), ""]
    return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class Default:
    """One name of asyncq/_defaults.py, its value and what its comments say of it."""

    name: str
    value: object
    note: str
    section: str


def defaults() -> list[Default]:
    """Every ``Final`` name of asyncq/_defaults.py with its value, its docstring (or trailing
    comment) and the section comment it sits under."""
    import asyncq._defaults as module

    path = Path(module.__file__ or "")
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    tree = ast.parse(source)
    out: list[Default] = []
    section = ""
    body = tree.body
    section_at = {i + 1: ln.removeprefix("# -- ").strip()
                  for i, ln in enumerate(lines) if ln.startswith("# -- ")}
    for i, node in enumerate(body):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        for line_no in sorted(section_at):
            if line_no < node.lineno:
                section = section_at[line_no]
        name = node.target.id
        note = ""
        line = lines[node.lineno - 1]
        following = body[i + 1] if i + 1 < len(body) else None
        if "#" in line:  # a trailing comment names this line's value
            note = line.split("#", 1)[1].strip()
        elif (isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)):
            note = " ".join(following.value.value.split())
        out.append(Default(name, getattr(module, name), note, section))
    return out


def _where(name: str) -> str:
    """Where a default applies: the WorkerConfig field and ``asyncq worker`` flag named after
    it, when there are such."""
    from asyncq import WorkerConfig

    fields = {f.name for f in dataclasses.fields(WorkerConfig)}
    worker = next(c.parser for c in commands() if c.path == ("asyncq", "worker"))
    flags = {s for a in worker._actions for s in a.option_strings}
    for prefix in ("WORKER_", ""):
        field = name.removeprefix(prefix).lower() if name.startswith(prefix) else None
        if field and field in fields:
            where = [f"`WorkerConfig.{field}`"]
            flag = "--queue" if field == "queues" else f"--{field.replace('_', '-')}"
            if flag in flags:
                where.append(f"`asyncq worker {flag}`")
            return ", ".join(where)
    return ""


def _value(value: object) -> str:
    if isinstance(value, tuple):
        return "`" + repr(value) + "`"
    return f"`{value!r}`"


def defaults_markdown() -> str:
    """The table of every default, grouped by the sections of asyncq/_defaults.py."""
    lines: list[str] = []
    current = None
    for d in defaults():
        if d.section != current:
            current = d.section
            lines += ["", f"### {d.section[0].upper()}{d.section[1:]}", "",
                      "| name | value | what it is | set with |", "|---|---|---|---|"]
        note = d.note.replace("|", "\\|")
        lines.append(f"| `{d.name}` | {_value(d.value)} | {note} | {_where(d.name)} |")
    return "\n".join(lines).lstrip() + "\n"


def _markers() -> Iterator[tuple[str, Any]]:
    yield CLI_MARKER, cli_markdown
    yield DEFAULTS_MARKER, defaults_markdown


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """Replace each marker with what it stands for."""
    for marker, make in _markers():
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown
