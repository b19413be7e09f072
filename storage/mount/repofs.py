"""A repo at one commit as a read-only FUSE filesystem.

Metadata first, bytes on read. At start up to four manifest pages (10,000 files each, with sha256,
size and a ready download URL) are asked for: a repo that fits — most models and many datasets —
is then known entirely and no listing ever goes to the hub again. A larger repo is listed a
directory at a time (the tree API, pages of 1,000) as the kernel asks, and a file's sha256 and URL
come from the manifest of its directory (one paged call for a directory without subdirectories, or
of the file alone). A commit never changes, so everything learnt is kept for the mount's life and the
kernel is told to cache entries, attributes and pages for an hour: a warm read never enters Python.

Listings go to the kernel with every entry's attributes (storage.mount.listing), so `ls -l` costs
no LOOKUP per entry. Listing a directory starts fetching its small files (PREFETCH_SIZE or less)
into the shared cache in the background, a bounded number at a time, because small files are where
per-request latency, not bandwidth, sets the pace; requests about names and attributes hold back
the start of new ones (Fetcher.metadata_request). Any attempt to change anything is EACCES.
"""
from __future__ import annotations

import errno
import json
import logging
import os
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import count
from urllib.parse import quote

from mfusepy import FuseOSError, Operations

from storage.client import HubClient, HubClientError, NotFoundError, api_prefix
from storage.mount.blocks import StreamingBlob
from storage.mount.common import (
    FUSE_CAP_READDIRPLUS_AUTO,
    FUSE_CAP_SPLICE_MOVE,
    FUSE_CAP_SPLICE_WRITE,
    READAHEAD,
    ErrorLog,
    fuse_op,
    malloc,
    reply_with_fd,
    reply_with_memory,
)
from storage.mount.fetch import WHOLE_FILE, Fetcher, Source

log = logging.getLogger("hub.mount")

MANIFEST_PAGE = 10_000
MANIFEST_PAGES = 4  # a repo of up to 40,000 files is known entirely at mount time
PREFETCH_SIZE = 1 << 20  # files this small are fetched when their directory is listed
PREFETCH_FILES = 20_000  # at most this many files per listing...
PREFETCH_BYTES = 1 << 30  # ...and this many bytes (and never more than a quarter of the cache)
URL_MARGIN = 0.8  # use a manifest URL for this share of its lifetime, then the hub's resolve URL
LISTINGS = 64  # directories whose entries are kept for the next page of their listing
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC


@dataclass(slots=True)
class Node:
    is_dir: bool
    size: int = 0
    sha256: str | None = None
    url: str | None = None
    url_until: float = 0.0
    children: dict[str, Node] | None = None  # a directory's entries, once listed
    has_subdirs: bool = False
    manifest_loaded: bool = False  # sha256 and URLs of every file directly inside are known
    blake3: str = ""  # what the manifest says the hub recorded (storage.client.digests)


@dataclass
class Handle:
    fd: int = -1
    blob: StreamingBlob | None = None
    size: int = 0


