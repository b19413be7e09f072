"""Where mirrored bytes come from: an upstream speaking the Hugging Face Hub protocol, an S3 prefix,
or a directory on the server. Each source lists revisions and files and streams a file from an
offset; nothing here touches the database.

Errors are of two kinds, because a job treats them differently: SourceError (the source says no:
unknown repo, no access, no such bucket — retrying will not help until someone fixes something)
and TransientSourceError (unreachable, timed out, 5xx, 429 — the task retries with backoff)."""
from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import quote, urljoin, urlparse

import requests

from hub.errors import HubError
from hub.validation import check_path, check_ref_name

log = logging.getLogger("hub.mirrors")

CHUNK = 1 << 20
TIMEOUT = (10, 60)  # connect, read
USER_AGENT = "hub-mirror/1"


class SourceError(Exception):
    """The source refuses or lacks what was asked: fix the job or the source, then retry."""


class TransientSourceError(Exception):
    """The source could not be reached or failed on its side: worth retrying later."""


@dataclass(frozen=True)
class RemoteFile:
    path: str
    size: int
    etag: str  # identifies the content at the source: sha256 (LFS), git blob id, S3 ETag, mtime+inode
    sha256: str = ""  # when the source says it (LFS files)
    git_oid: str = ""  # git blob sha1, when the source says it (non-LFS files of a git-backed hub)
    lfs: bool = False
    at: str = field(default="", compare=False)  # the upstream commit to read it from (HF)
    url: str = field(default="", compare=False)  # a direct (presigned) URL, when the upstream gave one


@dataclass
class Revision:
    name: str  # branch or tag name here; "" = the target's default branch
    kind: str  # "branch" or "tag"
    upstream: str = ""  # upstream commit id; for S3 and directories a digest of the listing
    files: list[RemoteFile] = field(default_factory=list)


def listing_digest(files: list[RemoteFile]) -> str:
    h = hashlib.sha1()
    for f in sorted(files, key=lambda f: f.path):
        h.update(f"{f.path}\0{f.etag}\0{f.size}\n".encode())
    return "listing-" + h.hexdigest()


class Source:
    display: str = ""

    def revisions(self, requested: list[str], notes: list[str]) -> list[Revision]:
        raise NotImplementedError

    def list_files(self, rev: Revision, notes: list[str]) -> list[RemoteFile]:
        raise NotImplementedError

    def open(self, f: RemoteFile, start: int = 0) -> tuple[int, Iterator[bytes]]:
        """Chunks of the file from `start`; returns (offset the chunks start at, chunks). The offset
        is 0 when the source ignored the range: the caller starts over."""
        raise NotImplementedError

    def local_path(self, f: RemoteFile) -> str | None:
        return None

    def close(self) -> None:
        pass


def _valid_paths(files: list[RemoteFile], notes: list[str]) -> list[RemoteFile]:
    out = []
    for f in files:
        try:
            check_path(f.path)
        except HubError as err:
            notes.append(f"skipped {f.path!r}: {err.message}")
            continue
        out.append(f)
    return out


def _single_revision(requested: list[str], what: str) -> list[Revision]:
    if requested:
        raise SourceError(f"{what} has no revisions; leave out --revision (it is mirrored to the default branch)")
    return [Revision("", "branch")]


# --- Hugging Face protocol --------------------------------------------------------------------------

