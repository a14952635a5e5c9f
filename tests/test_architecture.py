"""The architecture, checked: rules about which module may import what.

Each test reads every module of the ``asyncq`` package with ``ast`` (imports under
``TYPE_CHECKING`` and inside functions included), so a rule cannot be broken quietly: redis-py
and the key schema stay behind the broker (one door to Redis), no module imports one that
imports it back, and the package root stays small (the rest is grouped by concept).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncq

PACKAGE = Path(asyncq.__file__).parent


@dataclass(frozen=True)
class Module:
    """A module of the package: its dotted name, its path and its parsed source."""

    name: str
    path: Path
    tree: ast.Module

    @property
    def package(self) -> str:
        """The package relative imports start from."""
        return self.name if self.path.name == "__init__.py" else self.name.rpartition(".")[0]

    def imports(self) -> Iterator[str]:
        """The absolute name of every module this one imports (``from x import y`` names
        ``x``)."""
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                yield from (alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = self.package.split(".")[:len(self.package.split(".")) - node.level + 1]
                    yield ".".join([*base, *([node.module] if node.module else [])])
                elif node.module:
                    yield node.module

    def imported_modules(self) -> Iterator[str]:
        """Like ``imports``, plus ``x.y`` for every ``from x import y`` (y may be a module)."""
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                yield from (alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                target = self.target_of(node)
                yield target
                yield from (f"{target}.{alias.name}" for alias in node.names)

    def target_of(self, node: ast.ImportFrom) -> str:
        """The absolute name of the module a ``from ... import`` reads from."""
        if not node.level:
            return node.module or ""
        base = self.package.split(".")[:len(self.package.split(".")) - node.level + 1]
        return ".".join([*base, *([node.module] if node.module else [])])

    def docstrings(self) -> set[int]:
        """ids of the docstring nodes (prose may name a key to explain it)."""
        found = set()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef
                          | ast.AsyncFunctionDef):
                first = node.body[0] if node.body else None
                if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                    found.add(id(first.value))
        return found


def modules() -> list[Module]:
    """Every module of the package."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found.append(Module(".".join(parts), path, ast.parse(path.read_text(), str(path))))
    return found


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


# -- one door to Redis

#: Where redis-py may be imported: the broker, and the test fixtures asyncq ships.
REDIS_ALLOWED = ("asyncq._broker", "asyncq.testing", "asyncq._testing")
REDIS_PACKAGES = ("redis", "hiredis")


def test_nothing_outside_the_broker_imports_redis() -> None:
    offenders = sorted({
        f"{module.name} imports {imported}"
        for module in modules()
        if not any(_within(module.name, allowed) for allowed in REDIS_ALLOWED)
        for imported in module.imports()
        if any(_within(imported, package) for package in REDIS_PACKAGES)})
    assert not offenders, ("only asyncq._broker (and the asyncq.testing fixtures) may import "
                           "redis-py; found:\n  " + "\n  ".join(offenders))


def test_the_rule_sees_every_kind_of_import(tmp_path: Path) -> None:
    """The import reader finds plain, from-, relative and TYPE_CHECKING imports."""
    source = ("from typing import TYPE_CHECKING\nimport redis.asyncio\nfrom . import _keys\n"
              "from ..x import y\nif TYPE_CHECKING:\n    from hiredis import Reader\n"
              "def f():\n    from redis.exceptions import RedisError\n")
    module = Module("asyncq._client._c", tmp_path / "_c.py", ast.parse(source))
    assert list(module.imports()) == ["typing", "redis.asyncio", "asyncq._client", "asyncq.x",
                                      "hiredis", "redis.exceptions"]


# -- key names stay behind the broker (a second Broker may name its keys as it likes)

KEYS_MODULE = "asyncq._broker._keys"
#: Where key names may be spelled: the broker, and the test fixtures asyncq ships.
KEYS_ALLOWED = REDIS_ALLOWED
#: A key or channel name literal: "asyncq:" followed by a name character (not "asyncq: error").
KEY_LITERAL = re.compile(r"asyncq:[^\s]")


def _key_leaks(module: Module) -> list[str]:
    """Where ``module`` imports the key schema or spells a key name."""
    found = [f"{module.name} imports the key schema"
             for imported in set(module.imported_modules()) if imported == KEYS_MODULE]
    docs = module.docstrings()
    found += [f"{module.name}:{node.lineno} spells {node.value!r}"
              for node in ast.walk(module.tree)
              if isinstance(node, ast.Constant) and isinstance(node.value, str)
              and id(node) not in docs and KEY_LITERAL.match(node.value)]
    return found


def test_nothing_outside_the_broker_knows_a_key_name() -> None:
    outside = [m for m in modules()
               if not any(_within(m.name, allowed) for allowed in KEYS_ALLOWED)]
    assert len(outside) > 50  # (the walk found the package)
    leaks = [leak for module in outside for leak in _key_leaks(module)]
    assert not leaks, "key names outside asyncq._broker:\n  " + "\n  ".join(leaks)


