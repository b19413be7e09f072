"""Upload sessions: resumable multipart uploads of one blob, whatever door they came through (LFS,
the native volume API, `hub push`). The one lifecycle: open (reserving nothing itself: the caller's
reservation rides along) → parts (straight to the store through presigned URLs, or through the hub
with the local backend) → complete (claimed once, assembled, hashed, recorded as the blob) or
abort / expiry (bytes freed, reservation released). See hub.uploads.transfers for how a request's
objects are planned onto sessions."""
from __future__ import annotations

import logging
import threading
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, connection, connections, transaction
from django.utils import timezone
from django.utils.translation import gettext

from hub.content import blobs, signing
from hub.content.blobs import MAX_PARTS, MIN_PART, blob_key, object_store, stored_blob
from hub.content.models import Blob, BlobProof, UploadSession
from hub.errors import BadRequest, CompletionInProgress, NotFound, UnprocessableEntity
from hub.quotas import services as quotas
from storage.store.objectstore import ObjectMissingError, StoreRefusedError, StoreUnavailableError

log = logging.getLogger("hub.uploads")

LFS_SESSION_TTL = timedelta(days=1)  # an LFS multipart session (and its part URLs) lives this long


def part_size_for(size: int) -> int:
    chunk = max(settings.HUB_MULTIPART_CHUNK, MIN_PART)
    if -(-size // chunk) > MAX_PARTS:
        chunk = -(-size // MAX_PARTS)
        chunk = -(-chunk // 2**20) * 2**20
    return chunk


def open_session(*, sha256: str | None, size: int, user=None, repo=None, purpose: str = "lfs",
                 target: dict | None = None, part_size: int | None = None, reservation=None,
                 ttl: timedelta = LFS_SESSION_TTL, resume: bool = True, checked: bool = False) -> UploadSession:
    """Starts a multipart upload of one blob — or, with `resume`, returns the same user's open session
    of the same purpose for these bytes. Every session writes to a key of its own, so a wrong or
    malicious upload can never touch bytes another upload already verified. Without `sha256` (the
    client hashes as it sends and names it at completion) the stored bytes define the blob.

    `reservation` (quota the caller reserved for the bytes) rides along: completion hands it to the
    caller, abort and expiry release it. A `checked` session hands out only part URLs signed with
    each part's sha256 (checked_part_urls), and its completion does not read the bytes back."""
    with transaction.atomic():
        # Two requests for the same bytes at once (a client's batch and its retry, two workers) get
        # one session: the lookup and the creation run one at a time per sha256. (SQLite's
        # transactions take the write lock as they begin, which serializes them already.)
        if resume and sha256:
            if connection.vendor == "postgresql":
                with connection.cursor() as cur:
                    cur.execute("SELECT pg_advisory_xact_lock(%s)", [int(sha256[:15], 16)])
            existing = (UploadSession.objects.filter(sha256=sha256, size=size, user=user, purpose=purpose,
                                                     state=UploadSession.OPEN, checked=checked,
                                                     expires__gt=timezone.now() + timedelta(minutes=10))
                        .order_by("-created").first())
            if existing is not None:
                return existing
        session_id = uuid.uuid4()
        # Under the hash when it is known, for listing by blob.
        key = f"{blob_key(sha256)}.{session_id.hex}" if sha256 else f"blobs/pending/{session_id.hex}"
        upload_id = object_store().create_multipart(key)
        return UploadSession.objects.create(id=session_id, repo=repo, user=user, sha256=sha256 or "", size=size,
                                            part_size=part_size or part_size_for(size), store_upload_id=upload_id,
                                            key=key, purpose=purpose, target=target or {}, reservation=reservation,
                                            expires=timezone.now() + ttl, checked=checked)


def part_urls(session: UploadSession, numbers, *, lifetime: int, link) -> dict[int, str]:
    """Where to PUT each of these parts: a presigned store URL valid for `lifetime` seconds, or (the
    local backend) `link(n, token)`, the door's URL for part n's token (hub.content.signing). None
    for a checked session: its parts go only where checked_part_urls says."""
    if session.checked:
        return {}
    store = object_store()
    return {n: store.presign_part(session.key, session.store_upload_id, n, expires=lifetime)
            or link(n, signing.sign("part", {"s": str(session.id), "n": n}, lifetime)) for n in numbers}


def checked_part_urls(session: UploadSession, hashes: dict[int, str], *, lifetime: int) -> dict[int, str]:
    """A checked session's part URLs, {part number: sha256 of that part} → {number: URL}: the store
    refuses a part whose bytes do not hash to what its URL was signed with."""
    if not session.checked:
        raise BadRequest("this upload session takes plain part URLs (GET it for them), not checked ones")
    for n, sha in hashes.items():
        part_length(session, n)
        blobs.check_sha256(sha)
    numbers = sorted(hashes)
    urls = object_store().presign_parts_checked(session.key, session.store_upload_id,
                                                [(n, hashes[n]) for n in numbers], expires=lifetime)
    if urls is None:  # (sessions are checked only on stores that sign such URLs)
        raise BadRequest("this store cannot check parts; start the upload again")
    return dict(zip(numbers, urls, strict=True))


def name_sha256(session: UploadSession, sha256: str) -> None:
    """The client of a session opened before it knew the file's sha256 names it (as soon as its
    hash is done, or at completion). From then on the session is an ordinary one for those bytes:
    the LFS batch of a later push of them resumes it, and its reservation counts for them (one
    reservation per sha256, as every upload's). Naming another sha256 than the one named is a 400."""
    blobs.check_sha256(sha256)
    if session.sha256 == sha256:
        return
    if session.sha256 or not UploadSession.objects.filter(pk=session.pk, sha256="").update(sha256=sha256):
        raise BadRequest(f"this upload is for sha256 {session.sha256 or 'another file'}, not {sha256}")
    session.sha256 = sha256
    if session.reservation_id:
        quotas.name_reservation(session.reservation_id, sha256)


def complete_url(session: UploadSession, link) -> str:
    """The door's URL that completes this session (a token good while the session lives)."""
    return link(signing.sign("complete", {"s": str(session.id)}, LFS_SESSION_TTL.total_seconds()))


def received_parts(session: UploadSession) -> dict[int, tuple[str, int]]:
    """The parts the store holds with their full length ({number: (etag, size)}): a torn part
    counts as missing, and sending it again replaces it."""
    try:
        stored = object_store().list_parts(session.key, session.store_upload_id)
    except ObjectMissingError:  # swept a moment ago
        raise NotFound("this upload session has ended; start the upload again") from None
    return {n: v for n, v in stored.items() if n <= session.part_count and v[1] == part_length(session, n)}


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


def finish(session: UploadSession, parts: list[tuple[int, str]] | None = None) -> tuple[Blob | None, bool]:
    """Completes the session, whichever door asks: (the blob, False). A retry after a lost answer
    finds it completed already: (its blob, True) — or (None, True) when those bytes are no longer
    stored. 409 (retry) while another completion of it is under way; 404 once it was aborted or
    expired. A completion whose worker died is taken over (revive)."""
    session = revive(session)
    if session.state == UploadSession.DONE:
        if completing(session):
            raise CompletionInProgress(settings.HUB_UPLOAD_STALE)
        return (stored_blob(session.sha256, session.user) if session.sha256 else None), True
    if session.state != UploadSession.OPEN or session.expires < timezone.now():
        raise NotFound("this upload session has ended (aborted or expired); start the upload again")
    return complete_session(session, parts), False


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
            if session.checked and session.sha256:
                # Every part was checked by the store as it landed: no read-back; the whole file's
                # hash (named by the client) is checked in the background (blobs.claim).
                actual = store.size(session.key)
                if actual != session.size:
                    raise UnprocessableEntity(f"object {session.sha256}: the assembled upload has {actual} bytes, "
                                              f"expected {session.size}; upload the file again")
                claim.check()
                blob = blobs.claim(store, session.key, session.sha256, session.size, session.user)
            else:
                digest, b3, actual = store.digests(session.key)
                if actual != session.size or (session.sha256 and digest != session.sha256):
                    raise UnprocessableEntity(
                        f"object {session.sha256 or '(no sha256 given)'}: the uploaded bytes ({actual} bytes, "
                        f"expected {session.size}) hash to {digest}; upload the right file again")
                claim.check()  # (a completion that lost its claim leaves the rest to the one that took it)
                if not session.sha256:  # the client left the hashing to us: the stored bytes define it
                    session.sha256 = digest
                    UploadSession.objects.filter(pk=session.pk).update(sha256=digest)
                blob = blobs.install(store, session.key, session.sha256, session.size, session.user, blake3=b3)
        except CompletionInProgress:
            raise
        except StoreUnavailableError:
            _reopen(session)
            raise
        except BaseException:
            _end_claimed(session)
            raise
    UploadSession.objects.filter(pk=session.pk, lease=session.lease).update(lease="")  # finished
    if blobs.key_of(blob) != session.key:
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
    if session.sha256 and stored_blob(session.sha256, session.user) is not None and (
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
    if not UploadSession.objects.filter(pk=session.pk, state=UploadSession.OPEN).update(state=UploadSession.ABORTED):
        return False
    _drop_session_bytes(session)
    quotas.release(session.reservation)
    return True


def abandon(session: UploadSession) -> bool:
    """Its client says the bytes will never come (the file changed under the upload): the session
    ends as abort_session ends it — or stays ended, if a completion failed on those bytes — and what
    was reserved for them is given back now rather than at its expiry: the session's own reservation,
    and what an LFS batch reserved for its sha256 (such reservations ride with the batch, not the
    session) unless another open session of the same user is uploading those bytes. False when the
    session completed (or is completing)."""
    abort_session(session)
    if not UploadSession.objects.filter(pk=session.pk, state=UploadSession.ABORTED).exists():
        return False
    if session.reservation_id and UploadSession.objects.filter(pk=session.pk, reservation__isnull=False).update(
            reservation=None):
        quotas.release(session.reservation)
    if session.sha256 and session.repo_id and not UploadSession.objects.filter(
            user=session.user_id, sha256=session.sha256, state=UploadSession.OPEN).exists():
        quotas.release_blobs(session.repo.namespace_id, [session.sha256], user=session.user_id)
    return True


def end_upload(user, upload_id: str) -> UploadSession:
    """The user's own open session `upload_id`, ended as its DELETE ends it: a volume upload aborted,
    an LFS upload abandoned (what its batch reserved for its sha256 given back too). NotFound when
    there is no such open session of theirs (someone else's is as missing as one that never was)."""
    try:
        pk = uuid.UUID(str(upload_id))
    except ValueError:
        pk = None
    session = (UploadSession.objects.select_related("reservation", "repo")
               .filter(pk=pk, user=user, state=UploadSession.OPEN).first()) if pk else None
    if session is None or not (abandon(session) if session.purpose == "lfs" else abort_session(session)):
        raise NotFound(gettext("this upload has ended already, or is not yours"))
    return session


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
