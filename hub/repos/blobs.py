"""Blobs: file bytes stored once under their sha256, and the upload sessions that bring them in."""
from __future__ import annotations

import functools
import hashlib
import io
import logging
import threading
import time
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, IntegrityError, connection, connections, transaction
from django.utils import timezone

from hub.errors import BadRequest, BlobCorrupt, CompletionInProgress, NotFound, UnprocessableEntity
from hub.repos.models import Blob, BlobProof, UploadSession
from storage.objectstore import (
    ObjectMissingError,
    ObjectStore,
    StoreRefusedError,
    StoreUnavailableError,
    from_url,
)

log = logging.getLogger("hub.blobs")

SHA256_LEN = 64
MIN_PART = 5 * 2**20  # S3's smallest part but the last
MAX_PARTS = 10_000
MAX_BLOB_SIZE = 5 * 2**40  # S3's largest object
LFS_SESSION_TTL = timedelta(days=1)  # an LFS multipart session (and its part URLs) lives this long


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
    """The blob, if its bytes are stored and good (verified, not found corrupt since)."""
    return Blob.objects.filter(sha256=sha256, verified=True, corrupt_at=None).first()


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
    """The object key of a stored blob, for serving it: raises BlobCorrupt for bytes found corrupt.
    Cached per process: a blob's key never changes."""
    check_servable(sha256)
    key = _KEYS.get(sha256)
    if key is None:
        row = Blob.objects.filter(pk=sha256).values_list("key", flat=True).first()
        key = row or blob_key(sha256)
        if row is not None:
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


def _record(sha256: str, size: int, key: str, user=None) -> Blob:
    """Records verified bytes the caller holds at `key` as the blob. If good bytes are stored
    already, returns that blob (`_created_now` False: the caller drops its copy). A blob whose
    stored bytes were found corrupt, or never verified, is healed: it points at these bytes now."""
    canonical = key == blob_key(sha256)
    with transaction.atomic():
        blob = Blob.objects.select_for_update().filter(pk=sha256).first()
        created = False
        if blob is None:
            try:
                with transaction.atomic():
                    blob = Blob.objects.create(sha256=sha256, size=size, verified=True, key="" if canonical else key)
                created = True
            except IntegrityError:  # a concurrent upload of the same bytes won the insert
                blob = Blob.objects.select_for_update().get(pk=sha256)
        if not created and (not blob.verified or blob.corrupt_at is not None):
            old = key_of(blob)
            Blob.objects.filter(pk=sha256).update(key="" if canonical else key, verified=True, corrupt_at=None,
                                                  corrupt_reason="", checked_at=timezone.now())
            blob.refresh_from_db()
            forget(sha256)
            created = True  # these bytes are the blob's now
            if old != key:
                transaction.on_commit(lambda: object_store().delete(old))
        _proof(blob, user)
    blob._created_now = created
    return blob


def can_reference(user, sha256s: list[str]) -> set[str]:
    """Which of these stored blobs the user may put into a commit by hash alone: those they proved
    they hold, and those already in a repo they can read."""
    from hub.repos.models import RepoBlob
    from hub.repos.services import visible_repos

    wanted = set(sha256s)
    if not wanted:
        return set()
    ok: set[str] = set()
    if user is not None:
        ok |= set(BlobProof.objects.filter(user=user, blob_id__in=wanted).values_list("blob_id", flat=True))
        if wanted - ok:  # files of their own volume, however they got there
            from hub.volumes.models import VolumeEntry

            ok |= set(VolumeEntry.objects.filter(volume__namespace__user=user, blob_id__in=wanted - ok)
                      .values_list("blob_id", flat=True))
    rest = wanted - ok
    if rest:
        readable = visible_repos(user).values("pk")
        ok |= set(RepoBlob.objects.filter(blob_id__in=rest, repo__in=readable).values_list("blob_id", flat=True))
    return ok


def ingest_bytes(data: bytes, user=None) -> Blob:
    """Stores small in-memory content (inline commit files). The bytes are in the store before any
    row points at them; identical content is stored once."""
    sha = hashlib.sha256(data).hexdigest()
    blob = reuse(sha, user)
    if blob is not None:
        return blob
    object_store().put_bytes(blob_key(sha), data)
    return _record(sha, len(data), blob_key(sha), user)