class HFSource(Source):
    def __init__(self, endpoint: str, repo_id: str, repo_type: str, token: str | None = None, *,
                 use_manifest: bool = True) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.use_manifest = use_manifest
        self.repo_id = repo_id
        self.repo_type = repo_type
        self.token = token
        self.origin = _origin(self.endpoint)
        self.display = f"{self.endpoint}/{'datasets/' if repo_type == 'dataset' else ''}{repo_id}"
        self.api = f"{self.endpoint}/api/{repo_type}s/{repo_id}"
        self.session = requests.Session()
        self.session.headers["User-Agent"] = USER_AGENT
        adapter = requests.adapters.HTTPAdapter(pool_connections=4, pool_maxsize=32)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)

    def _headers(self, url: str) -> dict[str, str]:
        # The token goes to the hub's own origin only, never to a storage redirect.
        if self.token and _origin(url) == self.origin:
            return {"Authorization": f"Bearer {self.token}"}
        return {}

    def _get(self, url: str, what: str, **kwargs) -> requests.Response:
        try:
            resp = self.session.get(url, headers=self._headers(url) | kwargs.pop("headers", {}), timeout=TIMEOUT,
                                    **kwargs)
        except requests.RequestException as err:
            raise TransientSourceError(f"cannot reach {self.endpoint} ({what}): {_reason(err)}") from err
        self._check(resp, what)
        return resp

    def _json(self, url: str, what: str):
        resp = self._get(url, what)
        try:
            return resp, resp.json()
        except ValueError:
            raise SourceError(f"{self.endpoint} does not answer like a Hugging Face Hub ({what} is not JSON); "
                              "check the endpoint URL") from None

    def _check(self, resp: requests.Response, what: str) -> None:
        status = resp.status_code
        if status < 400:
            return
        code = resp.headers.get("X-Error-Code", "")
        message = resp.headers.get("X-Error-Message", "")[:300]
        if not message:  # a hub's JSON error only: other bodies (any server a URL names) are not echoed
            try:
                body = resp.json()
                message = str(body.get("error", ""))[:300] if isinstance(body, dict) else ""
            except ValueError:
                message = ""
        resp.close()
        detail = f": {message}" if message else ""
        if status == 429 or status >= 500:
            raise TransientSourceError(f"{self.endpoint} answered {status} to {what}{detail}")
        if code == "RepoNotFound" or (status in (401, 404) and what in ("refs", "revisions")):
            raise SourceError(f"{self.repo_type} {self.repo_id} not found at {self.endpoint} (or it is private or "
                              f"gated: give a token that can read it){detail}")
        if code == "RevisionNotFound":
            raise SourceError(f"revision not found in {self.display} ({what}){detail}")
        if status in (401, 403):
            raise SourceError(f"{self.endpoint} refused {what} ({status}){detail}; give a token that can read "
                              f"{self.repo_id}")
        raise SourceError(f"{self.endpoint} answered {status} to {what}{detail}")

    def revisions(self, requested: list[str], notes: list[str]) -> list[Revision]:
        _, refs = self._json(f"{self.api}/refs", "refs")
        if not isinstance(refs, dict) or not isinstance(refs.get("branches"), list):
            raise SourceError(f"{self.endpoint} does not answer like a Hugging Face Hub (refs); check the URL")
        branches = {b["name"]: b["targetCommit"] for b in refs.get("branches") or []}
        tags = {t["name"]: t["targetCommit"] for t in refs.get("tags") or []}
        if not requested:
            wanted = [(n, "branch") for n in branches] + [(n, "tag") for n in tags]
        else:
            wanted = []
            for rev in requested:
                name = rev.removeprefix("refs/heads/").removeprefix("refs/tags/")
                if name in branches and not rev.startswith("refs/tags/"):
                    wanted.append((name, "branch"))
                elif name in tags:
                    wanted.append((name, "tag"))
                else:
                    raise SourceError(f"{rev!r} is neither a branch nor a tag of {self.display} (branches: "
                                      f"{', '.join(sorted(branches)) or '-'}; tags: {', '.join(sorted(tags)) or '-'})")
        out = []
        for name, kind in dict.fromkeys(wanted):
            try:
                check_ref_name(name, kind)
            except HubError:
                if requested:
                    raise SourceError(f"upstream {kind} {name!r} cannot be named so here") from None
                notes.append(f"skipped upstream {kind} {name!r}: not a valid {kind} name here")
                continue
            out.append(Revision(name, kind, (branches if kind == "branch" else tags)[name]))
        if not out:
            raise SourceError(f"{self.display} has no branch or tag to mirror")
        return out

    def repo_info(self) -> dict:
        """The upstream's repo info (its gating, among others)."""
        _, info = self._json(self.api, "repo info")
        if not isinstance(info, dict):
            raise SourceError(f"{self.endpoint} does not answer like a Hugging Face Hub (repo info); check the URL")
        return info

    def list_files(self, rev: Revision, notes: list[str]) -> list[RemoteFile]:
        files = self._manifest(rev) if self.use_manifest else None
        if files is None:
            files = self._tree(rev)
        return _valid_paths(files, notes)

    def _manifest(self, rev: Revision) -> list[RemoteFile] | None:
        """An upstream that is a hub like this one lists every file with its sha256 and a direct
        download URL, a thousand at a time: no per-file round trip through its web tier, and files
        stored here already are known before anything is downloaded. None elsewhere (huggingface.co)."""
        kind = "dataset" if self.repo_type == "dataset" else "model"
        url = f"{self.endpoint}/api/v1/repos/{kind}/{self.repo_id}/manifest"
        params = {"revision": rev.upstream, "limit": 5000}
        files: list[RemoteFile] = []
        while True:
            try:
                resp = self.session.get(url, params=params, headers=self._headers(url), timeout=TIMEOUT)
            except requests.RequestException as err:
                raise TransientSourceError(f"cannot reach {self.endpoint} (manifest): {_reason(err)}") from err
            try:
                page = resp.json() if resp.status_code == 200 else None
            except ValueError:
                page = None
            if not isinstance(page, dict) or page.get("commit") != rev.upstream or not isinstance(page.get("files"), list):
                resp.close()
                if files or resp.status_code == 429 or resp.status_code >= 500:
                    self._check(resp, "the manifest")
                    raise TransientSourceError(f"{self.endpoint} answered an unexpected manifest page")
                return None
            for f in page["files"]:
                lfs = bool(f["lfs"])
                files.append(RemoteFile(f["path"], int(f["size"]), f["etag"], sha256=f["sha256"],
                                        git_oid="" if lfs else f["etag"], lfs=lfs, at=rev.upstream, url=f["url"]))
            if not page.get("next"):
                return files
            params["cursor"] = page["next"]

    def _tree(self, rev: Revision) -> list[RemoteFile]:
        files = []
        url = f"{self.api}/tree/{quote(rev.upstream, safe='')}?recursive=true&expand=false"
        while url:
            resp, items = self._json(url, f"the file list of {rev.name or rev.upstream}")
            for item in items:
                if item.get("type") != "file":
                    continue
                lfs = item.get("lfs")
                if lfs:
                    files.append(RemoteFile(item["path"], int(item["size"]), lfs["oid"], sha256=lfs["oid"], lfs=True,
                                            at=rev.upstream))
                else:
                    files.append(RemoteFile(item["path"], int(item["size"]), item["oid"], git_oid=item["oid"],
                                            at=rev.upstream))
            nxt = resp.links.get("next", {}).get("url")
            url = urljoin(url, nxt) if nxt else None
        return files

    def history(self, commit: str, max_pages: int = 20) -> list[str]:
        """Commit ids reachable from `commit`, newest first (as far as `max_pages` go; [] if the
        upstream does not list history)."""
        ids: list[str] = []
        url = f"{self.api}/commits/{quote(commit, safe='')}"
        try:
            for _ in range(max_pages):
                resp, items = self._json(url, "history")
                ids += [c["id"] for c in items if isinstance(c, dict) and "id" in c]
                nxt = resp.links.get("next", {}).get("url")
                if not nxt:
                    break
                url = urljoin(url, nxt)
        except SourceError:
            return []
        return ids

    def file_url(self, commit: str, path: str) -> str:
        prefix = "datasets/" if self.repo_type == "dataset" else ""
        return f"{self.endpoint}/{prefix}{self.repo_id}/resolve/{commit}/{quote(path)}"

    def open(self, f: RemoteFile, start: int = 0) -> tuple[int, Iterator[bytes]]:
        if f.url:
            try:
                return self._open(f.url, f, start)
            except (SourceError, TransientSourceError) as err:  # expired or refused: through the hub then
                log.info("direct URL of %s failed (%s); using /resolve", f.path, err)
        return self._open(self.file_url(f.at, f.path), f, start)

    def open_range(self, f: RemoteFile, start: int, end: int) -> tuple[int, Iterator[bytes]]:
        """Bytes [start, end) of the file (by the hub's /resolve/: direct URLs may have expired)."""
        return self._open(self.file_url(f.at, f.path), f, start, end)

    def _open(self, url: str, f: RemoteFile, start: int, end: int | None = None) -> tuple[int, Iterator[bytes]]:
        what = f"the download of {f.path}"
        rng = {"Range": f"bytes={start}-{'' if end is None else end - 1}"} if start or end is not None else {}
        for _ in range(6):  # redirects, followed by hand so the token never leaves the hub's origin
            try:
                resp = self.session.get(url, headers=self._headers(url) | rng, stream=True, allow_redirects=False,
                                        timeout=TIMEOUT)
            except requests.RequestException as err:
                raise TransientSourceError(f"cannot reach {_origin(url)} ({what}): {_reason(err)}") from err
            if resp.is_redirect:
                url = urljoin(url, resp.headers["Location"])
                resp.close()
                continue
            break
        else:
            raise SourceError(f"too many redirects for {what}")
        if start and resp.status_code == 416:
            resp.close()
            return start, iter(())
        self._check(resp, what)
        offset = start if resp.status_code == 206 else 0
        if offset and not resp.headers.get("Content-Range", "").startswith(f"bytes {start}-"):
            resp.close()
            raise TransientSourceError(f"{_origin(url)} answered a different range than asked for {what}")
        return offset, _guard(resp.iter_content(CHUNK), what, resp.close)

    def close(self) -> None:
        self.session.close()


