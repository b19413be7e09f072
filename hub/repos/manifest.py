"""The manifest of a commit: every file under a path, with what a downloader needs to fetch and verify
it without asking the hub about each file — size, sha256, the HF ETag, and a ready download URL.

Pages resume from a cursor (the last path scanned) at O(depth) cost, so a repo of millions of files
is listed in bounded pages; URLs of a page are signed in one batch where the store signs URLs."""
from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from hub.content import blobs
from hub.content.models import Blob
from hub.errors import EntryNotFound, HubError
from hub.repos import trees
from hub.repos.models import Commit, Repo

MAX_LIMIT = 10_000
SCAN_FACTOR = 20  # entries scanned per file returned, at most, before a filtered page is cut short


@dataclass(frozen=True)
class FileItem:
    path: str
    entry: trees.Entry

    @property
    def etag(self) -> str:
        """The name huggingface_hub gives the blob in its cache: sha256 for LFS, git sha1 otherwise."""
        return self.entry.ref if self.entry.lfs else self.entry.git_oid


@dataclass(frozen=True)
class Page:
    files: list[FileItem]
    after: str | None  # cursor for the next page, None at the end


def _expand(patterns: Iterable[str]) -> list[str]:
    # As huggingface_hub's allow_patterns: "dir/" means everything below dir.
    return [p + "*" if p.endswith("/") else p for p in patterns if p]


def matches(path: str, include: list[str], exclude: list[str]) -> bool:
    if include and not any(fnmatch.fnmatchcase(path, p) for p in include):
        return False
    return not any(fnmatch.fnmatchcase(path, p) for p in exclude)


def list_files(repo: Repo, commit: Commit, path: str = "", *, include: Iterable[str] = (),
               exclude: Iterable[str] = (), after: str | None = None, limit: int = 1000) -> Page:
    """Files under `path` (a directory, or one file) at `commit`, in path order, after the cursor
    `after` (a path relative to `path`). Globs match the full path in the repo."""
    include, exclude = _expand(include), _expand(exclude)
    limit = max(1, min(limit, MAX_LIMIT))
    store = trees.NodeStore()
    root = trees.resolve(store, commit.tree, path)
    if root is None:
        raise EntryNotFound(f"{path!r} not found in {repo.repo_id} at {commit.oid[:12]}",
                            headers={"X-Repo-Commit": commit.oid})
    if not root.is_dir:
        files = [FileItem(path, root)] if after is None and matches(path, include, exclude) else []
        return Page(files, None)
    base = f"{path}/" if path else ""
    files: list[FileItem] = []
    scanned = 0
    last = None
    for p, entry in trees.walk(store, root.ref, base, after.split("/") if after else None):
        scanned += 1
        last = p[len(base):]
        if not entry.is_dir and matches(p, include, exclude):
            files.append(FileItem(p, entry))
            if len(files) >= limit:
                break
        if scanned >= limit * SCAN_FACTOR:
            break
    else:
        return Page(files, None)
    return Page(files, last)


def download_urls(files: list[FileItem], *, expires: int,
                  fallback: Callable[[FileItem], str]) -> tuple[list[str], dict[str, str]]:
    """One URL per file: presigned store URLs signed in one batch where the store signs URLs (bytes
    then bypass the hub), otherwise `fallback(file)` (the hub's own /resolve/<commit>/ URL); and
    sha256 -> blake3 of the blobs that have one (Blob.blake3: clients check downloads with it)."""
    if not files:
        return [], {}
    store = blobs.object_store()
    shas = list({f.entry.ref for f in files})
    bad = blobs.corrupt_shas().intersection(shas)
    if bad:
        path = next(f.path for f in files if f.entry.ref in bad)
        try:
            blobs.check_servable(next(iter(bad)))
        except HubError as err:
            err.message = f"{path}: {err.message}"
            raise
    keys: dict[str, str] = {}
    remote: set[str] = set()
    b3: dict[str, str] = {}
    for i in range(0, len(shas), 500):
        for sha, key, far, digest in Blob.objects.filter(pk__in=shas[i:i + 500]).values_list(
                "sha256", "key", "remote", "blake3"):
            keys[sha] = key
            if far:
                remote.add(sha)
            if digest:
                b3[sha] = digest
    urls = store.presign_get_many([keys.get(f.entry.ref) or blobs.blob_key(f.entry.ref) for f in files],
                                  expires=expires)
    if urls is None:
        return [fallback(f) for f in files], b3
    # Bytes still at an upstream come through the hub, which fetches them on this first download.
    return [fallback(f) if f.entry.ref in remote else url for f, url in zip(files, urls, strict=True)], b3
