"""asyncq as the queue of Django's Tasks framework (``django.tasks``, or the ``django-tasks``
backport): ``AsyncqBackend`` enqueues and reads results; ``manage.py asyncq_worker`` (with
"asyncq.contrib.django" in INSTALLED_APPS) runs the project's ``@task`` functions."""

from ._backend import AsyncqBackend

__all__ = ["AsyncqBackend"]
