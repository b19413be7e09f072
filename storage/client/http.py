"""HTTP client of the hub, for the `hub` CLI, the `hub://` filesystem and the mount. Imports no Django.

Every failure becomes a HubClientError (storage.client.errors) whose message is one sentence a
person can act on; the server's {"error", "code"} body and X-Error-Code header feed it. Transient
failures are retried under one written-down policy (storage.client.retry).

The transport is urllib3, chosen by measurement (bench/transfer_stack.py): one loopback stream to a
fresh file moves ~2.4 GB/s with urllib3 and requests, ~0.4–0.6 GB/s with httpx; urllib3 is the
layer requests adds nothing to for bulk bytes, and its PoolManager is thread-safe.
"""
from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, BinaryIO, NamedTuple
from urllib.parse import parse_qs, quote, urlencode, urljoin, urlsplit

import urllib3
import urllib3.connection

from storage.client.errors import (
    _BY_STATUS,
    AuthError,
    ConflictError,
    HubClientError,
    TransportError,
    file_changed,
)
from storage.client.hubpath import DATASET
from storage.client.retry import COMMIT_RETRY, NO_RETRY, RETRY, RETRYABLE_ERRORS, RetryPolicy
from storage.client.settings import _SOURCES, NOT_LOGGED_IN, Settings, resolve_settings


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gpu-hub")
    except PackageNotFoundError:
        return "dev"


USER_AGENT = f"hub-cli/{_version()}; urllib3/{urllib3.__version__}"


# --- request bodies sent by the kernel -------------------------------------------------------------

class FileSpan(NamedTuple):
    """Bytes [offset, offset + count) of a file opened for reading, as one piece of a request body
    (a body is an iterable of bytes and FileSpans): the hub client's connections send it with
    sendfile(2), from the page cache to the socket without a copy through this process. A file
    that ends early raises IntegrityError (FileChanged)."""

    fh: BinaryIO
    offset: int
    count: int


class _SendsFiles:
    def send(self, data) -> None:
        if isinstance(data, FileSpan):
            sent = self.sock.sendfile(data.fh, data.offset, data.count)  # (TLS: read and sent, as before)
            if sent != data.count:
                raise file_changed(getattr(data.fh, 'name', 'a file'), "shrank")
            return
        super().send(data)


class _Connection(_SendsFiles, urllib3.connection.HTTPConnection):
    pass


class _HTTPSConnection(_SendsFiles, urllib3.connection.HTTPSConnection):
    pass


class _Pool(urllib3.HTTPConnectionPool):
    ConnectionCls = _Connection


class _HTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


# --- the client -------------------------------------------------------------------------------------

def origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme, parts.netloc.lower()


def api_prefix(repo_type: str) -> str:
    return f"api/{repo_type}s"


def file_prefix(repo_type: str) -> str:
    return "datasets/" if repo_type == DATASET else ""


def _kind(repo_type: str) -> str:
    return "dataset" if repo_type == DATASET else "model"


