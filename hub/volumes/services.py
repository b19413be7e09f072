"""Volumes: each user's mutable POSIX-like tree of (path → blob).

Locking: every change of a volume's tree runs in a transaction that first locks the owner's
Namespace row (`hub.quotas.services.lock`), the lock that also guards the account's usage. So
"which blobs the account references" and "how many bytes it uses" change together, and two changes
of one volume never interleave. Reads take no lock: a file is one row (blob, size), so a reader sees
the old or the new version of a file, never a mix; a rename is one row update.

Bytes never land under a path before they are complete and verified: a write streams them into the
object store first (content-addressed, so nothing there is ever overwritten) and only then, in one
short transaction, points the entry at the new blob.
"""
from __future__ import annotations

from typing import BinaryIO

from django.db import transaction
from django.db.models import Q, Sum
from django.utils import timezone
from django.utils.translation import gettext

from hub.accounts.models import Namespace
from hub.content import blobs
from hub.content.models import Blob
from hub.errors import BadRequest, Conflict, EntryNotFound, NotFound, PreconditionFailed
from hub.quotas import services as quotas
from hub.quotas.models import Reservation
from hub.validation import check_path
from hub.volumes.models import Volume, VolumeEntry

PAGE = 100
MAX_PAGE = 1000
MAX_PUT = 5 * 2**30  # larger files go through upload sessions
_CHUNK = 500  # rows per IN (...) list


class FileExists(Conflict):
    code = "FileExists"


class NotADirectory(Conflict):
    code = "NotADirectory"


class IsADirectory(Conflict):
    code = "IsADirectory"


class DirectoryNotEmpty(Conflict):
    code = "DirectoryNotEmpty"


# --- paths and lookups ------------------------------------------------------------------------------

def check_volume_path(path: str | None, *, root_ok: bool = False, directory: bool = False) -> str:
    """A safe volume path: relative, no '.', '..' or empty components, no control characters, not
    overlong (hub.validation.check_path). '' is the root, allowed only where `root_ok`; where
    the path may name a `directory`, one trailing '/' is tolerated."""
    if path is None:
        path = ""
    if not isinstance(path, str):
        raise BadRequest(gettext("a path must be a string"))
    if directory and path.endswith("/") and path != "/":
        path = path[:-1]
    if path in ("", "/"):
        if root_ok:
            return ""
        raise BadRequest(gettext("this operation needs a path below the volume root"))
    return check_path(path)


def _names(path: str) -> list[str]:
    return path.split("/") if path else []


def volume_of(user) -> Volume:
    """The user's volume, created with its root directory on first use."""
    vol = Volume.objects.select_related("namespace").filter(namespace__user=user).first()
    if vol is not None and vol.root_id is not None:
        return vol
    ns = Namespace.objects.filter(user=user, kind=Namespace.USER).first()
    if ns is None:
        raise NotFound(gettext("%(username)s has no personal namespace, so no volume") % {"username": user.username})
    with transaction.atomic():
        quotas.lock(ns)
        vol, _ = Volume.objects.get_or_create(namespace=ns)
        if vol.root_id is None:
            vol.root = VolumeEntry.objects.create(volume=vol, parent=None, name="", is_dir=True, mtime=timezone.now())
            vol.save(update_fields=["root"])
    return Volume.objects.select_related("namespace").get(pk=vol.pk)


def resolve(volume: Volume, path: str) -> VolumeEntry | None:
    """The entry at `path` (already checked), or None. One query per path component."""
    names = _names(path)
    if not names:
        return VolumeEntry.objects.get(pk=volume.root_id)
    parent_id = volume.root_id
    entry = None
    for i, name in enumerate(names):
        entry = VolumeEntry.objects.filter(parent_id=parent_id, name=name).first()
        if entry is None or (i < len(names) - 1 and not entry.is_dir):
            return None
        parent_id = entry.pk
    return entry


def access_entry(volume: Volume, path: str) -> VolumeEntry:
    entry = resolve(volume, path)
    if entry is None:
        raise EntryNotFound(gettext("%(path)r does not exist in your volume") % {"path": path})
    return entry


