"""The key schema stays behind the broker: no module outside ``asyncq/_broker/`` (test fixtures
aside) imports it or spells a key name, so a second Broker can name its keys as it likes."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "asyncq"
KEYS_MODULE = "asyncq._broker._keys"
#: A key or channel name literal: "asyncq:" followed by a name character (not "asyncq: error").
KEY_LITERAL = re.compile(r"asyncq:[^\s]")


def _allowed(path: Path) -> bool:
    """Where key names may live: the broker, and the fixtures of ``asyncq.testing``."""
    rel = path.relative_to(PACKAGE).as_posix()
    return rel.startswith(("_broker/", "_testing/")) or rel == "testing.py"


def _module_name(path: Path) -> tuple[str, bool]:
    """The dotted name of ``path`` and whether it is a package's ``__init__``."""
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts.pop()
    return ".".join(parts), is_package


def _imported(node: ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The modules an ``from ... import ...`` may bring in, made absolute."""
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    return [target] + [f"{target}.{alias.name}" for alias in node.names]


def _key_imports(source: str, module: str, is_package: bool) -> list[int]:
    """Lines of ``source`` (module ``module``) importing the key schema."""
    found = []
    # ast.walk reaches every import, those under ``if TYPE_CHECKING:`` and in functions too.
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            names = _imported(node, module, is_package)
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        if KEYS_MODULE in names:
            found.append(node.lineno)
    return found


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes (prose may name a key to explain it)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _key_literals(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and id(node) not in docs and KEY_LITERAL.match(node.value)):
            found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {node.value!r}")
    return found


def _modules_outside_the_broker() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if not _allowed(p))


def test_nothing_outside_the_broker_knows_a_key_name() -> None:
    modules = _modules_outside_the_broker()
    assert len(modules) > 50  # (the walk found the package)
    imports = [f"{path.relative_to(PACKAGE.parent)}:{line}" for path in modules
               for line in _key_imports(path.read_text(), *_module_name(path))]
    assert not imports, "modules outside asyncq/_broker import the key schema:\n" + "\n".join(
        imports)
    literals = [hit for path in modules for hit in _key_literals(path)]
    assert not literals, "key names spelled outside asyncq/_broker:\n" + "\n".join(literals)


def test_the_check_sees_every_form_of_import() -> None:
    """The checks themselves: relative and absolute imports, under TYPE_CHECKING, literals."""
    module, is_package = "asyncq._workflow._fake", False
    forms = {
        "from .._broker import _keys as K": True,
        "from .._broker._keys import queue_keys": True,
        "from asyncq._broker import _keys": True,
        "import asyncq._broker._keys": True,
        "if TYPE_CHECKING:\n    from .._broker._keys import QueueKeys": True,
        "def f():\n    from .. import _broker\n    from .._broker import _keys": True,
        "from .._broker import Broker": False,
        "from .._validate import validate_queue_name": False,
    }
    for source, leaks in forms.items():
        assert bool(_key_imports(source, module, is_package)) is leaks, source
    assert _key_imports("from ._broker import _keys", "asyncq", True)  # (from a package)
    assert KEY_LITERAL.match("asyncq:{q}:pending")
    assert not KEY_LITERAL.match("asyncq: error: boom")
