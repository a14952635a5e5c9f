"""Every ```python block of the docs and the README runs, so the docs cannot drift from the
API: a block is a complete program (run as a script, or with top-level ``await`` as in
``python -m asyncio``) against a real Redis, or it includes a file of examples/ that a test
runs, or it is marked ``<!-- fragment -->`` on the line before it (a piece of a larger app,
a settings file, a method shown alone)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from ._pages import REDIS_URL, ROOT, Block, python_blocks

#: The example files a page may include, each with the test that runs it.
RUN_BY_TESTS = {
    "examples/tutorial/tasks.py": "tests/docs/test_tutorial.py",
    "examples/tutorial/app.py": "tests/docs/test_tutorial.py",
    "examples/tutorial/test_invoices.py": "tests/docs/test_tutorial.py",
    "examples/quickstart/tasks.py": "tests/test_examples.py",
}

#: Runs a block that awaits at top level, as ``python -m asyncio`` would.
RUNNER = """
import ast, asyncio, sys, types
source = open(sys.argv[1], encoding="utf-8").read()
module = types.ModuleType("snippet")
module.__file__ = sys.argv[1]
sys.modules["snippet"] = module
code = compile(source, sys.argv[1], "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
result = eval(code, module.__dict__)
if asyncio.iscoroutine(result):
    asyncio.run(result)
"""

BLOCKS = python_blocks()
RUNNABLE = [b for b in BLOCKS if not b.fragment and not b.includes]


def _awaits_at_top_level(code: str) -> bool:
    try:
        compile(code, "<snippet>", "exec")
    except SyntaxError:
        compile(code, "<snippet>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        return True
    return False


def test_there_are_snippets_that_run() -> None:
    assert len(RUNNABLE) >= 15, [b.id for b in RUNNABLE]


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.includes], ids=lambda b: b.id)
def test_included_files_are_run_by_a_test(block: Block) -> None:
    for path in block.includes:
        assert path in RUN_BY_TESTS, f"{block.id}: {path} is not run by any test"
        assert (ROOT / path).is_file(), path
        test = ROOT / RUN_BY_TESTS[path]
        assert Path(path).name in test.read_text(encoding="utf-8") or \
            Path(path).parent.name in test.read_text(encoding="utf-8"), (path, test)


@pytest.mark.parametrize("block", RUNNABLE, ids=lambda b: b.id)
def test_snippet_runs(block: Block, asyncq_fresh_redis: str, tmp_path: Path) -> None:
    code = block.code.replace(REDIS_URL, asyncq_fresh_redis)
    assert "redis://" not in code.replace(asyncq_fresh_redis, ""), \
        f"{block.id}: write the Redis URL as {REDIS_URL}, the one this test replaces"
    script = tmp_path / "snippet.py"
    script.write_text(code, encoding="utf-8")
    args = ["-c", RUNNER, str(script)] if _awaits_at_top_level(code) else [str(script)]
    env = {**os.environ, "ASYNCQ_REDIS_URL": asyncq_fresh_redis,
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    try:
        proc = subprocess.run([sys.executable, *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=60, check=False)
    finally:  # a snippet enqueues into fixed queue names: leave no task to a later test
        with redis.Redis.from_url(asyncq_fresh_redis) as client:
            client.flushdb()
    assert proc.returncode == 0, f"{block.id} failed:\n{proc.stdout}\n{proc.stderr}"