def ingest_stream_verified(stream, sha256: str, size: int, user=None) -> Blob:
    """Local backend: the hub receives the bytes itself, hashing them on the way to a staging
    object, and installs them under their hash only if they match."""
    store = object_store()
    hasher = _HashingReader(stream, size)
    staging = f"staging/{uuid.uuid4().hex}"
    store.put_stream(staging, hasher, size)
    try:
        if hasher.count != size:
            raise BadRequest(f"expected {size} bytes, received {hasher.count}; upload it again")
        if hasher.hexdigest() != sha256:
            raise UnprocessableEntity(f"the uploaded bytes hash to {hasher.hexdigest()}, not {sha256}; "
                                      "upload the right file")
        blob = _install(store, staging, sha256, size, user)
    except BaseException:
        store.delete(staging)
        raise
    if key_of(blob) != staging:  # installed elsewhere (renamed, or the blob existed): drop the copy
        store.delete(staging)
    return blob


def _install(store: ObjectStore, staging: str, sha256: str, size: int, user) -> Blob:
    """Verified bytes at `staging` become the blob, unless the blob exists already (then the copy
    is redundant and the caller deletes it)."""
    blob = reuse(sha256, user)
    if blob is not None:
        return blob
    key = store.promote(staging, blob_key(sha256))
    blob = _record(sha256, size, key, user)
    if not blob._created_now and key != key_of(blob):
        store.delete(key)  # lost a race with an identical upload
    return blob


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
    upload of one blob. Every session writes to a key of its own, so a wrong or malicious upload
    can never touch bytes another upload already verified."""
    with transaction.atomic():
        # Two requests for the same bytes at once (a client's batch and its retry, two workers) get
        # one session: the lookup and the creation run one at a time per sha256. (SQLite's
        # transactions take the write lock as they begin, which serializes them already.)
        if connection.vendor == "postgresql":
            with connection.cursor() as cur:
                cur.execute("SELECT pg_advisory_xact_lock(%s)", [int(sha256[:15], 16)])
        existing = (UploadSession.objects.filter(sha256=sha256, size=size, user=user, state=UploadSession.OPEN,
                                                 expires__gt=timezone.now() + timedelta(minutes=10))
                    .order_by("-created").first())
        if existing is not None:
            return existing
        session_id = uuid.uuid4()
        key = f"{blob_key(sha256)}.{session_id.hex}"
        upload_id = object_store().create_multipart(key)
        return UploadSession.objects.create(id=session_id, repo=repo, user=user, sha256=sha256, size=size,
                                            part_size=part_size_for(size), store_upload_id=upload_id, key=key,
                                            expires=timezone.now() + LFS_SESSION_TTL)


def access_session(session_id: str) -> UploadSession:
    """The open session by id; 409 (retry) while a completion of it is under way."""
    session = UploadSession.objects.filter(pk=session_id).first()
    if session is not None:
        session = revive(session)
        if completing(session):
            raise CompletionInProgress(settings.HUB_UPLOAD_STALE)
    if session is None or session.state != UploadSession.OPEN or session.expires < timezone.now():
        raise NotFound("this upload session does not exist or has expired; start the upload again")
    return session


def part_length(session: UploadSession, number: int) -> int:
    if not 1 <= number <= session.part_count:
        raise BadRequest(f"part number {number} out of range 1..{session.part_count}")
    start = (number - 1) * session.part_size
    return min(session.part_size, session.size - start)


def store_part(session: UploadSession, number: int, stream, length: int) -> str:
    """Local backend: stores one part the client sends through the hub. Returns its ETag."""
    expected = part_length(session, number)
    if length != expected:
        raise BadRequest(f"part {number} must be {expected} bytes, the request has {length}; nothing was stored")
    try:
        return object_store().put_part(session.key, session.store_upload_id, number, stream, length)
    except ObjectMissingError:
        raise NotFound("this upload session has ended; start the upload again") from None
    except ValueError as err:  # the body fell short: the client went away
        raise BadRequest(f"part {number} was not stored: {err}; send it again") from None


def complete_session(session: UploadSession, parts: list[tuple[int, str]] | None = None) -> Blob:
    """Assembles the parts under the session's own key, verifies size and sha256 of exactly those
    bytes and records the blob. Claiming a session atomically (OPEN → DONE) makes a retried
    completion after a lost response harmless.

    Bytes that are wrong end the session (they are deleted), as does a store that will not assemble
    the parts or has lost them: no completion leaves a session claimed without its blob. The store
    going away (or running out of room) does not: the session is open again, and a retry picks up
    where this one stopped — the parts if they were not assembled yet, else the assembled object,
    hashed again (the store may have assembled them and then failed, or its answer may have been
    lost). A completion whose worker dies midway holds its claim only while its heartbeat lasts
    (`_Claim`, `revive`): then the session reopens in the same way. So no byte a client sent is lost
    to an outage, a full store or a dead server; meanwhile other completions answer 409, retry."""
    store = object_store()
    try:
        stored = store.list_parts(session.key, session.store_upload_id)
    except ObjectMissingError:
        stored = None  # no multipart upload any more: assembled by an earlier attempt, or ended
    if stored is None:
        if store.size(session.key) != session.size:
            raise ObjectMissingError(session.key)
    else:
        expected = session.part_count
        missing = [n for n in range(1, expected + 1) if n not in stored]
        if missing:
            raise BadRequest(f"parts {missing[:10]} of {expected} have not been uploaded")
        for n, (_etag, size) in stored.items():
            if n <= expected and size != part_length(session, n):
                raise BadRequest(f"part {n} has {size} bytes, expected {part_length(session, n)}")
    _claim(session)
    with _Claim(session) as claim:
        if stored is not None:
            # Use the store's own ETags: clients may quote them differently.
            ordered = [(n, stored[n][0] or dict(parts or []).get(n, "")) for n in range(1, session.part_count + 1)]
            try:
                store.complete_multipart(session.key, session.store_upload_id, ordered)
            except StoreUnavailableError:
                _reopen(session)
                raise
            except BaseException as err:
                _end_claimed(session)
                if isinstance(err, StoreRefusedError):
                    raise UnprocessableEntity(f"the object store would not assemble the uploaded parts ({err}); "
                                              "this upload has ended: start it again") from err
                if isinstance(err, ObjectMissingError):
                    raise NotFound("this upload's parts are gone from the object store; start the upload "
                                   "again") from err
                raise
        try:
            digest, actual = store.sha256(session.key)
            if actual != session.size or (session.sha256 and digest != session.sha256):
                raise UnprocessableEntity(
                    f"object {session.sha256 or '(no sha256 given)'}: the uploaded bytes ({actual} bytes, "
                    f"expected {session.size}) hash to {digest}; upload the right file again")
            claim.check()  # (a completion that lost its claim leaves the rest to the one that took it)
            if not session.sha256:  # the client left the hashing to us: the stored bytes define it
                session.sha256 = digest
                UploadSession.objects.filter(pk=session.pk).update(sha256=digest)
            blob = _install(store, session.key, session.sha256, session.size, session.user)
        except CompletionInProgress:
            raise
        except StoreUnavailableError:
            _reopen(session)
            raise
        except BaseException:
            _end_claimed(session)
            raise
    UploadSession.objects.filter(pk=session.pk, lease=session.lease).update(lease="")  # finished
    if key_of(blob) != session.key:
        store.delete(session.key)
    return blob


def _claim(session: UploadSession) -> None:
    """OPEN → DONE under a lease of this completion's own (see UploadSession.lease)."""
    lease = uuid.uuid4().hex
    if UploadSession.objects.filter(pk=session.pk, state=UploadSession.OPEN).update(
            state=UploadSession.DONE, lease=lease, claimed=timezone.now()):
        session.state, session.lease = UploadSession.DONE, lease
        return
    now = UploadSession.objects.filter(pk=session.pk).first()
    if now is not None and completing(now):
        raise CompletionInProgress(settings.HUB_UPLOAD_STALE)
    raise NotFound("this upload session was already completed or aborted")


