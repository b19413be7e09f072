"""The Celery app. With CELERY_BROKER_URL unset, tasks run eagerly in the calling process."""
from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hub.settings")
app = Celery("hub")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def task(name: str):
    """The registered task `name` ("hub.<app>.tasks.<function>"), for domain code that queues work:
    looked up by name so that services never import their app's tasks module, which imports them
    (tasks stay thin entry points that call back into the services)."""
    if name not in app.tasks:
        app.loader.import_default_modules()  # (autodiscovery is lazy outside a worker)
    return app.tasks[name]
