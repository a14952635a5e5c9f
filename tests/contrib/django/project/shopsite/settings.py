"""A minimal Django project whose tasks run on asyncq; the tests give it the Redis URL, the
queues, the SQLite file and the file its signal receivers write through the environment."""

import importlib.util
import os

if os.environ.get("SHOP_SETUPS"):  # (the tests read which processes set Django up)
    with open(os.environ["SHOP_SETUPS"], "a") as setups:
        setups.write(f"{os.getpid()}\n")

SECRET_KEY = "only-for-tests"
DEBUG = False
ALLOWED_HOSTS = ["testserver", "localhost"]
USE_TZ = True
ROOT_URLCONF = "shopsite.urls"
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"

INSTALLED_APPS = ["asyncq.contrib.django", "shop"]
if importlib.util.find_spec("django.tasks") is None:  # Django 5.2: the backport's app
    INSTALLED_APPS.insert(0, "django_tasks")

DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3",
                         "NAME": os.environ["SHOP_DB"]}}

TASKS = {
    "default": {
        "BACKEND": "asyncq.contrib.django.AsyncqBackend",
        "QUEUES": [os.environ["SHOP_QUEUE"]],
        "OPTIONS": {"URL": os.environ["SHOP_REDIS_URL"]},
    },
    # Its own queue (no worker serves it until a test starts one) and four priority bands.
    "ranked": {
        "BACKEND": "asyncq.contrib.django.AsyncqBackend",
        "QUEUES": [os.environ["SHOP_RANKED_QUEUE"]],
        "OPTIONS": {"URL": os.environ["SHOP_REDIS_URL"],
                    "PRIORITIES": {"urgent": 50, "high": 1, "low": -1}},
    },
    # Its own queue too: a 1-second time limit.
    "brief": {
        "BACKEND": "asyncq.contrib.django.AsyncqBackend",
        "QUEUES": [os.environ["SHOP_BRIEF_QUEUE"]],
        "OPTIONS": {"URL": os.environ["SHOP_REDIS_URL"], "TIMEOUT": 1},
    },
    # Its own queue too: two retries, so a failure that is not retried shows as final.
    "patient": {
        "BACKEND": "asyncq.contrib.django.AsyncqBackend",
        "QUEUES": [os.environ["SHOP_PATIENT_QUEUE"]],
        "OPTIONS": {"URL": os.environ["SHOP_REDIS_URL"], "MAX_RETRY": 2},
    },
    # Its own queue too, for the tests that start (and kill) workers of their own.
    "spare": {
        "BACKEND": "asyncq.contrib.django.AsyncqBackend",
        "QUEUES": [os.environ["SHOP_SPARE_QUEUE"]],
        "OPTIONS": {"URL": os.environ["SHOP_REDIS_URL"]},
    },
}
