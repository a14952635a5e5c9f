"""The shop's tasks: sync and async, one that fails, one that uses the database."""

import asyncio
import os
import time
import uuid
from pathlib import Path

from django.conf import settings
from django.db import connection

from asyncq import RateLimit, SkipRetry

try:
    from django.tasks import task
except ImportError:
    from django_tasks import task

QUEUE = settings.TASKS["default"]["QUEUES"][0]
RANKED_QUEUE = settings.TASKS["ranked"]["QUEUES"][0]
BRIEF_QUEUE = settings.TASKS["brief"]["QUEUES"][0]
PATIENT_QUEUE = settings.TASKS["patient"]["QUEUES"][0]
SPARE_QUEUE = settings.TASKS["spare"]["QUEUES"][0]


class OutOfStockError(Exception):
    """What a refund of an unknown order raises."""


@task(queue_name=QUEUE)
def add(a, b):
    return a + b


@task(queue_name=QUEUE)
def refund(order):
    raise OutOfStockError(f"order {order} cannot be refunded")


@task(queue_name=QUEUE)
def forget(order):
    """Returns nothing: its result is None."""
    return None


@task(queue_name=QUEUE)
async def greet(name):
    return {"greeting": f"hello {name}"}


@task(queue_name=QUEUE)
def count_tables():
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM sqlite_master")
        return cursor.fetchone()[0]


@task(queue_name=QUEUE)
def rendezvous(folder, parties):
    """Wait (up to 10 s) until ``parties`` calls are running at once."""
    (Path(folder) / uuid.uuid4().hex).touch()
    deadline = time.monotonic() + 10
    while len(list(Path(folder).iterdir())) < parties:
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {len(list(Path(folder).iterdir()))} of {parties} ran")
        time.sleep(0.01)
    return parties


@task(queue_name=QUEUE, takes_context=True)
def whoami(context, tag):
    return {"id": context.task_result.id, "attempt": context.attempt, "tag": tag}


@task(queue_name=RANKED_QUEUE, backend="ranked")
def mark(path, label):
    """Append ``label`` to the file at ``path``: the file lists the calls in the order run."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{label}\n".encode())
    finally:
        os.close(fd)
    return label


@task(queue_name=BRIEF_QUEUE, backend="brief")
def nap(seconds):
    time.sleep(seconds)
    return seconds


@task(queue_name=BRIEF_QUEUE, backend="brief")
async def anap(seconds):
    await asyncio.sleep(seconds)
    return seconds


@task(queue_name=PATIENT_QUEUE, backend="patient")
def give_up(order):
    """Fails for good at once, though its backend allows retries."""
    raise SkipRetry(f"order {order} is gone")


@task(queue_name=PATIENT_QUEUE, backend="patient", retry_on=ConnectionError)
def send_mail(order):
    """Fails with an error its definition does not retry (retry_on)."""
    raise ValueError(f"no address for order {order}")


class SMTPError(ConnectionError):
    """What the mail server's outage raises: the one error ``deliver`` is retried on."""


@task(queue_name=QUEUE, takes_context=True, retry_on=SMTPError, max_retry=3, retry_delay=0.1)
def deliver(context, order, error):
    """Raises ``error`` ("smtp" or "value") on its first attempt, then returns the attempt."""
    if context.attempt == 1:
        if error == "smtp":
            raise SMTPError(f"mail server down for order {order}")
        raise ValueError(f"no address for order {order}")
    return context.attempt


@task(queue_name=QUEUE, limits=[RateLimit("2/s")])
def call_partner(order):
    """The partner API takes 2 calls a second, whatever the priority of the call."""
    return order


@task(queue_name=QUEUE, isolate="process", timeout=2, takes_context=True)
def render_pdf(context, seconds):
    """CPU-bound work in a child process: its pid and the id its context gives."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        pass
    return {"pid": os.getpid(), "id": context.task_result.id}


@task(queue_name=QUEUE, isolate="process", timeout=1)
def runaway(seconds):
    """Runs past its 1 s limit: its child is killed."""
    time.sleep(seconds)
    return seconds


@task(queue_name=QUEUE, isolate="process", timeout=5)
def nothing_back():
    """A process-run call that returns None."""
    return None


@task(queue_name=SPARE_QUEUE, backend="spare", takes_context=True, retry_delay=0.1)
def hold(context, path, seconds):
    """Writes its attempt to ``path`` (one line each), then sleeps ``seconds`` on the first
    attempt (long enough for a test to kill its worker) and returns the attempt."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{context.attempt}\n".encode())
    finally:
        os.close(fd)
    if context.attempt == 1:
        time.sleep(seconds)
    return context.attempt


@task(queue_name=QUEUE)
def total(values, extra=0):
    """A chord's callback: the sum of its group's results (and ``extra``)."""
    return sum(values) + extra
