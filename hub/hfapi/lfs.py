"""Git LFS over HTTP as huggingface_hub speaks it: the batch API (basic and multipart uploads,
downloads), the signed upload, part and completion URLs, verification; and the Xet token routes,
which say this hub does not speak Xet yet."""
from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import signing
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from hub.discussions import pulls
from hub.discussions.services import check_can_participate
from hub.errors import BadRequest, Conflict, HubError, NotFound, Unauthorized, UnprocessableEntity
from hub.hfapi.common import base_url, read_json, repo_of
from hub.quotas import services as quota_services
from hub.repos import blobs, services, serving
from hub.repos.models import Repo, UploadSession
from hub.repos.services import Actor

LFS_JSON = "application/vnd.git-lfs+json"
NO_XET = ("This hub has no Xet support: set HF_HUB_DISABLE_XET=1 (or use `hub push`) to upload the files "
          "it stores through LFS (weights, data and other binary files, as .gitattributes marks them, and "
          f"files of {settings.HUB_LFS_THRESHOLD // 10**6} MB or more)")
XET_WARNING = "xet; " + NO_XET


def _sign(payload: dict) -> str:
    return signing.dumps(payload, salt="hub.lfs", compress=True)


def _unsign(token: str, max_age: int | timedelta) -> dict:
    try:
        return signing.loads(token, salt="hub.lfs", max_age=max_age)
    except signing.SignatureExpired:
        raise NotFound("this upload URL has expired; start the upload again") from None
    except signing.BadSignature:
        raise NotFound("this upload URL is not valid") from None


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
    referable = blobs.can_reference(request.user, list(valid))
    stored = {oid: blobs.stored_blob(oid) for oid in valid}
    if operation == "upload":  # a commit will reference these without uploading: GC's grace starts now
        blobs.touch([oid for oid, b in stored.items() if b is not None and oid in referable])
    with quota_services.Hold() as hold:
        if operation == "upload":
            # Quota before bytes: everything this batch may upload is reserved at once, or nothing is.
            need = {oid: size for oid, size in valid.items() if stored[oid] is None or oid not in referable}
            hold.reserve_many(repo.namespace, need, user=request.user, purpose=f"lfs {repo.repo_id}")
        out = _batch_objects(request, repo, operation, valid, stored, referable, out)
        # Handed on to the uploads the answer starts: they can complete it while their URLs live (a
        # failed batch releases it at once).
        sessions = [o for o in out if "header" in o.get("actions", {}).get("upload", {})]
        hold.keep_until(timezone.now() + (blobs.LFS_SESSION_TTL if sessions
                                          else timedelta(seconds=settings.HUB_PRESIGN_SECONDS)))
    return JsonResponse({"transfer": "basic", "objects": out, "hash_algo": "sha256"}, content_type=LFS_JSON)


def _batch_objects(request: HttpRequest, repo: Repo, operation: str, valid: dict[str, int], stored: dict,
                   referable: set[str], out: list[dict]) -> list[dict]:
    store = blobs.object_store()
    base = base_url(request)
    lfs_base = f"{base}/{'datasets/' if repo.type == Repo.DATASET else ''}{repo.repo_id}.git/info/lfs"
    for oid, size in valid.items():
        item = {"oid": oid, "size": size}
        blob = stored[oid]
        if blob is not None and oid not in referable:
            blob = None  # stored, but this caller has not shown they hold the bytes: upload them
        if operation == "download":
            if blob is None:
                item["error"] = {"code": 404, "message": "object not found"}
            elif oid in blobs.corrupt_shas():
                item["error"] = {"code": 409, "message": "the stored bytes failed their integrity check; "
                                                         "the operator has been told"}
            else:
                url = (store.presign_get(blobs.key_of(blob), expires=settings.HUB_PRESIGN_SECONDS)
                       or f"{base}/lfs/objects/{_sign({'o': oid})}")
                item["actions"] = {"download": {"href": url, "expires_in": settings.HUB_PRESIGN_SECONDS}}
        elif blob is None:
            verify = {"href": f"{lfs_base}/verify"}
            # Basic uploads only where the hub itself receives (and hashes) the bytes. A presigned PUT
            # to the blob's key would stay valid after verification and let its holder overwrite
            # verified, shared bytes; a multipart upload, even of one part, is completed by the hub,
            # after which its part URLs are dead.
            if store.local_path(blobs.blob_key(oid)) is not None and (
                    size < blobs.MIN_PART * 2 or size <= settings.HUB_MULTIPART_CHUNK):
                url = f"{base}/lfs/upload/{_sign({'o': oid, 'z': size, 'u': request.user.pk, 'n': repo.namespace_id})}"
                item["actions"] = {"upload": {"href": url}, "verify": verify}
            else:
                session = blobs.open_session(sha256=oid, size=size, repo=repo, user=request.user)
                # upload_id (not a digit key: huggingface_hub ignores it) lets `hub push` resume
                header = {"chunk_size": str(session.part_size), "upload_id": str(session.id)}
                for n in range(1, session.part_count + 1):
                    header[str(n)] = (store.presign_part(session.key, session.store_upload_id, n,
                                                         expires=int(blobs.LFS_SESSION_TTL.total_seconds()))
                                      or f"{base}/lfs/part/{_sign({'s': str(session.id), 'n': n})}")
                item["actions"] = {"upload": {"href": f"{base}/lfs/complete/{_sign({'s': str(session.id)})}",
                                              "header": header},
                                   "verify": verify}
        out.append(item)
    return out


