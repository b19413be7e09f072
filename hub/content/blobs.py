"""Blobs: file bytes stored once under their sha256 — ingest and verification (nothing is recorded
under a hash the hub has not checked), reuse by proof of possession, the per-process caches that
keep serving cheap. Upload sessions that bring large bytes in are hub.uploads'; what refers to a
blob is declared in hub.content.refs."""
from __future__ import annotations

import functools
import hashlib
import io
import logging
import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from blake3 import blake3 as new_blake3
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from hub.celery import run_soon
from hub.content import refs
from hub.content.models import Blob, BlobProof
from hub.errors import BadRequest, BlobCorrupt, BlobNotLocal, UnprocessableEntity
from storage.store.objectstore import (
    ObjectStore,
    from_url,
)

log = logging.getLogger("hub.blobs")

SHA256_LEN = 64
MIN_PART = 5 * 2**20  # S3's smallest part but the last
MAX_PARTS = 10_000
MAX_BLOB_SIZE = 5 * 2**40  # S3's largest object


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


def stored_blob(sha256: str, user=None) -> Blob | None:
    """The blob, if its bytes are stored and good (verified, not found corrupt since) — or, for
    `user`, bytes they claimed and are being verified in the background (`claim`)."""
    blob = Blob.objects.filter(sha256=sha256, corrupt_at=None, remote=False).first()
    if blob is None or blob.verified:
        return blob
    return blob if claimed_by(user, [sha256]) else None


def claimed_by(user, sha256s: list[str]) -> set[str]:
    """Which of these blobs `user` holds a proof of: for one not verified yet, that they claimed it
    (uploaded it in checked parts) — the only proofs an unverified blob has are its claimant's
    (`reuse` grants them only for verified ones). (Not asking whether it is verified: the background
    check may finish between a caller's read of the row and this query.)"""
    if user is None or not getattr(user, "pk", None) or not sha256s:
        return set()
    return set(BlobProof.objects.filter(user=user, blob_id__in=sha256s, blob__corrupt_at=None,
                                        blob__remote=False).values_list("blob_id", flat=True))


def claim(store: ObjectStore, key: str, sha256: str, size: int, user) -> Blob:
    """Bytes at `key` that the store checked part by part against the sha256 of each part their
    uploader named (a checked upload session), under the whole-file sha256 the uploader names too:
    recorded without reading them back, as a blob only its claimant may use until its background
    check (hub.content.integrity.verify_blob, queued here) has hashed the whole and marked it
    verified — or corrupt, never served again. Dedup across accounts waits for that check.

    When the hash names a blob already stored that the uploader may not use, or another claimant's
    pending one, these bytes are read back and hashed now (`install`): a claim never grants access
    to bytes someone else holds. The caller deletes `key` when the blob lives elsewhere."""
    with transaction.atomic():
        row = Blob.objects.select_for_update().filter(pk=sha256).first()
        if row is None:
            try:
                with transaction.atomic():
                    blob = Blob.objects.create(sha256=sha256, size=size, verified=False,
                                               key="" if key == blob_key(sha256) else key)
            except IntegrityError:  # a concurrent upload of the same bytes won the insert
                blob = None
            if blob is not None:
                _proof(blob, user)
                blob._created_now = True
                transaction.on_commit(lambda: _verify_later(sha256))
                return blob
        elif row.corrupt_at is None and not row.remote and BlobProof.objects.filter(user=user, blob=row).exists():
            Blob.objects.filter(pk=sha256).update(touched=timezone.now())
            row._created_now = False  # the uploader holds these bytes already: this copy is redundant
            return row
    digest, b3, actual = store.digests(key)
    if actual != size or digest != sha256:
        raise UnprocessableEntity(f"object {sha256}: the uploaded bytes ({actual} bytes, expected {size}) hash "
                                  f"to {digest}; upload the right file again")
    return install(store, key, sha256, size, user, blake3=b3)


def _verify_later(sha256: str) -> None:
    """The background check of a claimed blob (to the workers, or a thread without a broker)."""
    run_soon("hub.repos.tasks.verify_blob", sha256)


def key_of(blob: Blob) -> str:
    return blob.key or blob_key(blob.sha256)


_KEYS: dict[str, str] = {}
_CORRUPT: tuple[float, frozenset[str]] = (-1e9, frozenset())
CORRUPT_TTL = 5.0  # seconds a process may keep serving a blob after a check found it corrupt


