"""A local cache of file bytes keyed by sha256, shared by every mount on a machine and by `hub pull`.

    HUB_CACHE_DIR   where it lives (default ~/.cache/hub)
    HUB_CACHE_SIZE  how large it may grow (e.g. 200GiB; default a quarter of its disk, at most
                    50 GiB; 0 turns the cache off for `hub pull`)

Layout under the cache directory:
    blobs/ab/ab12…   complete files, sha256-verified before they arrive, read-only (0444); the
                     mtime is the last use, which eviction (LRU) goes by
    tmp/             files being written: <sha256>.<pid>.<n>.part, renamed into blobs/ when verified
    locks/ab/ab12….lock  flock(2) (storage.transfer.locks) held by the process fetching that blob, so two processes (two
                     mounts, a mount and `hub pull`) never fetch the same bytes at the same time
    evict.lock       flock(2) held by the process that evicts

A blob appears by rename(2) only after its sha256 matched, so a reader sees a whole verified file
or nothing. A blob evicted while some process has it open stays readable through that descriptor.
Nothing here trusts a blob's name to be hex: every sha256 is checked before it becomes a path.
"""
from __future__ import annotations

import errno
import hashlib
import itertools
import os
import re
import shutil
import threading
import time
from pathlib import Path

from storage.transfer.locks import FileLock

MiB = 1 << 20
GiB = 1 << 30
DEFAULT_MAX = 50 * GiB
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_TMP_STALE = 3600.0  # a part file older than this, whose writer is gone, is removed by eviction
_seq = itertools.count()


def cache_dir() -> Path:
    """HUB_CACHE_DIR, else $XDG_CACHE_HOME/hub, else ~/.cache/hub."""
    if os.environ.get("HUB_CACHE_DIR"):
        return Path(os.path.expanduser(os.environ["HUB_CACHE_DIR"]))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hub"