def test_the_key_check_sees_every_form(tmp_path: Path) -> None:
    """Relative and absolute imports of the schema, under TYPE_CHECKING, in functions, and
    key literals (but not docstrings or messages that start with "asyncq: ")."""
    forms = {
        "from .._broker import _keys as K": True,
        "from .._broker._keys import queue_keys": True,
        "from asyncq._broker import _keys": True,
        "import asyncq._broker._keys": True,
        "if TYPE_CHECKING:\n    from .._broker._keys import QueueKeys": True,
        "def f():\n    from .. import _broker\n    from .._broker import _keys": True,
        "KEY = 'asyncq:{q}:pending'": True,
        "from .._broker import Broker": False,
        "from .._validate import validate_queue_name": False,
        "def f():\n    \"\"\"asyncq:{q}:pending holds them.\"\"\"": False,
        "print('asyncq: error: boom')": False,
    }
    for source, leaks in forms.items():
        module = Module("asyncq._workflow._fake", tmp_path / "_fake.py", ast.parse(source))
        assert bool(_key_leaks(module)) is leaks, source
    package = Module("asyncq", tmp_path / "__init__.py", ast.parse("from ._broker import _keys"))
    assert _key_leaks(package)


# -- no import circles, a small package root


def _module_graph() -> dict[str, set[str]]:
    """asyncq's modules and what each imports of asyncq: ``from x import y`` counts as
    importing module ``x.y`` when there is one, else ``x``."""
    found = modules()
    names = {m.name for m in found}
    graph: dict[str, set[str]] = {}
    for module in found:
        edges = graph.setdefault(module.name, set())
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Import):
                edges.update(alias.name for alias in node.names if alias.name in names)
            elif isinstance(node, ast.ImportFrom):
                target = module.target_of(node)
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    edges.add(sub if sub in names else target)
        edges &= names - {module.name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circles() -> None:
    """No module imports, even for type checking only, a module that imports it back."""
    assert _circles(_module_graph()) == []


def test_the_package_root_holds_at_most_twelve_modules() -> None:
    """The rest lives in packages named for what they are (the task model, producing, ...)."""
    loose = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(loose) <= 12, loose


def test_the_circle_check_sees_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# -- the layers: packages in a declared order, the broker entered by its front door

#: asyncq's parts, bottom to top (a part is a subpackage or a loose module of the root; ""
#: is the root ``asyncq/__init__.py``). A part imports only parts of lower layers, for type
#: checking too; a new part must be placed here.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("_clock", "_defaults", "_log", "_observe", "_text", "_validate"),  # leaves
    ("_errors",),
    ("_model", "_service"),  # the task model; background services
    ("_broker",),  # the door to Redis
    ("_limits", "_scheduler", "_tracing", "_workflow"),
    ("_client", "_log_setup"),
    ("_inspector", "_typed"),
    ("_worker",),
    ("",),  # the public API: asyncq/__init__.py
    ("_testing", "contrib", "metrics", "otel", "web"),  # integrations, on the public API
    ("_cli", "testing"),
    ("__main__",),
)
#: Besides the broker itself, who may import a private module of it (``asyncq._broker._x``):
#: the test fixtures asyncq ships, which also know key names (KEYS_ALLOWED).
BROKER_PRIVATE_ALLOWED = ("asyncq._broker", "asyncq._testing", "asyncq.testing")


def _part(module: str) -> str:
    """The part a module belongs to: ``asyncq._worker._acker`` -> ``_worker``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _layer_breaks(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a part from its own layer or a higher one, and every part not placed
    in LAYERS."""
    rank = {part: i for i, layer in enumerate(LAYERS) for part in layer}
    breaks = sorted({f"{_part(m)} is in no layer ({m})" for m in graph if _part(m) not in rank})
    for module, imported in sorted(graph.items()):
        for target in sorted(imported):
            a, b = _part(module), _part(target)
            if a != b and a in rank and b in rank and rank[b] >= rank[a]:
                breaks.append(f"{module} imports {target}: {b or 'asyncq'} is not below "
                              f"{a or 'asyncq'}")
    return breaks


def test_parts_import_only_lower_layers() -> None:
    graph = _module_graph()
    edges = {(_part(m), _part(t)) for m, ts in graph.items() for t in ts if _part(m) != _part(t)}
    assert len(graph) > 150 and len(edges) > 80  # (the walk found the package and its imports)
    assert {p for layer in LAYERS for p in layer} == {_part(m) for m in graph}
    assert _layer_breaks(graph) == []


def test_the_layer_check_sees_an_upward_import_and_an_unplaced_part() -> None:
    graph = {"asyncq._model._task": {"asyncq._broker._values"},
             "asyncq._broker._values": {"asyncq._model._message"},
             "asyncq._model._message": set(), "asyncq._new._x": set()}
    assert _layer_breaks(graph) == [
        "_new is in no layer (asyncq._new._x)",
        "asyncq._model._task imports asyncq._broker._values: _broker is not below _model"]


def _private_broker_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{m} imports {t}" for m, ts in graph.items() for t in ts
                  if t.startswith("asyncq._broker._")
                  and not any(_within(m, allowed) for allowed in BROKER_PRIVATE_ALLOWED))


def test_the_broker_is_entered_by_its_front_door() -> None:
    """Above the broker, code imports ``asyncq._broker`` (its ``__init__``), never one of its
    private modules: what the broker offers is what that module exports."""
    graph = _module_graph()
    assert any(t == "asyncq._broker" for ts in graph.values() for t in ts)
    assert _private_broker_imports(graph) == []
    assert _private_broker_imports({"asyncq._worker._x": {"asyncq._broker._calls"}}) == [
        "asyncq._worker._x imports asyncq._broker._calls"]