def corrupt_shas() -> frozenset[str]:
    """Blobs found corrupt or missing, re-read at most every CORRUPT_TTL seconds per process (the
    set is normally empty: one cheap query, not one per request)."""
    global _CORRUPT
    at, shas = _CORRUPT
    if time.monotonic() - at > CORRUPT_TTL:
        old, shas = shas, frozenset(Blob.objects.filter(corrupt_at__isnull=False)
                                    .values_list("sha256", flat=True)[:100_000])
        for healed in old - shas:  # re-uploaded or restored: its bytes may live under a new key
            _KEYS.pop(healed, None)
        _CORRUPT = (time.monotonic(), shas)
    return shas


def check_servable(sha256: str) -> None:
    if sha256 in corrupt_shas():
        raise BlobCorrupt(f"the stored bytes of {sha256} failed their integrity check and are not served; "
                          "the operator has been told (restore the object or upload the file again)")


def touch(sha256s: list[str]) -> None:
    """These stored blobs were just promised to a client (no upload needed): restart GC's grace."""
    if sha256s:
        Blob.objects.filter(pk__in=sha256s).update(touched=timezone.now())


def forget(sha256: str) -> None:
    _KEYS.pop(sha256, None)


def key_for(sha256: str) -> str:
    """The object key of a stored blob, for serving it: raises BlobCorrupt for bytes found corrupt,
    BlobNotLocal for bytes an upstream holds (not fetched yet, or evicted). Cached per process: a
    blob's key never changes; bytes an upstream holds too are the exception (they may be evicted at
    any time, hub.mirrors.ondemand), so their row is read every time."""
    check_servable(sha256)
    key = _KEYS.get(sha256)
    if key is None:
        row = Blob.objects.filter(pk=sha256).values_list("key", "remote", "upstream").first()
        if row is not None and row[1]:
            raise BlobNotLocal(sha256)
        key = (row[0] if row else "") or blob_key(sha256)
        if row is not None and not row[2]:
            if len(_KEYS) > 100_000:
                _KEYS.clear()
            _KEYS[sha256] = key
    return key


def _proof(blob: Blob, user) -> None:
    if user is not None and getattr(user, "pk", None):
        BlobProof.objects.get_or_create(user=user, blob=blob)


def reuse(sha256: str, user=None) -> Blob | None:
    """The stored blob, locked against garbage collection while the caller's transaction lasts,
    with the user's proof of holding it and GC's grace period restarted; None if it is not stored
    (any more). Callers that find None store the bytes themselves."""
    with transaction.atomic():
        blob = (Blob.objects.select_for_update().filter(sha256=sha256, verified=True, corrupt_at=None).first())
        if blob is None:
            return None
        Blob.objects.filter(pk=sha256).update(touched=timezone.now())
        _proof(blob, user)
    blob._created_now = False
    return blob


def _record(sha256: str, size: int, key: str, user=None, blake3: str = "") -> Blob:
    """Records verified bytes the caller holds at `key` as the blob. If good bytes are stored
    already, returns that blob (`_created_now` False: the caller drops its copy). A blob whose
    stored bytes were found corrupt, or never verified, is healed: it points at these bytes now.
    `blake3`: of the same bytes, if the caller hashed them to both (see Blob.blake3)."""
    canonical = key == blob_key(sha256)
    with transaction.atomic():
        blob = Blob.objects.select_for_update().filter(pk=sha256).first()
        created = False
        if blob is None:
            try:
                with transaction.atomic():
                    blob = Blob.objects.create(sha256=sha256, size=size, verified=True, key="" if canonical else key,
                                               blake3=blake3)
                created = True
            except IntegrityError:  # a concurrent upload of the same bytes won the insert
                blob = Blob.objects.select_for_update().get(pk=sha256)
        if not created and (not blob.verified or blob.corrupt_at is not None or blob.remote):
            old = None if blob.remote else key_of(blob)
            Blob.objects.filter(pk=sha256).update(key="" if canonical else key, verified=True, corrupt_at=None,
                                                  corrupt_reason="", checked_at=timezone.now(), remote=False)
            blob.refresh_from_db()
            forget(sha256)
            created = True  # these bytes are the blob's now
            if old is not None and old != key:
                transaction.on_commit(lambda: object_store().delete(old))
        note_blake3(blob, blake3)
        _proof(blob, user)
    blob._created_now = created
    return blob


