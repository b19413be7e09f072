"""Celery tasks of mirroring: thin wrappers that take ids and call the engine.

`run_mirror` acknowledges late, so a worker killed mid-job leaves the message to be delivered
again; the job's lease and per-step records make that second delivery finish the job without
repeating a commit or a stored blob. Because a Redis broker hands an unacknowledged message out
again only after its visibility timeout, workers also look for jobs whose worker died when they
start and periodically (beat), and queue them again."""
from __future__ import annotations

from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings

from hub.mirrors.engine import TRANSIENT
from hub.mirrors.services import RETRY_BACKOFF_MAX


@shared_task(bind=True, acks_late=True, autoretry_for=TRANSIENT, retry_backoff=5, retry_backoff_max=RETRY_BACKOFF_MAX,
             retry_jitter=True, max_retries=settings.HUB_MIRROR_RETRIES)
def run_mirror(self, job_id: int) -> str:
    """Runs mirror job `job_id`: transient failures are retried with backoff, the last one fails it."""
    from hub.mirrors.engine import run_job

    return run_job(job_id, worker=self.request.hostname or "", final=self.request.retries >= self.max_retries)


@shared_task(acks_late=True)
def recover_mirrors() -> int:
    """Queues again running jobs whose worker died (periodic, and when a worker starts)."""
    from hub.mirrors.services import recover_stalled

    return recover_stalled()


@worker_ready.connect
def _recover_on_start(sender=None, **kwargs) -> None:
    # A worker restarted after a crash finds the jobs it was running at once, not a visibility
    # timeout later. Sent as a task: the main process forks the pool and must not hold DB handles.
    recover_mirrors.apply_async(countdown=1)


@shared_task(name="hub.mirrors.tasks.ondemand_housekeeping")
def ondemand_housekeeping() -> dict:
    """Keeps fetched-on-demand bytes within the budget, deletes the objects of evicted blobs, and
    drops partial fetches nothing will resume (periodic)."""
    from hub.mirrors import ondemand

    return {"evicted": ondemand.evict(), "partials_dropped": ondemand.prune_partials()}
