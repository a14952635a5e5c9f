"""What an asyncq worker process of a Django project imports: Django is set up when this
module is imported (from ``DJANGO_SETTINGS_MODULE``), so ``asyncq worker
asyncq.contrib.django.worker:mux`` runs the project's tasks, and a worker that preloads this
module (``--preload asyncq.contrib.django.worker``, as ``manage.py asyncq_worker`` does) sets
Django up, and imports the apps' tasks modules, once in its fork server rather than in each
child process."""

from __future__ import annotations

from . import _child  # noqa: F401  (sets Django up)
from ._mux import TaskMux

mux = TaskMux()
"""Runs every Django task of the project whose backend is asyncq's (see ``TaskMux``)."""
