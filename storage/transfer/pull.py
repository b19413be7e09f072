"""`hub pull`: a repo snapshot on disk, fetched in parallel and verified file by file.

Two layouts:
  * the huggingface_hub cache (default): $HF_HUB_CACHE/{models|datasets}--NS--NAME/ with blobs/<etag>,
    snapshots/<commit>/<path> → relative symlinks, refs/<revision>, locks in .locks/ — the same
    files and locks huggingface_hub uses, so `hub pull` then `from_pretrained(...,
    local_files_only=True)` works, and the two never fetch the same blob at the same time;
  * a plain directory (--local-dir), with huggingface_hub's .cache/huggingface/download/<path>.metadata
    records, so a second pull (by either tool) skips files already there.
Partial downloads are <etag>.hub.incomplete (+ .journal): huggingface_hub ≤ 1.17 resumes plain
<etag>.incomplete files from their length, which a sparse segmented file would fool.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from storage.client import DATASET, HubClient, HubClientError, UsageError
from storage.transfer import blobcache
from storage.transfer.engine import (
    SMALL_FILE,
    Context,
    DownloadJob,
    Downloads,
    Job,
    RemoteFile,
    SingleDownload,
    Stats,
    _hash_file,
    fetch_small,
)
from storage.transfer.locks import FileLock
from storage.transfer.progress import Progress
from storage.transfer.ratelimit import RateLimiter

PRESENT, LINK, VERIFY, FETCH = "present", "link", "verify", "fetch"


def hf_cache_dir() -> Path:
    """huggingface_hub's cache root: HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE, HF_HOME/hub, XDG_CACHE_HOME…"""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return Path(os.path.expandvars(os.path.expanduser(os.environ[var])))
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "huggingface")
    return Path(os.path.expandvars(os.path.expanduser(home))) / "hub"


def repo_folder_name(repo_type: str, repo_id: str) -> str:
    return "--".join([f"{repo_type}s", *repo_id.split("/")])


def _safe_relpath(path: str) -> str:
    parts = path.split("/")
    if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise UsageError(f"the hub sent an unsafe path {path!r}; refusing to write it", code="UnsafePath")
    return os.path.join(*parts)


class _Dirs:
    """Directories known to exist: one mkdir per directory, not per file."""

    def __init__(self) -> None:
        self.known: set[Path] = set()

    def ensure(self, path: Path) -> None:
        if path not in self.known:
            path.mkdir(parents=True, exist_ok=True)
            self.known.add(path)


class CacheLayout:
    def __init__(self, root: Path, repo_type: str, repo_id: str, commit: str) -> None:
        self.dirs = _Dirs()
        self.root = root
        self.folder = repo_folder_name(repo_type, repo_id)
        self.repo_dir = root / self.folder
        self.commit = commit
        self.snapshot = self.repo_dir / "snapshots" / commit
        self.dirs.ensure(self.repo_dir / "blobs")
        self.dirs.ensure(self.snapshot)
        self.dirs.ensure(root / ".locks" / self.folder)

    def blob(self, rf: RemoteFile) -> Path:
        return self.repo_dir / "blobs" / rf.etag

    def target(self, rf: RemoteFile) -> Path:
        return self.snapshot / _safe_relpath(rf.path)

    def check(self, rf: RemoteFile) -> str:
        target = self.target(rf)
        try:
            if target.stat().st_size == rf.size:  # follows the link to its blob
                return PRESENT
        except OSError:
            pass
        try:
            if self.blob(rf).stat().st_size == rf.size:
                return LINK
        except OSError:
            pass
        return FETCH

    def partial(self, rf: RemoteFile) -> Path:
        return self.repo_dir / "blobs" / f"{rf.etag}.hub.incomplete"

    def lock_path(self, rf: RemoteFile) -> Path:
        return self.root / ".locks" / self.folder / f"{rf.etag}.lock"

    def place(self, rf: RemoteFile, partial: Path) -> None:
        os.replace(partial, self.blob(rf))
        self.link(rf)

    def link(self, rf: RemoteFile) -> None:
        target = self.target(rf)
        self.dirs.ensure(target.parent)
        rel = os.path.relpath(self.blob(rf), target.parent)
        try:
            os.symlink(rel, target)
            return
        except FileExistsError:  # an older link (or file) there: replace it atomically
            pass
        tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.link")
        tmp.unlink(missing_ok=True)
        os.symlink(rel, tmp)
        os.replace(tmp, target)

    def verify_existing(self, rf: RemoteFile) -> bool:
        return False

    def finish(self, revision: str) -> Path:
        if revision and revision != self.commit:
            ref = self.repo_dir / "refs" / revision
            ref.parent.mkdir(parents=True, exist_ok=True)
            tmp = ref.with_name(f".{ref.name}.{os.getpid()}.tmp")
            tmp.write_text(self.commit)
            os.replace(tmp, ref)
        return self.snapshot