class HubClient:
    """One hub endpoint and token, and a pool of keep-alive connections shared by threads."""

    def __init__(self, endpoint: str | None = None, token: str | bool | None = None, *,
                 settings: Settings | None = None, max_connections: int = 64,
                 connect_timeout: float = 10.0, read_timeout: float = 60.0) -> None:
        self.settings = settings or resolve_settings(endpoint, token)
        self.endpoint = self.settings.endpoint
        self.token = self.settings.token
        self._origin = origin(self.endpoint)
        self.timeout = urllib3.Timeout(connect=connect_timeout, read=read_timeout)
        self.pool = urllib3.PoolManager(num_pools=32, maxsize=max_connections, retries=False,
                                        timeout=self.timeout, blocksize=1 << 20)
        self.pool.pool_classes_by_scheme = {"http": _Pool, "https": _HTTPSPool}  # (bodies with FileSpans)

    # -- plumbing --

    def url(self, path: str, params: dict | list | None = None) -> str:
        url = path if "://" in path else f"{self.endpoint}/{path.lstrip('/')}"
        if params:
            items = params.items() if isinstance(params, dict) else params
            url += ("&" if "?" in url else "?") + urlencode([(k, v) for k, v in items if v is not None], doseq=True)
        return url

    def headers_for(self, url: str, headers: dict | None = None) -> dict:
        """The token goes to the hub's own origin only, never to presigned store URLs."""
        out = {"User-Agent": USER_AGENT}
        if self.token and origin(url) == self._origin:
            out["Authorization"] = f"Bearer {self.token}"
        if headers:
            out.update(headers)
        return out

    def request(self, method: str, url: str, *, body: Any = None, headers: dict | None = None,
                retry: RetryPolicy = RETRY, preload: bool = True, follow: bool = True,
                timeout: urllib3.Timeout | None = None, ok: Iterable[int] = ()) -> urllib3.BaseHTTPResponse:
        """Sends one request under the retry policy and returns a response with status < 400 (or in
        `ok`); raises HubClientError otherwise. GET/HEAD redirects are followed by hand so that the
        token is dropped on a change of origin. `body` must be bytes (re-sendable) when retrying."""
        url = self.url(url)
        ok = set(ok)
        attempt = 0
        waited = 0.0
        hops = 0
        while True:
            try:
                resp = self.pool.request(method, url, body=body, headers=self.headers_for(url, headers),
                                         preload_content=False, redirect=False, timeout=timeout or self.timeout)
                _ack_now(resp)
                if preload:
                    try:
                        resp.read(cache_content=True)
                    finally:
                        resp.release_conn()
            except RETRYABLE_ERRORS as err:
                wait = retry.next_wait(attempt, waited)
                if wait is None:
                    raise TransportError(f"cannot reach {_where(url, self.endpoint)}: {_reason(err)}",
                                         code="ConnectionError") from err
                attempt += 1
                waited += wait
                time.sleep(wait)
                continue
            if follow and resp.status in (301, 302, 303, 307, 308) and method in ("GET", "HEAD"):
                location = resp.headers.get("Location")
                resp.drain_conn()
                resp.release_conn()
                hops += 1
                if not location or hops > 5:
                    raise TransportError(f"too many redirects from {url}", code="TooManyRedirects")
                url = urljoin(url, location)
                if headers and origin(url) != self._origin:
                    # Conditions on the hub's ETag (sha256) mean nothing to the store, whose ETags
                    # differ: the hub already checked them before redirecting.
                    headers = {k: v for k, v in headers.items() if k.lower() not in ("if-match", "if-none-match")}
                continue
            retry_after = resp.headers.get("Retry-After")
            wait = retry.next_wait(attempt, waited, retry_after) \
                if resp.status in retry.statuses and (resp.status != 409 or retry_after) else None
            if wait is not None:
                resp.drain_conn()
                resp.release_conn()
                attempt += 1
                waited += wait
                time.sleep(wait)
                continue
            if resp.status >= 400 and resp.status not in ok:
                try:
                    raw = resp.data if preload else resp.read(65536)
                    resp.drain_conn()
                except RETRYABLE_ERRORS:
                    raw = b""
                resp.release_conn()
                raise self.error_from(resp.status, resp.headers, raw, url)
            return resp

    def error_from(self, status: int, headers, raw: bytes, url: str) -> HubClientError:
        """The server's error as a HubClientError: its JSON {"error", "code"} or X-Error-* headers."""
        code = headers.get("X-Error-Code") or ""
        message = ""
        try:
            data = json.loads(raw)
            if isinstance(data, dict):
                err = data.get("error") or data.get("detail") or data.get("message")
                message = err if isinstance(err, str) else json.dumps(err) if err else ""
                code = code or str(data.get("code") or "")
        except (ValueError, UnicodeDecodeError):
            pass
        message = message or headers.get("X-Error-Message") or ""
        if origin(url) != self._origin:  # the object store answered (expired URL, missing object...)
            text = raw[:200].decode("utf-8", "replace").replace("\n", " ")
            s3_code = _S3_CODE.search(raw[:1000])  # (S3's XML error: its code says what went wrong)
            return TransportError(f"the storage server answered HTTP {status} for a download or upload URL"
                                  f"{': ' + text if text else ''}",
                                  code=code or (s3_code.group(1).decode("ascii", "replace") if s3_code else "StoreError"),
                                  status=status)
        if status == 401:
            if self.token:
                source = self.settings.token_source
                return AuthError(f"the hub at {self.endpoint} rejected your token (from {_SOURCES.get(source, source)})"
                                 f"{': ' + message if message else ''}{self._token_hint(code)}",
                                 code=code or "Unauthorized", status=status)
            if code == "GatedRepo":  # a token alone would not do: the message says what else is needed
                return AuthError(f"{message} (no token was sent: set HUB_TOKEN or run `hub login`)", code=code,
                                 status=status)
            return AuthError(NOT_LOGGED_IN, code=code or "Unauthorized", status=status)
        if not message:
            message = f"HTTP {status} from {_where(url, self.endpoint)}"
        if status == 404 and code == "RepoNotFound" and not self.token:
            message += " (no token was sent: set HUB_TOKEN or run `hub login` for private repos)"
        if status >= 500:
            return TransportError(f"the hub failed ({status}): {message}", code=code or "ServerError", status=status)
        return _BY_STATUS.get(status, HubClientError)(message, code=code or f"HTTP{status}", status=status)

    def _token_hint(self, code: str) -> str:
        """What to do about a token the hub rejected, given where it came from ("; ..."). An expired
        one's message already says where to make a new one: what is left is where to put it."""
        source = self.settings.token_source
        if code == "TokenExpired":
            if source in ("HUB_TOKEN", "HF_TOKEN"):
                return f"; then set {source} to the new token, or unset it to use the one `hub login` saved"
            if source == "hub login":
                return "; then run `hub login` again with the new token"
            return ""
        create = f"create one at {self.endpoint}/settings/tokens"
        if source in ("HUB_TOKEN", "HF_TOKEN"):
            return f"; set {source} to a valid token ({create}), or unset it to use the one `hub login` saved"
        if source == "hub login":
            return f"; run `hub login` again with a valid token ({create})"
        return f"; check the token ({create})"

    def json(self, method: str, path: str, *, params: dict | list | None = None, data: Any = None,
             headers: dict | None = None, retry: RetryPolicy = RETRY, ok: Iterable[int] = ()) -> Any:
        body = None
        hdrs = dict(headers or {})
        if data is not None:
            body = json.dumps(data).encode()
            hdrs.setdefault("Content-Type", "application/json")
        resp = self.request(method, self.url(path, params), body=body, headers=hdrs, retry=retry, ok=ok)
        try:
            return json.loads(resp.data) if resp.data else None
        except ValueError:
            raise TransportError(f"the hub sent something that is not JSON for {path}", code="BadResponse") from None

    def _pages(self, path: str, params: dict | list | None = None) -> Iterator[Any]:
        """Follows `Link: <url>; rel="next"` pagination."""
        url = self.url(path, params)
        while url:
            resp = self.request("GET", url)
            yield json.loads(resp.data)
            url = _next_link(resp.headers.get("Link", ""))

    # -- account --

    def whoami(self) -> dict:
        if not self.token:
            raise AuthError(NOT_LOGGED_IN, code="Unauthorized")
        return self.json("GET", "api/whoami-v2", retry=NO_RETRY)

    def quota(self, namespace: str | None = None) -> dict:
        if not self.token:
            raise AuthError(NOT_LOGGED_IN, code="Unauthorized")
        return self.json("GET", "api/quota", params={"namespace": namespace})

    # -- reading repos --

    def repo_info(self, repo_type: str, repo_id: str, revision: str | None = None) -> dict:
        path = f"{api_prefix(repo_type)}/{repo_id}"
        if revision:
            path += f"/revision/{quote(revision, safe='')}"
        return self.json("GET", path)

    def resolve_commit(self, repo_type: str, repo_id: str, revision: str | None = None) -> str:
        return self.repo_info(repo_type, repo_id, revision)["sha"]

    def manifest(self, repo_type: str, repo_id: str, revision: str | None = None, *, path: str = "",
                 include: Iterable[str] = (), exclude: Iterable[str] = (), limit: int | None = None
                 ) -> Iterator[dict]:
        """Pages of the native manifest: {"commit", "files": [{path, size, sha256, lfs, etag, url, blake3?}],
        "expires_in"}. Pages after the first are asked for at the commit the first resolved, so a
        branch moving during a long listing cannot mix two commits."""
        params: list[tuple[str, Any]] = [("revision", revision), ("path", path or None), ("limit", limit)]
        params += [("include", p) for p in include] + [("exclude", p) for p in exclude]
        cursor = None
        while True:
            page = self.json("GET", f"api/v1/repos/{_kind(repo_type)}/{repo_id}/manifest",
                             params=params + [("cursor", cursor)])
            yield page
            cursor = page.get("next")
            if not cursor:
                return
            params[0] = ("revision", page["commit"])

    def resolve_url(self, repo_type: str, repo_id: str, commit: str, path: str) -> str:
        return f"{self.endpoint}/{file_prefix(repo_type)}{repo_id}/resolve/{commit}/{quote(path)}"

    def list_tree(self, repo_type: str, repo_id: str, revision: str, path: str = "", *,
                  recursive: bool = False) -> Iterator[dict]:
        url = f"{api_prefix(repo_type)}/{repo_id}/tree/{quote(revision, safe='')}"
        if path:
            url += "/" + quote(path, safe="")
        for page in self._pages(url, {"recursive": "true" if recursive else "false", "expand": "false"}):
            yield from page

    def paths_info(self, repo_type: str, repo_id: str, revision: str, paths: list[str]) -> list[dict]:
        return self.json("POST", f"{api_prefix(repo_type)}/{repo_id}/paths-info/{quote(revision, safe='')}",
                         data={"paths": paths, "expand": False})

    # -- writing repos --

    def create_repo(self, repo_type: str, repo_id: str, *, private: bool = False, exist_ok: bool = True) -> bool:
        """Creates the repo; True if it was created, False if it existed (and exist_ok)."""
        ns, name = repo_id.split("/", 1)
        data = {"name": name, "organization": ns, "type": repo_type,
                "visibility": "private" if private else "public"}
        try:
            self.json("POST", "api/repos/create", data=data, retry=NO_RETRY)
            return True
        except ConflictError:
            if exist_ok:
                return False
            raise

    def delete_repo(self, repo_type: str, repo_id: str) -> None:
        ns, name = repo_id.split("/", 1)
        self.json("DELETE", "api/repos/delete", data={"name": name, "organization": ns, "type": repo_type},
                  retry=NO_RETRY)

    def list_refs(self, repo_type: str, repo_id: str) -> dict:
        """{"branches": [{"name", "targetCommit"}...], "tags": [...]}."""
        return self.json("GET", f"{api_prefix(repo_type)}/{repo_id}/refs")

    def list_commits(self, repo_type: str, repo_id: str, revision: str, *, limit: int = 50) -> list[dict]:
        """The newest `limit` commits reachable from `revision`, newest first (one page)."""
        return self.json("GET", f"{api_prefix(repo_type)}/{repo_id}/commits/{quote(revision, safe='')}",
                         params={"limit": limit})

    def create_branch(self, repo_type: str, repo_id: str, branch: str, starting_point: str | None = None) -> None:
        data = {"startingPoint": starting_point} if starting_point else {}
        self.json("POST", f"{api_prefix(repo_type)}/{repo_id}/branch/{quote(branch, safe='')}", data=data,
                  retry=NO_RETRY)

    def delete_branch(self, repo_type: str, repo_id: str, branch: str) -> None:
        self.json("DELETE", f"{api_prefix(repo_type)}/{repo_id}/branch/{quote(branch, safe='')}", retry=NO_RETRY)

    def preupload(self, repo_type: str, repo_id: str, revision: str, files: list[dict]) -> dict:
        return self.json("POST", f"{api_prefix(repo_type)}/{repo_id}/preupload/{quote(revision, safe='')}",
                         data={"files": files})

    def lfs_batch(self, repo_type: str, repo_id: str, objects: list[dict], ref: str | None = None) -> dict:
        lfs = "application/vnd.git-lfs+json"
        # hub-checked-put: small objects go in one PUT the store checks against their sha256 (then
        # verified in bulk: lfs_verify_many)
        data: dict = {"operation": "upload", "transfers": ["basic", "multipart", "hub-checked-put"],
                      "hash_algo": "sha256",
                      "objects": objects}
        if ref:
            data["ref"] = {"name": ref}
        return self.json("POST", f"{file_prefix(repo_type)}{repo_id}.git/info/lfs/objects/batch", data=data,
                         headers={"Accept": lfs, "Content-Type": lfs})

    def lfs_verify_many(self, verify_hrefs: list[tuple[str, str, int]]) -> list[dict]:
        """Verifies checked PUTs of one repo at once — (verify href, oid, size) as their batch
        answers gave them — with the hub's bulk verify. Returns its objects ({"oid", "size"}, or
        with an "error"), in order."""
        out: list[dict] = []
        lfs = "application/vnd.git-lfs+json"
        for i in range(0, len(verify_hrefs), 1000):
            chunk = verify_hrefs[i:i + 1000]
            url, _, _ = chunk[0][0].partition("?")
            objects = [{"oid": oid, "size": size, "token": parse_qs(urlsplit(href).query).get("token", [""])[0]}
                       for href, oid, size in chunk]
            out += self.json("POST", url, data={"objects": objects},
                             headers={"Accept": lfs, "Content-Type": lfs})["objects"]
        return out

    def checked_part_urls(self, upload_id: str, hashes: dict[int, str]) -> dict[int, str]:
        """URLs for parts of a checked upload session, each signed with its part's sha256
        ({part number: sha256} → {part number: URL}); PUT each with `x-amz-content-sha256`."""
        out = self.json("POST", f"api/v1/uploads/{upload_id}/parts", data={"parts": {str(n): h for n, h in hashes.items()}})
        return {int(n): url for n, url in out["part_urls"].items()}

    def start_unhashed_upload(self, repo_type: str, repo_id: str, path: str, size: int) -> dict | None:
        """A checked upload session for a new file of the repo, opened before its sha256 is known
        (POST /api/v1/uploads): None where the hub says to hash first (HashFirst: its store does not
        check parts, or an earlier upload of this path may resume) or has no such route."""
        try:
            return self.json("POST", "api/v1/uploads", data={"repo_type": repo_type, "repo_id": repo_id,
                                                              "path": path, "size": size})
        except HubClientError as err:
            if err.code == "HashFirst" or err.status in (404, 405):
                return None
            raise

    def name_upload_sha256(self, upload_id: str, sha256: str) -> None:
        """Names the sha256 of a session opened without it: a killed push's next run resumes it."""
        self.json("PATCH", f"api/v1/uploads/{upload_id}", data={"sha256": sha256})

    def abort_upload(self, upload_id: str, kind: str = "lfs") -> None:
        """Ends the caller's own open upload session (its parts freed, its reservation released): of
        an LFS object (`kind` "lfs") or of a volume file ("volume")."""
        path = f"api/volume/uploads/{upload_id}" if kind == "volume" else f"api/v1/uploads/{upload_id}"
        self.request("DELETE", self.url(path), retry=NO_RETRY)

    def upload_status(self, upload_id: str) -> dict:
        return self.json("GET", f"api/v1/uploads/{upload_id}")

    def commit(self, repo_type: str, repo_id: str, revision: str, payload: bytes) -> dict:
        """POSTs an NDJSON commit. Not retried once the hub may have acted on it (a retry could
        commit twice); only answers that say it was not processed (429, 503) are retried."""
        url = self.url(f"{api_prefix(repo_type)}/{repo_id}/commit/{quote(revision, safe='')}")
        resp = self.request("POST", url, body=payload, headers={"Content-Type": "application/x-ndjson"},
                            retry=COMMIT_RETRY, timeout=urllib3.Timeout(connect=10, read=600))
        return json.loads(resp.data)


