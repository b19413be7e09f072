"""HTTP client of the hub, for the `hub` CLI and the `hub://` filesystem. Imports no Django.

Settings come from the environment — HUB_ENDPOINT and HUB_TOKEN, falling back to HF_ENDPOINT and
HF_TOKEN — or from what `hub login` saved. Every failure becomes a HubClientError whose message is
one sentence a person can act on; the server's {"error", "code"} body and X-Error-Code header feed
it. Transient failures are retried under one written-down policy (RETRY below).

The transport is urllib3, chosen by measurement (bench/transfer_stack.py): one loopback stream to a
fresh file moves ~2.4 GB/s with urllib3 and requests, ~0.4–0.6 GB/s with httpx; urllib3 is the
layer requests adds nothing to for bulk bytes, and its PoolManager is thread-safe.
"""
from __future__ import annotations

import json
import os
import random
import stat
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urljoin, urlsplit

import urllib3


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gpu-hub")
    except PackageNotFoundError:
        return "dev"


USER_AGENT = f"hub-cli/{_version()}; urllib3/{urllib3.__version__}"
MODEL, DATASET = "model", "dataset"
REPO_TYPES = (MODEL, DATASET)


# --- errors -----------------------------------------------------------------------------------------

class HubClientError(Exception):
    """A failure with a one-line message for a person. `code` is the server's X-Error-Code (or a
    client-side code such as ConnectionError), `status` the HTTP status if there was one."""

    def __init__(self, message: str, *, code: str = "Error", status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status


class NotFoundError(HubClientError):
    pass


class AuthError(HubClientError):
    pass


class PermissionDeniedError(HubClientError):
    pass


class QuotaExceededError(HubClientError):
    pass


class ConflictError(HubClientError):
    pass


class TransportError(HubClientError):
    """The hub or the store could not be reached, or kept failing after the retries."""


class IntegrityError(HubClientError):
    """Bytes received do not match the sha256 or size the hub announced."""


class UsageError(HubClientError):
    """Bad input on the client side (a malformed repo id, a missing endpoint...)."""


_BY_STATUS: dict[int, type[HubClientError]] = {401: AuthError, 403: PermissionDeniedError, 404: NotFoundError,
                                               409: ConflictError, 413: QuotaExceededError}


# --- retry policy -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class RetryPolicy:
    """Retry 429 and 5xx answers and transport errors, `attempts` times in all, waiting
    min(cap, base·2^n) with ±25 % jitter — or the server's Retry-After, if it says so (capped too).
    With a `budget`, the waits of one call add up to at most that many seconds, whatever Retry-After
    says (a mount promises an answer in bounded time). Nothing else is retried: a 4xx is an answer,
    not an accident."""

    attempts: int = 5
    base: float = 0.5
    cap: float = 8.0
    statuses: frozenset[int] = frozenset({429, 500, 502, 503, 504})
    budget: float | None = None

    def next_wait(self, attempt: int, waited: float, retry_after: str | None = None) -> float | None:
        """The wait before try number `attempt` + 2, or None when there is to be no such try."""
        if attempt + 1 >= self.attempts:
            return None
        delay = self.delay(attempt, retry_after)
        if self.budget is not None:
            if waited >= self.budget:
                return None
            delay = min(delay, self.budget - waited)
        return delay

    def delay(self, attempt: int, retry_after: str | None = None) -> float:
        if retry_after:
            try:
                return min(self.cap, max(0.0, float(retry_after)))
            except ValueError:
                pass
        return min(self.cap, self.base * 2**attempt) * random.uniform(0.75, 1.25)


RETRY = RetryPolicy()
NO_RETRY = RetryPolicy(attempts=1)
COMMIT_RETRY = RetryPolicy(attempts=3, statuses=frozenset({429, 503}))
# Completing an upload: also a 409 that says when to come back (Retry-After) — another request is
# completing the same session, or one whose server died, which the hub reopens within a minute or so.
COMPLETE_RETRY = RetryPolicy(attempts=40, cap=10.0, statuses=RETRY.statuses | {409}, budget=300.0)
# Transport errors worth another try: refused/reset connections, timeouts, truncated bodies.
RETRYABLE_ERRORS: tuple[type[BaseException], ...] = (urllib3.exceptions.HTTPError, ConnectionError, TimeoutError)


# --- settings ---------------------------------------------------------------------------------------

def config_dir() -> Path:
    if os.environ.get("HUB_CONFIG_DIR"):
        return Path(os.environ["HUB_CONFIG_DIR"])
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "hub"


def _credentials_path() -> Path:
    return config_dir() / "credentials.json"


def load_credentials() -> dict:
    """{"endpoint": last endpoint logged in to, "tokens": {endpoint: token}}."""
    try:
        data = json.loads(_credentials_path().read_text())
    except (FileNotFoundError, ValueError):
        return {"endpoint": None, "tokens": {}}
    if not isinstance(data, dict) or not isinstance(data.get("tokens"), dict):
        return {"endpoint": None, "tokens": {}}
    return data


def save_credentials(data: dict) -> Path:
    """Writes the credentials file readable by its owner only (0600), atomically."""
    path = _credentials_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, stat.S_IRUSR | stat.S_IWUSR)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh, indent=1)
    os.replace(tmp, path)
    return path