def _blake3(data: bytes) -> str:
    return new_blake3(data).hexdigest()


def note_blake3(blob: Blob, blake3: str) -> None:
    """Records the blake3 of bytes the caller hashed to this blob's sha256 too, if it has none yet.
    (Any bytes with that sha256 are the blob's bytes, wherever they are stored.)"""
    if blake3 and not blob.blake3:
        Blob.objects.filter(pk=blob.sha256, blake3="").update(blake3=blake3)
        blob.blake3 = blake3


def can_reference(user, sha256s: list[str]) -> set[str]:
    """Which of these stored blobs the user may put into a commit or a file by hash alone: those they
    proved they hold, and those a reference they can read already holds (hub.content.refs)."""
    wanted = set(sha256s)
    if not wanted:
        return set()
    ok: set[str] = set()
    if user is not None:
        ok |= set(BlobProof.objects.filter(user=user, blob_id__in=wanted).values_list("blob_id", flat=True))
    if wanted - ok:
        ok |= refs.readable_by(user, wanted - ok)
    return ok


def ingest_bytes(data: bytes, user=None) -> Blob:
    """Stores small in-memory content (inline commit files). The bytes are in the store before any
    row points at them; identical content is stored once."""
    sha = hashlib.sha256(data).hexdigest()
    blob = reuse(sha, user)
    if blob is not None:
        return blob
    object_store().put_bytes(blob_key(sha), data)
    return _record(sha, len(data), blob_key(sha), user, blake3=_blake3(data))


@functools.cache
def _put_pool() -> ThreadPoolExecutor:
    """Threads that store many small objects at once for one request (a commit of 300 inline files
    costs one round trip's latency per 8 files, not per file). They touch no database."""
    return ThreadPoolExecutor(max_workers=8, thread_name_prefix="hub-put")


def store_map(fn, items) -> list:
    """fn(item) for each item on the store threads (calls to the store only, no database), in order."""
    return list(_put_pool().map(fn, items))


def ingest_many(contents, user=None) -> dict[str, Blob]:
    """`ingest_bytes` for many small contents at once (a commit's inline files): sha256 -> Blob.
    Those stored already are reused; the others go to the store in parallel, each recorded once its
    bytes are there."""
    by_sha = {hashlib.sha256(d).hexdigest(): d for d in contents}
    out: dict[str, Blob] = {}
    known = Blob.objects.filter(pk__in=list(by_sha), verified=True, corrupt_at=None).values_list("pk", flat=True)
    for sha in known:
        blob = reuse(sha, user)
        if blob is not None:
            out[sha] = blob
    missing = [sha for sha in by_sha if sha not in out]
    store = object_store()
    for sha, _ in zip(missing, _put_pool().map(lambda s: store.put_bytes(blob_key(s), by_sha[s]), missing),
                      strict=True):
        out[sha] = _record(sha, len(by_sha[sha]), blob_key(sha), user, blake3=_blake3(by_sha[sha]))
    return out


def ingest_stream(stream, size: int, *, sha256: str | None = None, user=None) -> Blob:
    """Streams exactly `size` bytes into the store, hashing them on the way to an object of their
    own, and records them as a verified blob (identical bytes are stored once). With `sha256`, the
    bytes must hash to it. Nothing is recorded, and the object is deleted, if they fall short or
    differ. (The local backend's basic LFS uploads, volume PUTs and mirrored files come in here.)"""
    store = object_store()
    hasher = _HashingReader(stream, size)
    # A key of its own under blobs/: on S3 verified bytes stay where they landed (Blob.key), so it
    # must not look like temporary garbage to anything that cleans the bucket.
    incoming = f"blobs/incoming/{uuid.uuid4().hex}"
    blob = None
    try:
        store.put_stream(incoming, hasher, size)
        if hasher.count != size:
            raise BadRequest(f"expected {size} bytes, received {hasher.count}; nothing was stored, send them again")
        digest = hasher.hexdigest()
        if sha256 and digest != sha256:
            raise UnprocessableEntity(f"the bytes received hash to {digest}, not {sha256}; nothing was stored, "
                                      "send the right file")
        blob = install(store, incoming, digest, size, user, blake3=hasher.b3.hexdigest())
    finally:
        # Unless the new blob lives there now (S3), what is left at the incoming key is garbage.
        if blob is None or key_of(blob) != incoming:
            store.delete(incoming)
    return blob


