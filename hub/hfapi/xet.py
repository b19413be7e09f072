"""Xet as huggingface_hub and hf_xet speak it: the hub's token routes, and the CAS the tokens open
(`{hub}/cas/...`: xorbs, shards, the dedup query, reconstructions, telemetry). The work is
hub.xet.cas's; this module turns HTTP into its calls and its answers into the JSON the Rust client
decodes.

A Xet access token is a capability signed by the hub (hub.content.signing, kind "xet"): the repo,
the user, read or write, for HUB_XET_TOKEN_SECONDS. The client asks for a new one when it lapses (a
401 makes it ask at once)."""
from __future__ import annotations

import json
import logging
import queue
import threading
import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from hub.accounts.actor import Actor
from hub.accounts.middleware import own_bearer_tokens
from hub.accounts.models import ApiToken
from hub.content import blobs, serving, signing
from hub.content.models import BlobProof
from hub.discussions.services import check_can_participate
from hub.errors import (
    BadRequest,
    Forbidden,
    HubError,
    NotFound,
    PayloadTooLarge,
    Unauthorized,
)
from hub.hfapi.common import flag, repo_of
from hub.instances.services import instance_of
from hub.repos import services
from hub.repos.models import Repo, RepoBlob
from hub.xet import cas
from hub.xet.models import XetFile

log = logging.getLogger("hub.xet")

CAS_PREFIX = "cas"


def cas_url(request: HttpRequest) -> str:
    return f"{signing.base_url(request)}/{CAS_PREFIX}"


# --- the hub's token routes --------------------------------------------------------------------------


@require_http_methods(["GET"])
def xet_token(request: HttpRequest, prefix: str, ns: str, name: str, access: str, rev: str = "") -> JsonResponse:
    """`xet-read-token/{rev}` and `xet-write-token/{rev}` (`?create_pr=1` or a refs/pr/N revision: for
    a pull request, which the caller may open without write access): the same 401/403/404 as the rest
    of the API, then a token for this repo and these rights."""
    write = access == "write"
    # (huggingface_hub names the revision "None" when it has none: the default branch)
    for_pr = write and (flag(request, "create_pr") or rev.startswith("refs/pr/"))
    if write and not request.user.is_authenticated:
        raise Unauthorized("uploading needs a token with write access: pass one (HF_TOKEN or `hf auth login`)")
    repo = repo_of(request, prefix, ns, name, write=write and not for_pr)
    actor = Actor.from_request(request)
    if for_pr:
        check_can_participate(actor, repo)
    if not write:
        services.check_gate(actor, repo)
    lifetime = settings.HUB_XET_TOKEN_SECONDS
    api_token = getattr(request, "api_token", None)
    if api_token is not None and api_token.expires is not None:  # (never outlives the token it came from)
        lifetime = max(1, min(lifetime, int((api_token.expires - timezone.now()).total_seconds())))
    exp = int(time.time() + lifetime)
    token = signing.sign("xet", {"r": repo.pk, "u": request.user.pk if request.user.is_authenticated else None,
                                 "t": api_token.pk if api_token is not None else None, "w": write}, lifetime)
    url = cas_url(request)
    resp = JsonResponse({"accessToken": token, "exp": exp, "casUrl": url})
    # (huggingface_hub reads them from headers, hf_xet from the body)
    resp["X-Xet-Cas-Url"], resp["X-Xet-Access-Token"], resp["X-Xet-Token-Expiration"] = url, token, str(exp)
    resp["Cache-Control"] = "no-store"
    return resp


# --- the CAS -------------------------------------------------------------------------------------------


class _Access:
    def __init__(self, repo: Repo, user, write: bool) -> None:
        self.repo, self.user, self.write = repo, user, write


