"""Celery tasks of the repos app: thin wrappers that take ids and call one domain function."""
from __future__ import annotations

from celery import shared_task
from django.utils import timezone


@shared_task(acks_late=True)
def abort_expired_uploads() -> int:
    """Aborts upload sessions past their expiry and frees their parts in the store."""
    from hub.repos.blobs import object_store
    from hub.repos.models import UploadSession

    n = 0
    for session in UploadSession.objects.filter(state=UploadSession.OPEN, expires__lt=timezone.now())[:1000]:
        if UploadSession.objects.filter(pk=session.pk, state=UploadSession.OPEN).update(state=UploadSession.ABORTED):
            object_store().abort_multipart(session.key, session.store_upload_id)
            n += 1
    return n


@shared_task(acks_late=True)
def prune_repo(repo_id: int) -> int:
    """After a branch or tag is deleted: drop unreachable history and give its bytes back."""
    from hub.repos.models import Repo
    from hub.repos.services import do_prune_repo

    repo = Repo.objects.filter(pk=repo_id).first()
    return do_prune_repo(repo) if repo is not None else 0