def completing(session: UploadSession) -> bool:
    """A completion of this session is under way (claimed, and its worker is alive as far as we know)."""
    return session.state == UploadSession.DONE and bool(session.lease)


class _Claim:
    """Keeps a claimed session's `claimed` time fresh while its completion runs — a thread writes
    it every HUB_UPLOAD_STALE/5 seconds — so that other requests can tell a slow completion (a
    large object takes minutes to verify) from one whose worker died (see `revive`)."""

    def __init__(self, session: UploadSession) -> None:
        self.session = session
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"upload-{session.pk}-claim", daemon=True)

    def __enter__(self) -> _Claim:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def check(self) -> None:
        """Raises CompletionInProgress if another completion took this session over."""
        if self.lost:
            raise CompletionInProgress(settings.HUB_UPLOAD_STALE)

    def _beat(self) -> None:
        try:
            while not self._stop.wait(max(0.2, settings.HUB_UPLOAD_STALE / 5)):
                try:
                    if not UploadSession.objects.filter(pk=self.session.pk, state=UploadSession.DONE,
                                                        lease=self.session.lease).update(claimed=timezone.now()):
                        self.lost = True
                        log.warning("upload session %s: another completion took it over", self.session.pk)
                        return
                except DatabaseError as err:  # the next beat tries again
                    log.warning("upload session %s: could not renew its claim: %s", self.session.pk, err)
        finally:
            connections.close_all()  # (this thread's own connections)