class LocalDirLayout:
    def __init__(self, root: Path, commit: str) -> None:
        self.dirs = _Dirs()
        self.root = root
        self.commit = commit
        self.meta_root = root / ".cache" / "huggingface"
        self.dirs.ensure(self.meta_root / "download")
        gitignore = self.meta_root / ".gitignore"
        if not gitignore.exists():
            gitignore.write_text("*")

    def target(self, rf: RemoteFile) -> Path:
        return self.root / _safe_relpath(rf.path)

    def _metadata(self, rf: RemoteFile) -> Path:
        return self.meta_root / "download" / f"{_safe_relpath(rf.path)}.metadata"

    def check(self, rf: RemoteFile) -> str:
        try:
            st = self.target(rf).stat()
        except OSError:
            return FETCH
        if st.st_size != rf.size:
            return FETCH
        try:
            _commit, etag, stamp = self._metadata(rf).read_text().splitlines()[:3]
            if etag == rf.etag and st.st_mtime - 1 <= float(stamp):
                return PRESENT
        except (OSError, ValueError):
            pass
        return VERIFY  # same size, no trustworthy record: hash it

    def verify_existing(self, rf: RemoteFile) -> bool:
        if not rf.matches(_hash_file(self.target(rf), h=rf.hasher()).hexdigest()):
            return False
        self._write_metadata(rf)
        return True

    def partial(self, rf: RemoteFile) -> Path:
        return self.meta_root / "download" / f"{rf.etag}.hub.incomplete"

    def lock_path(self, rf: RemoteFile) -> Path:
        return self.meta_root / "download" / f"{rf.etag}.hub.lock"

    def place(self, rf: RemoteFile, partial: Path) -> None:
        target = self.target(rf)
        self.dirs.ensure(target.parent)
        os.replace(partial, target)
        self._write_metadata(rf)

    def link(self, rf: RemoteFile, source: RemoteFile | None = None) -> None:
        """Another path with the same bytes as `source`, already placed: copy it (never hard-link:
        editing one file must not change the other)."""
        target = self.target(rf)
        self.dirs.ensure(target.parent)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.copy")
        shutil.copyfile(self.target(source or rf), tmp)
        os.replace(tmp, target)
        self._write_metadata(rf)

    def _write_metadata(self, rf: RemoteFile) -> None:
        meta = self._metadata(rf)
        self.dirs.ensure(meta.parent)
        meta.write_text(f"{self.commit}\n{rf.etag}\n{time.time()}\n")

    def finish(self, revision: str) -> Path:
        return self.root


@dataclass
class PullResult:
    path: Path
    commit: str
    revision: str
    files: int
    bytes: int
    stats: Stats


def pull(client: HubClient, repo_type: str, repo_id: str, *, revision: str | None = None,
         include: Iterable[str] = (), exclude: Iterable[str] = (), local_dir: str | Path | None = None,
         cache_dir: str | Path | None = None, workers: int = 8, limit_rate: float | None = None,
         progress: bool = True) -> PullResult:
    """Downloads the files of `repo_id` at `revision` (default branch) matching the globs into the
    huggingface_hub cache, or into `local_dir`. Every file is verified against its sha256 (or the
    blake3 the hub recorded beside a checked sha256) before it appears at its final path; files
    already there are not fetched again; an interrupted pull continues from the bytes on disk. Raises HubClientError on failure."""
    pages = client.manifest(repo_type, repo_id, revision, include=list(include), exclude=list(exclude),
                            limit=5000)
    first = next(pages)
    if first.get("notice"):  # a catalog entry whose files are not on the hub yet: nothing to pull
        raise HubClientError(f"nothing to pull: {first['notice']}", code="NotMirrored")
    commit, resolved_rev = first["commit"], first["revision"]
    if local_dir is not None:
        layout: CacheLayout | LocalDirLayout = LocalDirLayout(Path(local_dir), commit)
    else:
        layout = CacheLayout(Path(cache_dir) if cache_dir else hf_cache_dir(), repo_type, repo_id, commit)
    label = f"{'datasets/' if repo_type == DATASET else ''}{repo_id}"
    ctx = Context(client, limiter=RateLimiter(limit_rate), progress=Progress(f"pull {label}", show=progress))
    counted = [0, 0]  # files, bytes

    def remote_files() -> Iterator[RemoteFile]:
        for page in _chain(first, pages):
            for item in page["files"]:
                rf = RemoteFile.from_manifest(client, repo_type, repo_id, commit, item)
                counted[0] += 1
                counted[1] += rf.size
                yield rf

    _download_all(ctx, workers, layout, remote_files())
    files, total = counted
    if files == 0:
        print(f"warning: no files of {label} at {commit[:12]} match the filters", file=sys.stderr)
    path = layout.finish(resolved_rev)
    return PullResult(path, commit, resolved_rev, files, total, ctx.stats)


