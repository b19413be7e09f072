"""Git LFS over HTTP as huggingface_hub speaks it: the batch API (basic and multipart uploads,
downloads), the signed upload, part and completion URLs, verification. (Xet, the other way files
arrive: hub.hfapi.xet.)"""
from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from hub.accounts.actor import Actor
from hub.content import blobs, serving, signing
from hub.content.models import UploadSession
from hub.discussions import pulls
from hub.discussions.services import check_can_participate
from hub.errors import BadRequest, Conflict, HubError, NotFound, Unauthorized, UnprocessableEntity
from hub.hfapi.common import read_json, repo_of
from hub.quotas import services as quota_services
from hub.repos import services
from hub.repos.models import Repo
from hub.uploads import sessions, transfers

LFS_JSON = "application/vnd.git-lfs+json"


@csrf_exempt
@require_http_methods(["POST"])
def lfs_batch(request: HttpRequest, prefix: str, ns: str, name: str) -> JsonResponse:
    if not request.user.is_authenticated:
        raise Unauthorized("LFS requires a token: pass one with write access")
    data = read_json(request)
    operation = data.get("operation")
    if operation not in ("upload", "download"):
        raise BadRequest("operation must be 'upload' or 'download'")
    for_pr = operation == "upload" and _lfs_for_pull_request(data)
    repo = repo_of(request, prefix, ns, name, write=operation == "upload" and not for_pr)
    if for_pr:
        check_can_participate(Actor.from_request(request), repo)
    if operation == "download":
        services.check_gate(Actor.from_request(request), repo)
    objects = data.get("objects")
    if not isinstance(objects, list) or len(objects) > 1000:
        raise BadRequest("'objects' must be a list of at most 1000 objects")
    out = []
    valid: dict[str, int] = {}
    for obj in objects:
        oid, size = (obj.get("oid"), obj.get("size")) if isinstance(obj, dict) else (None, None)
        try:
            blobs.check_sha256(oid)
            if not isinstance(size, int) or not 0 <= size <= blobs.MAX_BLOB_SIZE:
                raise BadRequest(f"invalid size {size!r} for {oid}: expected 0 to {blobs.MAX_BLOB_SIZE} bytes")
        except HubError as err:
            out.append({"oid": str(oid), "size": size if isinstance(size, int) else 0,
                        "error": {"code": 422, "message": err.message}})
            continue
        valid[oid] = size
    if operation == "download":
        out += _downloads(request, valid)
        return JsonResponse({"transfer": "basic", "objects": out, "hash_algo": "sha256"}, content_type=LFS_JSON)
    with quota_services.Hold() as hold:
        # Quota before bytes: everything this batch may upload is reserved at once, or nothing is.
        offered = data.get("transfers")
        planned = transfers.plan(valid, ns=repo.namespace, user=request.user, hold=hold, repo=repo,
                                 purpose=f"lfs {repo.repo_id}",
                                 offered=frozenset(t for t in offered if isinstance(t, str))
                                 if isinstance(offered, list) else transfers.OFFERED)
        out += _uploads(request, repo, planned)
        # Handed on to the uploads the answer starts: they can complete it while their URLs live (a
        # failed batch releases it at once).
        multipart = any(p.session is not None for p in planned)
        hold.keep_until(timezone.now() + (sessions.LFS_SESSION_TTL if multipart
                                          else timedelta(seconds=settings.HUB_PRESIGN_SECONDS)))
    return JsonResponse({"transfer": "basic", "objects": out, "hash_algo": "sha256"}, content_type=LFS_JSON)


def _downloads(request: HttpRequest, valid: dict[str, int]) -> list[dict]:
    store = blobs.object_store()
    base = signing.base_url(request)
    referable = blobs.can_reference(request.user, list(valid))
    out = []
    for oid, size in valid.items():
        item = {"oid": oid, "size": size}
        blob = blobs.stored_blob(oid, request.user) if oid in referable else None
        if blob is None:
            item["error"] = {"code": 404, "message": "object not found"}
        elif oid in blobs.corrupt_shas():
            item["error"] = {"code": 409, "message": "the stored bytes failed their integrity check; "
                                                     "the operator has been told"}
        else:
            url = (store.presign_get(blobs.key_of(blob), expires=settings.HUB_PRESIGN_SECONDS)
                   or f"{base}/lfs/objects/{signing.sign('object', {'o': oid}, settings.HUB_PRESIGN_SECONDS)}")
            item["actions"] = {"download": {"href": url, "expires_in": settings.HUB_PRESIGN_SECONDS}}
        out.append(item)
    return out


