"""The caller's volume over the native API (/api/volume/): listing, metadata, reads, writes. Imports no
Django; used by `hub ls/cp/rm/mv/mkdir volume/...` and by `hub://volume/...`.

Writes: a file below PUT_THRESHOLD is one PUT with its sha256; a larger one is a resumable upload
session whose parts go in parallel (straight to the store on S3) while a hasher thread reads the file
once alongside, and the sha256 is given at completion. The session's id is kept in the config
directory until it completes, so the same copy run again sends only the parts the session lacks. Reads go through the hub's files/ URL, which
redirects to a presigned store URL on S3; downloads reuse the verified, resumable machinery of pulls.
"""
from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

import urllib3

from storage.client import HubClient, HubClientError, IntegrityError, config_dir
from storage.progress import Progress
from storage.transfer import CHUNK, Context, RateLimiter, RemoteFile, Stats, _put

PUT_THRESHOLD = 16 * 2**20  # files at or above this size go in an upload session


def file_url(client: HubClient, path: str) -> str:
    return client.url(f"api/volume/files/{quote(path)}")


def stat(client: HubClient, path: str) -> dict:
    """{path, name, type, size, mtime, etag}; NotFoundError if nothing is there."""
    return client.json("GET", "api/volume/stat", params={"path": path})


def ls(client: HubClient, path: str = "", *, limit: int = 1000) -> Iterator[dict]:
    """The entries of directory `path`, by name, following the pages."""
    cursor = None
    while True:
        page = client.json("GET", "api/volume/ls", params={"path": path, "cursor": cursor, "limit": limit})
        yield from page["items"]
        cursor = page.get("next_cursor")
        if not cursor:
            return


def walk(client: HubClient, path: str = "") -> Iterator[dict]:
    """Every entry below directory `path`, depth first (directories before their contents)."""
    for e in ls(client, path):
        yield e
        if e["type"] == "directory":
            yield from walk(client, e["path"])


def mkdir(client: HubClient, path: str, *, parents: bool = True) -> dict:
    return client.json("POST", "api/volume/mkdir", data={"path": path, "parents": parents})


def move(client: HubClient, src: str, dst: str, *, overwrite: bool = False) -> dict:
    """Renames a file or directory (metadata only, whatever its size); missing parents of dst are made."""
    return client.json("POST", "api/volume/move", data={"src": src, "dst": dst, "overwrite": overwrite,
                                                         "parents": True})


def delete(client: HubClient, path: str, *, recursive: bool = False) -> None:
    client.request("DELETE", client.url(f"api/volume/files/{quote(path)}",
                                        {"recursive": "true" if recursive else None}))


def read_range(client: HubClient, path: str, start: int, end: int) -> bytes:
    """Bytes [start, end) of a file, in one ranged GET (redirected to the store on S3)."""
    if start >= end:
        return b""
    resp = client.request("GET", file_url(client, path), headers={"Range": f"bytes={start}-{end - 1}"})
    data = resp.data
    if resp.status == 200:
        data = data[start:end]  # a server that ignored the range
    return data


def remote_file(client: HubClient, entry: dict) -> RemoteFile:
    url = file_url(client, entry["path"])
    return RemoteFile(entry["path"], entry["size"], entry["etag"], entry["etag"], url, url)


def download(client: HubClient, entries: list[dict], targets: dict[str, Path], *, workers: int = 8,
             limit_rate: float | None = None, progress: bool = False) -> Stats:
    """Files of the volume (stat/ls entries) to local paths ({volume path: local path}), in parallel,
    each verified by sha256 before it appears at its path."""
    from storage.pull import download_remote_files

    return download_remote_files(client, [remote_file(client, e) for e in entries], targets, workers=workers,
                                 limit_rate=limit_rate, progress=progress)


def _hash(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def upload(client: HubClient, local: str | Path, path: str, *, workers: int = 8, limit_rate: float | None = None,
           progress: Progress | None = None, stats: Stats | None = None) -> dict:
    """Writes local file `local` to volume `path`, atomically (visible only once complete and verified).
    Returns the new entry. QuotaExceededError before any byte is sent if it does not fit."""
    local = Path(local)
    size = local.stat().st_size
    ctx = Context(client, limiter=RateLimiter(limit_rate), progress=progress or Progress("", show=False),
                  stats=stats or Stats())
    ctx.progress.add_total(size)
    if size < PUT_THRESHOLD:
        data = local.read_bytes()
        if len(data) != size:
            raise IntegrityError(f"{local} changed while it was being uploaded", code="FileChanged")
        resp = client.request("PUT", file_url(client, path), body=data,
                              headers={"X-Content-Sha256": hashlib.sha256(data).hexdigest(),
                                       "Content-Type": "application/octet-stream"})
        ctx.progress.update(size)
        ctx.stats.add(bytes_up=size, files_up=1)
        return json.loads(resp.data)
    journal = _journal(client, local, path)
    session = _resume(client, journal, size)
    if session is None:
        session = client.json("POST", "api/volume/uploads", data={"path": path, "size": size})
        if session["status"] != "done":
            journal.parent.mkdir(parents=True, exist_ok=True)
            journal.write_text(json.dumps({"id": session["id"]}))
    if session["status"] == "done":
        ctx.progress.update(size)
        return session["entry"]
    digest: dict[str, str] = {}
    hasher = threading.Thread(target=lambda: digest.setdefault("sha256", _hash(local)), daemon=True)
    hasher.start()
    part_size = session["part_size"]
    held = sum(min(part_size, size - (n - 1) * part_size) for n in session.get("received") or [])
    ctx.progress.update(held)
    try:
        with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="hub-volume-up") as pool:
            futures = []
            for key, url in sorted(session["parts"].items(), key=lambda kv: int(kv[0])):
                start = (int(key) - 1) * part_size
                futures.append(pool.submit(_put, ctx, url, local, start, min(part_size, size - start)))
            try:
                for fut in futures:
                    fut.result()
            except BaseException:
                ctx.cancelled.set()
                raise
        hasher.join()
        if "sha256" not in digest:
            raise IntegrityError(f"could not hash {local}", code="HashFailed")
        read = 120 + size / (50 * 2**20)  # the hub reads the assembled file back to verify it
        resp = client.request("POST", client.url(f"api/volume/uploads/{session['id']}/complete"),
                              body=json.dumps({"sha256": digest["sha256"]}).encode(),
                              headers={"Content-Type": "application/json"},
                              timeout=urllib3.Timeout(connect=10, read=read))
    except HubClientError:
        hasher.join()
        raise
    journal.unlink(missing_ok=True)
    ctx.stats.add(files_up=1)
    return json.loads(resp.data)["entry"]


def _journal(client: HubClient, local: Path, path: str) -> Path:
    """Where the id of the open session for this local file (as it is now) and target is kept, so
    that running the same copy again after an interruption sends only the missing parts."""
    st = local.stat()
    key = f"{client.endpoint}|{client.token or ''}|{local.resolve()}|{st.st_size}|{st.st_mtime_ns}|{path}"
    return config_dir() / "volume-uploads" / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"


def _resume(client: HubClient, journal: Path, size: int) -> dict | None:
    """The open session the journal names, with fresh URLs for its missing parts; None if there is none."""
    try:
        upload_id = json.loads(journal.read_text())["id"]
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None
    try:
        session = client.json("GET", f"api/volume/uploads/{upload_id}")
    except HubClientError:
        session = None  # ended, expired or aborted: start again
    if not session or session.get("status") != "open" or session.get("size") != size:
        journal.unlink(missing_ok=True)
        return None
    return session
