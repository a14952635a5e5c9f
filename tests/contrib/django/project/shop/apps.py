"""The shop app: connects its signal receivers when Django starts (web and worker alike)."""

from django.apps import AppConfig


class ShopConfig(AppConfig):
    name = "shop"

    def ready(self) -> None:
        from shop import signals  # noqa: F401  (connects the receivers)