_buffers = threading.local()
MiB = 1 << 20


def body_chunks(resp: urllib3.BaseHTTPResponse, n: int,
                dest: Callable[[int], memoryview | None] | None = None) -> Iterator[memoryview | bytes]:
    """Up to n bytes of a streamed body as memoryviews of one reused buffer of this thread (each
    valid until the next is asked for): socket reads straight into it, no allocation per MiB (a
    fresh 1 MiB object per read is an mmap, its page faults and an munmap: most of a download's
    system time). `dest(k)`, if given, is asked before each read for the memory to read (up to k
    bytes) into instead — the caller's own, saving it a copy — or None for that buffer."""
    fp = getattr(resp, "_fp", None)
    if fp is None or not hasattr(fp, "readinto") or resp.headers.get("Content-Encoding"):
        while n > 0 and (chunk := resp.read(min(MiB, n))):
            n -= len(chunk)
            yield chunk
        return
    buf = getattr(_buffers, "buf", None)
    if buf is None:
        buf = _buffers.buf = memoryview(bytearray(MiB))
    while n > 0:
        into = dest(min(MiB, n)) if dest is not None else None
        if into is None:
            into = buf[:min(MiB, n)]
        got = fp.readinto(into)
        if not got:
            return
        n -= got
        yield into[:got]