def _download_all(ctx: Context, workers: int, layout, files: Iterable[RemoteFile]) -> None:
    """Plans every file onto a pool of download workers and waits for them all. A failure while
    planning, or Ctrl-C, stops the workers at their next chunk."""
    sched = Downloads(ctx, workers)
    inflight: dict[str, tuple[Job, RemoteFile]] = {}
    try:
        for rf in files:
            if sched.failed:
                break
            _plan(ctx, sched, layout, rf, inflight)
        sched.close()
    except BaseException:
        sched.abort()
        raise
    finally:
        ctx.progress.close()


def _chain(first: dict, rest):
    yield first
    yield from rest


def _plan(ctx: Context, sched: Downloads, layout, rf: RemoteFile,
          inflight: dict[str, tuple[Job, RemoteFile]]) -> None:
    """Schedules what `rf` needs. Runs in the one planning thread: small files are checked and
    fetched entirely in a worker (filesystem calls here would queue behind the workers for the
    GIL); large files are checked here, since their byte ranges are planned here."""
    if rf.etag in inflight:  # same bytes as a file being fetched: place this path after it
        job, source = inflight[rf.etag]

        def follow() -> None:
            layout.link(rf) if isinstance(layout, CacheLayout) else layout.link(rf, source)
            ctx.stats.add(files_present=1, bytes_present=rf.size)  # no bytes of its own to fetch
        with job.lock:
            if not job.done:
                job.then.append(follow)
                return
        if job.error is None:
            follow()
            return
    if rf.size < 2 * ctx.segment_size:
        job: Job = FileJob(ctx, layout, rf)
    else:
        state = layout.check(rf)
        if state == PRESENT:
            ctx.stats.add(files_present=1, bytes_present=rf.size)
            return
        if state == LINK:
            layout.link(rf)
            ctx.stats.add(files_present=1, bytes_present=rf.size)
            return
        if state == VERIFY:
            job = FileJob(ctx, layout, rf)  # hashed first, fetched in one stream if it differs
        elif _from_shared_cache(ctx, layout, rf):
            return
        else:
            ctx.progress.add_total(rf.size)

            def place(p: Path) -> None:
                layout.place(rf, p)
                _to_shared_cache(layout, rf)
            job = DownloadJob(ctx, rf, layout.partial(rf), place, layout.lock_path(rf))
    inflight[rf.etag] = (job, rf)
    job.then.append(lambda: inflight.pop(rf.etag, None))  # keep the map as small as what is in flight
    sched.submit(job)


class FileJob(Job):
    """One file, start to end in one worker task: already there (done), same bytes in the cache
    (link), same size without a record (hash, --local-dir), or fetched in one stream, verified and
    placed — under the blob's lock."""

    def __init__(self, ctx: Context, layout, rf: RemoteFile) -> None:
        super().__init__()
        self.ctx, self.layout, self.rf = ctx, layout, rf
        self.then: list = []

    def tasks(self):
        return [self._run]

    def _run(self) -> None:
        ctx, layout, rf = self.ctx, self.layout, self.rf
        state = layout.check(rf)
        if state == LINK:
            layout.link(rf)
        if state in (PRESENT, LINK) or (state == VERIFY and layout.verify_existing(rf)):
            ctx.stats.add(files_present=1, bytes_present=rf.size)
            return
        if _from_shared_cache(ctx, layout, rf):
            return
        if rf.size < SMALL_FILE:
            ctx.progress.add_total(rf.size)
            partial = layout.partial(rf)
            tmp = partial.with_name(f"{rf.etag}.{os.getpid()}-{threading.get_ident()}.hub.incomplete")
            try:
                fetch_small(ctx, rf, tmp)
                layout.place(rf, tmp)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
            _to_shared_cache(layout, rf)
            ctx.stats.add(files_down=1)
            return
        lock_path = layout.lock_path(rf)
        with FileLock(lock_path) if lock_path is not None else contextlib.nullcontext():
            if lock_path is not None and layout.check(rf) == LINK:  # another process just fetched it
                layout.link(rf)
                ctx.stats.add(files_present=1, bytes_present=rf.size)
                return
            ctx.progress.add_total(rf.size)
            partial = layout.partial(rf)
            SingleDownload(ctx, rf, partial).run()
            layout.place(rf, partial)
        _to_shared_cache(layout, rf)
        ctx.stats.add(files_down=1)

    def complete(self) -> None:
        for fn in self.then:
            fn()


