"""The Django app that provides ``manage.py asyncq_worker`` (add "asyncq.contrib.django" to
INSTALLED_APPS)."""

from django.apps import AppConfig


class AsyncqConfig(AppConfig):
    """Labelled "asyncq" (the module's last part, "django", would read as Django's own)."""

    name = "asyncq.contrib.django"
    label = "asyncq"
    verbose_name = "asyncq"
