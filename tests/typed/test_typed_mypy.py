"""mypy flags a wrong call of a typed task, and only the wrong ones (ParamSpec typing)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

SNIPPET = Path(__file__).with_name("typing_snippet.py")
WORKFLOW_SNIPPET = Path(__file__).with_name("workflow_snippet.py")


@pytest.mark.parametrize("snippet", [SNIPPET, WORKFLOW_SNIPPET], ids=["tasks", "workflows"])
def test_mypy_reports_exactly_the_wrong_calls(tmp_path: Path, snippet: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"),
         "--no-error-summary", str(snippet)],
        capture_output=True, text=True, timeout=120, check=False)
    errors = [line for line in out.stdout.splitlines() if ": error: " in line]
    lines = snippet.read_text().splitlines()
    expected = {i + 1: m.group(1) for i, line in enumerate(lines)
                if (m := re.search(r"# (E\d) ", line))}
    flagged = {int(line.split(":")[1]) for line in errors}
    assert flagged == set(expected), out.stdout + out.stderr
    assert out.returncode == 1
