"""The `hub://` fsspec filesystem (registered through the `fsspec.specs` entry point).

    hub://datasets/NS/NAME[@REV]/PATH    hub://models/NS/NAME[@REV]/PATH    hub://volume/PATH

Read-only for repos; read-write for the caller's volume (a file opened "wb" is buffered in a local
temporary file and written on close, atomically: readers see the old bytes or the new, never a part). A thin adapter over storage.client: it never needs store credentials; bytes
come through the URLs the hub hands out (presigned store URLs on S3, the hub's own /resolve/ URLs
otherwise). Each revision is resolved to a commit once per filesystem object and pinned there, so
a branch that moves under a reader does not change what it reads (`invalidate_cache()` unpins).

    import pandas as pd
    pd.read_csv("hub://datasets/alice/iris/iris.csv")          # HUB_ENDPOINT / HUB_TOKEN from the env
    fs = fsspec.filesystem("hub", endpoint="https://hub", token="...")
"""
from __future__ import annotations

import errno
import hashlib
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from glob import has_magic
from pathlib import Path

from fsspec.callbacks import DEFAULT_CALLBACK
from fsspec.implementations.local import trailing_sep
from fsspec.spec import AbstractBufferedFile, AbstractFileSystem, _Cached
from fsspec.utils import other_paths

from storage.client import (
    REPO_TYPES,
    HubClient,
    HubClientError,
    HubPath,
    NotFoundError,
    UsageError,
    errno_of,
    parse_hub_path,
    resolve_settings,
)
from storage.fs import volume
from storage.transfer.engine import Stats

URL_MARGIN = 0.8  # refresh a presigned URL after this share of its lifetime


@dataclass(frozen=True)
class ResolvedPath:
    """A hub path with its revision pinned to a commit."""

    repo_type: str
    repo_id: str
    revision: str | None  # as the user spelled it (None: default branch)
    commit: str
    path: str  # inside the repo, '' for the root

    @property
    def root(self) -> str:
        rev = f"@{self.revision}" if self.revision else ""
        return f"{self.repo_type}s/{self.repo_id}{rev}"

    def name(self, path: str) -> str:
        return f"{self.root}/{path}" if path else self.root


def _os_error(err: HubClientError, path: str) -> OSError:
    """The built-in exception fsspec callers expect: ValueError for bad input on our side, else an
    OSError with the errno of storage.client.errors.errno_of (OSError picks the subclass:
    FileNotFoundError, PermissionError, FileExistsError...)."""
    if isinstance(err, UsageError):
        return ValueError(err.message)
    return OSError(errno_of(err), err.message, path)


class _EnvCached(_Cached):
    """Instances are cached by fsspec per arguments; the endpoint and token from the environment
    count as arguments, so a changed HUB_ENDPOINT or HUB_TOKEN gives a new filesystem."""

    def __call__(cls, *args, **kwargs):
        if kwargs.get("endpoint") is None or "token" not in kwargs:
            settings = resolve_settings(kwargs.get("endpoint"), kwargs.get("token"))
            kwargs["endpoint"] = settings.endpoint
            kwargs.setdefault("token", settings.token or False)
        return super().__call__(*args, **kwargs)


