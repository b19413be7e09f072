"""The Celery app. With CELERY_BROKER_URL unset, tasks run eagerly in the calling process."""
from __future__ import annotations

import atexit
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
            with _lock:
                _running.discard(threading.current_thread())

    thread = threading.Thread(target=run, name=f"task-{name.rsplit('.', 1)[-1]}", daemon=True)
    with _lock:
        _running.add(thread)
    thread.start()


_running: set[threading.Thread] = set()  # run_soon's threads still at work
_lock = threading.Lock()


@atexit.register
def _finish_tasks() -> None:
    """A process that started tasks on its own threads (a management command, a server worker that
    is stopping) finishes them before it exits instead of dropping them half done: a dataset
    mirrored by `manage.py mirror` has its viewer when the command returns. (A daemon thread still
    inside pyarrow when the interpreter finalizes aborts or hangs the whole process.) The threads
    stay daemons so that nothing waits for them before the interpreter starts to exit."""
    while True:
        with _lock:
            alive = [t for t in _running if t.is_alive()]
        if not alive:
            return
        for thread in alive:
            thread.join()
