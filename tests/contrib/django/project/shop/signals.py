"""Receivers of the Tasks framework's signals that record each one (and where it was sent
from) as a JSON line in the file named by $SHOP_SIGNALS, for the tests to read back."""

import json
import os
import threading

from django.db import connection
from django.dispatch import receiver

try:
    from django.tasks.signals import task_enqueued, task_finished, task_started
except ImportError:
    from django_tasks.signals import task_enqueued, task_finished, task_started


def _record(name, sender, task_result):
    path = os.environ.get("SHOP_SIGNALS")
    if not path:
        return
    with connection.cursor() as cursor:  # receivers may use the database, as in a request
        cursor.execute("SELECT 1")
    line = {"signal": name, "sender": f"{sender.__module__}.{sender.__qualname__}",
            "pid": os.getpid(), "main_thread": threading.current_thread() is
            threading.main_thread(), "id": task_result.id, "status": str(task_result.status),
            "task": task_result.task.module_path, "queue_name": task_result.task.queue_name,
            "priority": task_result.task.priority, "args": task_result.args,
            "backend": task_result.backend, "started": task_result.started_at is not None,
            "finished": task_result.finished_at is not None,
            "errors": [e.exception_class_path for e in task_result.errors]}
    if task_result.status == "SUCCESSFUL":
        line["return_value"] = task_result.return_value
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)


@receiver(task_enqueued)
def on_enqueued(sender, task_result, **kwargs):
    _record("task_enqueued", sender, task_result)


@receiver(task_started)
def on_started(sender, task_result, **kwargs):
    _record("task_started", sender, task_result)


@receiver(task_finished)
def on_finished(sender, task_result, **kwargs):
    _record("task_finished", sender, task_result)