def normalize_endpoint(url: str) -> str:
    url = url.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"not a hub URL: {url!r} (expected http(s)://host[:port])", code="BadEndpoint")
    return url


NOT_LOGGED_IN = "not logged in: set HUB_TOKEN or run `hub login`"
# Where a token came from (Settings.token_source), as messages name it.
_SOURCES = {"hub login": "the token `hub login` saved", "--token": "--token", "stdin": "stdin",
            "prompt": "the prompt", "argument": "the caller"}


@dataclass(frozen=True)
class Settings:
    endpoint: str
    token: str | None
    # where the token came from: "HUB_TOKEN", "HF_TOKEN", "hub login" (saved), "--token", "stdin" or
    # "prompt" (being given to `hub login`), "argument" (HubClient(token=...)), "" (none)
    token_source: str


def resolve_settings(endpoint: str | None = None, token: str | bool | None = None) -> Settings:
    """Endpoint: argument, HUB_ENDPOINT, HF_ENDPOINT, the last `hub login`. Token: argument (False
    means anonymous), HUB_TOKEN, HF_TOKEN, the token `hub login` saved for that endpoint."""
    creds = load_credentials()
    ep = endpoint or os.environ.get("HUB_ENDPOINT") or os.environ.get("HF_ENDPOINT") or creds.get("endpoint")
    if not ep:
        raise UsageError("no hub endpoint: set HUB_ENDPOINT=https://your-hub (or run `hub login --endpoint URL`)",
                         code="NoEndpoint")
    ep = normalize_endpoint(ep)
    if token is False:
        return Settings(ep, None, "")
    if isinstance(token, str) and token:
        return Settings(ep, token, "argument")
    for var in ("HUB_TOKEN", "HF_TOKEN"):
        if os.environ.get(var):
            return Settings(ep, os.environ[var].strip(), var)
    saved = creds["tokens"].get(ep)
    return Settings(ep, saved, "hub login" if saved else "")


# --- repo paths -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class HubPath:
    """A parsed `[hub://]datasets/NS/NAME[@REV][/PATH]`, `models/...`, or `volume[/PATH]`."""

    kind: str  # "repo" or "volume"
    repo_type: str | None = None
    repo_id: str | None = None
    revision: str | None = None
    path: str = ""

    @property
    def prefix(self) -> str:
        """The spelling of the repo part: datasets/NS/NAME[@REV], or volume."""
        if self.kind == "volume":
            return "volume"
        rev = f"@{self.revision}" if self.revision else ""
        return f"{self.repo_type}s/{self.repo_id}{rev}"


def _check_name(part: str, text: str) -> str:
    ok = part and part[0].isalnum() and all(c.isalnum() or c in "._-" for c in part)
    if not ok:
        raise UsageError(f"not a repo id: {text!r} (expected namespace/name)", code="BadRepoId")
    return part


