"""A long workflow's page lists its steps a page at a time, with a count per step state and
a filter by state (a chord of 250 members has 252 steps)."""

from __future__ import annotations

import re

import pytest

from asyncq import Client, Task, chord
from asyncq.web._workflows import STEPS_PAGE
from tests.web.web_helpers import WebFactory

pytestmark = pytest.mark.anyio


def _rows(page: str) -> int:
    body = page.split('id="steps"', 1)[1].split("</table>", 1)[0]
    return len(re.findall(r"<tr><td class=\"mono\">", body))


async def test_a_long_workflow_pages_its_steps(web: WebFactory, asyncq_client: Client,
                                               asyncq_queue: str) -> None:
    members = [Task("part", i, queue=asyncq_queue) for i in range(250)]
    handle = await asyncq_client.enqueue_workflow(
        chord(members, Task("sum", queue=asyncq_queue)))
    async with web() as http:
        first = await http.get("/workflows", params={"id": handle.id})
        assert first.status_code == 200
        assert _rows(first.text) == STEPS_PAGE
        assert f"steps 1 to {STEPS_PAGE} of 252 · page 1 of 3" in first.text
        assert re.search(r'>pending <span class="count">250</span>', first.text)
        last = await http.get("/workflows", params={"id": handle.id, "page": 3})
        assert _rows(last.text) == 252 - 2 * STEPS_PAGE
        assert "page 3 of 3" in last.text and 'id="next-steps"' not in last.text
        waiting = await http.get("/workflows", params={"id": handle.id,
                                                       "step_state": "waiting"})
        shown = re.search(r'>waiting <span class="count">(\d+)</span>', waiting.text)
        assert shown and 0 < _rows(waiting.text) == int(shown.group(1)) < STEPS_PAGE
        assert "page 1 of" not in waiting.text
        beyond = await http.get("/workflows", params={"id": handle.id, "page": "99"})
        assert "page 3 of 3" in beyond.text
