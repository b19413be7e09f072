"""Celery tasks of the dataset viewer: thin wrappers that take ids and call one domain function."""
from __future__ import annotations

from celery import shared_task


@shared_task(acks_late=True, autoretry_for=(OSError,), retry_backoff=True, max_retries=3)
def compute_viewer(run_id: int) -> str:
    """Reads the data files of one commit of a dataset: its splits, schema, row counts, and a copy
    of each file laid out for paging (once per commit; files unchanged since an earlier commit are
    not read again)."""
    from hub.viewer.services import do_compute

    return do_compute(run_id)
