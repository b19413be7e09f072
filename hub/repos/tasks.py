"""Celery tasks of the repos app: thin wrappers that take ids and call one domain function."""
from __future__ import annotations

from celery import shared_task


@shared_task(acks_late=True)
def expire_upload_sessions() -> int:
    """Aborts upload sessions idle past their expiry and releases their reservations (periodic)."""
    from hub.uploads.sessions import expire_sessions

    return expire_sessions()


@shared_task(acks_late=True)
def prune_repo(repo_id: int) -> int:
    """After a branch or tag is deleted: drop unreachable history and give its bytes back."""
    from hub.repos.models import Repo
    from hub.repos.services import do_prune_repo

    repo = Repo.objects.filter(pk=repo_id).first()
    return do_prune_repo(repo) if repo is not None else 0


@shared_task(acks_late=True, autoretry_for=(OSError,), retry_backoff=True, max_retries=5)
def verify_blob(sha256: str) -> bool | None:
    """Hashes one blob's stored bytes; marks it verified, or corrupt (and tells the operator)."""
    from hub.content.integrity import verify_blob as verify

    return verify(sha256)


@shared_task(acks_late=True, autoretry_for=(OSError,), retry_backoff=True, max_retries=5)
def verify_unverified() -> dict:
    """Periodic: checks blobs recorded without verification."""
    from hub.content.integrity import verify_unverified as run

    return run()


@shared_task(acks_late=True, autoretry_for=(OSError,), retry_backoff=True, max_retries=5)
def scrub(max_blobs: int = 100) -> dict:
    """Periodic: re-checks the blobs checked longest ago."""
    from hub.content.integrity import scrub as run

    return run(max_blobs=max_blobs)


@shared_task(acks_late=True, autoretry_for=(OSError,), retry_backoff=True, max_retries=5)
def collect_garbage(grace_seconds: int = 3600) -> dict:
    """Periodic: expired sessions, unreferenced blobs and orphan objects after the grace period,
    quota usage reconciled from the references. Idempotent: a re-run finds less to do."""
    from datetime import timedelta

    from hub.repos import gc

    return gc.run(timedelta(seconds=grace_seconds)).as_dict()