def _ack_now(resp: urllib3.BaseHTTPResponse) -> None:
    """Acknowledges the response's headers at once (TCP_QUICKACK), once they are in. A store that
    sends the headers and a small body in two segments (Ceph RGW) holds the body back until the
    headers are acknowledged (Nagle), and this end, having just sent the request, delays that ACK
    by up to 40 ms: every small GET then took ~45 ms instead of ~2.5 ms. Only for bodies up to
    1 MiB. (Linux only; elsewhere a no-op.)"""
    try:
        small = int(resp.headers.get("Content-Length") or 0) <= MiB
    except ValueError:
        small = False
    sock = getattr(getattr(resp, "connection", None), "sock", None)
    if sock is not None and _QUICKACK is not None:
        try:
            # A large body: one stall is nothing, and a kept-alive connection left in quick-ACK mode
            # by an earlier small response would ACK every segment of it (measured: 2.0 s of system
            # time for a GiB instead of 0.7): back to delayed ACKs.
            sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1 if small else 0)
        except OSError:
            pass


_QUICKACK = getattr(socket, "TCP_QUICKACK", None)
_S3_CODE = re.compile(rb"<Code>([A-Za-z0-9.]{1,64})</Code>")


def _next_link(header: str) -> str | None:
    for part in header.split(","):
        if 'rel="next"' in part:
            start, end = part.find("<"), part.find(">")
            if start != -1 and end > start:
                return part[start + 1:end]
    return None


def _where(url: str, endpoint: str) -> str:
    return endpoint if origin(url) == origin(endpoint) else f"{urlsplit(url).scheme}://{urlsplit(url).netloc}"


def _reason(err: BaseException) -> str:
    text = str(getattr(err, "reason", None) or err)
    if "Connection refused" in text:
        return "connection refused"
    if "timed out" in text.lower():
        return "timed out"
    return text.split(": ", 1)[-1][:200]
