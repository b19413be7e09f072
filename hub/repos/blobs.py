"""Blobs: file bytes stored once under their sha256, and the upload sessions that bring them in."""
from __future__ import annotations

import functools
import hashlib
import io
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError
from django.utils import timezone

from hub.errors import BadRequest, NotFound, UnprocessableEntity
from hub.repos.models import Blob, UploadSession
from storage.objectstore import ObjectMissingError, ObjectStore, from_url

SHA256_LEN = 64
MIN_PART = 5 * 2**20  # S3's smallest part but the last
MAX_PARTS = 10_000


@functools.cache
def object_store() -> ObjectStore:
    return from_url(settings.HUB_STORAGE_URL)


def blob_key(sha256: str) -> str:
    return f"blobs/{sha256[:2]}/{sha256[2:4]}/{sha256}"


def check_sha256(oid: str) -> str:
    if not isinstance(oid, str) or len(oid) != SHA256_LEN or any(c not in "0123456789abcdef" for c in oid):
        raise BadRequest(f"invalid sha256 oid {oid!r}: expected 64 lowercase hex characters")
    return oid


def git_blob_oid(data: bytes) -> str:
    h = hashlib.sha1(b"blob %d\x00" % len(data))
    h.update(data)
    return h.hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


def lfs_pointer_oid(sha256: str, size: int) -> str:
    return git_blob_oid(lfs_pointer(sha256, size))


def stored_blob(sha256: str) -> Blob | None:
    return Blob.objects.filter(sha256=sha256, verified=True).first()


def _record(sha256: str, size: int) -> Blob:
    try:
        blob, _ = Blob.objects.get_or_create(sha256=sha256, defaults={"size": size, "verified": True})
    except IntegrityError:  # a concurrent upload of the same bytes won the insert
        blob = Blob.objects.get(sha256=sha256)
    if not blob.verified:
        Blob.objects.filter(pk=sha256).update(verified=True, size=size)
        blob.verified = True
    return blob


def ingest_bytes(data: bytes) -> Blob:
    """Stores small in-memory content (inline commit files). The bytes are in the store before any
    row points at them; identical content is stored once."""
    sha = hashlib.sha256(data).hexdigest()
    blob = stored_blob(sha)
    if blob is not None:
        return blob
    object_store().put_bytes(blob_key(sha), data)
    return _record(sha, len(data))


def verify_stored(sha256: str, size: int) -> Blob:
    """Reads back bytes that a client put straight into the store and records them as a Blob only
    if their size and sha256 match; wrong bytes are deleted, never served under that hash."""
    blob = stored_blob(sha256)
    if blob is not None:
        return blob
    store = object_store()
    key = blob_key(sha256)
    actual_size = store.size(key)
    if actual_size is None:
        raise UnprocessableEntity(f"object {sha256} was not uploaded; upload it before committing")
    if actual_size != size:
        store.delete(key)
        raise UnprocessableEntity(f"object {sha256}: uploaded {actual_size} bytes but announced {size}; "
                                  "upload it again")
    digest, _ = store.sha256(key)
    if digest != sha256:
        store.delete(key)
        raise UnprocessableEntity(f"object {sha256}: the uploaded bytes hash to {digest}; upload it again")
    return _record(sha256, size)


def ingest_stream_verified(stream, sha256: str, size: int) -> Blob:
    """Local backend: the hub receives the bytes itself, hashing them on the way to a temporary
    object, and installs them under their hash only if they match."""
    from storage.objectstore import LocalStore

    store = object_store()
    assert isinstance(store, LocalStore)
    hasher = _HashingReader(stream, size)
    tmp_key = f"staging/{sha256}.{timezone.now().timestamp():.6f}"
    store.put_stream(tmp_key, hasher, size)
    try:
        if hasher.count != size:
            raise BadRequest(f"expected {size} bytes, received {hasher.count}; upload it again")
        if hasher.hexdigest() != sha256:
            raise UnprocessableEntity(f"the uploaded bytes hash to {hasher.hexdigest()}, not {sha256}")
        import os

        os.replace(store.local_path(tmp_key), _ensure_parent(store.local_path(blob_key(sha256))))
    finally:
        store.delete(tmp_key)
    return _record(sha256, size)


