"""A task outside the app's ``tasks`` module (the worker registers it when it first meets
it), defined with asyncq's ``task``: the framework's ``@task`` with asyncq's options on any
Django the backend runs on."""

from asyncq.contrib.django import task
from shop.tasks import QUEUE


@task(queue_name=QUEUE, max_retry=4)
def nightly(kind):
    return kind
