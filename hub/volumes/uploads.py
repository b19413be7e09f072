"""Resumable uploads of volume files.

A session is an upload session of the one pipeline (hub.uploads.sessions) with purpose="volume" and
target {"path", "if_match", "if_none_match"}. Its parts go straight to S3 through presigned URLs or, with
the local backend, through the hub; the store itself remembers which parts it holds, so a client
killed half-way asks for the session's status and sends only the missing parts. Creating a session
reserves its size; completion verifies size and sha256 and installs the file atomically (converting
the reservation); abort or expiry releases it. A session is private to its user.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import BinaryIO

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext

from hub.content import blobs
from hub.content.models import UploadSession
from hub.errors import BadRequest, CompletionInProgress, NotFound
from hub.quotas import services as quotas
from hub.quotas.models import Reservation
from hub.uploads import sessions, transfers
from hub.volumes import services
from hub.volumes.models import Volume, VolumeEntry
from storage.store.objectstore import ObjectMissingError

PURPOSE = "volume"
SESSION_TTL = timedelta(days=1)  # a session idle for this long is aborted
# The reservation outlives its session, so that only the session sweeper (which also frees the
# parts) ends it, never quotas.expire_reservations under a live session.
RESERVATION_TTL = SESSION_TTL + timedelta(hours=1)
PART_URL_SECONDS = 3600  # part URLs are re-issued by every status call
MAX_SIZE = blobs.MAX_BLOB_SIZE
MAX_PART = 5 * 2**30  # S3's largest part


@dataclass
class UploadStart:
    """A new or resumed session; or, when the account may already use these bytes, no session
    and the file written at once."""

    session: UploadSession | None
    entry: VolumeEntry | None = None
    resumed: bool = False


def _check_size(size) -> int:
    if not isinstance(size, int) or isinstance(size, bool):
        raise BadRequest(gettext("'size' must be an integer number of bytes"))
    if size < 0:
        raise BadRequest(gettext("'size' cannot be negative"))
    if size > MAX_SIZE:
        raise BadRequest(gettext("'size' %(size)s is over the largest file a volume holds (%(value)s TiB)") % {"size": size, "value": MAX_SIZE // 2 ** 40})
    return size


def _check_part_size(size: int, part_size) -> int:
    if part_size is None:
        return sessions.part_size_for(size)
    if not isinstance(part_size, int) or isinstance(part_size, bool) or not blobs.MIN_PART <= part_size <= MAX_PART:
        raise BadRequest(gettext("'part_size' must be between %(min_part)s and %(max_part)s bytes") % {"min_part": blobs.MIN_PART, "max_part": MAX_PART})
    if -(-size // part_size) > blobs.MAX_PARTS:
        raise BadRequest(gettext("'part_size' %(part_size)s makes more than %(max_parts)s parts; choose "
                                 "a larger one") % {"part_size": part_size, "max_parts": blobs.MAX_PARTS})
    return part_size


def do_create_upload(volume: Volume, user, path: str, *, size, sha256, part_size=None,
                     if_match: str | None = None, if_none_match: bool = False, checked: bool = False) -> UploadStart:
    """Starts an upload of `size` bytes hashing to `sha256` for `path`, or resumes the caller's open
    session for the same file. Without `sha256` (the client hashes while its parts upload and gives
    it at completion) every call starts a new session. Checks everything that can fail before
    reserving anything."""
    if sha256 is not None:
        blobs.check_sha256(sha256)
    size = _check_size(size)
    part_size = _check_part_size(size, part_size)
    services.check_parents(volume, path)
    services.check_preconditions(services.resolve(volume, path), path, if_match=if_match,
                                 if_none_match=if_none_match)
    target = {"path": path, "if_match": if_match, "if_none_match": if_none_match}
    # Checked parts only where the store signs such URLs (S3); elsewhere the hub receives the bytes.
    checked = checked and transfers.store_checks_uploads()
    existing = (UploadSession.objects.filter(user=user, purpose=PURPOSE, state=UploadSession.OPEN, sha256=sha256,
                                             size=size, target__path=path, expires__gt=timezone.now(),
                                             checked=checked)
                .order_by("-created").first()) if sha256 else None
    if existing is not None:
        if existing.target != target:
            UploadSession.objects.filter(pk=existing.pk).update(target=target)
            existing.target = target
        touch(existing)
        return UploadStart(existing, resumed=True)
    if sha256 and transfers.reusable(user, {sha256: size}):  # (the same dedup as every upload)
        entry, _ = services.do_install(volume, path, blobs.stored_blob(sha256), if_match=if_match,
                                       if_none_match=if_none_match)
        return UploadStart(None, entry)
    reservation = quotas.reserve(volume.namespace, size, user=user, purpose=f"volume upload {path}"[:100],
                                 ttl=RESERVATION_TTL)
    try:
        session = sessions.open_session(sha256=sha256, size=size, user=user, purpose=PURPOSE, target=target,
                                        part_size=part_size, reservation=reservation, ttl=SESSION_TTL, resume=False,
                                        checked=checked)
    except BaseException:
        quotas.release(reservation)
        raise
    return UploadStart(session)


def access_upload(user, session_id: str, *, open_only: bool = True) -> UploadSession:
    """The caller's session; anyone else's is as missing as one that never existed."""
    try:
        pk = uuid.UUID(str(session_id))
    except ValueError:
        pk = None
    session = (UploadSession.objects.select_related("reservation")
               .filter(pk=pk, purpose=PURPOSE, user=user).first() if pk else None)
    if session is not None and open_only:
        session = sessions.revive(session)
        if sessions.completing(session):
            raise CompletionInProgress(settings.HUB_UPLOAD_STALE)
    if session is None or (open_only and (session.state != UploadSession.OPEN
                                          or session.expires < timezone.now())):
        raise NotFound(gettext("this upload session does not exist or has ended; start the upload again"))
    return session


def access_upload_by_id(session_id: str) -> UploadSession:
    """An open session by id alone, for requests authorized by a signed part URL."""
    session = UploadSession.objects.filter(pk=session_id, purpose=PURPOSE).first()
    if session is None:
        raise NotFound(gettext("this upload session does not exist or has ended; start the upload again"))
    return access_upload(session.user, session_id)


def touch(session: UploadSession) -> None:
    """Pushes the expiry of an active session (and of its reservation) back."""
    now = timezone.now()
    if session.expires > now + SESSION_TTL - timedelta(minutes=5):
        return
    session.expires = now + SESSION_TTL
    UploadSession.objects.filter(pk=session.pk, state=UploadSession.OPEN).update(expires=session.expires)
    if session.reservation_id:
        Reservation.objects.filter(pk=session.reservation_id).update(expires=now + RESERVATION_TTL)


def parts_status(session: UploadSession) -> tuple[list[int], list[int]]:
    """(received, missing) part numbers. A part of the wrong length counts as missing: sending it
    again replaces it."""
    stored = sessions.received_parts(session)
    received = sorted(stored)
    return received, [n for n in range(1, session.part_count + 1) if n not in stored]


def part_urls(session: UploadSession, numbers: list[int], link: Callable[[int, str], str]) -> dict[int, str]:
    """Where to PUT each part: a presigned store URL, or (local backend) `link(n, token)`, the
    volume API's URL for part n carrying its token (hub.content.signing)."""
    return sessions.part_urls(session, numbers, lifetime=PART_URL_SECONDS, link=link)