def _ensure_parent(path: str) -> str:
    import os

    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


class _HashingReader(io.RawIOBase):
    def __init__(self, stream, limit: int) -> None:
        self.stream = stream
        self.limit = limit
        self.count = 0
        self.h = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        want = self.limit - self.count if n < 0 else min(n, self.limit - self.count + 1)
        if want <= 0:
            return b""
        data = self.stream.read(want)
        self.count += len(data)
        self.h.update(data)
        return data

    def readinto(self, b) -> int:
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)

    def hexdigest(self) -> str:
        return self.h.hexdigest()


# --- multipart sessions -----------------------------------------------------------------------------

def part_size_for(size: int) -> int:
    chunk = max(settings.HUB_MULTIPART_CHUNK, MIN_PART)
    if -(-size // chunk) > MAX_PARTS:
        chunk = -(-size // MAX_PARTS)
        chunk = -(-chunk // 2**20) * 2**20
    return chunk


def open_session(*, sha256: str, size: int, repo=None, user=None) -> UploadSession:
    """Starts (or resumes, when the same user already has an open one for these bytes) a multipart
    upload of one blob."""
    existing = (UploadSession.objects.filter(sha256=sha256, size=size, user=user, state=UploadSession.OPEN,
                                             expires__gt=timezone.now() + timedelta(minutes=10))
                .order_by("-created").first())
    if existing is not None:
        return existing
    key = blob_key(sha256)
    upload_id = object_store().create_multipart(key)
    return UploadSession.objects.create(repo=repo, user=user, sha256=sha256, size=size,
                                        part_size=part_size_for(size), store_upload_id=upload_id, key=key,
                                        expires=timezone.now() + timedelta(days=1))


def access_session(session_id: str) -> UploadSession:
    session = UploadSession.objects.filter(pk=session_id).first()
    if session is None or session.state != UploadSession.OPEN or session.expires < timezone.now():
        raise NotFound("this upload session does not exist or has expired; start the upload again")
    return session


def part_length(session: UploadSession, number: int) -> int:
    if not 1 <= number <= session.part_count:
        raise BadRequest(f"part number {number} out of range 1..{session.part_count}")
    start = (number - 1) * session.part_size
    return min(session.part_size, session.size - start)


def complete_session(session: UploadSession, parts: list[tuple[int, str]] | None = None) -> Blob:
    """Assembles the parts, verifies the bytes and records the blob. Idempotent: a completion
    retried after a lost response finds the blob already there."""
    blob = stored_blob(session.sha256)
    store = object_store()
    if blob is None:
        stored = store.list_parts(session.key, session.store_upload_id)
        expected = session.part_count
        missing = [n for n in range(1, expected + 1) if n not in stored]
        if missing:
            raise BadRequest(f"parts {missing[:10]} of {expected} have not been uploaded")
        for n, (_etag, size) in stored.items():
            if n <= expected and size != part_length(session, n):
                raise BadRequest(f"part {n} has {size} bytes, expected {part_length(session, n)}")
        # Use the store's own ETags: clients may quote them differently.
        ordered = [(n, stored[n][0] or (dict(parts or [])).get(n, "")) for n in range(1, expected + 1)]
        try:
            store.complete_multipart(session.key, session.store_upload_id, ordered)
        except ObjectMissingError:
            pass  # completed by an earlier attempt whose response was lost
        try:
            blob = verify_stored(session.sha256, session.size)
        except UnprocessableEntity:
            # The store's upload is consumed and the wrong bytes deleted: never resume this session.
            UploadSession.objects.filter(pk=session.pk).update(state=UploadSession.ABORTED)
            raise
    UploadSession.objects.filter(pk=session.pk).update(state=UploadSession.DONE)
    return blob
