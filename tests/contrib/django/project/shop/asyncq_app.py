"""The shop's patient tasks on a ServeMux of the shop's own, run by plain ``asyncq worker
shop.asyncq_app:mux``: ``register`` gives each the options of its definition (``send_mail``
is retried on ConnectionError only)."""

import django

django.setup()

from asyncq import ServeMux  # noqa: E402  (after Django is set up)
from asyncq.contrib.django import register  # noqa: E402
from shop.tasks import give_up, send_mail  # noqa: E402

mux = ServeMux()
register(mux, send_mail, "shop.tasks.give_up")
assert give_up  # (registered by its path)
