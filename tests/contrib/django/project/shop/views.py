"""Views that enqueue (from sync and async code) and read results back."""

from datetime import timedelta

from django.http import JsonResponse
from django.utils import timezone

from shop.tasks import (
    add,
    count_tables,
    deliver,
    forget,
    greet,
    mark,
    refund,
    render_pdf,
    rendezvous,
    whoami,
)

try:
    from django.tasks import default_task_backend
except ImportError:
    from django_tasks import default_task_backend


def _started(result):
    return JsonResponse({"id": result.id, "status": str(result.status)})


def enqueue_add(request):
    task = add.using(priority=int(request.GET.get("priority", 0)))
    return _started(task.enqueue(int(request.GET["a"]), int(request.GET["b"])))


def enqueue_mark(request):
    task = mark.using(priority=int(request.GET["priority"]))
    return _started(task.enqueue(request.GET["path"], request.GET["label"]))


def enqueue_add_later(request):
    later = timezone.now() + timedelta(seconds=float(request.GET["in"]))
    return _started(add.using(run_after=later).enqueue(1, 2))


def enqueue_forget(request):
    return _started(forget.enqueue(request.GET["order"]))


def enqueue_deliver(request):
    return _started(deliver.enqueue(request.GET["order"], request.GET["error"]))


def enqueue_render(request):
    return _started(render_pdf.enqueue(float(request.GET["seconds"])))


def enqueue_refund(request):
    return _started(refund.enqueue(request.GET["order"]))


def enqueue_count(request):
    return _started(count_tables.enqueue())


def enqueue_rendezvous(request):
    return _started(rendezvous.enqueue(request.GET["folder"], int(request.GET["parties"])))


def enqueue_whoami(request):
    return _started(whoami.enqueue(tag=request.GET["tag"]))


async def enqueue_greet(request):
    return _started(await greet.aenqueue(request.GET["name"]))


def _described(result):
    body = {"status": str(result.status), "args": result.args,
            "priority": result.task.priority, "queue_name": result.task.queue_name,
            "run_after": result.task.run_after.isoformat() if result.task.run_after else None,
            "started_at": result.started_at.isoformat() if result.started_at else None,
            "errors": [{"class": e.exception_class_path, "traceback": e.traceback}
                       for e in result.errors]}
    if result.status == "SUCCESSFUL":
        body["return_value"] = result.return_value
    return JsonResponse(body)


def result(request, result_id):
    return _described(default_task_backend.get_result(result_id))


def ranked_result(request, result_id):
    return _described(mark.get_result(result_id))


async def aresult(request, result_id):
    return _described(await default_task_backend.aget_result(result_id))