def _uploads(request: HttpRequest, repo: Repo, planned: list[transfers.Planned]) -> list[dict]:
    """The plan in LFS's words: no action for stored bytes, a basic upload URL, or a multipart
    upload (part URLs in the header, the completion URL as the upload's href)."""
    base = signing.base_url(request)
    verify = {"href": f"{base}/{'datasets/' if repo.type == Repo.DATASET else ''}{repo.repo_id}.git/info/lfs/verify"}
    puts = transfers.put_urls(planned, lifetime=settings.HUB_PRESIGN_SECONDS)
    out = []
    for p in planned:
        item = {"oid": p.oid, "size": p.size}
        if p.transfer == transfers.CheckedPut.name:
            # The verify that makes the bytes a blob names where they went (a token: only this user's).
            token = signing.sign("put", {"o": p.oid, "z": p.size, "p": p.key, "u": request.user.pk},
                                 int(sessions.LFS_SESSION_TTL.total_seconds()))
            item["actions"] = {"upload": {"href": puts[p.oid], "header": {"x-amz-content-sha256": p.oid},
                                          "expires_in": settings.HUB_PRESIGN_SECONDS},
                               "verify": {"href": f"{verify['href']}?token={token}"}}
        elif p.transfer == "basic":
            token = signing.sign("upload", {"o": p.oid, "z": p.size, "u": request.user.pk, "n": repo.namespace_id},
                                 settings.HUB_PRESIGN_SECONDS)
            item["actions"] = {"upload": {"href": f"{base}/lfs/upload/{token}"}, "verify": verify}
        elif p.transfer == "multipart":
            session = p.session
            # upload_id (not a digit key: huggingface_hub ignores it) lets `hub push` resume
            header = {"chunk_size": str(session.part_size), "upload_id": str(session.id)}
            if session.checked:  # no part URLs here: each comes signed with its part's sha256 (hub push)
                header["checked"] = "sha256"
            urls = sessions.part_urls(session, range(1, session.part_count + 1),
                                      lifetime=int(sessions.LFS_SESSION_TTL.total_seconds()),
                                      link=lambda n, token: f"{base}/lfs/part/{token}")
            header |= {str(n): url for n, url in urls.items()}
            item["actions"] = {"upload": {"href": sessions.complete_url(session, lambda t: f"{base}/lfs/complete/{t}"),
                                          "header": header},
                               "verify": verify}
        out.append(item)
    return out


@csrf_exempt
@require_http_methods(["POST"])
def lfs_verify(request: HttpRequest, prefix: str, ns: str, name: str) -> JsonResponse:
    # (it only answers whether the caller's upload is stored: pull requests' uploads are verified too)
    repo = repo_of(request, prefix, ns, name)
    check_can_participate(Actor.from_request(request), repo)
    data = read_json(request)
    if isinstance(data.get("objects"), list):
        return _verify_many(request, repo, data["objects"])
    oid, size = data.get("oid"), data.get("size")
    blobs.check_sha256(oid)
    if not isinstance(size, int):
        raise BadRequest("'size' must be an integer")
    if request.GET.get("token"):
        (blob,) = _finish_puts(request, repo, [(oid, size, request.GET["token"])]).values()
        if isinstance(blob, str):
            raise UnprocessableEntity(blob)
        return JsonResponse({"oid": blob.sha256, "size": blob.size}, content_type=LFS_JSON)
    blob = blobs.stored_blob(oid, request.user)
    if blob is None or not blobs.can_reference(request.user, [oid]):
        raise UnprocessableEntity(f"object {oid} is not stored: it was not uploaded, its upload did not complete, "
                                  "or it was removed as unreferenced before a commit named it; upload it again")
    if blob.size != size:
        raise UnprocessableEntity(f"object {oid} has {blob.size} bytes, not {size}")
    return JsonResponse({"oid": blob.sha256, "size": blob.size}, content_type=LFS_JSON)


def _verify_many(request: HttpRequest, repo: Repo, objects: list) -> JsonResponse:
    """The hub's own extension of verify (`hub push`): the checked PUTs of a whole batch at once,
    [{"oid", "size", "token"}] (each token from its verify href) → {"objects": [{"oid", "size"} or
    with an "error"]}."""
    if len(objects) > 1000:
        raise BadRequest("verify at most 1000 objects at once")
    items = []
    for obj in objects:
        oid, size, token = (obj.get("oid"), obj.get("size"), obj.get("token")) if isinstance(obj, dict) else (
            None, None, None)
        blobs.check_sha256(oid)
        if not isinstance(size, int) or not isinstance(token, str):
            raise BadRequest("each object needs an integer 'size' and the 'token' of its verify href")
        items.append((oid, size, token))
    done = _finish_puts(request, repo, items)
    out = []
    for oid, size, _token in items:
        blob = done[oid]
        out.append({"oid": oid, "size": size, "error": {"code": 422, "message": blob}} if isinstance(blob, str)
                   else {"oid": blob.sha256, "size": blob.size})
    return JsonResponse({"objects": out}, content_type=LFS_JSON)