class RepoTree:
    """What the hub says is in the repo at `commit`, learnt lazily and kept."""

    def __init__(self, client: HubClient, repo_type: str, repo_id: str, commit: str) -> None:
        self.client = client
        self.repo_type, self.repo_id, self.commit = repo_type, repo_id, commit
        self.kind = "dataset" if repo_type == "dataset" else "model"
        self.root = Node(True)
        self.complete = False
        self.known: dict[str, tuple[dict, float]] = {}  # files the first manifest pages told about
        self._locks: dict[str, threading.Lock] = {}
        self._mu = threading.Lock()

    # --- loading ------------------------------------------------------------------------------------

    def load(self) -> None:
        """Up to MANIFEST_PAGES manifest pages: the whole tree if the repo fits in them, else what
        they said is kept for the directories listed later. Raises HubClientError (a repo or commit
        that cannot be read) before anything is mounted."""
        items: list[tuple[dict, float]] = []
        pages = self.client.manifest(self.repo_type, self.repo_id, self.commit, limit=MANIFEST_PAGE)
        for n, page in enumerate(pages, 1):
            if n == 1 and page.get("notice"):  # a catalog entry not mirrored yet: say why it is empty
                log.warning("%s", page["notice"])
            until = time.monotonic() + page.get("expires_in", 900) * URL_MARGIN
            items.extend((item, until) for item in page["files"])
            if page.get("next") and n >= MANIFEST_PAGES:
                # Too large to know at once: directories are listed as they are visited, and what
                # these pages said about their files is used then.
                self.known = {item["path"]: (item, until) for item, until in items}
                return
        for item, until in items:
            parts = item["path"].split("/")
            node = self.root
            for name in parts[:-1]:
                if node.children is None:
                    node.children = {}
                node.has_subdirs = True
                node = node.children.setdefault(name, Node(True))
            if node.children is None:
                node.children = {}
            node.children[parts[-1]] = Node(False, item["size"], item["sha256"], item["url"], until,
                                            blake3=item.get("blake3") or "")
        self._mark_listed(self.root)
        self.complete = True

    def _mark_listed(self, node: Node) -> None:
        stack = [node]
        while stack:
            n = stack.pop()
            if n.children is None:
                n.children = {}
            n.manifest_loaded = True
            stack.extend(c for c in n.children.values() if c.is_dir)

    def _lock(self, path: str) -> threading.Lock:
        with self._mu:
            return self._locks.setdefault(path, threading.Lock())

    def children(self, path: str, node: Node) -> dict[str, Node]:
        """The entries of directory `node` at `path` ('' for the root), listed once."""
        if node.children is not None:
            return node.children
        with self._lock(path):
            if node.children is None:
                out: dict[str, Node] = {}
                subdirs = False
                url = f"{api_prefix(self.repo_type)}/{self.repo_id}/tree/{self.commit}"
                if path:
                    url += "/" + quote(path, safe="")
                for page in self.client._pages(url, {"recursive": "false", "expand": "false"}):
                    for e in page:
                        name = e["path"].rsplit("/", 1)[-1]
                        if e["type"] == "directory":
                            out[name] = Node(True)
                            subdirs = True
                        else:
                            lfs = e.get("lfs") or {}
                            node_ = out[name] = Node(False, e.get("size", 0), lfs.get("oid"))
                            known = self.known.pop(e["path"], None)
                            if known is not None:
                                node_.sha256, node_.url, node_.url_until = known[0]["sha256"], known[0]["url"], known[1]
                                node_.blake3 = known[0].get("blake3") or ""
                node.has_subdirs = subdirs
                node.children = out
        return node.children

    def lookup(self, path: str) -> Node | None:
        """The node at `path` ('/a/b' as FUSE gives it), listing directories on the way."""
        node = self.root
        rel = ""
        for name in path.strip("/").split("/") if path.strip("/") else ():
            if not node.is_dir:
                return None
            node = self.children(rel, node).get(name)
            if node is None:
                return None
            rel = f"{rel}/{name}" if rel else name
        return node

    # --- file metadata --------------------------------------------------------------------------------

    def source(self, path: str, node: Node) -> Source:
        """Where the file's bytes are, with its sha256 (asking the hub if it is not known yet)."""
        rel = path.strip("/")
        if node.sha256 is None:  # (a file the tree API listed without LFS: its sha256 is in the manifest)
            self._learn(rel, node)
        now = time.monotonic()
        url = node.url if node.url and node.url_until > now else self.client.resolve_url(
            self.repo_type, self.repo_id, self.commit, rel)
        return Source(node.sha256, node.size, rel, url, fresh_url=lambda: self._fresh_url(rel, node),
                      blake3=node.blake3)

    def _learn(self, rel: str, node: Node) -> None:
        parent_path = rel.rsplit("/", 1)[0] if "/" in rel else ""
        parent = self.lookup(parent_path)
        if parent is not None and parent.children is not None and not parent.has_subdirs \
                and not parent.manifest_loaded:
            with self._lock(f"manifest:{parent_path}"):
                if not parent.manifest_loaded:
                    self._load_manifest(parent_path, parent)
            if node.sha256 is not None:
                return
        self._fresh_url(rel, node)

    def _load_manifest(self, path: str, node: Node) -> None:
        """sha256 and URLs of every file in directory `node` (which has no subdirectories)."""
        for page in self.client.manifest(self.repo_type, self.repo_id, self.commit, path=path, limit=MANIFEST_PAGE):
            until = time.monotonic() + page.get("expires_in", 900) * URL_MARGIN
            for item in page["files"]:
                child = node.children.get(item["path"].rsplit("/", 1)[-1]) if node.children else None
                if child is not None and not child.is_dir:
                    child.sha256, child.url, child.url_until = item["sha256"], item["url"], until
                    child.blake3 = item.get("blake3") or ""
        node.manifest_loaded = True

    def _fresh_url(self, rel: str, node: Node) -> str:
        page = next(self.client.manifest(self.repo_type, self.repo_id, self.commit, path=rel, limit=1))
        if not page["files"] or page["files"][0]["path"] != rel:
            raise NotFoundError(f"{rel!r} is not in {self.repo_id} at {self.commit[:12]}", code="EntryNotFound")
        item = page["files"][0]
        node.sha256, node.url, node.blake3 = item["sha256"], item["url"], item.get("blake3") or ""
        node.url_until = time.monotonic() + page.get("expires_in", 900) * URL_MARGIN
        return node.url