@csrf_exempt
@require_http_methods(["POST"])
def lfs_verify(request: HttpRequest, prefix: str, ns: str, name: str) -> JsonResponse:
    # (it only answers whether the caller's upload is stored: pull requests' uploads are verified too)
    check_can_participate(Actor.from_request(request), repo_of(request, prefix, ns, name))
    data = read_json(request)
    oid, size = data.get("oid"), data.get("size")
    blobs.check_sha256(oid)
    if not isinstance(size, int):
        raise BadRequest("'size' must be an integer")
    blob = blobs.stored_blob(oid)
    if blob is None or not blobs.can_reference(request.user, [oid]):
        raise UnprocessableEntity(f"object {oid} is not stored: it was not uploaded, its upload did not complete, "
                                  "or it was removed as unreferenced before a commit named it; upload it again")
    if blob.size != size:
        raise UnprocessableEntity(f"object {oid} has {blob.size} bytes, not {size}")
    return JsonResponse({"oid": blob.sha256, "size": blob.size}, content_type=LFS_JSON)


@csrf_exempt
@require_http_methods(["PUT"])
def lfs_upload(request: HttpRequest, token: str) -> HttpResponse:
    """Local backend: a basic LFS upload straight into the hub, which verifies as it stores."""
    claims = _unsign(token, max_age=settings.HUB_PRESIGN_SECONDS)
    length = _content_length(request)
    if length != claims["z"]:
        raise BadRequest(f"this upload expects {claims['z']} bytes, the request has {length}")
    user = get_user_model().objects.filter(pk=claims.get("u")).first()
    blobs.ingest_stream_verified(request, claims["o"], claims["z"], user)
    if claims.get("n"):
        quota_services.await_commit(claims["n"], claims["o"])
    return HttpResponse(status=200)


@csrf_exempt
@require_http_methods(["PUT"])
def lfs_part(request: HttpRequest, token: str) -> HttpResponse:
    claims = _unsign(token, max_age=blobs.LFS_SESSION_TTL)
    session = blobs.access_session(claims["s"])
    etag = blobs.store_part(session, claims["n"], request, _content_length(request))
    resp = HttpResponse(status=200)
    resp["ETag"] = etag
    return resp


@csrf_exempt
@require_http_methods(["POST"])
def lfs_complete(request: HttpRequest, token: str) -> JsonResponse:
    claims = _unsign(token, max_age=blobs.LFS_SESSION_TTL)
    session = UploadSession.objects.filter(pk=claims["s"]).first()
    if session is not None:
        session = blobs.revive(session)  # (a completion whose worker died: open again)
    if session is not None and session.state == UploadSession.DONE and not blobs.completing(session):
        # Completed already (a retry after a lost answer): say so — but only once the bytes are in.
        if blobs.stored_blob(session.sha256) is not None:
            return JsonResponse({"oid": session.sha256, "size": session.size}, content_type=LFS_JSON)
        raise Conflict("this upload's bytes are no longer stored; upload the file again")
    session = blobs.access_session(claims["s"])  # (409, retry, while another completion is under way)
    data = read_json(request)
    if data.get("oid") not in (None, session.sha256):
        raise BadRequest("the oid does not match this upload")
    parts = [(int(p.get("partNumber", 0)), str(p.get("etag", ""))) for p in data.get("parts", [])
             if isinstance(p, dict)]
    blob = blobs.complete_session(session, parts)
    if session.repo_id is not None:
        quota_services.await_commit(session.repo.namespace_id, blob.sha256)
    return JsonResponse({"oid": blob.sha256, "size": blob.size}, content_type=LFS_JSON)


@require_http_methods(["GET"])
def lfs_object(request: HttpRequest, token: str) -> HttpResponse:
    claims = _unsign(token, max_age=settings.HUB_PRESIGN_SECONDS)
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


@require_http_methods(["GET"])
def xet_token(request: HttpRequest, **kwargs) -> JsonResponse:
    raise HubError(NO_XET)


def _lfs_for_pull_request(data: dict) -> bool:
    """An LFS upload for a pull request: huggingface_hub names no ref for create_pr, refs/pr/N else."""
    ref = data.get("ref")
    name = ref.get("name") if isinstance(ref, dict) else None
    return not isinstance(name, str) or pulls.is_pr_revision(name)
