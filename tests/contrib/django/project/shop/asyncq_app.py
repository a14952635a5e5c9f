"""The shop's patient tasks on a ServeMux, run by plain ``asyncq worker shop.asyncq_app:mux``:
``send_mail`` is retried on ConnectionError only (its registration's ``retry_on``)."""

import django

django.setup()

from asyncq import ServeMux  # noqa: E402  (after Django is set up)
from asyncq.contrib.django._runner import run_django_task  # noqa: E402

mux = ServeMux()
mux.handle("shop.tasks.send_mail", run_django_task, retry_on=ConnectionError)
mux.handle("shop.tasks.give_up", run_django_task)