def cache_limit(root: Path) -> int:
    """HUB_CACHE_SIZE in bytes (UsageError if it is not a size), else a quarter of the disk the
    cache is on, at most DEFAULT_MAX."""
    raw = os.environ.get("HUB_CACHE_SIZE", "").strip()
    if raw:
        from storage.client.settings import user_size

        return user_size(raw)
    probe = root
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        st = os.statvfs(probe)
        return min(DEFAULT_MAX, st.f_frsize * st.f_blocks // 4)
    except OSError:
        return 10 * GiB


def check_sha256(sha256: str) -> str:
    if not isinstance(sha256, str) or not _HEX64.match(sha256):
        raise ValueError(f"not a sha256: {sha256!r}")
    return sha256


class BlobCache:
    """The cache at `root`, bounded to `limit` bytes. Thread-safe; any number of processes may
    share one directory."""

    def __init__(self, root: str | Path, limit: int) -> None:
        self.root = Path(root)
        self.limit = limit
        self.blobs = self.root / "blobs"
        self.tmp = self.root / "tmp"
        self.locks = self.root / "locks"
        for d in (self.blobs, self.tmp, self.locks):
            d.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._estimate: int | None = None  # bytes in blobs/, as of the last scan plus what we added since

    # --- looking up ---------------------------------------------------------------------------------

    def path(self, sha256: str) -> Path:
        """Where the blob lives (whether or not it is there)."""
        check_sha256(sha256)
        return self.blobs / sha256[:2] / sha256

    def get(self, sha256: str, size: int | None = None) -> Path | None:
        """The blob's path if it is cached (with `size` bytes, when given), marked as just used."""
        p = self.path(sha256)
        try:
            st = p.stat()
        except FileNotFoundError:
            return None
        if size is not None and st.st_size != size:
            return None
        self._touch(p, st.st_mtime)
        return p

    def open(self, sha256: str, size: int | None = None) -> int | None:
        """A read-only descriptor of the cached blob (the caller closes it), or None."""
        try:
            fd = os.open(self.path(sha256), os.O_RDONLY)
        except FileNotFoundError:
            return None
        st = os.fstat(fd)
        if size is not None and st.st_size != size:
            os.close(fd)
            return None
        self._touch(self.path(sha256), st.st_mtime)
        return fd

    @staticmethod
    def _touch(p: Path, mtime: float) -> None:
        now = time.time()
        if now - mtime > 60:  # LRU to the minute: no metadata write on every open
            try:
                os.utime(p, (now, now))
            except OSError:
                pass

    def lock(self, sha256: str) -> FileLock:
        """The (unacquired) lock that whoever fetches this blob holds."""
        check_sha256(sha256)
        return FileLock(self.locks / sha256[:2] / f"{sha256}.lock")

    # --- adding ---------------------------------------------------------------------------------------

    def tmp_path(self, sha256: str) -> Path:
        """A fresh name in tmp/ to write a blob to before commit()."""
        check_sha256(sha256)
        return self.tmp / f"{sha256}.{os.getpid()}.{next(_seq)}.part"

    def commit(self, tmp: Path, sha256: str, *, verified: bool = False) -> Path:
        """Moves a complete file from tmp/ into the cache, after checking its sha256 (unless the
        caller just did). Raises ValueError (and removes the file) if the bytes do not match."""
        if not verified and _hash_file(tmp) != sha256:
            tmp.unlink(missing_ok=True)
            raise ValueError(f"the bytes of {tmp.name} do not hash to {sha256}")
        target = self.path(sha256)
        target.parent.mkdir(exist_ok=True)
        os.chmod(tmp, 0o444)
        size = os.stat(tmp).st_size
        os.replace(tmp, target)
        self._added(size)
        return target

    def put_bytes(self, sha256: str, data: bytes | bytearray | memoryview, *, verified: bool = False) -> Path:
        """Adds bytes held in memory (checked against sha256 unless the caller just did)."""
        if not verified and hashlib.sha256(data).hexdigest() != sha256:
            raise ValueError(f"the bytes given do not hash to {sha256}")
        tmp = self.tmp_path(sha256)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        os.close(fd)
        return self.commit(tmp, sha256, verified=True)

    def adopt(self, src: str | Path, sha256: str, size: int) -> bool:
        """Adds a file that is known to hash to `sha256` (verified by its writer) — by a hard link
        when it is on the same filesystem, else by a copy. The caller must never modify `src` in
        place afterwards (a hard link shares the bytes): blobs of a huggingface_hub cache qualify,
        files a user may edit do not (use adopt_copy). Returns whether the cache holds it now."""
        return self._adopt(Path(src), sha256, size, link=True)

    def adopt_copy(self, src: str | Path, sha256: str, size: int) -> bool:
        """As adopt(), always by copying (the source may change later)."""
        return self._adopt(Path(src), sha256, size, link=False)

    def _adopt(self, src: Path, sha256: str, size: int, *, link: bool) -> bool:
        if self.get(sha256, size) is not None:
            return True
        if size > self.limit // 2:
            return False  # would push out everything else for one file
        tmp = self.tmp_path(sha256)
        try:
            if link:
                try:
                    os.link(src, tmp)
                except OSError as err:
                    if err.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
                        raise
                    link = False
            if not link:
                shutil.copyfile(src, tmp)
            if os.stat(tmp).st_size != size:
                tmp.unlink(missing_ok=True)
                return False
            self.commit(tmp, sha256, verified=True)
            return True
        except OSError:
            tmp.unlink(missing_ok=True)
            return False

    def copy_out(self, sha256: str, size: int, dest: str | Path, *, link: bool = False) -> bool:
        """Writes the cached blob to `dest` (a new name: the caller renames it into place), by a
        hard link when `link` and possible, else by a copy. False if the cache does not hold it."""
        src = self.get(sha256, size)
        if src is None:
            return False
        dest = Path(dest)
        try:
            if link:
                try:
                    os.link(src, dest)
                    return True
                except OSError as err:
                    if err.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
                        raise
            shutil.copyfile(src, dest)
            os.chmod(dest, 0o644)
            return True
        except FileNotFoundError:  # evicted a moment ago
            dest.unlink(missing_ok=True)
            return False

    # --- size ---------------------------------------------------------------------------------------

    def _added(self, size: int) -> None:
        with self._lock:
            if self._estimate is None:
                self._estimate = self.usage()
            else:
                self._estimate += size
            over = self._estimate > self.limit
        if over:
            self.evict()

    def usage(self) -> int:
        """Bytes held in blobs/ (a scan)."""
        return sum(st.st_size for _, st in self._scan())

    def _scan(self) -> list[tuple[Path, os.stat_result]]:
        out = []
        try:
            shards = list(os.scandir(self.blobs))
        except FileNotFoundError:
            return out
        for shard in shards:
            if not shard.is_dir(follow_symlinks=False):
                continue
            try:
                for e in os.scandir(shard.path):
                    try:
                        out.append((Path(e.path), e.stat(follow_symlinks=False)))
                    except FileNotFoundError:
                        pass
            except FileNotFoundError:
                pass
        return out

    def evict(self, target: int | None = None) -> int:
        """Removes the least recently used blobs until at most `target` bytes remain (default 90 %
        of the limit), and part files left by processes that are gone. One process evicts at a time;
        others skip. Returns the bytes freed."""
        lock = FileLock(self.root / "evict.lock")
        if not lock.acquire(blocking=False):
            return 0
        try:
            self._clean_tmp()
            target = int(self.limit * 0.9) if target is None else target
            files = sorted(self._scan(), key=lambda item: item[1].st_mtime)
            total = sum(st.st_size for _, st in files)
            freed = 0
            for path, st in files:
                if total - freed <= target:
                    break
                try:
                    path.unlink()
                    freed += st.st_size
                except FileNotFoundError:
                    pass
            with self._lock:
                self._estimate = total - freed
            return freed
        finally:
            lock.release()

    def _clean_tmp(self) -> None:
        now = time.time()
        try:
            entries = list(os.scandir(self.tmp))
        except FileNotFoundError:
            return
        for e in entries:
            parts = e.name.split(".")
            try:
                pid = int(parts[1])
                old = now - e.stat(follow_symlinks=False).st_mtime > _TMP_STALE
            except (IndexError, ValueError, FileNotFoundError):
                continue
            if pid != os.getpid() and old and not alive(pid):
                try:
                    os.unlink(e.path)
                except FileNotFoundError:
                    pass


def alive(pid: int) -> bool:
    """Whether a process of this machine still runs (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (our own child not yet reaped) is gone for our purposes
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


def _hash_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as fh:
        while chunk := fh.read(4 * MiB):
            h.update(chunk)
    return h.hexdigest()


_shared: dict[tuple[str, int], BlobCache] = {}
_shared_lock = threading.Lock()


def shared_cache(*, create: bool = False) -> BlobCache | None:
    """The machine's cache as the environment configures it (one object per directory and limit),
    or None when HUB_CACHE_SIZE is 0, or when it does not exist yet and `create` is false: `hub
    pull` shares the cache a mount made, but makes none itself (it would only double what the
    huggingface_hub cache holds)."""
    root = cache_dir()
    if not create and not (root / "blobs").is_dir():
        return None
    try:
        limit = cache_limit(root)
    except Exception:  # noqa: BLE001 - a bad HUB_CACHE_SIZE must not break `hub pull`
        return None
    if limit <= 0:
        return None
    key = (str(root), limit)
    with _shared_lock:
        if key not in _shared:
            try:
                _shared[key] = BlobCache(root, limit)
            except OSError:
                return None
        return _shared[key]
