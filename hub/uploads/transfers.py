"""Planning uploads: for each object (sha256, size) a request names, what its client must do.

1. **Dedup**: bytes stored already that the caller may reference (hub.content.blobs.can_reference)
   need no transfer; GC's grace restarts for them, since a commit will name them.
2. **Reserve**: the account's quota for everything else, all at once or nothing (quotas.Hold).
3. **Choose a transfer**: the first of TRANSFERS that accepts the object starts it. Its bytes then
   arrive by that transfer's own route and are verified before they become a blob.

A transfer protocol is one class here: `accepts` says which objects it takes, `start` opens what the
client will send to. A door turns the plan into its own wire format: the LFS adapter a batch answer
(hub.hfapi.lfs); the native volume API plans one file at a time with the same dedup (`reusable`) and
a session that owns its reservation (hub.volumes.uploads); the mirror engine fetches what is not
`reusable` itself and ingests it through hub.content.blobs.ingest_stream. However they arrive, bytes
become a blob only once the hub has hashed them (hub.content.blobs.install).
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.conf import settings

from hub.content import blobs
from hub.content.models import Blob, BlobProof, UploadSession
from hub.errors import Conflict
from hub.quotas import services as quotas
from hub.quotas.services import Hold
from hub.uploads import sessions


@dataclass
class Planned:
    oid: str
    size: int
    transfer: str  # "stored" (nothing to send), or the name of the transfer that takes the bytes
    session: UploadSession | None = None
    key: str = ""  # where a CheckedPut goes


class Basic:
    """One request straight to the hub, which hashes the bytes as it stores them. Only where the hub
    itself receives the bytes (the local backend): a presigned PUT to a blob's key would stay valid
    after verification and let its holder overwrite verified, shared bytes."""

    name = "basic"

    def accepts(self, oid: str, size: int) -> bool:
        return blobs.object_store().local_path(blobs.blob_key(oid)) is not None and (
            size < blobs.MIN_PART * 2 or size <= settings.HUB_MULTIPART_CHUNK)

    def start(self, oid: str, size: int, *, user, repo, batch: str = "", checked: bool = False) -> Planned:
        return Planned(oid, size, self.name)


class CheckedPut:
    """One PUT straight to the store, through a URL signed with the object's sha256: the store
    refuses any body that does not hash to it (x-amz-content-sha256), so the hub never reads the
    bytes back, and the URL can only ever store those bytes. Each upload gets a key of its own (the
    hub cannot tell who wrote an object, so an object at a key everyone can name would prove nothing
    about who holds the bytes). The bytes become a blob when the uploader verifies (`finish_puts`).

    Only for clients that offer it ("hub-checked-put": the request must carry the signed header,
    which huggingface_hub's basic upload does not send), on stores that sign such URLs, and for
    objects of one part (larger ones resume part by part in a session)."""

    name = "hub-checked-put"

    def accepts(self, oid: str, size: int) -> bool:
        return size <= settings.HUB_MULTIPART_CHUNK and store_checks_uploads()

    def start(self, oid: str, size: int, *, user, repo, batch: str = "", checked: bool = False) -> Planned:
        # The objects of one batch share a prefix: their verification lists it instead of asking
        # about each object.
        return Planned(oid, size, self.name, key=f"blobs/incoming/{batch or uuid.uuid4().hex}/{oid}")


def store_checks_uploads() -> bool:
    """The store signs PUT URLs it checks against a sha256 (S3 with path-style addressing): checked
    PUTs and checked parts are possible."""
    return blobs.object_store().presign_put_checked([], expires=1) is not None


def put_urls(planned: list[Planned], *, lifetime: int) -> dict[str, str]:
    """{oid: the checked PUT URL} for the CheckedPut objects of a plan, signed in one go."""
    mine = [p for p in planned if p.transfer == CheckedPut.name]
    urls = blobs.object_store().presign_put_checked([(p.key, p.oid) for p in mine], expires=lifetime) or []
    return {p.oid: url for p, url in zip(mine, urls, strict=True)}


def finish_puts(objects: list[tuple[str, int, str]], user) -> dict[str, Blob | str]:
    """CheckedPut uploads the client says it made, as (sha256, size, key): {sha256: its blob, or why
    it is not one}. The store checked the bytes' sha256 as they arrived; what is left to check is
    that they arrived at all, whole (the object's size, asked in parallel). Idempotent: a retry finds
    the blob (and the key emptied when the bytes were stored already)."""
    store = blobs.object_store()
    sizes = _sizes(store, [key for _sha, _size, key in objects])
    out: dict[str, Blob | str] = {}
    arrived = []
    for (sha, size, key), actual in zip(objects, sizes, strict=True):
        if actual is None:
            done = blobs.reuse(sha, user) if BlobProof.objects.filter(user=user, blob_id=sha).exists() else None
            out[sha] = done or (f"object {sha} is not stored: its upload did not reach the store or expired; "
                                "upload it again")
        elif actual != size:  # (bytes that hash to the sha256 but have another size: not this object)
            out[sha] = f"object {sha} was stored with {actual} bytes, not {size}; upload it again"
            store.delete(key)
        else:
            arrived.append((key, sha, size))
    return out | blobs.install_many(store, arrived, user)


def _sizes(store, keys: list[str]) -> list[int | None]:
    """The stored size of each key (None: not there): one listing for keys that share a prefix
    (the objects of one batch), a HEAD for the others."""
    groups: dict[str, list[str]] = {}
    for key in keys:
        groups.setdefault(key.rsplit("/", 1)[0] + "/", []).append(key)
    found: dict[str, int] = {}
    for prefix, members in groups.items():
        if len(members) > 4:
            found |= {k: size for k, size, _mtime in store.list(prefix)}
    single = [k for k in keys if k not in found and len(groups[k.rsplit("/", 1)[0] + "/"]) <= 4]
    found |= {k: size for k, size in zip(single, blobs.store_map(store.size, single), strict=True) if size is not None}
    return [found.get(k) for k in keys]


class Multipart:
    """An upload session (hub.uploads.sessions): parts straight to the store through presigned URLs
    (or through the hub), completed — assembled, hashed, recorded — by the hub, after which its part
    URLs are dead. Takes any object."""

    name = "multipart"

    def accepts(self, oid: str, size: int) -> bool:
        return True

    def start(self, oid: str, size: int, *, user, repo, batch: str = "", checked: bool = False) -> Planned:
        return Planned(oid, size, self.name, sessions.open_session(sha256=oid, size=size, repo=repo, user=user,
                                                                   checked=checked))


TRANSFERS = [Basic(), CheckedPut(), Multipart()]  # in order of preference
OFFERED = frozenset({Basic.name, Multipart.name})  # what every client takes (huggingface_hub's)


class HashFirst(Conflict):
    code = "HashFirst"


def start_unhashed(repo, user, path: str, size: int) -> UploadSession:
    """An upload of a new file whose sha256 its client is still computing (`hub push` of a large
    file: hashing and sending overlap instead of following each other). Checked parts only (each
    part's URL signed with that part's sha256; the whole file hashed in the background before
    anyone else may use it), so only where the store checks uploads. The size is reserved now.

    The client names the sha256 once known (sessions.name_sha256): from then on it is an ordinary
    session for those bytes, which the next push of them resumes through the LFS batch. So an
    earlier session of the caller for the same path and size that got its sha256 → HashFirst
    (409): hash the file, then the batch resumes it; one that never did is ended (its parts
    cannot be matched to any bytes) and a new one starts."""
    if not store_checks_uploads():
        raise HashFirst("this hub's store does not check parts as they land: hash the file and ask the LFS batch")
    earlier = UploadSession.objects.filter(user=user, repo=repo, purpose="lfs", state=UploadSession.OPEN,
                                           size=size, checked=True, target__path=path)
    for session in earlier.select_related("reservation"):
        if session.sha256:
            raise HashFirst("an earlier upload of this file may resume: hash it and ask the LFS batch")
        sessions.abort_session(session)
    reservation = quotas.reserve(repo.namespace, size, user=user, purpose=f"lfs {repo.repo_id}"[:100],
                                 ttl=sessions.LFS_SESSION_TTL)
    try:
        return sessions.open_session(sha256=None, size=size, user=user, repo=repo, target={"path": path},
                                     reservation=reservation, resume=False, checked=True)
    except BaseException:
        quotas.release(reservation)
        raise


def reusable(user, objects: dict[str, int]) -> set[str]:
    """Dedup: which of these objects (sha256 → size) are stored with that size and may be named by
    `user` without sending them (hub.content.blobs.can_reference). GC's grace restarts for them: a
    commit or a file is about to reference them. (In batches: a mirror asks about 100,000 files.)"""
    shas = list(objects)
    found: set[str] = set()
    for i in range(0, len(shas), 1000):
        chunk = shas[i:i + 1000]
        stored = {sha for sha, size in Blob.objects.filter(pk__in=chunk, verified=True, corrupt_at=None)
                  .values_list("sha256", "size") if size == objects[sha]}
        found |= blobs.can_reference(user, list(stored)) if stored else set()
    for i in range(0, len(shas), 1000):
        blobs.touch([sha for sha in shas[i:i + 1000] if sha in found])
    return found


def plan(objects: dict[str, int], *, ns, user, hold: Hold, repo=None, purpose: str = "",
         offered: frozenset[str] = OFFERED) -> list[Planned]:
    """The plan for each object, in the order given, with the transfers the client `offered`.
    Raises QuotaExceeded (nothing reserved, nothing started) when the bytes to send do not fit the
    account's quota."""
    stored = reusable(user, objects)
    need = {oid: size for oid, size in objects.items() if oid not in stored}
    hold.reserve_many(ns, need, user=user, purpose=purpose)
    out = []
    batch = uuid.uuid4().hex
    # A client that takes checked PUTs takes checked parts too (sessions.checked_part_urls).
    checked = CheckedPut.name in offered and store_checks_uploads()
    for oid, size in objects.items():
        if oid in stored:
            out.append(Planned(oid, size, "stored"))
        else:
            transfer = next(t for t in TRANSFERS if (t.name in offered or t.name in OFFERED) and t.accepts(oid, size))
            out.append(transfer.start(oid, size, user=user, repo=repo, batch=batch, checked=checked))
    return out