def ingest_checked_file(path, sha256: str, size: int, user=None) -> Blob:
    """A file on this server's disk whose bytes the caller hashed as they arrived (to `sha256`)
    becomes the blob, without hashing them again: a store on this disk takes the file by a hard
    link (no second copy), another one gets it streamed. The same incoming key and clean-up as
    `ingest_stream`."""
    store = object_store()
    incoming = f"blobs/incoming/{uuid.uuid4().hex}"
    blob = None
    try:
        local = store.local_path(incoming)
        try:
            if not local:
                raise OSError("not a local store")
            os.makedirs(os.path.dirname(local), exist_ok=True)
            os.link(path, local)
        except OSError:
            with open(path, "rb") as fh:
                store.put_stream(incoming, fh, size)
        blob = install(store, incoming, sha256, size, user)
    finally:
        if blob is None or key_of(blob) != incoming:
            store.delete(incoming)
    return blob


def install(store: ObjectStore, staging: str, sha256: str, size: int, user, blake3: str = "") -> Blob:
    """Verified bytes at `staging` become the blob, unless the blob exists already (then the copy
    is redundant and the caller deletes it). `blake3`: of the same bytes, if the caller has it."""
    blob = reuse(sha256, user)
    if blob is not None:
        note_blake3(blob, blake3)
        return blob
    key = store.promote(staging, blob_key(sha256))
    blob = _record(sha256, size, key, user, blake3=blake3)
    if not blob._created_now and key != key_of(blob):
        store.delete(key)  # lost a race with an identical upload
    return blob


def install_many(store: ObjectStore, staged: list[tuple[str, str, int]], user) -> dict[str, Blob]:
    """`install` for many verified objects at once, (key, sha256, size) each: sha256 -> Blob, in one
    transaction (a push of 5,000 small files verifies them 1,000 at a time). New blobs stay at
    their keys (on S3 `promote` keeps an object where it is); bytes stored already make the staged
    copy redundant, deleted here once the transaction holds. A row that needs healing (never
    verified, found corrupt, or at an upstream) goes through `install`."""
    if type(store).promote is not ObjectStore.promote:  # (a store that moves objects: one by one)
        return {sha: install(store, key, sha, size, user) for key, sha, size in staged}
    staged = list({sha: (key, sha, size) for key, sha, size in staged}.values())
    shas = [sha for _key, sha, _size in staged]
    out: dict[str, Blob] = {}
    redundant: list[str] = []
    with transaction.atomic():
        rows = {b.sha256: b for b in Blob.objects.select_for_update().filter(pk__in=shas)}
        heal = [(key, sha, size) for key, sha, size in staged
                if sha in rows and (not rows[sha].verified or rows[sha].corrupt_at is not None or rows[sha].remote)]
        Blob.objects.bulk_create([Blob(sha256=sha, size=size, verified=True, key="" if key == blob_key(sha) else key)
                                  for key, sha, size in staged if sha not in rows], ignore_conflicts=True)
        now = {b.sha256: b for b in Blob.objects.filter(pk__in=shas)}  # (with rows a concurrent upload made)
        Blob.objects.filter(pk__in=[sha for sha in rows if sha not in {h[1] for h in heal}]).update(
            touched=timezone.now())
        if user is not None and getattr(user, "pk", None):
            BlobProof.objects.bulk_create([BlobProof(user=user, blob_id=sha) for sha in shas], ignore_conflicts=True)
        for key, sha, _size in staged:
            if any(h[1] == sha for h in heal):
                continue
            blob = now[sha]
            blob._created_now = key_of(blob) == key
            if not blob._created_now:
                redundant.append(key)
            out[sha] = blob
    for key, sha, size in heal:
        out[sha] = install(store, key, sha, size, user)
        if key_of(out[sha]) != key:
            redundant.append(key)
    store_map(store.delete, redundant)
    return out


class _HashingReader(io.RawIOBase):
    def __init__(self, stream, limit: int) -> None:
        self.stream = stream
        self.limit = limit
        self.count = 0
        self.h = hashlib.sha256()
        self.b3 = new_blake3()

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        want = self.limit - self.count if n < 0 else min(n, self.limit - self.count + 1)
        if want <= 0:
            return b""
        data = self.stream.read(want)
        self.count += len(data)
        self.h.update(data)
        self.b3.update(data)
        return data

    def readinto(self, b) -> int:
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)

    def hexdigest(self) -> str:
        return self.h.hexdigest()
