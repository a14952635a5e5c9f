"""A fast start: ``import asyncq`` and the commands that only print (``--version``, ``--help``,
a subcommand's ``--help``) import neither redis-py nor the broker, the worker, protobuf, the web
stack, metrics, tracing or structlog; those load when a command runs or a name is used.

Behaviour only: which modules a fresh interpreter loads. How fast it starts is measured by
``python -m benchmarks.startup``, never asserted here.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import asyncq
from asyncq._cli import _task_cmd
from asyncq._model._info import STORED_STATES

#: What starting up must not load: third-party packages (top-level names, or dotted for
#: namespace packages) and asyncq's own heavy parts.
HEAVY = ("redis", "hiredis", "google.protobuf", "starlette", "uvicorn", "prometheus_client",
         "opentelemetry", "structlog", "asyncq._broker", "asyncq._worker", "asyncq._client",
         "asyncq._inspector", "asyncq._scheduler", "asyncq.web", "asyncq.metrics")


def loaded_modules(*args: str) -> tuple[list[str], subprocess.CompletedProcess[str]]:
    """Every module ``python -X importtime ARGS`` imported, and the finished process."""
    done = subprocess.run([sys.executable, "-X", "importtime", *args], capture_output=True,
                          text=True, timeout=60)
    modules = [line.rpartition("|")[2].strip() for line in done.stderr.splitlines()
               if line.startswith("import time:") and "|" in line]
    assert modules, done.stderr  # (-X importtime answered)
    return modules, done


def heavy(modules: list[str]) -> list[str]:
    """The modules of ``modules`` that belong to a package of HEAVY."""
    return sorted({m for m in modules
                   if any(m == h or m.startswith(h + ".") for h in HEAVY)})


def test_import_asyncq_loads_nothing_heavy() -> None:
    code = ("import asyncq, sys; print(sorted(m for m in ('redis', 'google.protobuf', "
            "'starlette', 'prometheus_client', 'opentelemetry', 'structlog') "
            "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == "[]"
    modules, _ = loaded_modules("-c", "import asyncq")
    assert heavy(modules) == []
    assert [m for m in modules if m.startswith("asyncq")] == ["asyncq"]


@pytest.mark.parametrize(("argv", "says"), [
    (["--version"], f"asyncq {asyncq.__version__}"),
    (["--help"], "usage: asyncq [-h] [--version] COMMAND"),
    (["task", "ls", "--help"], "usage: asyncq task ls [-h] --queue QUEUE"),
    (["worker", "--help"], "usage: asyncq worker [-h]"),
])
def test_the_commands_that_only_print_load_nothing_heavy(argv: list[str], says: str) -> None:
    modules, done = loaded_modules("-m", "asyncq", *argv)
    assert done.returncode == 0, done.stderr
    assert says in done.stdout
    assert heavy(modules) == []
    assert "asyncio" not in modules  # (nothing runs: no event loop either)


def test_a_command_that_runs_still_imports_what_it_needs() -> None:
    """The other side: a failing ``task ls`` (no Redis there) got as far as the broker."""
    code = ("import sys\nfrom asyncq._cli import main\n"
            "code = main(['task', 'ls', '-q', 'q', '-u', 'redis://127.0.0.1:1'])\n"
            "print(code, 'redis' in sys.modules, 'asyncq._inspector._inspector' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.split() == ["1", "True", "True"]
    assert "asyncq: error:" in done.stderr


def test_every_public_name_is_listed_importable_and_loaded_on_first_use() -> None:
    code = ("import sys, asyncq\n"
            "assert 'redis' not in sys.modules\n"
            "missing = sorted(set(asyncq.__all__) - set(dir(asyncq)))\n"
            "from asyncq import *\n"
            "from asyncq import Client\n"
            "print(missing, Client.__module__, 'redis' in sys.modules, "
            "'Client' in vars(asyncq), Worker.__name__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.split() == ["[]", "asyncq._client._client", "True", "True", "Worker"]


def test_the_lazy_table_is_the_public_surface() -> None:
    table = vars(asyncq)["_LAZY"]
    assert set(table) | {"__version__"} == set(asyncq.__all__)
    for name, module in table.items():
        assert getattr(asyncq, name) is getattr(importlib.import_module(module, "asyncq"), name)
    with pytest.raises(AttributeError, match="has no attribute 'Clinet'"):
        asyncq.Clinet  # noqa: B018  (a typo is an AttributeError, as before)


def test_the_task_state_choices_are_the_listed_states() -> None:
    """``task ls -s``'s choices, spelt out for a cheap parser, are the model's STORED_STATES."""
    assert [s.value for s in STORED_STATES] == _task_cmd.STATES