def checked_part_urls(session: UploadSession, hashes: dict[int, str]) -> dict[int, str]:
    """URLs for parts of a checked session, each signed with its part's sha256."""
    urls = sessions.checked_part_urls(session, hashes, lifetime=PART_URL_SECONDS)
    touch(session)
    return urls


def do_upload_part(session: UploadSession, number: int, stream: BinaryIO, length: int) -> str:
    """Local backend: stores one part the client sends through the hub. Returns its ETag."""
    etag = sessions.store_part(session, number, stream, length)
    touch(session)
    return etag


def do_complete(volume: Volume, session: UploadSession, sha256: str | None = None) -> VolumeEntry:
    """Verifies the parts (count, lengths, then size and sha256 of the assembled bytes) and installs
    the file. The hub computes the sha256 from the stored bytes; a sha256 the client gives (at the
    start or here) must match it, which also checks the bytes end to end. Missing or wrong-length
    parts leave the session open to be fixed; bytes that hash wrong end it. Completing a session
    twice returns the file it wrote (the one lifecycle: hub.uploads.sessions.finish)."""
    path = session.target["path"]
    if sha256 is not None and session.state != UploadSession.DONE:
        blobs.check_sha256(sha256)
        if session.sha256 and sha256 != session.sha256:
            raise BadRequest(gettext("this upload was started for sha256 %(sha256)s, not %(sha2562)s") % {"sha256": session.sha256, "sha2562": sha256})
        if not session.sha256:
            UploadSession.objects.filter(pk=session.pk, sha256="", state=UploadSession.OPEN).update(sha256=sha256)
            session.sha256 = sha256
    reservation = session.reservation
    try:
        blob, again = sessions.finish(session)
    except BaseException as err:
        # ABORTED: the bytes were wrong and are gone. Still OPEN: the client may fix its parts.
        # DONE: a concurrent completion owns the reservation now.
        if UploadSession.objects.filter(pk=session.pk, state=UploadSession.ABORTED).exists():
            quotas.release(reservation)
        if isinstance(err, ObjectMissingError):  # a concurrent completion or abort got there first
            raise NotFound(gettext("this upload session has ended; start the upload again")) from None
        raise
    if again:  # (a retry after a lost answer: the file it wrote, unless it changed since)
        entry = services.resolve(volume, path)
        if blob is not None and entry is not None and entry.blob_id == blob.sha256:
            return entry
        raise NotFound(gettext("this upload session has ended; start the upload again"))
    try:
        entry, _ = services.do_install(volume, path, blob, reservation=reservation,
                                       if_match=session.target.get("if_match"),
                                       if_none_match=bool(session.target.get("if_none_match")))
    except BaseException:
        quotas.release(reservation)
        raise
    return entry


def do_abort(session: UploadSession) -> None:
    if not sessions.abort_session(session):
        raise NotFound(gettext("this upload session has already ended"))


def expire_sessions(limit: int = 1000) -> int:
    """Kept for the volume task's name: every kind of upload session is swept the same way."""
    return sessions.expire_sessions(limit)
