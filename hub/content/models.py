"""The content store's records: bytes stored once under their sha256 (Blob), who has shown they hold
them (BlobProof), and the resumable uploads that bring them in (UploadSession). What refers to a blob
(a repo's commits, a volume's files) is declared by those apps in hub.content.refs; this module
imports no app above it (the foreign keys up are by name)."""
from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class Blob(models.Model):
    """Bytes in the object store, stored once per content."""

    sha256 = models.CharField(max_length=64, primary_key=True)
    size = models.BigIntegerField()
    verified = models.BooleanField(default=False, help_text="sha256 checked against the stored bytes")
    # Not in the store (yet): an upstream holds the bytes, and hub.mirrors.ondemand fetches them on
    # their first read (then they are recorded like any upload: verified, remote False). A remote
    # blob is never verified, never reused by hash, never checked by integrity runs.
    remote = models.BooleanField(default=False, help_text="bytes at an upstream, fetched on first read")
    # An upstream holds these bytes too (a catalog entry's file): once fetched they may be evicted
    # again, so their key is never cached by a process (blobs.key_for reads the row every time).
    upstream = models.BooleanField(default=False, help_text="an upstream holds them too (evictable)")
    # Where the bytes live; empty = the canonical blobs/<ab>/<cd>/<sha256>. Multipart uploads to S3
    # stay under their own session key (no copy), so no upload can ever write over verified bytes.
    key = models.CharField(max_length=300, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    # Last time an upload was skipped because these bytes exist (a commit may follow): GC's grace
    # period counts from here, so bytes promised to a client are not collected under it.
    touched = models.DateTimeField(null=True, blank=True)
    # Integrity: when the stored bytes were last hashed and found right; when they were found wrong
    # or missing (then the blob is never served: clients get a clear error, not wrong bytes).
    checked_at = models.DateTimeField(null=True, blank=True)
    corrupt_at = models.DateTimeField(null=True, blank=True, db_index=True)
    corrupt_reason = models.CharField(max_length=300, blank=True)
    # blake3 of the same bytes, recorded only when the hub hashed them to both (so it vouches for
    # nothing the sha256 check did not): clients verify downloads with it at a fifth of the CPU.
    # Empty until then (claimed, checked-PUT and older blobs: the next check or scrub fills it in).
    blake3 = models.CharField(max_length=64, blank=True, default="",
                              help_text="blake3 of the bytes, recorded when the hub hashed them to the sha256")

    class Meta:
        db_table = "repos_blob"  # (created by the repos app; the table kept its name)

    def __str__(self) -> str:
        return f"{self.sha256[:12]} ({self.size} B)"


class BlobProof(models.Model):
    """The user has shown they hold these bytes (uploaded or sent them). Only then, or when the blob
    is already in a repo they can read, may they reference it by hash alone: otherwise knowing a
    sha256 would be enough to copy someone's private file into your own repo."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    blob = models.ForeignKey(Blob, on_delete=models.CASCADE, related_name="proofs")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "repos_blobproof"  # (created by the repos app; the table kept its name)
        constraints = [models.UniqueConstraint(fields=["user", "blob"], name="blobproof_unique")]


class UploadSession(models.Model):
    """A resumable upload of one blob: parts go straight to the store (S3 multipart) or to the hub
    (local backend); completion verifies the bytes and records the Blob."""

    OPEN, DONE, ABORTED = "open", "done", "aborted"
    id = models.UUIDField(primary_key=True, default=uuid.uuid4)
    repo = models.ForeignKey("repos.Repo", null=True, on_delete=models.SET_NULL)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    sha256 = models.CharField(max_length=64)
    size = models.BigIntegerField()
    part_size = models.BigIntegerField()
    store_upload_id = models.CharField(max_length=1024, blank=True)
    key = models.CharField(max_length=300)
    state = models.CharField(max_length=8, default=OPEN)
    # What the bytes are for once complete: an LFS object, or a volume file ({"volume_path", "if_match"}).
    purpose = models.CharField(max_length=16, default="lfs")
    target = models.JSONField(default=dict, blank=True)
    reservation = models.ForeignKey("quotas.Reservation", null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="+")
    created = models.DateTimeField(auto_now_add=True)
    expires = models.DateTimeField()
    # A completion claims the session (OPEN → DONE) with a lease of its own and keeps `claimed` fresh
    # while it assembles and verifies the bytes; the lease is cleared once the blob is recorded. A
    # DONE session still holding a lease whose `claimed` went stale lost its worker: it reopens
    # (hub.uploads.sessions.revive) so that a retry completes it from the parts already sent.
    lease = models.CharField(max_length=32, blank=True, default="")
    claimed = models.DateTimeField(null=True, blank=True)
    # Every part URL of a checked session was signed with the sha256 of that part, which the store
    # checks as the part lands (hub.uploads.sessions.checked_part_urls): completing it needs no
    # read-back, and its blob is verified as a whole in the background (blobs.claim).
    checked = models.BooleanField(default=False)

    class Meta:
        db_table = "repos_uploadsession"  # (created by the repos app; the table kept its name)

    @property
    def part_count(self) -> int:
        return max(1, -(-self.size // self.part_size))
