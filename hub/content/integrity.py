"""Integrity of stored bytes: hash them back and compare with the sha256 they are stored under.

A blob found wrong (or missing) is marked corrupt and never served again — clients get a clear
BlobCorrupt error instead of wrong bytes (see blobs.check_servable) — and the operator is told (an
ERROR log line and mail to ADMINS, and the admin's "corrupt" filter). Blobs recorded without
verification are checked by `verify_unverified`; `scrub` re-checks the least recently checked
verified blobs, a bounded amount per run, so the whole store is covered over time."""
from __future__ import annotations

import logging

from django.core.mail import mail_admins
from django.db.models import F
from django.utils import timezone

from hub.content import blobs
from hub.content.models import Blob
from storage.store.objectstore import ObjectMissingError

log = logging.getLogger("hub.integrity")


def verify_blob(sha256: str) -> bool | None:
    """Hashes the blob's stored bytes. True: right (now verified); False: wrong or missing (now
    corrupt); None: no such blob. Store outages raise StoreUnavailableError (retry later)."""
    blob = Blob.objects.filter(pk=sha256).first()
    if blob is None:
        return None
    key = blobs.key_of(blob)
    try:
        digest, b3, size = blobs.object_store().digests(key)
    except ObjectMissingError:
        digest, b3, size = None, "", None
    now = timezone.now()
    if digest == blob.sha256 and size == blob.size:
        Blob.objects.filter(pk=sha256).update(verified=True, checked_at=now, corrupt_at=None, corrupt_reason="",
                                              blake3=b3)
        return True
    reason = ("the object is missing from the store" if digest is None
              else f"the stored bytes ({size} bytes, expected {blob.size}) hash to {digest}")
    Blob.objects.filter(pk=sha256).update(corrupt_at=now, checked_at=now, corrupt_reason=reason[:300])
    message = f"blob {sha256} at {key} is corrupt: {reason}; it is no longer served"
    log.error(message)
    mail_admins("corrupt blob in the object store", message, fail_silently=True)
    return False


def verify_unverified(limit: int = 100) -> dict[str, int]:
    """Checks blobs recorded without verification (oldest first)."""
    out = {"checked": 0, "corrupt": 0}
    for sha in Blob.objects.filter(verified=False, corrupt_at=None, remote=False).order_by("created").values_list(
            "sha256", flat=True)[:limit]:
        ok = verify_blob(sha)
        out["checked"] += ok is not None
        out["corrupt"] += ok is False
    return out


def scrub(max_blobs: int = 100, max_bytes: int = 10 * 10**9) -> dict[str, int]:
    """Re-checks the verified blobs checked longest ago (never-checked first), up to `max_blobs`
    blobs or `max_bytes` bytes per run."""
    out = {"checked": 0, "corrupt": 0, "bytes": 0}
    rows = (Blob.objects.filter(corrupt_at=None, remote=False).order_by(F("checked_at").asc(nulls_first=True), "created")
            .values_list("sha256", "size")[:max_blobs])
    for sha, size in rows:
        if out["checked"] and out["bytes"] + size > max_bytes:
            break
        ok = verify_blob(sha)
        out["checked"] += ok is not None
        out["corrupt"] += ok is False
        out["bytes"] += size
    return out


def corrupt_blobs():
    return Blob.objects.filter(corrupt_at__isnull=False).order_by("-corrupt_at")
