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

from dataclasses import dataclass

from django.conf import settings

from hub.content import blobs
from hub.content.models import Blob, UploadSession
from hub.quotas.services import Hold
from hub.uploads import sessions


@dataclass
class Planned:
    oid: str
    size: int
    transfer: str  # "stored" (nothing to send), or the name of the transfer that takes the bytes
    session: UploadSession | None = None


class Basic:
    """One request straight to the hub, which hashes the bytes as it stores them. Only where the hub
    itself receives the bytes (the local backend): a presigned PUT to a blob's key would stay valid
    after verification and let its holder overwrite verified, shared bytes."""

    name = "basic"

    def accepts(self, oid: str, size: int) -> bool:
        return blobs.object_store().local_path(blobs.blob_key(oid)) is not None and (
            size < blobs.MIN_PART * 2 or size <= settings.HUB_MULTIPART_CHUNK)

    def start(self, oid: str, size: int, *, user, repo) -> Planned:
        return Planned(oid, size, self.name)


class Multipart:
    """An upload session (hub.uploads.sessions): parts straight to the store through presigned URLs
    (or through the hub), completed — assembled, hashed, recorded — by the hub, after which its part
    URLs are dead. Takes any object."""

    name = "multipart"

    def accepts(self, oid: str, size: int) -> bool:
        return True

    def start(self, oid: str, size: int, *, user, repo) -> Planned:
        return Planned(oid, size, self.name, sessions.open_session(sha256=oid, size=size, repo=repo, user=user))


TRANSFERS = [Basic(), Multipart()]  # in order of preference


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


def plan(objects: dict[str, int], *, ns, user, hold: Hold, repo=None, purpose: str = "") -> list[Planned]:
    """The plan for each object, in the order given. Raises QuotaExceeded (nothing reserved, nothing
    started) when the bytes to send do not fit the account's quota."""
    stored = reusable(user, objects)
    need = {oid: size for oid, size in objects.items() if oid not in stored}
    hold.reserve_many(ns, need, user=user, purpose=purpose)
    out = []
    for oid, size in objects.items():
        if oid in stored:
            out.append(Planned(oid, size, "stored"))
        else:
            transfer = next(t for t in TRANSFERS if t.accepts(oid, size))
            out.append(transfer.start(oid, size, user=user, repo=repo))
    return out