def _access(request: HttpRequest, *, write: bool) -> _Access:
    header = request.META.get("HTTP_AUTHORIZATION", "")
    if header[:7].lower() != "bearer ":
        raise Unauthorized("the Xet CAS needs a Xet access token: the one the hub's xet-read-token or "
                           "xet-write-token route gives")
    try:
        claims = signing.unsign("xet", header[7:].strip(), what="Xet access token")
    except NotFound:
        raise Unauthorized("this Xet access token is not valid or has expired; ask the hub for a new one") from None
    repo = Repo.objects.filter(pk=claims.get("r")).select_related("namespace").first()
    if repo is None:
        raise Unauthorized("the repo this Xet access token was made for no longer exists")
    user = None
    if claims.get("t"):  # made for an API token: only while that token is live (revoking it ends this too)
        row = ApiToken.objects.select_related("user").filter(pk=claims["t"], revoked_at=None).first()
        if row is None or row.expired or not row.user.is_active or (
                row.kind == ApiToken.INSTANCE and instance_of(row) is None):
            raise Unauthorized("the token this Xet access token was made from was revoked or has expired")
        user = row.user
    elif claims.get("u"):  # (a signed-in browser session)
        user = get_user_model().objects.filter(pk=claims["u"], is_active=True).first()
        if user is None:
            raise Unauthorized("the account this Xet access token was made for is disabled")
    if write and not claims.get("w"):
        raise Forbidden("this Xet access token is read-only; uploading needs one from xet-write-token")
    return _Access(repo, user, bool(claims.get("w")))


def _content_length(request: HttpRequest) -> int:
    try:
        n = int(request.META.get("CONTENT_LENGTH") or "")
    except ValueError:
        raise BadRequest("Content-Length is required") from None
    if n < 0:
        raise BadRequest("Content-Length is required")
    return n


@csrf_exempt
@require_http_methods(["POST"])
def xorb(request: HttpRequest, prefix: str, hash: str) -> JsonResponse:
    access = _access(request, write=True)
    inserted = cas.store_xorb(hash, request.read, _content_length(request), user=access.user,
                              ns=access.repo.namespace)
    return JsonResponse({"was_inserted": inserted})


def _shard_body(request: HttpRequest) -> bytes:
    n = _content_length(request)
    if n > cas.MAX_SHARD_BYTES:
        raise PayloadTooLarge(f"a shard may hold at most {cas.MAX_SHARD_BYTES} bytes; this one has {n}: "
                              "upload fewer files per commit")
    return request.read(n)


@csrf_exempt
@require_http_methods(["POST"])
def shard_v1(request: HttpRequest) -> JsonResponse:
    access = _access(request, write=True)
    cas.accept_shard(cas.check_shard(_shard_body(request)), user=access.user, ns=access.repo.namespace)
    return JsonResponse({"result": 1})


@csrf_exempt
@require_http_methods(["POST"])
def shard_v2(request: HttpRequest) -> HttpResponse:
    """As v1, with NDJSON progress while the hub rebuilds and hashes the files (and the last frame
    repeated as a heartbeat, so the client's read timeout never fires). What can be refused before
    the rebuild (a malformed or lying shard, the quota) is an HTTP error as anywhere else."""
    access = _access(request, write=True)
    checked = cas.check_shard(_shard_body(request))
    return StreamingHttpResponse(_shard_events(checked, access), content_type="application/x-ndjson")


def _shard_events(checked: list[cas.Checked], access: _Access):
    events: queue.Queue = queue.Queue()

    def work() -> None:
        from django.db import connections

        try:
            cas.accept_shard(checked, user=access.user, ns=access.repo.namespace,
                             progress=lambda done, total: events.put(
                                 {"type": "validating", "verified": done, "total": total}))
            events.put({"type": "committing", "stage": "syncing"})
            events.put({"type": "result"})
        except HubError as err:
            events.put({"type": "error", "message": err.message, "retryable": False})
        except Exception as err:  # noqa: BLE001 - the stream has begun: the client reads the reason here
            events.put({"type": "error", "message": f"the hub could not store this upload ({type(err).__name__}); "
                                                    "try again", "retryable": True})
            raise
        finally:
            events.put(None)
            connections.close_all()

    thread = threading.Thread(target=work, name="xet-shard", daemon=True)
    thread.start()
    last = {"type": "validating", "verified": 0, "total": 0}
    yield json.dumps(last) + "\n"
    sent = time.monotonic()
    while True:
        try:
            event = events.get(timeout=10)
        except queue.Empty:
            yield json.dumps(last) + "\n"  # heartbeat
            sent = time.monotonic()
            continue
        if event is None:
            break
        if event["type"] == "validating" and time.monotonic() - sent < 0.5:
            last = event
            continue  # (progress at most twice a second)
        last = event
        yield json.dumps(event) + "\n"
        sent = time.monotonic()
    thread.join()


@require_http_methods(["GET"])
def chunk(request: HttpRequest, prefix: str, hash: str) -> HttpResponse:
    """Global dedup: a shard offering the stored xorbs of the files holding this chunk that the
    token's user may read (cas.dedup_shard); 404 when there are none, as the client expects."""
    access = _access(request, write=False)
    shard = cas.dedup_shard(hash, user=access.user)
    if shard is None:
        return HttpResponse(status=404)
    log.info("xet dedup: chunk %s answered with %d bytes of shard", hash[:16], len(shard))
    return HttpResponse(shard, content_type="application/octet-stream")