def _finish_puts(request: HttpRequest, repo: Repo, items: list[tuple[str, int, str]]) -> dict:
    """Checked PUTs (hub.uploads.transfers.CheckedPut) become blobs: {oid: blob or why not}. Each
    token must be this user's, for this object."""
    objects = []
    for oid, size, token in items:
        claims = signing.unsign("put", token, what="verify URL")
        if claims.get("u") != request.user.pk or claims.get("o") != oid or claims.get("z") != size:
            raise BadRequest(f"this verify URL is not for object {oid} of {size} bytes uploaded by you")
        objects.append((oid, size, claims["p"]))
    done = transfers.finish_puts(objects, request.user)
    quota_services.await_commit(repo.namespace_id, *[oid for oid, blob in done.items() if not isinstance(blob, str)])
    return done


@csrf_exempt
@require_http_methods(["PUT"])
def lfs_upload(request: HttpRequest, token: str) -> HttpResponse:
    """Local backend: a basic LFS upload straight into the hub, which verifies as it stores."""
    claims = signing.unsign("upload", token)
    length = _content_length(request)
    if length != claims["z"]:
        raise BadRequest(f"this upload expects {claims['z']} bytes, the request has {length}")
    user = get_user_model().objects.filter(pk=claims.get("u")).first()
    blobs.ingest_stream(request, claims["z"], sha256=claims["o"], user=user)
    if claims.get("n"):
        quota_services.await_commit(claims["n"], claims["o"])
    return HttpResponse(status=200)


@csrf_exempt
@require_http_methods(["PUT"])
def lfs_part(request: HttpRequest, token: str) -> HttpResponse:
    claims = signing.unsign("part", token)
    session = sessions.access_session(claims["s"])
    etag = sessions.store_part(session, claims["n"], request, _content_length(request))
    resp = HttpResponse(status=200)
    resp["ETag"] = etag
    return resp


@csrf_exempt
@require_http_methods(["POST"])
def lfs_complete(request: HttpRequest, token: str) -> JsonResponse:
    claims = signing.unsign("complete", token)
    session = UploadSession.objects.filter(pk=claims["s"]).first()
    if session is None:
        raise NotFound("this upload session does not exist or has expired; start the upload again")
    data = read_json(request)
    if not session.sha256 and data.get("oid") is not None and session.state == UploadSession.OPEN:
        sessions.name_sha256(session, str(data["oid"]))  # (opened before its client knew it: POST /api/v1/uploads)
    if data.get("oid") not in (None, session.sha256):
        raise BadRequest("the oid does not match this upload")
    parts = [(int(p.get("partNumber", 0)), str(p.get("etag", ""))) for p in data.get("parts", [])
             if isinstance(p, dict)]
    blob, again = sessions.finish(session, parts)
    if blob is None:  # completed before, and collected since
        raise Conflict("this upload's bytes are no longer stored; upload the file again")
    if again:
        return JsonResponse({"oid": blob.sha256, "size": blob.size}, content_type=LFS_JSON)
    if session.repo_id is not None:
        quota_services.await_commit(session.repo.namespace_id, blob.sha256)
    return JsonResponse({"oid": blob.sha256, "size": blob.size}, content_type=LFS_JSON)


@require_http_methods(["GET"])
def lfs_object(request: HttpRequest, token: str) -> HttpResponse:
    claims = signing.unsign("object", token, what="download URL")
    blob = blobs.stored_blob(claims["o"])
    if blob is None:
        raise NotFound("object not found")
    blobs.check_servable(blob.sha256)
    return serving.blob_response(request, blobs.key_of(blob), blob.size, {}, blob.sha256)


def _content_length(request: HttpRequest) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or "")
    except ValueError:
        raise BadRequest("Content-Length is required") from None


def _lfs_for_pull_request(data: dict) -> bool:
    """An LFS upload for a pull request: huggingface_hub names no ref for create_pr, refs/pr/N else."""
    ref = data.get("ref")
    name = ref.get("name") if isinstance(ref, dict) else None
    return not isinstance(name, str) or pulls.is_pr_revision(name)