def parse_hub_path(text: str, default_type: str | None = None) -> HubPath:
    """Parses what users type: `datasets/alice/x@v1/dir/f.csv`, `hub://models/alice/m`, `volume/ckpt`,
    or `alice/x@main/f` when `default_type` says which kind of repo that is. A revision with '/'
    (refs/pr/1) is recognised as such, or may be given percent-encoded."""
    from urllib.parse import unquote

    raw = text
    if text.startswith("hub://"):
        text = text[len("hub://"):]
    text = text.strip("/")
    if text == "volume" or text.startswith("volume/"):
        return HubPath("volume", path=text[len("volume"):].strip("/"))
    parts = text.split("/")
    if parts[0] in ("datasets", "models"):
        repo_type = parts[0][:-1]
        parts = parts[1:]
    elif default_type in REPO_TYPES:
        repo_type = default_type
    else:
        raise UsageError(f"not a hub path: {raw!r} (expected datasets/NS/NAME[@REV]/PATH, models/... or volume/...)",
                         code="BadPath")
    if len(parts) < 2:
        raise UsageError(f"not a repo id: {raw!r} (expected namespace/name)", code="BadRepoId")
    ns, name = parts[0], parts[1]
    rest = parts[2:]
    revision = None
    if "@" in name:
        name, revision = name.split("@", 1)
        if revision.startswith("refs/") or (revision == "refs" and rest):
            # refs/pr/1 and friends: the revision swallows two more segments
            tail = revision.split("/")[1:] if revision.startswith("refs/") else []
            need = 2 - len(tail)
            revision = "/".join(["refs", *tail, *rest[:need]])
            rest = rest[need:]
        revision = unquote(revision)
        if not revision:
            raise UsageError(f"empty revision in {raw!r}", code="BadRevision")
    _check_name(ns, raw)
    _check_name(name, raw)
    return HubPath("repo", repo_type, f"{ns}/{name}", revision, "/".join(p for p in rest if p))


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
                 settings: Settings | None = None, max_connections: int = 32,
                 connect_timeout: float = 10.0, read_timeout: float = 60.0) -> None:
        self.settings = settings or resolve_settings(endpoint, token)
        self.endpoint = self.settings.endpoint
        self.token = self.settings.token
        self._origin = origin(self.endpoint)
        self.timeout = urllib3.Timeout(connect=connect_timeout, read=read_timeout)
        self.pool = urllib3.PoolManager(num_pools=32, maxsize=max_connections, retries=False,
                                        timeout=self.timeout, blocksize=1 << 20)

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
                                         preload_content=preload, redirect=False, timeout=timeout or self.timeout)
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
            return TransportError(f"the storage server answered HTTP {status} for a download or upload URL"
                                  f"{': ' + text if text else ''}", code=code or "StoreError", status=status)
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
        """Pages of the native manifest: {"commit", "files": [{path, size, sha256, lfs, etag, url}],
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
        data: dict = {"operation": "upload", "transfers": ["basic", "multipart"], "hash_algo": "sha256",
                      "objects": objects}
        if ref:
            data["ref"] = {"name": ref}
        return self.json("POST", f"{file_prefix(repo_type)}{repo_id}.git/info/lfs/objects/batch", data=data,
                         headers={"Accept": lfs, "Content-Type": lfs})

    def upload_status(self, upload_id: str) -> dict:
        return self.json("GET", f"api/v1/uploads/{upload_id}")

    def commit(self, repo_type: str, repo_id: str, revision: str, payload: bytes) -> dict:
        """POSTs an NDJSON commit. Not retried once the hub may have acted on it (a retry could
        commit twice); only answers that say it was not processed (429, 503) are retried."""
        url = self.url(f"{api_prefix(repo_type)}/{repo_id}/commit/{quote(revision, safe='')}")
        resp = self.request("POST", url, body=payload, headers={"Content-Type": "application/x-ndjson"},
                            retry=COMMIT_RETRY, timeout=urllib3.Timeout(connect=10, read=600))
        return json.loads(resp.data)


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
