"""Garbage collection: remove bytes nothing refers to, after a grace period, and put quota usage
back on the truth.

What refers to bytes: every kind of reference declared in hub.content.refs (a repo's commits, a
volume's files), and an open upload session (its key; its sha256). A blob row with none of these, created and last promised to a
client (Blob.touched) before the grace period, is deleted — row first, in a transaction that locks
it and re-checks the references, so a commit that references it at the same moment either wins
(the blob stays) or finds it gone and fails with a clear message (do_commit locks the same rows);
the object is deleted only after the row is gone. Objects under blobs/ and staging/ that no blob
row and no open session names (left by crashes, aborted uploads, lost races), older than the grace
period, are deleted too, and multipart uploads no open session owns are aborted."""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from hub.accounts.models import Namespace
from hub.content import blobs, refs
from hub.content.models import Blob, UploadSession
from hub.quotas import services as quotas
from hub.uploads import sessions
from hub.xet import cas as xet
from hub.xet import staging as xet_staging

log = logging.getLogger("hub.gc")
PREFIXES = ("blobs/", "staging/")


@dataclass
class Report:
    sessions_expired: int = 0
    blobs_deleted: int = 0
    bytes_freed: int = 0
    orphans_deleted: int = 0
    uploads_aborted: int = 0
    xorbs_deleted: int = 0
    collected: dict[str, dict] = field(default_factory=dict)  # what the apps' collectors removed, by name
    quota_drift: dict[str, tuple[int, int]] = field(default_factory=dict)  # ns → (recorded, true)

    def as_dict(self) -> dict:
        return self.__dict__.copy()


def _live_sessions():
    """Upload sessions whose bytes must stay: open ones, and those a completion is working on (or
    whose completion died: they reopen, see sessions.revive)."""
    return UploadSession.objects.filter(Q(state=UploadSession.OPEN) | Q(state=UploadSession.DONE, lease__gt=""))


def _unreferenced():
    uploading = _live_sessions().filter(sha256=OuterRef("sha256"))
    return refs.unreferenced(Blob.objects.filter(~Exists(uploading)))


def collect_blobs(grace: timedelta, *, dry_run: bool = False, limit: int = 10_000) -> tuple[int, int]:
    """Deletes unreferenced blobs older than `grace`. Returns (blobs, bytes)."""
    cutoff = timezone.now() - grace
    candidates = list(_unreferenced().filter(created__lt=cutoff)
                      .filter(Q(touched__isnull=True) | Q(touched__lt=cutoff))
                      .values_list("sha256", flat=True)[:limit])
    n = freed = 0
    store = blobs.object_store()
    for sha in candidates:
        if dry_run:
            n += 1
            freed += Blob.objects.get(pk=sha).size
            continue
        try:
            with transaction.atomic():
                blob = Blob.objects.select_for_update().filter(pk=sha).first()
                # Re-check under the lock: a commit may have referenced it since the scan.
                if blob is None or not _unreferenced().filter(pk=sha).exists():
                    continue
                if (blob.touched and blob.touched >= cutoff) or blob.created >= cutoff:
                    continue
                key = blobs.key_of(blob)
                blob.delete()  # its BlobProof rows go with it
        except IntegrityError:  # referenced by a row committed meanwhile (the database's FK says so)
            continue
        blobs.forget(sha)
        store.delete(key)
        n += 1
        freed += blob.size
        log.info("gc: deleted unreferenced blob %s (%d bytes)", sha, blob.size)
    return n, freed


def collect_orphans(grace: timedelta, *, dry_run: bool = False) -> tuple[int, int]:
    """Deletes store objects under blobs/ and staging/ that nothing names, older than `grace`, and
    aborts multipart uploads no open session owns. Returns (objects, uploads)."""
    store = blobs.object_store()
    cutoff = time.time() - grace.total_seconds()
    live_sessions = set(_live_sessions().values_list("key", flat=True))
    objects = uploads = 0
    batch: list[str] = []

    def flush() -> int:
        named = _named_by_blobs(batch)
        doomed = [k for k in batch if k not in named]
        for key in doomed:
            if not dry_run:
                store.delete(key)
            log.info("gc: deleted orphan object %s", key)
        batch.clear()
        return len(doomed)

    for prefix in PREFIXES:
        for key, _size, mtime in store.list(prefix):
            if mtime < cutoff and key not in live_sessions:
                batch.append(key)
                if len(batch) >= 1000:
                    objects += flush()
    objects += flush()
    live_ids = set(_live_sessions().values_list("store_upload_id", flat=True))
    for key, upload_id, started in store.list_uploads(""):
        if started < cutoff and upload_id not in live_ids:
            if not dry_run:
                store.abort_multipart(key, upload_id)
            uploads += 1
    return objects, uploads


def _named_by_blobs(keys: list[str]) -> set[str]:
    """Which of these keys hold a blob's bytes (canonical blobs/ab/cd/<sha256>, or a Blob.key)."""
    canonical = {}
    for key in keys:
        name = key.rsplit("/", 1)[-1]
        if len(name) == blobs.SHA256_LEN and key == blobs.blob_key(name):
            canonical[name] = key
    named = {canonical[sha] for sha in Blob.objects.filter(pk__in=list(canonical), key="")
             .values_list("sha256", flat=True)}
    named |= set(Blob.objects.filter(key__in=keys).values_list("key", flat=True))
    return named


def reconcile_quotas() -> dict[str, tuple[int, int]]:
    """Recomputes every namespace's usage from the references; returns the ones that had drifted."""
    drift = {}
    for ns in Namespace.objects.only("pk", "name", "used_bytes", "reserved_bytes").iterator():
        before = (ns.used_bytes, ns.reserved_bytes)
        after = quotas.reconcile(ns)
        if tuple(after) != before:
            drift[ns.name] = (before[0], after[0])
            log.warning("quota drift for %s corrected: used %d → %d, reserved %d → %d",
                        ns.name, before[0], after[0], before[1], after[1])
    return drift


# Collectors of the layers above (they hold bytes of their own, derived from blobs: the dataset
# viewer's copies): name → fn(grace, dry_run) -> what it removed. Registered at app start-up.
_COLLECTORS: dict[str, Callable[[timedelta, bool], dict]] = {}


def add_collector(name: str, collect: Callable[[timedelta, bool], dict]) -> None:
    _COLLECTORS[name] = collect


def run(grace: timedelta = timedelta(hours=1), *, dry_run: bool = False) -> Report:
    report = Report()
    if not dry_run:
        report.sessions_expired = sessions.expire_sessions()
    report.blobs_deleted, report.bytes_freed = collect_blobs(grace, dry_run=dry_run)
    report.orphans_deleted, report.uploads_aborted = collect_orphans(grace, dry_run=dry_run)
    # Xet's xorbs have a retention of their own (hub.xet.cas: clients reuse them for weeks)
    report.xorbs_deleted = xet.collect(timedelta(seconds=settings.HUB_XET_RETENTION), dry_run=dry_run)
    for name, collect in _COLLECTORS.items():
        report.collected[name] = collect(grace, dry_run)
    if not dry_run:
        # xorbs a server staged and did not write (it died): written or rebuilt from blobs, after ten
        # write-behind delays whatever the grace (nothing is deleted here, and until then the files
        # they hold are served over HTTP only)
        xet_staging.recover(timedelta(seconds=max(60, 10 * settings.HUB_XET_WRITE_BEHIND)))
        report.quota_drift = reconcile_quotas()
    return report