def _origin(url: str) -> str:
    p = urlparse(url)
    return f"{p.scheme}://{p.netloc}"


def _reason(err: BaseException) -> str:
    """The useful part of a transport error ("[Errno 111] Connection refused", "timed out")."""
    if isinstance(err, requests.Timeout):
        return "timed out"
    text = str(err)
    m = re.search(r"\[Errno -?\d+\] [^'\")(]+", text)
    return m.group(0).strip() if m else text[:300]


def _guard(chunks: Iterator[bytes], what: str, close=None) -> Iterator[bytes]:
    """The chunks, with transport failures in the middle turned into TransientSourceError."""
    try:
        yield from chunks
    except (requests.RequestException, OSError) as err:
        raise TransientSourceError(f"{what} broke off: {_reason(err)}") from err
    except Exception as err:
        if type(err).__module__.split(".")[0] in ("urllib3", "botocore", "http"):
            raise TransientSourceError(f"{what} broke off: {err}") from err
        raise
    finally:
        if close is not None:
            close()


# --- S3 ----------------------------------------------------------------------------------------------

class S3Source(Source):
    def __init__(self, url: str, endpoint_url: str = "", credentials: dict | None = None) -> None:
        import boto3
        from botocore.config import Config

        parsed = urlparse(url)
        if parsed.scheme != "s3" or not parsed.netloc:
            raise SourceError(f"not an S3 URL: {url!r} (use s3://bucket/prefix)")
        creds = credentials or {}
        self.bucket = parsed.netloc
        self.prefix = parsed.path.strip("/")
        self.display = url
        self.endpoint_url = endpoint_url or os.environ.get("AWS_ENDPOINT_URL") or None
        kwargs = {}
        if creds.get("aws_access_key_id"):
            kwargs = {"aws_access_key_id": creds["aws_access_key_id"],
                      "aws_secret_access_key": creds.get("aws_secret_access_key", "")}
        config = Config(signature_version="s3v4", retries={"max_attempts": 3, "mode": "standard"},
                        s3={"addressing_style": os.environ.get("HUB_S3_ADDRESSING", "path")},
                        connect_timeout=10, read_timeout=60, max_pool_connections=32)
        self.client = boto3.client("s3", endpoint_url=self.endpoint_url, config=config,
                                   region_name=creds.get("region") or os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
                                   **kwargs)

    def _call(self, fn, what: str, **kwargs):
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

        try:
            return fn(**kwargs)
        except NoCredentialsError:
            raise SourceError("no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY where the "
                              "workers run, or give them with the job") from None
        except ClientError as err:
            code = err.response.get("Error", {}).get("Code", "")
            status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            if status >= 500 or code in ("SlowDown", "ServiceUnavailable", "RequestTimeout", "InternalError"):
                raise TransientSourceError(f"S3 error {code} ({what}): {err}") from err
            if code == "NoSuchBucket":
                raise SourceError(f"bucket {self.bucket!r} does not exist"
                                  f"{f' at {self.endpoint_url}' if self.endpoint_url else ''}") from err
            if code in ("PreconditionFailed", "NoSuchKey"):
                raise TransientSourceError(f"{what}: the object changed or went away since it was listed") from err
            if status in (401, 403) or code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
                raise SourceError(f"S3 refused {what} ({code}): give credentials that can read "
                                  f"s3://{self.bucket}/{self.prefix}") from err
            raise SourceError(f"S3 error {code} ({what}): {err}") from err
        except BotoCoreError as err:
            raise TransientSourceError(f"cannot reach S3 ({what}): {err}") from err

    def revisions(self, requested: list[str], notes: list[str]) -> list[Revision]:
        return _single_revision(requested, "an S3 prefix")

    def _key_prefix(self) -> str:
        return f"{self.prefix}/" if self.prefix else ""

    def list_files(self, rev: Revision, notes: list[str]) -> list[RemoteFile]:
        files = []
        pfx = self._key_prefix()
        token = None
        while True:
            kwargs = {"Bucket": self.bucket, "Prefix": pfx} | ({"ContinuationToken": token} if token else {})
            page = self._call(self.client.list_objects_v2, "listing", **kwargs)
            for obj in page.get("Contents", []):
                if obj["Key"].endswith("/"):
                    continue  # a "directory" marker
                files.append(RemoteFile(obj["Key"][len(pfx):], obj["Size"], obj["ETag"].strip('"')))
            if not page.get("IsTruncated"):
                break
            token = page["NextContinuationToken"]
        if not files:
            raise SourceError(f"{self.display} holds no objects (check the bucket and prefix)")
        return _valid_paths(files, notes)

    def open(self, f: RemoteFile, start: int = 0) -> tuple[int, Iterator[bytes]]:
        kwargs = {"Bucket": self.bucket, "Key": self._key_prefix() + f.path, "IfMatch": f'"{f.etag}"'}
        if start:
            if start >= f.size:
                return start, iter(())
            kwargs["Range"] = f"bytes={start}-"
        resp = self._call(self.client.get_object, f"reading {f.path}", **kwargs)
        offset = start if start and resp.get("ContentRange", "").startswith(f"bytes {start}-") else 0
        body = resp["Body"]
        return offset, _guard(body.iter_chunks(CHUNK), f"reading {f.path}", body.close)


