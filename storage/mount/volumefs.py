"""The caller's volume as a read-write FUSE filesystem, with close-to-open consistency.

* Reads: open() asks the hub for the file's current version (its sha256) and the handle reads
  that version to the end, whatever is written meanwhile; bytes come through the shared cache
  (whole small files, large ones in blocks, as for repos). The kernel keeps a file's pages across
  opens only while the version is the one it cached.
* Writes go to a local spool file; on close (flush) or fsync its bytes upload through the volume
  client (one PUT, or a resumable multipart session for large files) and the new version appears
  atomically. A failed upload (over quota: EDQUOT) fails close() and leaves the old file as it was.
  Every handle of one path in this mount shares one spool file, as they would share an inode.
* rename is the volume's move (metadata only, atomic); mkdir, rmdir, unlink, truncate map to
  their calls. chmod, chown and utimens are accepted and ignored (the volume keeps no modes).
* Listings come in pages of 1,000 and are kept LISTING_TTL seconds (the kernel's attribute and
  entry timeouts are the same), so `ls -l` of a large directory costs a few requests, and what
  another instance wrote shows up here within that time — and at once for an open(). A walk that
  outlasts the TTL (`ls -l` of 10,000 entries does 10,000 lookups) would then cost one request per
  entry; once a stale listing has been asked WALK_ASKS times per page, it is listed again instead.
"""
from __future__ import annotations

import errno
import json
import logging
import os
import stat
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from itertools import count
from pathlib import Path

from mfusepy import FuseOSError, Operations

from storage.client import HubClient, IntegrityError, NotFoundError
from storage.fs import volume
from storage.mount.blocks import StreamingBlob
from storage.mount.common import (
    ErrorLog,
    fuse_op,
    invalidate_kernel_cache,
    malloc,
    reply_with_fd,
    reply_with_memory,
)
from storage.mount.fetch import WHOLE_FILE, Fetcher, Source

log = logging.getLogger("hub.mount")

LISTING_TTL = 1.0
LS_PAGE = 1000
WALK_ASKS = 8  # lookups into a stale listing, per page of it, before the whole listing is fetched again
QUOTA_TTL = 30.0


@dataclass(slots=True)
class Entry:
    is_dir: bool
    size: int = 0
    sha256: str | None = None
    mtime_ns: int = 0

    @classmethod
    def from_api(cls, e: dict) -> Entry:
        try:
            mtime = int(datetime.fromisoformat(e["mtime"].replace("Z", "+00:00")).timestamp() * 1e9)
        except (KeyError, AttributeError, ValueError):
            mtime = time.time_ns()
        is_dir = e["type"] == "directory"
        return cls(is_dir, 0 if is_dir else e["size"], e.get("etag"), mtime)


@dataclass(slots=True)
class Listing:
    entries: dict[str, Entry]
    at: float
    stale_asks: int = 0  # lookups answered by the hub one by one since this listing went stale
    refreshing: bool = False

    @property
    def pages(self) -> int:
        """Requests it took to list (LS_PAGE entries each)."""
        return len(self.entries) // LS_PAGE + 1

    def worth_refreshing(self) -> bool:
        """Whether the lookups seen since this listing went stale say a walk is going on (caller holds mu)."""
        if self.refreshing or self.stale_asks < WALK_ASKS * self.pages:
            return False
        self.refreshing = True
        return True


@dataclass
class WriteState:
    """The local version of a file open for writing in this mount (its spool file)."""

    path: str
    tmp: Path
    fd: int
    dirty: bool
    refs: int = 1
    unlinked: bool = False
    uploaded_sha: str | None = None
    mtime_ns: int = field(default_factory=time.time_ns)
    lock: threading.RLock = field(default_factory=threading.RLock)

    def size(self) -> int:
        return os.fstat(self.fd).st_size


@dataclass
class VHandle:
    state: WriteState | None = None
    writable: bool = False
    fd: int = -1
    blob: StreamingBlob | None = None
    size: int = 0


def _rel(path: str) -> str:
    return path.strip("/")


def _parent(rel: str) -> str:
    return rel.rsplit("/", 1)[0] if "/" in rel else ""


