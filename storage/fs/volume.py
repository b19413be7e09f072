"""The caller's volume over the native API (/api/volume/): listing, metadata, reads, writes. Imports no
Django; used by `hub ls/cp/rm/mv/mkdir volume/...` and by `hub://volume/...`.

Writes: a file below PUT_THRESHOLD is one PUT with its sha256; a larger one is a resumable upload
session whose parts go in parallel (straight to the store on S3) while a hasher thread reads the file
once alongside, and the sha256 is given at completion. The session's id is kept in the config
directory until it completes, so the same copy run again sends only the parts the session lacks.
Reads go through the hub's files/ URL, which redirects to a presigned store URL on S3; downloads
reuse the verified, resumable machinery of pulls.

Copies from the hub (a repo file, another volume file) go by hash when the sha256 is known: the hub
installs bytes it already holds without any byte moving, if the account may use them; otherwise the
bytes come down to a temporary file and go up again (copy_in).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import urllib3

from storage.client import COMPLETE_RETRY, HubClient, HubClientError, IntegrityError, config_dir, file_changed
from storage.transfer.engine import (
    Context,
    PartHashes,
    PartSigner,
    RemoteFile,
    Stats,
    _put,
    explain_refusal,
)
from storage.transfer.progress import Progress
from storage.transfer.ratelimit import RateLimiter

PUT_THRESHOLD = 16 * 2**20  # files at or above this size go in an upload session
COPY_BATCH = 2**30  # a copy that must move bytes holds at most this much (or one larger file) in temp files


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


def mkdir(client: HubClient, path: str, *, parents: bool = True) -> bool:
    """Creates directory `path`; True if it was created, False if it existed (only with `parents`,
    like mkdir -p; without it an existing path is a FileExists error)."""
    resp = client.request("POST", client.url("api/volume/mkdir"),
                          body=json.dumps({"path": path, "parents": parents}).encode(),
                          headers={"Content-Type": "application/json"})
    return resp.status == 201


def move(client: HubClient, src: str, dst: str, *, overwrite: bool = False) -> dict:
    """Renames a file or directory (metadata only, whatever its size); missing parents of dst are made."""
    return client.json("POST", "api/volume/move", data={"src": src, "dst": dst, "overwrite": overwrite,
                                                         "parents": True})


def delete(client: HubClient, path: str, *, recursive: bool = False) -> None:
    client.request("DELETE", client.url(f"api/volume/files/{quote(path)}",
                                        {"recursive": "true" if recursive else None}))


def read_range(client: HubClient, path: str, start: int, end: int, *, etag: str | None = None) -> bytes:
    """Bytes [start, end) of a file, in one ranged GET (redirected to the store on S3). With `etag`,
    only of that version: a file replaced since fails (412) rather than mixing old and new bytes."""
    if start >= end:
        return b""
    headers = {"Range": f"bytes={start}-{end - 1}"}
    if etag:
        headers["If-Match"] = f'"{etag}"'
    resp = client.request("GET", file_url(client, path), headers=headers)
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
    from storage.transfer.pull import download_remote_files

    return download_remote_files(client, [remote_file(client, e) for e in entries], targets, workers=workers,
                                 limit_rate=limit_rate, progress=progress)


def upload(client: HubClient, local: str | Path, path: str, *, sha256: str | None = None,
           if_none_match: bool = False, workers: int = 8, limit_rate: float | None = None,
           progress: Progress | None = None, stats: Stats | None = None) -> dict:
    """Writes local file `local` to volume `path`, atomically (visible only once complete and verified).
    Returns the new entry. QuotaExceededError before any byte is sent if it does not fit.

    `sha256`, if the caller knows it, is sent up front: the hub then verifies the bytes against it,
    may install the file without them (see install_by_hash), and resumes its own open session for
    the same path, size and hash, so no local journal is kept. `if_none_match`: create only; a
    PreconditionFailed error (412) if the path exists."""
    local = Path(local)
    size = local.stat().st_size
    ctx = Context(client, limiter=RateLimiter(limit_rate), progress=progress or Progress("", show=False),
                  stats=stats or Stats())
    ctx.progress.add_total(size)
    if size < PUT_THRESHOLD:
        data = local.read_bytes()
        if len(data) != size:
            raise file_changed(local)
        headers = {"X-Content-Sha256": sha256 or hashlib.sha256(data).hexdigest(),
                   "Content-Type": "application/octet-stream"}
        if if_none_match:
            headers["If-None-Match"] = "*"
        resp = client.request("PUT", file_url(client, path), body=data, headers=headers)
        ctx.progress.update(size)
        ctx.stats.add(bytes_up=size, files_up=1)
        return json.loads(resp.data)
    create = {"path": path, "size": size, "sha256": sha256, "if_none_match": if_none_match, "checked": True}
    journal = None if sha256 else _journal(client, local, path, if_none_match)
    session = _resume(client, journal, size) if journal else None
    if session is None:
        session = client.json("POST", "api/volume/uploads", data=create)
        if journal and session["status"] != "done":
            journal.parent.mkdir(parents=True, exist_ok=True)
            journal.write_text(json.dumps({"id": session["id"]}))
    if session["status"] == "done":
        ctx.progress.update(size)
        return session["entry"]
    part_size = session["part_size"]
    received = set(session.get("received") or [])
    ctx.progress.update(sum(min(part_size, size - (n - 1) * part_size) for n in received))
    # PartHashes hashes the parts to send ahead of their PUTs (a checked session signs each part's URL
    # with its sha256) and, unless the caller knows it, the whole file.
    hashes = None
    todo = [n for n in range(1, session["part_count"] + 1) if n not in received] if session.get("checked") else []
    if todo or not sha256:
        hashes = PartHashes(ctx, local, size, part_size, todo, whole=not sha256).start()
    try:
        with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="hub-volume-up") as pool:
            futures = []
            signer = PartSigner(hashes, _part_urls(client, session["id"])) if todo else None
            for n in todo:
                start = (n - 1) * part_size
                futures.append(pool.submit(_checked_part, ctx, signer, n, local, start, min(part_size, size - start)))
            for key, url in sorted(session["parts"].items(), key=lambda kv: int(kv[0])):
                start = (int(key) - 1) * part_size
                futures.append(pool.submit(_put, ctx, url, local, start, min(part_size, size - start)))
            try:
                for fut in futures:
                    fut.result()
            except BaseException:
                ctx.cancelled.set()  # the parts not yet sent, and the hash, stop at their next read
                raise
        digest = sha256 or hashes.whole()
        read = 120 + size / (50 * 2**20)  # the hub reads the assembled file back to verify it
        try:
            resp = client.request("POST", client.url(f"api/volume/uploads/{session['id']}/complete"),
                                  body=json.dumps({"sha256": digest}).encode(),
                                  headers={"Content-Type": "application/json"},
                                  timeout=urllib3.Timeout(connect=10, read=read), retry=COMPLETE_RETRY)
        except HubClientError as err:
            raise explain_refusal(err, local, size, digest) from None
    except IntegrityError as err:
        if err.code == "FileChanged":  # another file now: this session can never complete nor resume
            with contextlib.suppress(HubClientError):
                client.request("DELETE", client.url(f"api/volume/uploads/{session['id']}"))
            if journal:
                journal.unlink(missing_ok=True)
        raise
    finally:
        if hashes is not None:
            ctx.cancelled.set()  # (done by now, unless something failed: then it stops at its next read)
            hashes.join()
    if journal:
        journal.unlink(missing_ok=True)
    ctx.stats.add(files_up=1)
    return json.loads(resp.data)["entry"]


def _part_urls(client: HubClient, upload_id: str) -> Callable[[dict[int, str]], dict[int, str]]:
    """{part number: sha256} → {part number: URL signed with it} for PartSigner."""
    def sign(hashes: dict[int, str]) -> dict[int, str]:
        got = client.json("POST", f"api/volume/uploads/{upload_id}/parts",
                          data={"parts": {str(n): sha for n, sha in hashes.items()}})["parts"]
        return {int(n): url for n, url in got.items()}
    return sign


def _checked_part(ctx: Context, signer: PartSigner, n: int, local: Path, start: int, length: int) -> str:
    """Sends part n through a URL signed with its sha256 (the store checks the bytes against it)."""
    ctx.check()
    sha, url = signer.url(n)
    return _put(ctx, url, local, start, length, {"x-amz-content-sha256": sha})


def install_by_hash(client: HubClient, path: str, size: int, sha256: str, *, if_none_match: bool = False
                    ) -> dict | None:
    """Writes volume `path` from bytes the hub already holds, sending only (path, size, sha256): the
    hub installs them at once if the account may use them (they are in a repo the caller can read,
    or the caller uploaded them), charging the quota as any write does. Returns the new entry, or
    None when the hub needs the bytes. Then, for a file of PUT_THRESHOLD or more, the upload session
    the hub opened is left for `upload(..., sha256=sha256)` to resume; a smaller file's is aborted
    (it will be one PUT) so that its reservation is given back at once."""
    start = client.json("POST", "api/volume/uploads",
                        data={"path": path, "size": size, "sha256": sha256, "if_none_match": if_none_match})
    if start["status"] == "done":
        return start["entry"]
    if size < PUT_THRESHOLD:
        client.request("DELETE", client.url(f"api/volume/uploads/{start['id']}"))
    return None


@dataclass(frozen=True)
class CopySource:
    """One file of the hub (of a repo or of the volume) to write to volume path `dst`."""

    key: str  # how the caller's fetch function knows the file
    dst: str
    size: int
    sha256: str | None  # None if unknown: then the bytes must move


@dataclass
class CopyResult:
    files: int = 0
    bytes: int = 0
    by_hash: int = 0  # files the hub installed from bytes it holds: nothing moved for them
    bytes_down: int = 0
    bytes_up: int = 0


# fetch(sources, {source.key: local path}) downloads those files, each verified by its sha256
Fetch = Callable[[list[CopySource], dict[str, Path]], Stats]


def copy_in(client: HubClient, sources: list[CopySource], fetch: Fetch, *, workers: int = 8,
            limit_rate: float | None = None, progress: bool = False) -> CopyResult:
    """Writes hub files to the volume. Each file whose sha256 is known goes by hash first (see
    install_by_hash; several at a time). The others are fetched by `fetch` into a private temporary
    directory — at most COPY_BATCH bytes, or one larger file, at a time — uploaded, and deleted.
    Every write is atomic; a failure stops the copy with the files before it written."""
    result = CopyResult(files=len(sources), bytes=sum(s.size for s in sources))

    def by_hash(s: CopySource) -> dict | None:
        return install_by_hash(client, s.dst, s.size, s.sha256) if s.sha256 else None

    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="hub-volume-cp") as pool:
        done = list(pool.map(by_hash, sources))
    pending = [s for s, entry in zip(sources, done, strict=True) if entry is None]
    result.by_hash = len(sources) - len(pending)
    if not pending:
        return result
    up = Stats()
    with Progress("upload", show=progress) as bar, tempfile.TemporaryDirectory(prefix="hub-cp-") as tmp:
        for batch in _batches(pending, COPY_BATCH):
            targets = {s.key: Path(tmp) / str(i) for i, s in enumerate(batch)}
            down = fetch(batch, targets)
            result.bytes_down += down.bytes_down
            for s in batch:
                upload(client, targets[s.key], s.dst, sha256=s.sha256, workers=workers, limit_rate=limit_rate,
                       progress=bar, stats=up)
                targets[s.key].unlink()
    result.bytes_up = up.bytes_up
    return result


def _batches(sources: list[CopySource], limit: int) -> Iterator[list[CopySource]]:
    batch: list[CopySource] = []
    held = 0
    for s in sources:
        if batch and held + s.size > limit:
            yield batch
            batch, held = [], 0
        batch.append(s)
        held += s.size
    if batch:
        yield batch


def _journal(client: HubClient, local: Path, path: str, if_none_match: bool) -> Path:
    """Where the id of the open session for this local file (as it is now) and target is kept, so
    that running the same copy again after an interruption sends only the missing parts."""
    st = local.stat()
    key = f"{client.endpoint}|{client.token or ''}|{local.resolve()}|{st.st_size}|{st.st_mtime_ns}|{path}"
    if if_none_match:
        key += "|create"
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
