"""Celery tasks of the volumes app: thin wrappers over domain functions."""
from __future__ import annotations

from celery import shared_task


@shared_task(acks_late=True)
def expire_volume_sessions() -> int:
    """Aborts volume upload sessions idle past their expiry and releases their reservations.
    Meant to run periodically (every few minutes) from Celery beat."""
    from hub.volumes.uploads import expire_sessions

    return expire_sessions()