class HubFileSystem(AbstractFileSystem, metaclass=_EnvCached):
    protocol = "hub"
    root_marker = ""
    default_block_size = 4 * 2**20
    default_cache_type = "blockcache"  # LRU of blocks: good for parquet's jumps and for sequential reads

    def __init__(self, endpoint: str | None = None, token: str | bool | None = None, *, workers: int = 8,
                 **storage_options) -> None:
        super().__init__(endpoint=endpoint, token=token, **storage_options)
        self.client = HubClient(endpoint, token)
        self.workers = workers
        self._pins: dict[tuple[str, str, str], str] = {}
        self._items: dict[tuple[str, str, str, str], tuple[dict, float]] = {}
        self._lock = threading.Lock()
        self._collect = threading.local()

    # --- paths --------------------------------------------------------------------------------------

    @classmethod
    def _strip_protocol(cls, path):
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        path = str(path)
        if path.startswith("hub://"):
            path = path[len("hub://"):]
        return path.strip("/")

    def _parse(self, path: str) -> HubPath:
        try:
            hp = parse_hub_path(self._strip_protocol(path))
        except UsageError as err:
            raise ValueError(err.message) from None
        if hp.kind == "volume":
            raise ValueError(f"{path!r} is a volume path, not a repo path")
        return hp

    @staticmethod
    def _volume(path: str) -> str | None:
        """The path inside the volume ('' for its root) if `path` is hub://volume[/...], else None."""
        path = HubFileSystem._strip_protocol(path)
        if path == "volume" or path.startswith("volume/"):
            return path[len("volume"):].strip("/")
        return None

    def resolve_path(self, path: str) -> ResolvedPath:
        """The path with its revision pinned: the first call for a (repo, revision) asks the hub
        for the commit; later ones reuse it for the lifetime of this filesystem."""
        hp = self._parse(path)
        key = (hp.repo_type, hp.repo_id, hp.revision or "")
        commit = self._pins.get(key)
        if commit is None:
            try:
                commit = self.client.resolve_commit(hp.repo_type, hp.repo_id, hp.revision)
            except HubClientError as err:
                raise _os_error(err, path) from err
            with self._lock:
                commit = self._pins.setdefault(key, commit)
        return ResolvedPath(hp.repo_type, hp.repo_id, hp.revision, commit, hp.path)

    def invalidate_cache(self, path: str | None = None) -> None:
        """Forgets listings (and, for the whole filesystem, the pinned revisions and URLs)."""
        if path is None:
            self.dircache.clear()
            self._pins.clear()
            self._items.clear()
        else:
            path = self._strip_protocol(path)
            self.dircache.pop(path, None)
            while path:
                path = self._parent(path)
                self.dircache.pop(path, None)

    # --- metadata -----------------------------------------------------------------------------------

    def _entry_info(self, r: ResolvedPath, e: dict) -> dict:
        info = {"name": r.name(e["path"]), "size": e.get("size", 0) if e["type"] == "file" else 0,
                "type": "file" if e["type"] == "file" else "directory", "oid": e.get("oid")}
        if e.get("lfs"):
            info["lfs"] = e["lfs"]
            info["sha256"] = e["lfs"].get("oid")
        return info

    def _item_info(self, r: ResolvedPath, item: dict) -> dict:
        return {"name": r.name(item["path"]), "size": item["size"], "type": "file", "sha256": item["sha256"],
                "etag": item["etag"], "lfs": item["lfs"]}

    def _root_listing(self, path: str) -> list[dict] | None:
        """'' , 'datasets', 'models', 'datasets/NS': above the level of a single repo."""
        parts = [p for p in path.split("/") if p]
        if not parts:
            return [{"name": f"{t}s", "size": 0, "type": "directory"} for t in REPO_TYPES]
        if parts[0] not in ("datasets", "models") or len(parts) > 2:
            return None
        params = {"author": parts[1]} if len(parts) == 2 else {}
        try:
            repos = self.client.json("GET", f"api/{parts[0]}", params=params | {"limit": 1000})
        except HubClientError as err:
            raise _os_error(err, path) from err
        return [{"name": f"{parts[0]}/{r['id']}", "size": 0, "type": "directory"} for r in repos]

    def ls(self, path: str, detail: bool = True, refresh: bool = False, **kwargs):
        path = self._strip_protocol(path)
        if not refresh and path in self.dircache:
            out = self.dircache[path]
        elif self._volume(path) is not None:
            try:
                out = [_volume_info(e) for e in volume.ls(self.client, self._volume(path))]
            except HubClientError as err:
                if err.code != "NotADirectory":
                    raise _os_error(err, path) from err
                info = self.info(path)  # a file: ls of a file lists the file
                return [info] if detail else [info["name"]]
            self.dircache[path] = out
        else:
            above = self._root_listing(path)
            if above is not None:
                out = above
            else:
                r = self.resolve_path(path)
                try:
                    entries = list(self.client.list_tree(r.repo_type, r.repo_id, r.commit, r.path))
                except NotFoundError as err:
                    if err.code == "EntryNotFound" and r.path:
                        info = self.info(path)  # a file: ls of a file lists the file
                        return [info] if detail else [info["name"]]
                    raise _os_error(err, path) from err
                except HubClientError as err:
                    raise _os_error(err, path) from err
                out = [self._entry_info(r, e) for e in entries]
            self.dircache[path] = out
        return out if detail else [e["name"] for e in out]

    def info(self, path: str, **kwargs) -> dict:
        path = self._strip_protocol(path)
        vpath = self._volume(path)
        if vpath is not None:
            for e in self.dircache.get(self._parent(path), ()):
                if e["name"] == path:
                    return e
            try:
                return _volume_info(volume.stat(self.client, vpath))
            except HubClientError as err:
                raise _os_error(err, path) from err
        if self._root_listing_level(path):
            return {"name": path, "size": 0, "type": "directory"}
        r = self.resolve_path(path)
        if not r.path:
            return {"name": path, "size": 0, "type": "directory", "commit": r.commit}
        parent = self._parent(path)
        for e in self.dircache.get(parent, ()):
            if e["name"] == path:
                return e
        cached = self._items.get((r.repo_type, r.repo_id, r.commit, r.path))
        if cached is not None:
            return self._item_info(r, cached[0])
        try:
            found = self.client.paths_info(r.repo_type, r.repo_id, r.commit, [r.path])
        except HubClientError as err:
            raise _os_error(err, path) from err
        if not found:
            raise FileNotFoundError(errno.ENOENT, f"{r.path!r} not found in {r.repo_id} at {r.commit[:12]}", path)
        info = self._entry_info(r, found[0])
        info["name"] = path
        return info

    def modified(self, path: str) -> datetime:
        """When a volume file was last written (fsspec's API; repo files are versioned: use the
        commit's date)."""
        mtime = self.info(path).get("mtime")
        if mtime is None:
            raise NotImplementedError(f"{path}: no modification time (only volume entries have one)")
        return datetime.fromtimestamp(mtime, tz=UTC)

    def _root_listing_level(self, path: str) -> bool:
        parts = [p for p in path.split("/") if p]
        return not parts or (parts[0] in ("datasets", "models") and len(parts) <= 2)

    def find(self, path: str, maxdepth: int | None = None, withdirs: bool = False, detail: bool = False, **kwargs):
        """Everything below `path` from the hub's manifest: one paged listing with sha256, whatever
        the depth (millions of files cost pages, not one request per directory)."""
        path = self._strip_protocol(path)
        if maxdepth is not None or self._root_listing_level(path) or self._volume(path) is not None:
            return super().find(path, maxdepth=maxdepth, withdirs=withdirs, detail=detail, **kwargs)
        r = self.resolve_path(path)
        try:
            items = self._manifest(r)
        except FileNotFoundError:
            items = []
        out: dict[str, dict] = {}
        if len(items) == 1 and items[0]["path"] == r.path and r.path:
            out[path] = self._item_info(r, items[0]) | {"name": path}
        else:
            base = f"{r.path}/" if r.path else ""
            if withdirs:
                if items or not r.path:
                    out[path] = {"name": path, "size": 0, "type": "directory"}
                for item in items:
                    parts = item["path"][len(base):].split("/")[:-1]
                    for i in range(1, len(parts) + 1):
                        d = r.name(base + "/".join(parts[:i]))
                        out.setdefault(d, {"name": d, "size": 0, "type": "directory"})
            for item in items:
                info = self._item_info(r, item)
                out[info["name"]] = info
        names = sorted(out)
        return {n: out[n] for n in names} if detail else names

    def _manifest(self, r: ResolvedPath, limit: int = 5000, *, first_page: bool = False) -> list[dict]:
        """Manifest items under r.path at the pinned commit; remembered with their URLs."""
        items = []
        try:
            for page in self.client.manifest(r.repo_type, r.repo_id, r.commit, path=r.path, limit=limit):
                until = time.monotonic() + page.get("expires_in", 900) * URL_MARGIN
                for item in page["files"]:
                    items.append(item)
                    self._items[(r.repo_type, r.repo_id, r.commit, item["path"])] = (item, until)
                if first_page:
                    break
        except HubClientError as err:
            raise _os_error(err, r.name(r.path)) from err
        return items

    def _item(self, path: str, *, fresh: bool = False) -> tuple[ResolvedPath, dict]:
        """The manifest item of one file (size, sha256, a download URL that is still valid)."""
        r = self.resolve_path(path)
        key = (r.repo_type, r.repo_id, r.commit, r.path)
        cached = self._items.get(key)
        if cached is not None and not fresh and cached[1] > time.monotonic():
            return r, cached[0]
        if not r.path:
            raise IsADirectoryError(errno.EISDIR, "a repo is a directory", path)
        items = self._manifest(r, limit=1, first_page=True)
        if not items or items[0]["path"] != r.path:
            self.info(path)  # FileNotFoundError if nothing is there
            raise IsADirectoryError(errno.EISDIR, f"{r.path!r} is a directory", path)
        return r, items[0]

    def ukey(self, path: str) -> str:
        if self._volume(path) is not None:
            return f"volume:{self.info(path).get('etag')}"
        r, item = self._item(path)
        return f"{r.commit}:{item['sha256']}"

    def checksum(self, path: str) -> int:
        return int(self.ukey(path).split(":")[1][:16], 16)

    # --- reading ------------------------------------------------------------------------------------

    def _read_range(self, path: str, start: int, end: int, etag: str | None = None) -> bytes:
        """Bytes [start, end) of the file, in one ranged GET straight from where the bytes are. For a
        volume file opened earlier, `etag` pins the version that was opened."""
        vpath = self._volume(path)
        if vpath is not None:
            try:
                return volume.read_range(self.client, vpath, start, end, etag=etag)
            except HubClientError as err:
                if err.status == 412:
                    raise OSError(errno.ESTALE, f"{path} was replaced while it was being read; open it again",
                                  path) from err
                raise _os_error(err, path) from err
        r, item = self._item(path)
        end = min(end, item["size"])
        if start >= end:
            return b""
        headers = {"Range": f"bytes={start}-{end - 1}"}
        for attempt in (0, 1):
            try:
                resp = self.client.request("GET", item["url"], headers=headers)
                break
            except HubClientError as err:
                if attempt == 0 and err.status in (400, 403):  # an expired presigned URL: ask again
                    r, item = self._item(path, fresh=True)
                    continue
                raise _os_error(err, path) from err
        data = resp.data
        if resp.status == 200 and (start, end) != (0, item["size"]):
            data = data[start:end]  # a server that ignored the range
        if len(data) != end - start:
            raise OSError(errno.EIO, f"short read: {len(data)} of {end - start} bytes", path)
        return data

    def cat_file(self, path: str, start: int | None = None, end: int | None = None, **kwargs) -> bytes:
        if self._volume(path) is not None:
            info = self.info(path)
            if info["type"] != "file":
                raise IsADirectoryError(errno.EISDIR, "a directory", path)
            item = {"size": info["size"], "sha256": info["etag"]}
        else:
            r, item = self._item(path)
        size = item["size"]
        start = 0 if start is None else (max(0, size + start) if start < 0 else start)
        end = size if end is None else (max(0, size + end) if end < 0 else min(end, size))
        data = self._read_range(path, start, end)
        if (start, end) == (0, size) and hashlib.sha256(data).hexdigest() != item["sha256"]:
            raise OSError(errno.EIO, f"{path}: the bytes received do not match their sha256", path)
        return data

    def _open(self, path: str, mode: str = "rb", block_size=None, autocommit: bool = True, cache_options=None,
              cache_type=None, **kwargs):
        if self._volume(path) is not None:
            if mode in ("wb", "xb"):
                if mode == "xb" and self.exists(path):  # checked again, atomically, when it is written
                    raise FileExistsError(errno.EEXIST, "exists", path)
                return VolumeWriteFile(self, path, mode=mode, block_size=block_size or self.default_block_size)
            if mode != "rb":
                raise NotImplementedError(f"mode {mode!r}: hub://volume files open 'rb', 'wb' or 'xb'")
            info = self.info(path)
            if info["type"] != "file":
                raise IsADirectoryError(errno.EISDIR, "a directory", path)
            return HubFile(self, path, mode=mode, block_size=block_size or self.default_block_size,
                           cache_type=cache_type or self.default_cache_type, cache_options=cache_options,
                           size=info["size"], **kwargs)
        if mode != "rb":
            raise NotImplementedError("hub:// repos are read-only: publish with `hub push DIR REPO`")
        r, item = self._item(path)
        return HubFile(self, path, mode=mode, block_size=block_size or self.default_block_size,
                       cache_type=cache_type or self.default_cache_type, cache_options=cache_options,
                       size=item["size"], **kwargs)

    def get_file(self, rpath: str, lpath: str, callback=DEFAULT_CALLBACK, outfile=None, **kwargs) -> None:
        """One file to a local path, verified by sha256 before it appears there (and resumable)."""
        pending = getattr(self._collect, "pairs", None)
        if pending is not None:  # inside get(): collected and fetched in parallel
            pending.append((rpath, lpath))
            return
        if self.isdir(rpath):
            os.makedirs(lpath, exist_ok=True)
            return
        if outfile is not None:
            outfile.write(self.cat_file(rpath))
            return
        self._download([(rpath, lpath)])

    def get(self, rpath, lpath, recursive: bool = False, callback=DEFAULT_CALLBACK, maxdepth=None, **kwargs):
        """As fsspec's get (same path rules), but the files are fetched in parallel."""
        self._collect.pairs = pairs = []
        try:
            super().get(rpath, lpath, recursive=recursive, callback=callback, maxdepth=maxdepth, **kwargs)
        finally:
            self._collect.pairs = None
        files = []
        for rp, lp in pairs:
            if self.isdir(rp):
                os.makedirs(lp, exist_ok=True)
            else:
                files.append((rp, lp))
        self._download(files)

    def _download(self, pairs: list[tuple[str, str]]) -> Stats:
        """Remote files to local paths, in parallel, each verified by sha256 before it appears; a file
        wanted at several local paths is fetched once."""
        from storage.transfer.pull import download_files

        first: dict[str, str] = {}
        again: list[tuple[str, str]] = []
        for rp, lp in pairs:
            rp = self._strip_protocol(rp)
            if rp in first:
                again.append((first[rp], lp))
            else:
                first[rp] = lp
        stats = Stats()
        groups: dict[tuple[str, str, str], tuple[list[dict], dict[str, Path]]] = {}
        entries, vtargets = [], {}
        for rp, lp in first.items():
            if self._volume(rp) is not None:
                info = self.info(rp)
                entries.append({"path": self._volume(rp), "size": info["size"], "etag": info["etag"]})
                vtargets[entries[-1]["path"]] = Path(lp)
                continue
            r, item = self._item(rp)
            items, targets = groups.setdefault((r.repo_type, r.repo_id, r.commit), ([], {}))
            if item["path"] in targets:  # the same file spelled another way (a branch and its commit)
                again.append((str(targets[item["path"]]), lp))
                continue
            items.append(item)
            targets[item["path"]] = Path(lp)
        for (repo_type, repo_id, commit), (items, targets) in groups.items():
            try:
                got = download_files(self.client, repo_type, repo_id, commit, items, targets, workers=self.workers)
            except HubClientError as err:
                raise _os_error(err, f"{repo_type}s/{repo_id}") from err
            stats.add(files_down=got.files_down, bytes_down=got.bytes_down)
        if entries:
            for t in vtargets.values():
                t.parent.mkdir(parents=True, exist_ok=True)
            try:
                got = volume.download(self.client, entries, vtargets, workers=self.workers)
            except HubClientError as err:
                raise _os_error(err, "volume") from err
            stats.add(files_down=got.files_down, bytes_down=got.bytes_down)
        for done, lp in again:
            os.makedirs(os.path.dirname(lp) or ".", exist_ok=True)
            shutil.copyfile(done, lp)
        return stats

    # --- writing: the volume only ---------------------------------------------------------------------

    def _writable(self, path: str) -> str:
        vpath = self._volume(path)
        if vpath is None:
            raise NotImplementedError("hub:// repos are read-only: publish with `hub push DIR REPO`")
        return vpath

    def _invalidate_volume(self, path: str) -> None:
        """Forgets the listings of `path`, of everything below it and of its parents."""
        path = self._strip_protocol(path)
        for key in [k for k in self.dircache if k.startswith(f"{path}/")]:
            self.dircache.pop(key, None)
        self.invalidate_cache(path)

    def _call(self, path: str, fn, *args, **kwargs):
        try:
            return fn(self.client, *args, **kwargs)
        except HubClientError as err:
            raise _os_error(err, path) from err
        finally:
            self._invalidate_volume(path)

    def put_file(self, lpath, rpath, callback=DEFAULT_CALLBACK, mode="overwrite", **kwargs) -> None:
        """One local file to the volume, atomically. mode="create": FileExistsError if rpath exists
        (checked by the hub when the file is written, not before)."""
        vpath = self._writable(rpath)
        if os.path.isdir(lpath):
            self.makedirs(rpath, exist_ok=True)
            return
        create = mode == "create"
        try:
            volume.upload(self.client, lpath, vpath, if_none_match=create, workers=self.workers)
        except HubClientError as err:
            raise _os_error(err, rpath) from err  # PreconditionFailed (mode="create"): FileExistsError
        finally:
            self._invalidate_volume(rpath)

    def pipe_file(self, path, value, mode="overwrite", **kwargs) -> None:
        with self.open(path, "xb" if mode == "create" else "wb") as fh:
            fh.write(value)

    def mkdir(self, path, create_parents: bool = True, **kwargs) -> None:
        """Creates a directory (and, with create_parents, its missing parents); FileExistsError if
        something is already there, as on a local disk."""
        vpath = self._writable(path)
        if not vpath or not self._call(path, volume.mkdir, vpath, parents=create_parents):
            raise FileExistsError(errno.EEXIST, "a directory is already there", path)

    def makedirs(self, path, exist_ok: bool = False) -> None:
        vpath = self._writable(path)
        created = bool(vpath) and self._call(path, volume.mkdir, vpath, parents=True)
        if not created and not exist_ok:
            raise FileExistsError(errno.EEXIST, "a directory is already there", path)

    def rm_file(self, path) -> None:
        self._call(path, volume.delete, self._writable(path))

    def rmdir(self, path) -> None:
        """Removes an empty directory (OSError ENOTEMPTY otherwise); never a file."""
        vpath = self._writable(path)
        if self.info(path)["type"] != "directory":
            raise NotADirectoryError(errno.ENOTDIR, "not a directory", path)
        self._call(path, volume.delete, vpath)

    def rm(self, path, recursive: bool = False, maxdepth=None) -> None:
        """Deletes files and, with recursive, directories: each in one request, whatever lies below.
        Globs are expanded. With maxdepth, only what lies that deep goes, and a directory still
        holding something deeper stays (OSError ENOTEMPTY)."""
        paths = [self._strip_protocol(p) for p in (path if isinstance(path, list) else [path])]
        if maxdepth is not None:
            paths, recursive = self.expand_path(paths, recursive=recursive, maxdepth=maxdepth)[::-1], False
        elif any(has_magic(p) for p in paths):
            kept: set[str] = set()
            for p in self.expand_path(paths, recursive=recursive):  # sorted: directories before their contents
                if not any(a in kept for a in _ancestors(p)):
                    kept.add(p)
            paths = sorted(kept)
        for p in paths:
            vpath = self._writable(p)
            if not vpath:
                raise PermissionError(errno.EPERM, "refusing to remove the root of the volume", p)
            self._call(p, volume.delete, vpath, recursive=recursive)

    def _pairs(self, path1, path2) -> list[tuple[str, str]]:
        """(source, target) pairs by fsspec's rules for cp, without descending into directories."""
        if isinstance(path1, list) and isinstance(path2, list):
            return list(zip(path1, path2, strict=True))
        paths1 = self.expand_path(path1)
        single = isinstance(path1, str)
        into_dir = isinstance(path2, str) and (trailing_sep(path2) or self.isdir(path2))
        exists = single and ((has_magic(path1) and len(paths1) == 1)
                             or (not has_magic(path1) and into_dir and not trailing_sep(path1)))
        return list(zip(paths1, other_paths(paths1, path2, exists=exists, flatten=not single), strict=True))

    def mv(self, path1, path2, recursive: bool = False, maxdepth=None, **kwargs) -> None:
        """Renames inside the volume: metadata only, whatever the size, a directory with everything
        below it (so recursive and maxdepth change nothing). Targets follow cp's rules: into path2
        if it is a directory or ends with '/'; a file at a target is replaced."""
        for src, dst in self._pairs(path1, path2):
            src, dst = self._strip_protocol(src), self._strip_protocol(dst)
            if src != dst:
                self._call(src, volume.move, self._writable(src), self._writable(dst), overwrite=True)
                self._invalidate_volume(dst)

    def cp_file(self, path1, path2, **kwargs) -> None:
        """One file of a repo or of the volume to the volume (a directory: made there). By hash when
        the hub allows it: no byte moves (see storage.fs.volume.copy_in)."""
        pending = getattr(self._collect, "copies", None)
        if pending is not None:  # inside copy(): collected and copied several at a time
            pending.append((path1, path2))
            return
        self._copy_in([(path1, path2)])

    def copy(self, path1, path2, recursive: bool = False, maxdepth=None, on_error=None, **kwargs) -> None:
        """As fsspec's copy (same path rules), but the files go together, several at a time."""
        self._collect.copies = pairs = []
        try:
            super().copy(path1, path2, recursive=recursive, maxdepth=maxdepth, on_error=on_error, **kwargs)
        finally:
            self._collect.copies = None
        self._copy_in(pairs, missing_ok=on_error == "ignore" or (on_error is None and recursive))

    def _copy_in(self, pairs: list[tuple[str, str]], *, missing_ok: bool = False) -> None:
        sources, names = [], {}
        try:
            for i, (p1, p2) in enumerate(pairs):
                dst = self._writable(p2)
                try:
                    info = self.info(p1)
                except FileNotFoundError:
                    if missing_ok:
                        continue
                    raise
                if info["type"] == "directory":
                    self.makedirs(p2, exist_ok=True)
                    continue
                sha256 = info.get("sha256") if self._volume(p1) is not None else self._item(p1)[1]["sha256"]
                names[str(i)] = p1
                sources.append(volume.CopySource(str(i), dst, info["size"], sha256))

            def fetch(batch: list[volume.CopySource], targets: dict[str, Path]) -> Stats:
                return self._download([(names[s.key], str(targets[s.key])) for s in batch])

            volume.copy_in(self.client, sources, fetch, workers=self.workers)
        except HubClientError as err:
            raise _os_error(err, pairs[0][1] if len(pairs) == 1 else "volume") from err
        finally:
            for _, p2 in pairs:
                self._invalidate_volume(p2)

    def touch(self, path, truncate: bool = True, **kwargs) -> None:
        self._writable(path)
        if truncate or not self.exists(path):
            self.pipe_file(path, b"")


