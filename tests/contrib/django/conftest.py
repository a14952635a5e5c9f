"""The shop project set up once for this package's tests (Django's settings are read once
per process): its environment, ``django.setup()`` and a worker for its default backend."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator

import pytest

from tests.contrib.django.harness import CONCURRENCY, PROJECT, Shop, manage_worker


@pytest.fixture(scope="package")
def shop(asyncq_redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shop]:
    tmp = tmp_path_factory.mktemp("shop")
    signals = tmp / "signals.jsonl"
    env = {"SHOP_QUEUE": f"dj-{uuid.uuid4().hex[:10]}",
           "SHOP_RANKED_QUEUE": f"dj-ranked-{uuid.uuid4().hex[:10]}",
           "SHOP_BRIEF_QUEUE": f"dj-brief-{uuid.uuid4().hex[:10]}",
           "SHOP_PATIENT_QUEUE": f"dj-patient-{uuid.uuid4().hex[:10]}",
           "SHOP_SPARE_QUEUE": f"dj-spare-{uuid.uuid4().hex[:10]}",
           "SHOP_REDIS_URL": asyncq_redis_url, "SHOP_SIGNALS": str(signals),
           "SHOP_SETUPS": str(tmp / "setups"),
           "SHOP_DB": str(tmp / "shop.sqlite3"), "DJANGO_SETTINGS_MODULE": "shopsite.settings"}
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    sys.path.insert(0, str(PROJECT))
    import django
    from django.test import Client

    django.setup()
    try:
        with manage_worker(["-c", str(CONCURRENCY)], tmp / "worker.log", os.environ) as worker:
            yield Shop(Client(), tmp / "worker.log", tmp, signals, worker.pid)
    finally:
        sys.path.remove(str(PROJECT))
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