# --- a directory on the server -------------------------------------------------------------------

class LocalSource(Source):
    def __init__(self, path: str) -> None:
        self.root = os.path.abspath(path)
        self.display = self.root
        if not os.path.isdir(self.root):
            raise SourceError(f"{self.root} is not a directory on the server")

    def revisions(self, requested: list[str], notes: list[str]) -> list[Revision]:
        return _single_revision(requested, "a directory")

    def list_files(self, rev: Revision, notes: list[str]) -> list[RemoteFile]:
        files = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            if dirpath == self.root:
                dirnames[:] = [d for d in dirnames if d != ".git"]
            dirnames.sort()
            for name in sorted(filenames):
                full = os.path.join(dirpath, name)
                try:
                    st = os.stat(full)
                except OSError as err:
                    notes.append(f"skipped {full}: {err.strerror}")
                    continue
                rel = os.path.relpath(full, self.root).replace(os.sep, "/")
                files.append(RemoteFile(rel, st.st_size, f"{st.st_mtime_ns:x}-{st.st_ino:x}"))
        if not files:
            raise SourceError(f"{self.root} holds no files")
        return _valid_paths(files, notes)

    def local_path(self, f: RemoteFile) -> str:
        return os.path.join(self.root, *f.path.split("/"))

    def open(self, f: RemoteFile, start: int = 0) -> tuple[int, Iterator[bytes]]:
        try:
            fh = open(self.local_path(f), "rb")
        except OSError as err:
            raise SourceError(f"cannot read {self.local_path(f)}: {err.strerror}") from err
        fh.seek(start)
        return start, _guard(iter(lambda: fh.read(CHUNK), b""), f"reading {f.path}", fh.close)
