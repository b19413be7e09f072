"""The Celery app. With CELERY_BROKER_URL unset, tasks run eagerly in the calling process."""
from __future__ import annotations

import os
import threading

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


def run_soon(name: str, *args) -> None:
    """Task `name` to the workers; without a broker (the embedded default, tasks eager) on a thread
    of this process, so that the request that asked for it does not wait for it."""
    from django.conf import settings
    from django.db import connections

    t = task(name)
    if not settings.CELERY_TASK_ALWAYS_EAGER:
        t.delay(*args)
        return

    def run() -> None:
        try:
            t.apply(args=args)
        finally:
            connections.close_all()  # (this thread's own)

    threading.Thread(target=run, name=f"task-{name.rsplit('.', 1)[-1]}", daemon=True).start()
