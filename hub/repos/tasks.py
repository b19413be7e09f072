"""Celery tasks of the repos app: thin wrappers that take ids and call one domain function."""
from __future__ import annotations

from celery import shared_task


@shared_task(acks_late=True)
def expire_upload_sessions() -> int:
    """Aborts upload sessions idle past their expiry and releases their reservations (periodic)."""
    from hub.repos.blobs import expire_sessions

    return expire_sessions()


@shared_task(acks_late=True)
def prune_repo(repo_id: int) -> int:
    """After a branch or tag is deleted: drop unreachable history and give its bytes back."""
    from hub.repos.models import Repo
    from hub.repos.services import do_prune_repo

    repo = Repo.objects.filter(pk=repo_id).first()
    return do_prune_repo(repo) if repo is not None else 0