def _ancestors(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def _volume_info(e: dict) -> dict:
    name = f"volume/{e['path']}" if e["path"] else "volume"
    # mtime as a Unix time, as fsspec's local filesystem gives it: pyarrow (pd.read_parquet) and
    # others take a number or a datetime, not the API's ISO text.
    mtime = datetime.fromisoformat(e["mtime"].replace("Z", "+00:00")).timestamp() if e.get("mtime") else None
    return {"name": name, "size": e["size"] if e["type"] == "file" else 0, "type": e["type"], "etag": e["etag"],
            "sha256": e["etag"], "mtime": mtime}


class HubFile(AbstractBufferedFile):
    def _fetch_range(self, start: int, end: int) -> bytes:
        # Every block comes from the version opened: a volume file replaced meanwhile raises ESTALE.
        return self.fs._read_range(self.path, start, end, etag=(self.details or {}).get("etag"))


class VolumeWriteFile(AbstractBufferedFile):
    """A volume file opened "wb" (or "xb": create only): bytes go to a local temporary file, written
    to the volume on close() in one atomic upload. Leaving a `with` block by an exception writes
    nothing."""

    def _initiate_upload(self) -> None:
        self._tmp = tempfile.NamedTemporaryFile(prefix="hub-volume-", suffix=".part", delete=False)

    def _upload_chunk(self, final: bool = False) -> bool:
        self._tmp.write(self.buffer.getvalue())
        if final:
            self._tmp.close()
            try:
                self.fs.put_file(self._tmp.name, self.path, mode="create" if self.mode == "xb" else "overwrite")
            finally:
                os.unlink(self._tmp.name)
        return True

    def discard(self) -> None:
        tmp = getattr(self, "_tmp", None)
        if tmp is not None:
            tmp.close()
            if os.path.exists(tmp.name):
                os.unlink(tmp.name)

    def __exit__(self, exc_type, *args) -> None:
        if exc_type is not None and not self.closed:
            self.discard()
            self.closed = True
            return
        self.close()