@csrf_exempt
@require_http_methods(["POST"])
def telemetry(request: HttpRequest) -> HttpResponse:
    """hf_xet's transfer statistics: accepted (from holders of an access token) and not kept."""
    _access(request, write=False)
    request.read(min(_content_length(request), 1 << 20))
    return HttpResponse(status=204)


def _readable_file(access: _Access, file_hash: str) -> XetFile:
    """The Xet file, if the token's repo holds its bytes (any revision) — or, for the uploader, if they
    proved they hold it. A file the token may not read is as missing as one that does not exist."""
    cas.check_hash(file_hash, "file hash")
    f = XetFile.objects.filter(pk=file_hash.lower()).first()
    if f is not None and (RepoBlob.objects.filter(repo=access.repo, blob_id=f.blob_id).exists()
                          or (access.user is not None
                              and BlobProof.objects.filter(user=access.user, blob_id=f.blob_id).exists())):
        blobs.check_servable(f.blob_id)
        return f
    raise NotFound(f"no file {file_hash} in this repo's Xet storage")


def _range(request: HttpRequest, size: int) -> tuple[int, int]:
    """The bytes a reconstruction covers: the Range asked for (416 from its start at or past the end,
    as hf_xet pages through a file), else the whole file."""
    return serving.parse_range(request.META.get("HTTP_RANGE", ""), size) or (0, size)


def _fetch_url(request: HttpRequest, xorb_hash: str) -> str:
    key = cas.xorb_key(xorb_hash)
    store = blobs.object_store()
    return (store.presign_get(key, expires=settings.HUB_PRESIGN_SECONDS)
            or f"{cas_url(request)}/fetch/{signing.sign('xorb', {'h': xorb_hash}, settings.HUB_PRESIGN_SECONDS)}")


def _reconstruction(request: HttpRequest, file_hash: str, version: int) -> JsonResponse:
    access = _access(request, write=False)
    f = _readable_file(access, file_hash)
    start, end = _range(request, f.size)
    skip, pieces = cas.reconstruction(f, start, end)
    urls = {p.xorb: _fetch_url(request, p.xorb) for p in pieces}
    terms = [{"hash": p.xorb, "unpacked_length": p.unpacked, "range": {"start": p.first, "end": p.end}}
             for p in pieces]
    fetch: dict[str, list] = {}
    for p in pieces:
        if version == 1:
            fetch.setdefault(p.xorb, []).append({"range": {"start": p.first, "end": p.end}, "url": urls[p.xorb],
                                                 "url_range": {"start": p.start_byte, "end": p.end_byte - 1}})
        else:
            fetch.setdefault(p.xorb, []).append({"url": urls[p.xorb], "ranges": [
                {"chunks": {"start": p.first, "end": p.end}, "bytes": {"start": p.start_byte,
                                                                       "end": p.end_byte - 1}}]})
    log.info("xet reconstruction v%d of %s, bytes %d-%d, for %s", version, f.hash, start, end - 1,
             access.repo.repo_id)
    body = {"offset_into_first_range": skip, "terms": terms}
    body["fetch_info" if version == 1 else "xorbs"] = fetch
    return JsonResponse(body)


@require_http_methods(["GET"])
def reconstruction_v1(request: HttpRequest, hash: str) -> JsonResponse:
    return _reconstruction(request, hash, 1)


@require_http_methods(["GET"])
def reconstruction_v2(request: HttpRequest, hash: str) -> JsonResponse:
    return _reconstruction(request, hash, 2)


@require_http_methods(["GET"])
def fetch(request: HttpRequest, token: str) -> HttpResponse:
    """A xorb's bytes where the store cannot sign URLs (the local backend): the URL is the capability."""
    claims = signing.unsign("xorb", token, what="xorb URL")
    key = cas.xorb_key(claims["h"])
    store = blobs.object_store()
    size = store.size(key)
    if size is None:
        raise NotFound("this xorb is no longer stored; ask for the file's reconstruction again")
    return serving.serve_local(request, store.local_path(key), size, {}, claims["h"])


for _view in (xorb, shard_v1, shard_v2, chunk, telemetry, reconstruction_v1, reconstruction_v2, fetch):
    own_bearer_tokens(_view)