def _name(rel: str) -> str:
    return rel.rsplit("/", 1)[-1]


class VolumeOps(Operations):
    """The FUSE operations of a volume mount."""

    use_ns = True

    def __init__(self, client: HubClient, fetcher: Fetcher, spool: Path, *, ttl: float = LISTING_TTL,
                 on_ready=None) -> None:
        self.client = client
        self.fetcher = fetcher
        self.spool = spool
        self.ttl = ttl
        self.mounted_ns = time.time_ns()
        self.on_ready = on_ready
        self.errors = ErrorLog()
        self.uid, self.gid = os.getuid(), os.getgid()
        self.mu = threading.RLock()
        self.listings: dict[str, Listing] = {}
        self.singles: dict[str, tuple[Entry | None, float]] = {}
        self.states: dict[str, WriteState] = {}
        self.handles: dict[int, VHandle] = {}
        self.served: dict[str, str] = {}  # path -> sha256 the kernel may hold pages of
        self._ids = count(1)
        self._quota: tuple[dict, float] | None = None
        self.requests = {"listing_pages": 0, "stat_requests": 0}  # metadata asked of the hub (user.hub.stats)
        spool.mkdir(parents=True, exist_ok=True)

    def init_with_config(self, conn, config) -> None:
        try:
            self._configure(conn, config)
        finally:
            if self.on_ready:
                self.on_ready()

    def _configure(self, conn, config) -> None:
        if config is not None:
            config.kernel_cache = 0
            config.entry_timeout = config.attr_timeout = self.ttl
            config.negative_timeout = 0.0

    def destroy(self, path: str) -> None:
        with self.mu:
            left = [s.path for s in self.states.values() if s.dirty and not s.unlinked]
            states = list(self.states.values())
            self.states.clear()
        if left:
            log.warning("unmounted with %d files open for writing and never closed; not uploaded: %s",
                        len(left), ", ".join(left[:10]))
        for s in states:
            self._drop_spool(s)
        log.info("unmounted; %s", json.dumps(self.fetcher.counters.as_dict() | self.requests))
        self.fetcher.close()

    # --- metadata -----------------------------------------------------------------------------------

    def _listing(self, rel: str, *, max_age: float | None = None) -> dict[str, Entry]:
        """The entries of directory `rel`, from a listing at most `max_age` (default: the TTL) old."""
        max_age = self.ttl if max_age is None else max_age
        with self.mu:
            cached = self.listings.get(rel)
            if cached is not None and time.monotonic() - cached.at <= max_age:
                return cached.entries
        started = time.monotonic()
        try:
            entries = {e["name"]: Entry.from_api(e) for e in volume.ls(self.client, rel, limit=LS_PAGE)}
        finally:
            with self.mu:
                old = self.listings.get(rel)
                if old is not None:
                    old.refreshing = False
        listing = Listing(entries, started)
        with self.mu:
            self.listings[rel] = listing
            self.requests["listing_pages"] += listing.pages
        return entries

    def _entry(self, rel: str, *, fresh: bool = False) -> Entry | None:
        """What is at `rel`: this mount's own open version first, then a listing or stat younger
        than the TTL, else the hub (always the hub when `fresh`)."""
        if not rel:
            return Entry(True, mtime_ns=self.mounted_ns)  # (the volume root has no time of its own)
        now = time.monotonic()
        walk = False
        with self.mu:
            st = self.states.get(rel)
            if st is not None and not st.unlinked:
                return Entry(False, st.size(), st.uploaded_sha, st.mtime_ns)
            if not fresh:
                listing = self.listings.get(_parent(rel))
                if listing is not None and now - listing.at <= self.ttl:
                    return listing.entries.get(_name(rel))
                single = self.singles.get(rel)
                if single is not None and single[0] is not None and now - single[1] <= self.ttl:
                    return single[0]  # (a name found missing is asked for again: it may appear any time)
                if listing is not None:
                    walk = listing.worth_refreshing()
                    listing.stale_asks += 1
        if walk:
            try:
                return self._listing(_parent(rel), max_age=0).get(_name(rel))
            except NotFoundError:
                pass  # the directory itself went away: the stat below says what is there now
        with self.mu:
            self.requests["stat_requests"] += 1
        try:
            entry: Entry | None = Entry.from_api(volume.stat(self.client, rel))
        except NotFoundError:
            entry = None
        with self.mu:
            self.singles[rel] = (entry, now)
            if len(self.singles) > 100_000:
                self.singles.clear()
            listing = self.listings.get(_parent(rel))
            if listing is not None:
                if entry is None:
                    listing.entries.pop(_name(rel), None)
                else:
                    listing.entries[_name(rel)] = entry
        return entry

    def _must(self, rel: str, *, fresh: bool = False) -> Entry:
        e = self._entry(rel, fresh=fresh)
        if e is None:
            raise FuseOSError(errno.ENOENT)
        return e

    def _learn(self, rel: str, entry: Entry | None) -> None:
        """Records what this mount just did at `rel` (None: removed) in the cached metadata."""
        with self.mu:
            self.singles[rel] = (entry, time.monotonic())
            listing = self.listings.get(_parent(rel))
            if listing is not None:
                if entry is None:
                    listing.entries.pop(_name(rel), None)
                else:
                    listing.entries[_name(rel)] = entry

    def _forget_below(self, rel: str) -> None:
        with self.mu:
            prefix = f"{rel}/"
            for key in [k for k in self.listings if k == rel or k.startswith(prefix)]:
                del self.listings[key]
            for key in [k for k in self.singles if k.startswith(prefix)]:
                del self.singles[key]

    def _attrs(self, e: Entry) -> dict:
        t = e.mtime_ns
        base = {"st_uid": self.uid, "st_gid": self.gid, "st_mtime": t, "st_ctime": t, "st_atime": t}
        if e.is_dir:
            return base | {"st_mode": stat.S_IFDIR | 0o755, "st_nlink": 2, "st_size": 0}
        return base | {"st_mode": stat.S_IFREG | 0o644, "st_nlink": 1, "st_size": e.size,
                       "st_blocks": (e.size + 511) // 512, "st_blksize": 1 << 20}

    @fuse_op
    def getattr(self, path: str, fh=None) -> dict:
        return self._attrs(self._must(_rel(path)))

    @fuse_op
    def readdir(self, path: str, fh) -> list:
        rel = _rel(path)
        if rel and not self._must(rel).is_dir:
            raise FuseOSError(errno.ENOTDIR)
        entries = dict(self._listing(rel))
        with self.mu:
            for p, st in self.states.items():
                if _parent(p) == rel and not st.unlinked:
                    entries.setdefault(_name(p), Entry(False, st.size()))
        out: list = [".", ".."]
        out.extend((name, {"st_mode": stat.S_IFDIR if e.is_dir else stat.S_IFREG}, 0) for name, e in entries.items())
        return out

    @fuse_op
    def statfs(self, path: str) -> dict:
        now = time.monotonic()
        if self._quota is None or now - self._quota[1] > QUOTA_TTL:
            self._quota = (self.client.quota(), now)
        q = self._quota[0]
        frsize = 4096
        return {"f_bsize": 1 << 20, "f_frsize": frsize, "f_blocks": q["limit"] // frsize,
                "f_bfree": q["available"] // frsize, "f_bavail": q["available"] // frsize,
                "f_files": 1 << 30, "f_ffree": 1 << 30, "f_favail": 1 << 30, "f_namemax": 255}

    @fuse_op
    def getxattr(self, path: str, name: str, position: int = 0) -> bytes:
        rel = _rel(path)
        if name == "user.hub.stats" and not rel:
            with self.mu:
                asked = dict(self.requests)
            return json.dumps(self.fetcher.counters.as_dict() | asked).encode()
        e = self._must(rel)
        if name == "user.hub.sha256" and not e.is_dir and e.sha256:
            return e.sha256.encode()
        raise FuseOSError(errno.ENODATA)

    @fuse_op
    def listxattr(self, path: str) -> list[str]:
        rel = _rel(path)
        e = self._must(rel)
        return (["user.hub.stats"] if not rel else []) + (["user.hub.sha256"] if not e.is_dir and e.sha256 else [])

    # --- opening ------------------------------------------------------------------------------------

    def _new_state(self, rel: str, *, dirty: bool) -> WriteState:
        tmp = self.spool / f"{os.getpid()}.{next(self._ids)}.write"
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        return WriteState(rel, tmp, fd, dirty)

    def _register(self, fi, handle: VHandle) -> int:
        fh = next(self._ids)
        with self.mu:
            self.handles[fh] = handle
        fi.fh = fh
        return 0

    @fuse_op
    def create(self, path: str, mode: int, fi) -> int:
        rel = _rel(path)
        state = self._new_state(rel, dirty=True)  # created, even if nothing is written before close
        with self.mu:
            old = self.states.get(rel)
            if old is not None and not old.unlinked:
                self._drop_spool(state)
                old.refs += 1
                state = old
                os.ftruncate(state.fd, 0)
                state.dirty = True
            else:
                self.states[rel] = state
        fi.direct_io = 0
        return self._register(fi, VHandle(state=state, writable=True))

    @fuse_op
    def open(self, path: str, fi) -> int:
        rel = _rel(path)
        acc = fi.flags & os.O_ACCMODE
        writable = acc != os.O_RDONLY
        trunc = bool(fi.flags & os.O_TRUNC) and writable
        with self.mu:
            state = self.states.get(rel)
            if state is not None and state.unlinked:
                state = None
            if state is not None:
                state.refs += 1
        if state is not None:  # this mount's own version
            if trunc:
                with state.lock:
                    os.ftruncate(state.fd, 0)
                    state.dirty = True
            return self._register(fi, VHandle(state=state, writable=writable))
        with self.mu:
            listing = self.listings.get(_parent(rel))
            before = listing.entries.get(_name(rel)) if listing else (self.singles.get(rel) or (None,))[0]
        entry = self._must(rel, fresh=True)  # close-to-open: the version as of now
        if before is not None and (before.size, before.sha256) != (entry.size, entry.sha256):
            invalidate_kernel_cache(path)  # the kernel may hold the old size: make it ask again
        if entry.is_dir:
            raise FuseOSError(errno.EISDIR)
        if writable:
            return self._register(fi, VHandle(state=self._open_for_write(rel, entry, trunc), writable=True))
        handle = self._open_for_read(rel, entry)
        with self.mu:
            same = self.served.get(rel) == entry.sha256
            self.served[rel] = entry.sha256 or ""
        fi.keep_cache = 1 if same else 0
        return self._register(fi, handle)

    def _source(self, rel: str, entry: Entry) -> Source:
        if not entry.sha256:
            raise FuseOSError(errno.EIO)
        return Source(entry.sha256, entry.size, f"volume/{rel}", volume.file_url(self.client, rel))

    def _open_for_read(self, rel: str, entry: Entry) -> VHandle:
        if entry.size == 0:
            return VHandle()
        for attempt in (0, 1):
            src = self._source(rel, entry)
            try:
                fd = self.fetcher.cache.open(src.sha256, src.size)
                if fd is not None:
                    self.fetcher.counters.add(cache_hits=1)
                    return VHandle(fd=fd, size=entry.size)
                if entry.size < WHOLE_FILE:
                    return VHandle(fd=self.fetcher.open_whole(src), size=entry.size)
                return VHandle(blob=self.fetcher.stream(src))
            except IntegrityError:
                if attempt:
                    raise
                entry = self._must(rel, fresh=True)  # replaced while we fetched it: the new version then
        raise AssertionError("unreachable")

    def _open_for_write(self, rel: str, entry: Entry, trunc: bool) -> WriteState:
        state = self._new_state(rel, dirty=trunc)
        try:
            if not trunc and entry.size:
                self.fetcher.download_to(self._source(rel, entry), state.fd)
                state.uploaded_sha = entry.sha256
        except BaseException:
            self._drop_spool(state)
            raise
        with self.mu:
            other = self.states.get(rel)
            if other is not None and not other.unlinked:  # opened meanwhile by another thread: share it
                other.refs += 1
                self._drop_spool(state)
                return other
            self.states[rel] = state
        return state

    # --- reading and writing ------------------------------------------------------------------------

    @fuse_op
    def read(self, path: str, size: int, offset: int, fi) -> bytes:
        h = self.handles[fi.fh]
        if h.state is not None:
            return os.pread(h.state.fd, size, offset)
        if h.fd >= 0:
            return os.pread(h.fd, size, offset)
        if h.blob is None:
            return b""
        return h.blob.read(offset, size)

    @fuse_op
    def read_buf(self, path: str, bufpp, size: int, offset: int, fi) -> int:
        """As read, but the bytes go from the local file to the kernel without Python."""
        h = self.handles[fi.fh]
        if h.state is not None:
            with h.state.lock:
                return reply_with_fd(bufpp, h.state.fd, offset, min(size, h.state.size() - offset))
        if h.fd >= 0:
            return reply_with_fd(bufpp, h.fd, offset, min(size, h.size - offset))
        if h.blob is None:
            return reply_with_fd(bufpp, -1, 0, 0)
        return reply_with_memory(bufpp, *h.blob.read_into(offset, size, malloc))

    @fuse_op
    def write(self, path: str, data: bytes, offset: int, fi) -> int:
        h = self.handles[fi.fh]
        if h.state is None or not h.writable:
            raise FuseOSError(errno.EBADF)
        st = h.state
        with st.lock:
            view = memoryview(data)
            pos = offset
            while view:
                n = os.pwrite(st.fd, view, pos)
                view, pos = view[n:], pos + n
            st.dirty = True
            st.mtime_ns = time.time_ns()
        return len(data)

    @fuse_op
    def truncate(self, path: str, length: int, fh=None) -> int:
        rel = _rel(path)
        with self.mu:
            st = self.states.get(rel)
            if st is not None and st.unlinked:
                st = None
        if st is not None:
            with st.lock:
                os.ftruncate(st.fd, length)
                st.dirty = True
                st.mtime_ns = time.time_ns()
            return 0
        entry = self._must(rel, fresh=True)
        if entry.is_dir:
            raise FuseOSError(errno.EISDIR)
        if entry.size == length:
            return 0
        st = self._new_state(rel, dirty=True)
        try:
            if length:
                self.fetcher.download_to(self._source(rel, entry), st.fd)
            os.ftruncate(st.fd, length)
            self._upload(st)
        finally:
            self._drop_spool(st)
        return 0

    def _upload(self, st: WriteState) -> None:
        """Sends the spool file's bytes as the new version of st.path (caller: not under self.mu)."""
        with st.lock:
            if not st.dirty or st.unlinked:
                return
            entry = volume.upload(self.client, st.tmp, st.path)
            st.dirty = False
            st.uploaded_sha = entry.get("etag")
            self._learn(st.path, Entry.from_api(entry))

    @fuse_op
    def flush(self, path: str, fi) -> int:
        h = self.handles.get(fi.fh)
        if h is None or h.state is None or not h.writable or not h.state.dirty:
            return 0  # closing a reader never sends (nor fails on) a writer's bytes
        st = h.state
        try:
            self._upload(st)
        except BaseException:
            # close() fails and the file stays as the hub has it: from now on this path opens and
            # stats as the hub's version. Handles still open keep the refused bytes; the last one's
            # release tries once more and otherwise keeps them in lost+found.
            with self.mu:
                if self.states.get(st.path) is st:
                    del self.states[st.path]
            raise
        return 0

    @fuse_op
    def fsync(self, path: str, datasync: int, fi) -> int:
        return self.flush(path, fi)

    @fuse_op
    def release(self, path: str, fi) -> int:
        with self.mu:
            h = self.handles.pop(fi.fh, None)
        if h is None:
            return 0
        if h.fd >= 0:
            os.close(h.fd)
        if h.blob is not None:
            self.fetcher.release(h.blob)
        st = h.state
        if st is None:
            return 0
        with self.mu:
            st.refs -= 1
            last = st.refs == 0
            if last and self.states.get(st.path) is st:
                del self.states[st.path]
        if last:
            if st.dirty and not st.unlinked:
                try:
                    self._upload(st)
                except Exception as err:  # noqa: BLE001 - release cannot report: keep the bytes, say where
                    kept = self._keep(st)
                    self.errors.error(f"{st.path}: the last writes could not be uploaded "
                                      f"({getattr(err, 'message', err)}); the bytes are kept in {kept}")
            self._drop_spool(st)
        return 0

    def _keep(self, st: WriteState) -> Path:
        """Moves a spool file whose upload failed for good out of the way, for a person to recover."""
        lost = self.spool / "lost+found"
        lost.mkdir(exist_ok=True)
        target = lost / f"{time.strftime('%Y%m%d-%H%M%S')}-{st.path.replace('/', '%2F')}"
        os.link(st.tmp, target)
        return target

    def _drop_spool(self, st: WriteState) -> None:
        """Closes and removes a spool file; one whose bytes the hub now holds goes to the cache."""
        try:
            if st.uploaded_sha and not st.dirty and st.fd >= 0:
                self.fetcher.cache.adopt(st.tmp, st.uploaded_sha, st.size())
        except (OSError, ValueError):
            pass
        if st.fd >= 0:
            os.close(st.fd)
            st.fd = -1
        st.tmp.unlink(missing_ok=True)

    # --- the namespace ------------------------------------------------------------------------------

    @fuse_op
    def mkdir(self, path: str, mode: int) -> int:
        rel = _rel(path)
        volume.mkdir(self.client, rel, parents=False)
        self._learn(rel, Entry(True, mtime_ns=time.time_ns()))
        with self.mu:
            self.listings[rel] = Listing({}, time.monotonic())
        return 0

    @fuse_op
    def rmdir(self, path: str) -> int:
        rel = _rel(path)
        if not self._must(rel, fresh=True).is_dir:
            raise FuseOSError(errno.ENOTDIR)
        volume.delete(self.client, rel)
        self._learn(rel, None)
        self._forget_below(rel)
        return 0

    @fuse_op
    def unlink(self, path: str) -> int:
        rel = _rel(path)
        with self.mu:
            st = self.states.get(rel)
            if st is not None:
                st.unlinked = True  # open handles keep their bytes; nothing of it is uploaded any more
                del self.states[rel]
        try:
            e = self._must(rel, fresh=True)
            if e.is_dir:
                raise FuseOSError(errno.EISDIR)
            volume.delete(self.client, rel)
        except FuseOSError as err:
            if not (st is not None and err.errno == errno.ENOENT):  # created here and never uploaded
                raise
        self._learn(rel, None)
        return 0

    @fuse_op
    def rename(self, old: str, new: str) -> int:
        src, dst = _rel(old), _rel(new)
        with self.mu:
            st = self.states.get(src)
        if st is not None:
            self._upload(st)  # the bytes written so far exist on the hub before they move
        entry = volume.move(self.client, src, dst, overwrite=True)
        with self.mu:
            replaced = self.states.pop(dst, None)
            if replaced is not None and replaced is not st:
                replaced.unlinked = True  # as with an open file renamed over: its writes go nowhere now
            moved = {p: s for p, s in self.states.items() if p == src or p.startswith(f"{src}/")}
            for p, s in moved.items():
                del self.states[p]
                s.path = dst + p[len(src):]
                self.states[s.path] = s
            for p in [p for p in self.served if p == src or p.startswith(f"{src}/")]:
                del self.served[p]
        self._learn(src, None)
        self._forget_below(src)
        self._forget_below(dst)
        self._learn(dst, Entry.from_api(entry) if isinstance(entry, dict) and "type" in entry else None)
        if not isinstance(entry, dict) or "type" not in entry:
            with self.mu:
                self.singles.pop(dst, None)
        return 0

    @fuse_op
    def access(self, path: str, amode: int) -> int:
        self._must(_rel(path))
        return 0

    def chmod(self, path: str, mode: int) -> int:
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        return 0

    def utimens(self, path: str, times=None) -> int:
        return 0

    def symlink(self, target: str, source: str) -> int:
        raise FuseOSError(errno.ENOTSUP)

    def link(self, target: str, source: str) -> int:
        raise FuseOSError(errno.EPERM)
