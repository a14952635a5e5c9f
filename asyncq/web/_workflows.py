"""The workflows page (GET only): the newest workflows, or one workflow's steps and their
states (``/workflows?id=wf-...``), read through the public Inspector API."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from .._errors import TaskNotFoundError
from ._render import dashboard, render

LIMIT = 100


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
    return render(request, "workflows.html", {"nav": "workflows", "workflows": [],
                                              "flow": flow})
