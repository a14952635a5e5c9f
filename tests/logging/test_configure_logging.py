"""``asyncq.configure_logging`` governs every logger of the process, whenever it was made: an
asyncq logger made at import time, before logging is set up, writes in the format set up
later, and again in a new one after ``configure_logging`` runs again."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

from tests.helpers.processes import ROOT

pytestmark = pytest.mark.anyio

SCRIPT = """
import logging
import asyncq
from asyncq._log import get_logger

early = get_logger("early")  # made at import time, as a module's own logger
asyncq.configure_logging("info", "json")
early.info("first", n=1)
logging.getLogger("lib").info("second")
asyncq.configure_logging("info", "console")
early.info("third")
"""


async def test_a_logger_made_before_logging_is_configured_follows_the_configuration(
    tmp_path: Path,
) -> None:
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    out = await anyio.run_process([sys.executable, str(script)], check=False,
                                  env={"PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr.decode()
    first, second, third = out.stderr.decode().splitlines()
    assert json.loads(first).items() >= {"event": "first", "component": "early", "n": 1,
                                         "level": "info"}.items()
    assert json.loads(second).items() >= {"event": "second", "logger": "lib"}.items()
    assert "[info     ] third" in third and "component=early" in third
