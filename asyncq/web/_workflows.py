"""The workflows page (GET only): the newest workflows, or one workflow's steps and their
states (``/workflows?id=wf-...``), read through the public Inspector API. A workflow's steps
are shown ``STEPS_PAGE`` a page, with a count per state and a filter by state, so a workflow
of 10 000 steps renders one page of them."""

from __future__ import annotations

import math
from collections import Counter

from starlette.requests import Request
from starlette.responses import Response

from .._errors import TaskNotFoundError
from ._render import dashboard, render

LIMIT = 100
#: Steps shown per page of one workflow.
STEPS_PAGE = 100


async def workflows_page(request: Request) -> Response:
    inspector = dashboard(request).inspector
    workflow_id = request.query_params.get("id")
    if not workflow_id:
        return render(request, "workflows.html", {
            "nav": "workflows", "workflows": await inspector.workflows(LIMIT), "flow": None})
    try:
        flow = await inspector.workflow(workflow_id)
    except TaskNotFoundError as exc:
        return render(request, "error.html", {"nav": "workflows", "message": str(exc)},
                      status_code=404)
    counts = Counter(n.state for n in flow.nodes)
    step_state = request.query_params.get("step_state", "")
    nodes = [n for n in flow.nodes if n.state == step_state] if step_state else list(flow.nodes)
    pages = max(1, math.ceil(len(nodes) / STEPS_PAGE))
    try:
        page = min(pages, max(1, int(request.query_params.get("page", 1))))
    except ValueError:
        page = 1
    first = (page - 1) * STEPS_PAGE
    return render(request, "workflows.html", {
        "nav": "workflows", "workflows": [], "flow": flow,
        "nodes": nodes[first:first + STEPS_PAGE], "first": first, "matching": len(nodes),
        "page": page, "pages": pages, "step_state": step_state,
        "step_counts": sorted(counts.items()),
    })
