"""Why the command stopped is one line on stderr: ``asyncq: error: …`` for a person, or, under
``--log-format json``, one JSON log line that a log pipeline reads like the others."""

from __future__ import annotations

import orjson
import pytest

from tests.helpers.cli import Cli

pytestmark = pytest.mark.anyio


async def test_a_fatal_error_under_json_logging_is_one_json_log_line(cli: Cli) -> None:
    ran = await cli("worker", "no_such_module_here:mux", "--log-format", "json", ok=None)
    assert ran.returncode == 1
    lines = ran.stderr.decode().splitlines()
    assert len(lines) == 1
    line = orjson.loads(lines[0])
    assert line["level"] == "error"
    assert "cannot import 'no_such_module_here'" in line["event"]
    assert line["timestamp"].endswith("Z")


async def test_a_fatal_error_otherwise_is_one_asyncq_error_line(cli: Cli) -> None:
    ran = await cli("worker", "no_such_module_here:mux", "--log-format", "console", ok=None)
    assert ran.returncode == 1
    lines = ran.stderr.decode().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("asyncq: error: cannot import 'no_such_module_here'")