def _shared_cache(layout) -> blobcache.BlobCache | None:
    """The machine's cache of file bytes that mounts fill (storage.transfer.blobcache), if a mount made one."""
    return blobcache.shared_cache() if isinstance(layout, CacheLayout | LocalDirLayout) else None


def _from_shared_cache(ctx: Context, layout, rf: RemoteFile) -> bool:
    """Places rf from the shared cache if it holds its bytes: a hard link into the huggingface_hub
    cache (both keep blobs immutable), a copy into a --local-dir (whose files a user may edit)."""
    cache = _shared_cache(layout)
    if cache is None or cache.get(rf.sha256, rf.size) is None:
        return False
    tmp = layout.partial(rf).with_name(f"{rf.etag}.{os.getpid()}-{threading.get_ident()}.hub.shared")
    tmp.parent.mkdir(parents=True, exist_ok=True)
    if not cache.copy_out(rf.sha256, rf.size, tmp, link=isinstance(layout, CacheLayout)):
        return False
    layout.place(rf, tmp)
    ctx.stats.add(files_present=1, bytes_present=rf.size)
    return True


def _to_shared_cache(layout, rf: RemoteFile) -> None:
    """Adds a file this pull fetched (and verified) to the shared cache, so mounts need not fetch it."""
    cache = _shared_cache(layout)
    if cache is not None:
        if isinstance(layout, CacheLayout):
            cache.adopt(layout.blob(rf), rf.sha256, rf.size)
        else:
            cache.adopt_copy(layout.target(rf), rf.sha256, rf.size)


class PlainLayout:
    """Files to explicit local paths (`hub cp`, `hub://` get): no metadata, partials beside them."""

    def __init__(self, targets: dict[str, Path]) -> None:
        self.targets = targets

    def target(self, rf: RemoteFile) -> Path:
        return self.targets[rf.path]

    def check(self, rf: RemoteFile) -> str:
        return FETCH

    def partial(self, rf: RemoteFile) -> Path:
        t = self.target(rf)
        return t.with_name(f".{t.name}.{rf.etag[:16]}.hub.incomplete")

    def lock_path(self, rf: RemoteFile) -> Path | None:
        return None

    def place(self, rf: RemoteFile, partial: Path) -> None:
        os.replace(partial, self.target(rf))

    def link(self, rf: RemoteFile, source: RemoteFile | None = None) -> None:
        target = self.target(rf)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.copy")
        shutil.copyfile(self.target(source or rf), tmp)
        os.replace(tmp, target)

    def finish(self, revision: str) -> Path:
        return Path(".")


def download_files(client: HubClient, repo_type: str, repo_id: str, commit: str, items: list[dict],
                   targets: dict[str, Path], *, workers: int = 8, limit_rate: float | None = None,
                   progress: bool = False) -> Stats:
    """Fetches manifest `items` (of `commit`) to `targets` ({repo path: local path}) in parallel,
    each verified and resumable. Parent directories are created."""
    rfs = [RemoteFile.from_manifest(client, repo_type, repo_id, commit, item) for item in items]
    return download_remote_files(client, rfs, targets, workers=workers, limit_rate=limit_rate, progress=progress)


def download_remote_files(client: HubClient, files: list[RemoteFile], targets: dict[str, Path], *,
                          workers: int = 8, limit_rate: float | None = None, progress: bool = False) -> Stats:
    """Fetches `files` to `targets` ({RemoteFile.path: local path}) in parallel, each verified by its
    sha256 and resumable. Parent directories are created."""
    layout = PlainLayout(targets)
    for t in targets.values():
        t.parent.mkdir(parents=True, exist_ok=True)
    ctx = Context(client, limiter=RateLimiter(limit_rate), progress=Progress("download", show=progress))
    _download_all(ctx, workers, layout, files)
    return ctx.stats
