"""The architecture, checked: rules about which module may import what.

Each test reads every module of the ``asyncq`` package with ``ast`` (imports under
``TYPE_CHECKING`` and inside functions included), so a rule cannot be broken quietly.
"""

from __future__ import annotations

import ast
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
