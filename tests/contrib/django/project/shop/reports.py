"""A task outside the app's ``tasks`` module: the worker registers it when it first meets it."""

from shop.tasks import QUEUE

try:
    from django.tasks import task
except ImportError:
    from django_tasks import task


@task(queue_name=QUEUE, max_retry=4)
def nightly(kind):
    return kind