def access_file(volume: Volume, path: str) -> VolumeEntry:
    entry = access_entry(volume, path)
    if entry.is_dir:
        raise IsADirectory(gettext("%(path)r is a directory; list it with /api/volume/ls") % {"path": path})
    return entry


def list_dir(volume: Volume, path: str, cursor: str | None = None, limit: int = PAGE
             ) -> tuple[list[VolumeEntry], str | None]:
    """One page of a directory, ordered by name, starting after `cursor` (a name). Returns the
    entries and the cursor of the next page (None on the last). Costs depth + 1 queries."""
    directory = access_entry(volume, path)
    if not directory.is_dir:
        raise NotADirectory(gettext("%(path)r is a file, not a directory") % {"path": path})
    limit = max(1, min(limit, MAX_PAGE))
    qs = VolumeEntry.objects.filter(parent=directory).order_by("name")
    if cursor:
        qs = qs.filter(name__gt=cursor)
    rows = list(qs[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, (rows[-1].name if more else None)


def check_preconditions(current: VolumeEntry | None, path: str, *, if_match: str | None = None,
                        if_none_match: bool = False) -> None:
    """`if_match`: the file must exist with this ETag (its sha256), or exist at all for '*'.
    `if_none_match`: the path must not exist (create-only)."""
    if if_none_match and current is not None:
        raise PreconditionFailed(gettext("%(path)r already exists (If-None-Match: *)") % {"path": path})
    if not if_match:
        return
    if current is None:
        raise PreconditionFailed(gettext("%(path)r does not exist, so it cannot match the ETag %(if_match)r") % {"path": path, "if_match": if_match})
    if current.is_dir:
        raise PreconditionFailed(gettext("%(path)r is a directory, which has no ETag") % {"path": path})
    if if_match != "*" and current.blob_id != if_match:
        raise PreconditionFailed(gettext("%(path)r has changed: its ETag is %(blob_id)s, not "
                                         "%(if_match)s; read it again before overwriting") % {"path": path, "blob_id": current.blob_id, "if_match": if_match})


# --- directories, moves, deletes ---------------------------------------------------------------------

def _child(parent_id: int, name: str) -> VolumeEntry | None:
    return VolumeEntry.objects.filter(parent_id=parent_id, name=name).first()


def _directory(volume: Volume, names: list[str], *, create: bool) -> VolumeEntry:
    """The directory at `names`, creating missing ones if `create`. Call under the volume's lock."""
    current = VolumeEntry.objects.get(pk=volume.root_id)
    now = timezone.now()
    for i, name in enumerate(names):
        child = _child(current.pk, name)
        if child is None:
            if not create:
                raise EntryNotFound(gettext("directory %(names)r does not exist in your volume") % {"names": '/'.join(names[:i + 1])})
            child = VolumeEntry.objects.create(volume=volume, parent=current, name=name, is_dir=True, mtime=now)
        elif not child.is_dir:
            raise NotADirectory(gettext("%(names)r is a file, not a directory") % {"names": '/'.join(names[:i + 1])})
        current = child
    return current


def check_parents(volume: Volume, path: str) -> None:
    """Fails early (without the lock) if a parent of `path` is a file. Writes create missing parents."""
    parent_id = volume.root_id
    names = _names(path)[:-1]
    for i, name in enumerate(names):
        child = _child(parent_id, name)
        if child is None:
            return
        if not child.is_dir:
            raise NotADirectory(gettext("%(names)r is a file, not a directory") % {"names": '/'.join(names[:i + 1])})
        parent_id = child.pk


def do_mkdir(volume: Volume, path: str, *, parents: bool = False) -> tuple[VolumeEntry, bool]:
    """Creates a directory; with `parents`, missing parents too and an existing directory is fine
    (mkdir -p). Returns (entry, created)."""
    names = _names(path)
    with transaction.atomic():
        quotas.lock(volume.namespace_id)
        parent = _directory(volume, names[:-1], create=parents)
        existing = _child(parent.pk, names[-1])
        if existing is not None:
            if existing.is_dir and parents:
                return existing, False
            raise FileExists(gettext("%(path)r already exists") % {"path": path})
        return VolumeEntry.objects.create(volume=volume, parent=parent, name=names[-1], is_dir=True,
                                          mtime=timezone.now()), True


def do_move(volume: Volume, src: str, dst: str, *, overwrite: bool = False, parents: bool = False) -> VolumeEntry:
    """Renames or moves a file or a directory: one row update, whatever lies below. With `overwrite`,
    replaces a file by a file or an empty directory by a directory, like rename(2)."""
    dst_names = _names(dst)
    with transaction.atomic():
        ns = quotas.lock(volume.namespace_id)
        entry = access_entry(volume, src)
        if entry.pk == volume.root_id:
            raise BadRequest(gettext("the volume root cannot be moved"))
        target_dir = _directory(volume, dst_names[:-1], create=parents)
        if entry.is_dir:
            ancestor_id = target_dir.pk
            while ancestor_id is not None:
                if ancestor_id == entry.pk:
                    raise BadRequest(gettext("cannot move %(src)r into itself (%(dst)r)") % {"src": src, "dst": dst})
                ancestor_id = VolumeEntry.objects.filter(pk=ancestor_id).values_list("parent_id", flat=True).first()
        existing = _child(target_dir.pk, dst_names[-1])
        freed: dict[str, int] = {}
        if existing is not None and existing.pk != entry.pk:
            if not overwrite:
                raise FileExists(gettext("%(dst)r already exists; pass overwrite to replace it") % {"dst": dst})
            if existing.is_dir and not entry.is_dir:
                raise IsADirectory(gettext("%(dst)r is a directory; a file cannot replace it") % {"dst": dst})
            if entry.is_dir and not existing.is_dir:
                raise NotADirectory(gettext("%(dst)r is a file; a directory cannot replace it") % {"dst": dst})
            if existing.is_dir and existing.children.exists():
                raise DirectoryNotEmpty(gettext("%(dst)r is a directory that is not empty") % {"dst": dst})
            if existing.blob_id:
                freed[existing.blob_id] = existing.size
            existing.delete()
        VolumeEntry.objects.filter(pk=entry.pk).update(parent=target_dir, name=dst_names[-1])
        if freed:
            quotas.uncharge(ns, freed)
        entry.parent, entry.name = target_dir, dst_names[-1]
        return entry


def _subtree(root: VolumeEntry) -> tuple[list[list[int]], dict[str, int]]:
    """Ids of the entries below `root`, level by level, and the blobs they reference."""
    levels: list[list[int]] = []
    blob_sizes: dict[str, int] = {}
    frontier = [root.pk]
    while frontier:
        level: list[int] = []
        dirs: list[int] = []
        for i in range(0, len(frontier), _CHUNK):
            rows = VolumeEntry.objects.filter(parent_id__in=frontier[i:i + _CHUNK]).values_list(
                "id", "is_dir", "blob_id", "size")
            for pk, is_dir, blob_id, size in rows:
                level.append(pk)
                if is_dir:
                    dirs.append(pk)
                elif blob_id:
                    blob_sizes[blob_id] = size
        if level:
            levels.append(level)
        frontier = dirs
    return levels, blob_sizes


def do_delete(volume: Volume, path: str, *, recursive: bool = False, if_match: str | None = None) -> int:
    """Deletes a file, or a directory (non-empty ones only with `recursive`), then gives the account
    back the bytes of blobs nothing else of it references. Returns the bytes freed."""
    with transaction.atomic():
        ns = quotas.lock(volume.namespace_id)
        entry = access_entry(volume, path)
        if entry.pk == volume.root_id:
            raise BadRequest(gettext("the volume root cannot be deleted; delete what is in it"))
        check_preconditions(entry, path, if_match=if_match)
        blob_sizes: dict[str, int] = {entry.blob_id: entry.size} if entry.blob_id else {}
        if entry.is_dir:
            levels, below = _subtree(entry)
            if levels and not recursive:
                raise DirectoryNotEmpty(gettext("%(path)r is not empty; delete it with recursive=true") % {"path": path})
            blob_sizes.update(below)
            for level in reversed(levels):  # deepest first: nothing left to cascade to
                for i in range(0, len(level), _CHUNK):
                    VolumeEntry.objects.filter(pk__in=level[i:i + _CHUNK]).delete()
        entry.delete()
        items = list(blob_sizes.items())
        return sum(quotas.uncharge(ns, dict(items[i:i + _CHUNK])) for i in range(0, len(items), _CHUNK))


# --- writes -----------------------------------------------------------------------------------------

def _live(reservation: Reservation | None) -> list[Reservation]:
    """The reservation, if it still exists: expiry may have released it while bytes were flowing,
    and charging a released reservation would count its bytes free twice."""
    if reservation is None:
        return []
    return list(Reservation.objects.filter(pk=reservation.pk))


def do_install(volume: Volume, path: str, blob: Blob, *, reservation: Reservation | None = None,
               if_match: str | None = None, if_none_match: bool = False) -> tuple[VolumeEntry, bool]:
    """Points `path` at verified bytes, atomically: creates missing parent directories, checks the
    preconditions against the current entry, charges the blob (converting `reservation`) and gives
    back the bytes of the blob it replaces. Returns (entry, created). The caller releases
    `reservation` if this raises."""
    names = _names(path)
    with transaction.atomic():
        ns = quotas.lock(volume.namespace_id)
        parent = _directory(volume, names[:-1], create=True)
        current = _child(parent.pk, names[-1])
        check_preconditions(current, path, if_match=if_match, if_none_match=if_none_match)
        if current is not None and current.is_dir:
            raise IsADirectory(gettext("%(path)r is a directory; a file cannot replace it") % {"path": path})
        quotas.charge(ns, {blob.sha256: blob.size}, reservations=_live(reservation))
        now = timezone.now()
        if current is None:
            entry = VolumeEntry.objects.create(volume=volume, parent=parent, name=names[-1], blob=blob,
                                               size=blob.size, mtime=now)
            return entry, True
        old = {current.blob_id: current.size} if current.blob_id and current.blob_id != blob.sha256 else {}
        VolumeEntry.objects.filter(pk=current.pk).update(blob=blob, size=blob.size, mtime=now)
        if old:
            quotas.uncharge(ns, old)
        current.blob, current.size, current.mtime = blob, blob.size, now
        return current, False


def do_write(volume: Volume, path: str, stream: BinaryIO, size: int, *, user, if_match: str | None = None,
             if_none_match: bool = False, sha256: str | None = None) -> tuple[VolumeEntry, bool]:
    """Writes a whole file from a stream. The bytes are reserved before they flow and become visible
    only once complete and verified; on any failure the old file stays as it was and the
    reservation is released."""
    if size < 0:
        raise BadRequest(gettext("the size cannot be negative"))
    if size > MAX_PUT:
        raise BadRequest(gettext("files over %(value)s GiB must be sent through an upload session (POST "
                                 "/api/volume/uploads)") % {"value": MAX_PUT // 2 ** 30})
    check_parents(volume, path)
    check_preconditions(resolve(volume, path), path, if_match=if_match, if_none_match=if_none_match)
    with quotas.Hold() as hold:  # (held while the bytes flow; released if anything fails)
        reservation = hold.reserve(volume.namespace, size, user=user, purpose=f"volume write {path}"[:100])
        blob = blobs.ingest_stream(stream, size, user=user, sha256=sha256)
        return do_install(volume, path, blob, reservation=reservation, if_match=if_match,
                          if_none_match=if_none_match)



# --- what the account's volume holds (hub.content.refs) -------------------------------------------

def volume_consumers(ns: Namespace, top: int) -> list[tuple[str, str, int]]:
    """The volume, by the bytes of the distinct blobs its files hold, for the quota report."""
    held = VolumeEntry.objects.filter(volume__namespace=ns, is_dir=False).values("blob_id")
    size = Blob.objects.filter(sha256__in=held).aggregate(s=Sum("size"))["s"]
    return [("volume", f"{ns.name}/volume", size)] if size else []


def readable_refs(user) -> Q:
    """Files of the user's own volume (however they got there) may be named by hash."""
    return Q(volume__namespace__user=user) if user is not None else Q(pk__in=[])