def revive(session: UploadSession) -> UploadSession:
    """A completion that claimed this session and then went silent for HUB_UPLOAD_STALE seconds lost
    its worker (killed, out of memory, its machine gone): the session is open again, with every part
    the client sent, so that a retry completes it. If it got as far as recording the blob (for this
    user), the session is simply finished. Returns the session as it is now."""
    if not completing(session):
        return session
    stale = timezone.now() - timedelta(seconds=settings.HUB_UPLOAD_STALE)
    if session.claimed is not None and session.claimed >= stale:
        return session
    mine = UploadSession.objects.filter(pk=session.pk, state=UploadSession.DONE, lease=session.lease)
    if session.sha256 and stored_blob(session.sha256) is not None and (
            session.user_id is None or BlobProof.objects.filter(user_id=session.user_id, blob_id=session.sha256).exists()):
        mine.update(lease="")
    elif mine.update(state=UploadSession.OPEN, lease="", claimed=None):
        log.warning("upload session %s: the completion that claimed it went silent at %s; open again for a retry",
                    session.pk, session.claimed)
    session.refresh_from_db()
    return session


def _end_claimed(session: UploadSession) -> None:
    """The completion cannot succeed (not an outage): the claimed session ends as an abort does, its
    bytes freed in the store. Its reservation is released by the volume API or the expiry sweep.
    (Unless another completion took it over meanwhile: then it is that one's.)"""
    if not UploadSession.objects.filter(pk=session.pk, lease=session.lease).update(
            state=UploadSession.ABORTED, lease=""):
        return
    try:
        _drop_session_bytes(session)
    except Exception as err:  # noqa: BLE001 — the error that ended it matters more; GC frees leftovers
        log.warning("upload session %s ended, but its bytes could not be freed now: %s", session.pk, err)


def _reopen(session: UploadSession) -> None:
    """The store failed mid-completion: the session is open again for a retry (or for expiry)."""
    UploadSession.objects.filter(pk=session.pk, state=UploadSession.DONE, lease=session.lease).update(
        state=UploadSession.OPEN, lease="", claimed=None)


def abort_session(session: UploadSession) -> bool:
    """Ends an open session: its bytes freed in the store, its reservation released. False when it
    had ended already (completed, aborted or expired elsewhere)."""
    from hub.quotas import services as quotas

    if not UploadSession.objects.filter(pk=session.pk, state=UploadSession.OPEN).update(state=UploadSession.ABORTED):
        return False
    _drop_session_bytes(session)
    quotas.release(session.reservation)
    return True


def _drop_session_bytes(session: UploadSession) -> None:
    """Frees what an ended session left in the store: its parts, or the object they were assembled
    into when a completion could not finish (unless a blob lives there)."""
    store = object_store()
    store.abort_multipart(session.key, session.store_upload_id)
    if not Blob.objects.filter(key=session.key).exists():
        store.delete(session.key)


def expire_sessions(limit: int = 1000) -> int:
    """Aborts upload sessions (LFS and volume) idle past their expiry, frees their parts in the
    store and releases their reservations; releases reservations still held by sessions aborted
    elsewhere; then expires stray reservations. Idempotent. Returns the sessions ended."""
    from hub.quotas import services as quotas

    n = 0
    stale = timezone.now() - timedelta(seconds=settings.HUB_UPLOAD_STALE)
    for session in UploadSession.objects.filter(state=UploadSession.DONE, claimed__lt=stale).exclude(lease="")[:limit]:
        revive(session)  # (a completion whose worker died: open again, and expired below if it is old)
    expired = UploadSession.objects.select_related("reservation").filter(
        state=UploadSession.OPEN, expires__lt=timezone.now())[:limit]
    for session in expired:
        n += abort_session(session)
    stale = UploadSession.objects.select_related("reservation").filter(
        state=UploadSession.ABORTED, reservation__isnull=False)[:limit]
    for session in stale:
        quotas.release(session.reservation)
        UploadSession.objects.filter(pk=session.pk).update(reservation=None)
    quotas.expire_reservations()
    return n