class RepoOps(Operations):
    """The FUSE operations of a read-only repo mount."""

    use_ns = True

    def __init__(self, tree: RepoTree, fetcher: Fetcher, *, mtime: float, timeout: float = 3600.0,
                 prefetch: bool = True, on_ready=None) -> None:
        self.tree = tree
        self.fetcher = fetcher
        self.timeout = timeout
        self.prefetch_enabled = prefetch
        self.on_ready = on_ready
        self.errors = ErrorLog()
        self.handles: dict[int, Handle] = {}
        self._ids = count(1)
        self.uid, self.gid = os.getuid(), os.getgid()
        self.mtime_ns = int(mtime * 1e9)
        self.prefetched_dirs: set[str] = set()
        self.listings: OrderedDict[str, list[tuple[bytes, Node]]] = OrderedDict()  # (name, node) of each entry
        self.listings_lock = threading.Lock()
        self.lookups = 0  # getattr calls: the kernel's LOOKUPs and GETATTRs (approximate: not locked)

    # --- set-up ---------------------------------------------------------------------------------------

    def init_with_config(self, conn, config) -> None:
        try:
            self._configure(conn, config)
        finally:
            if self.on_ready:
                self.on_ready()

    def _configure(self, conn, config) -> None:
        if config is not None:
            config.kernel_cache = 1  # pages stay cached across opens: files never change
            config.entry_timeout = config.attr_timeout = config.negative_timeout = self.timeout
        if conn is not None:
            splice = conn.capable & (FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE)
            conn.want |= splice  # read_buf's file descriptors go to the kernel by splice(2)
            # Every listing with attributes (storage.mount.listing), not only a directory's first
            # page: they cost nothing here, and each entry without them is a LOOKUP later.
            conn.want &= ~FUSE_CAP_READDIRPLUS_AUTO
            # The kernel takes min(its bdi's read-ahead, this) when it reads the INIT reply: the
            # bdi's is raised before that (storage.mount.commands), this must not cap it again.
            conn.max_readahead = max(conn.max_readahead, READAHEAD)
            log.debug("kernel connection: max_write %d, max_read %d, max_readahead %d, capable %#x, want %#x",
                      conn.max_write, conn.max_read, conn.max_readahead, conn.capable, conn.want)

    def destroy(self, path: str) -> None:
        log.info("unmounted; %s", json.dumps(self.fetcher.counters.as_dict()))
        self.fetcher.close()

    # --- metadata -----------------------------------------------------------------------------------

    def _node(self, path: str) -> Node:
        node = self.tree.lookup(path)
        if node is None:
            raise FuseOSError(errno.ENOENT)
        return node

    def _attrs(self, node: Node) -> dict:
        t = self.mtime_ns
        if node.is_dir:
            return {"st_mode": stat.S_IFDIR | 0o555, "st_nlink": 2, "st_size": 0, "st_uid": self.uid,
                    "st_gid": self.gid, "st_mtime": t, "st_ctime": t, "st_atime": t}
        return {"st_mode": stat.S_IFREG | 0o444, "st_nlink": 1, "st_size": node.size, "st_uid": self.uid,
                "st_gid": self.gid, "st_mtime": t, "st_ctime": t, "st_atime": t,
                "st_blocks": (node.size + 511) // 512, "st_blksize": 1 << 20}

    @fuse_op
    def getattr(self, path: str, fh=None) -> dict:
        self.lookups += 1
        self.fetcher.metadata_request()
        return self._attrs(self._node(path))

    @fuse_op
    def listing(self, path: str, fh, offset: int = 0) -> Iterator[tuple[bytes, dict]]:
        """The directory's entries from the offset-th on, with their attributes, for
        storage.mount.listing (which asks again for each page the kernel reads: the names are kept
        for the next call, the attributes made as the page takes them)."""
        self.fetcher.metadata_request()
        rel = path.strip("/")
        with self.listings_lock:
            entries = self.listings.get(rel)
            if entries is not None:
                self.listings.move_to_end(rel)
        if entries is None:
            node = self._node(path)
            if not node.is_dir:
                raise FuseOSError(errno.ENOTDIR)
            children = self.tree.children(rel, node)
            if self.prefetch_enabled and rel not in self.prefetched_dirs:
                self.prefetched_dirs.add(rel)
                self._prefetch(rel, children)
            entries = [(b".", node), (b"..", node)]
            entries.extend((name.encode("utf-8", "surrogateescape"), c) for name, c in children.items())
            with self.listings_lock:
                self.listings[rel] = entries
                while len(self.listings) > LISTINGS:
                    self.listings.popitem(last=False)
        return ((entries[i][0], self._attrs(entries[i][1])) for i in range(offset, len(entries)))

    @fuse_op
    def readdir(self, path: str, fh) -> list:
        return [(name.decode("utf-8", "surrogateescape"), attrs, 0) for name, attrs in self.listing(path, fh)]

    def _prefetch(self, rel: str, children: dict[str, Node]) -> None:
        small = [(name, c) for name, c in sorted(children.items()) if not c.is_dir and 0 < c.size <= PREFETCH_SIZE]
        if not small:
            return

        def sources() -> Iterator[Source]:
            for name, c in small:
                try:
                    yield self.tree.source(f"{rel}/{name}" if rel else name, c)
                except HubClientError as err:
                    log.debug("no prefetch of %s/%s: %s", rel, name, err)
                    return

        limit = min(PREFETCH_BYTES, self.fetcher.cache.limit // 4)
        self.fetcher.prefetch(sources(), max_files=PREFETCH_FILES, max_bytes=limit)

    @fuse_op
    def access(self, path: str, amode: int) -> int:
        self.fetcher.metadata_request()
        self._node(path)
        if amode & os.W_OK:
            raise FuseOSError(errno.EACCES)
        return 0

    @fuse_op
    def statfs(self, path: str) -> dict:
        return {"f_bsize": 1 << 20, "f_frsize": 4096, "f_blocks": 0, "f_bfree": 0, "f_bavail": 0, "f_namemax": 255}

    @fuse_op
    def getxattr(self, path: str, name: str, position: int = 0) -> bytes:
        node = self._node(path)
        if not name.startswith("user.hub."):
            self.fetcher.metadata_request()  # `ls -l` asks for security.selinux and POSIX ACLs of every file
        if name == "user.hub.commit":
            return self.tree.commit.encode()
        if name == "user.hub.stats" and path == "/":
            return json.dumps(self.fetcher.counters.as_dict() | {"lookups": self.lookups}).encode()
        if name == "user.hub.sha256" and not node.is_dir:
            return self.tree.source(path, node).sha256.encode()
        raise FuseOSError(errno.ENODATA)

    @fuse_op
    def listxattr(self, path: str) -> list[str]:
        self.fetcher.metadata_request()
        node = self._node(path)
        names = ["user.hub.commit"]
        if path == "/":
            names.append("user.hub.stats")
        if not node.is_dir:
            names.append("user.hub.sha256")
        return names

    # --- reading ------------------------------------------------------------------------------------

    @fuse_op
    def open(self, path: str, fi) -> int:
        if fi.flags & _WRITE_FLAGS:
            raise FuseOSError(errno.EACCES)
        node = self._node(path)
        if node.is_dir:
            raise FuseOSError(errno.EISDIR)
        handle = Handle(size=node.size)
        if node.size:
            fd = self.fetcher.cache.open(node.sha256, node.size) if node.sha256 else None
            if fd is not None:  # the common case, and the one to keep short: no Source, no hub
                self.fetcher.counters.add(cache_hits=1)
                handle.fd = fd
                fi.keep_cache = 1
                fh = next(self._ids)
                self.handles[fh] = handle
                fi.fh = fh
                return 0
            src = self.tree.source(path, node)
            if node.size < WHOLE_FILE:
                handle.fd = self.fetcher.open_whole(src)
            else:
                handle.blob = self.fetcher.stream(src)
        fi.keep_cache = 1
        fh = next(self._ids)
        self.handles[fh] = handle
        fi.fh = fh
        return 0

    @fuse_op
    def read(self, path: str, size: int, offset: int, fi) -> bytes:
        h = self.handles[fi.fh]
        if h.fd >= 0:
            return os.pread(h.fd, size, offset)
        if h.blob is None:
            return b""
        return h.blob.read(offset, size)

    @fuse_op
    def read_buf(self, path: str, bufpp, size: int, offset: int, fi) -> int:
        """As read, but the bytes go from the cached (or part) file to the kernel without Python."""
        h = self.handles[fi.fh]
        if h.fd >= 0:
            return reply_with_fd(bufpp, h.fd, offset, min(size, h.size - offset))
        if h.blob is None:
            return reply_with_fd(bufpp, -1, 0, 0)
        return reply_with_memory(bufpp, *h.blob.read_into(offset, size, malloc))

    @fuse_op
    def release(self, path: str, fi) -> int:
        h = self.handles.pop(fi.fh, None)
        if h is not None:
            if h.fd >= 0:
                os.close(h.fd)
            if h.blob is not None:
                self.fetcher.release(h.blob)
        return 0

    # --- everything else is a write: refused ------------------------------------------------------------

    def _refuse(self, *args) -> int:
        raise FuseOSError(errno.EACCES)

    create = mkdir = rmdir = unlink = rename = symlink = link = mknod = _refuse
    write = truncate = chmod = chown = setxattr = removexattr = _refuse

    def utimens(self, path: str, times=None) -> int:
        raise FuseOSError(errno.EACCES)
