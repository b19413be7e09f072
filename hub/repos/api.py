"""Native repo API for the `hub` client (mounted at /api/v1/): thin DRF views over the repo services.

* GET /api/v1/repos/{model|dataset}/{ns}/{name}/manifest — every file of a commit with size, sha256
  and a ready download URL, in pages: `hub pull` fetches and verifies a snapshot without one request
  to the hub per file.
* GET /api/v1/uploads/{upload_id} (DELETE: end it) — what a multipart upload session (opened by the LFS batch, whose
  multipart `header` carries `upload_id`) has received so far, with fresh URLs for the missing
  parts: a killed `hub push` continues from the last stored part.
* POST /api/v1/uploads — a checked upload session for a new file of a repo, opened before its
  client knows the file's sha256 (hashing and sending overlap); PATCH /api/v1/uploads/{upload_id}
  names the sha256 as soon as it is known, and the LFS completion URL finishes it.

Errors are HubErrors: JSON {"error", "code"} plus X-Error-Code, as everywhere on the hub."""
from __future__ import annotations

from urllib.parse import quote

from django.conf import settings
from django.urls import re_path
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hub.accounts.actor import Actor
from hub.content import blobs
from hub.content.models import UploadSession
from hub.content.signing import base_url
from hub.cursors import decode_cursor, encode_cursor
from hub.errors import BadRequest, NotFound, Unauthorized
from hub.repos import gating, manifest, services
from hub.repos.models import Repo
from hub.uploads import sessions, transfers
from hub.validation import check_dir_path, check_path

ErrorSchema = inline_serializer("HubError", {"error": serializers.CharField(), "code": serializers.CharField()})
MANIFEST_FILE = {
    "path": serializers.CharField(),
    "size": serializers.IntegerField(),
    "sha256": serializers.CharField(help_text="sha256 of the content (every file, LFS or not)"),
    "lfs": serializers.BooleanField(),
    "etag": serializers.CharField(help_text="huggingface_hub's cache name: sha256 for LFS, git blob sha1 else"),
    "url": serializers.URLField(help_text="GET it (Range allowed); send the token only to the hub's own origin"),
    "blake3": serializers.CharField(required=False, help_text=(
        "blake3 of the content, when the hub has hashed the stored bytes to their sha256 and this too: "
        "checking a download against it proves the same as against the sha256, at a fraction of the CPU")),
}
ManifestSchema = inline_serializer("Manifest", {
    "repo": serializers.CharField(),
    "type": serializers.ChoiceField([Repo.MODEL, Repo.DATASET]),
    "revision": serializers.CharField(),
    "commit": serializers.CharField(help_text="the revision resolved to a commit id (40 hex)"),
    "files": inline_serializer("ManifestFile", MANIFEST_FILE, many=True),
    "next": serializers.CharField(allow_null=True, help_text="cursor of the next page; null on the last"),
    "expires_in": serializers.IntegerField(help_text="seconds the URLs stay valid"),
    "notice": serializers.CharField(allow_null=True, required=False, help_text=(
        "on the first page, for a catalog entry whose files are not mirrored to this hub yet: what to do")),
})
UploadSchema = inline_serializer("UploadSession", {
    "upload_id": serializers.UUIDField(),
    "sha256": serializers.CharField(),
    "size": serializers.IntegerField(),
    "part_size": serializers.IntegerField(),
    "part_count": serializers.IntegerField(),
    "state": serializers.ChoiceField([UploadSession.OPEN, UploadSession.DONE, UploadSession.ABORTED]),
    "parts": inline_serializer("UploadPart", {"part_number": serializers.IntegerField(),
                                              "size": serializers.IntegerField(),
                                              "etag": serializers.CharField()}, many=True),
    "part_urls": serializers.DictField(child=serializers.URLField(), help_text="part number → PUT URL, missing parts"),
    "complete_url": serializers.URLField(allow_null=True, help_text="POST {oid, parts} here when all parts are in"),
})
TYPES = {"model": Repo.MODEL, "dataset": Repo.DATASET}
CURSOR_HINT = "pass the `next` value of the previous page"


class ManifestView(APIView):
    permission_classes = [AllowAny]  # public repos are readable anonymously; access_repo decides

    @extend_schema(
        summary="Files of a commit with sha256 and download URLs",
        description="Resolves `revision` to a commit and lists the files under `path` in path order, "
                    "paginated by `cursor`. Ask for later pages with `revision` set to the returned "
                    "`commit`. Private repos are 404 to anyone who cannot read them.",
        parameters=[
            OpenApiParameter("repo_type", OpenApiTypes.STR, OpenApiParameter.PATH, enum=list(TYPES)),
            OpenApiParameter("revision", OpenApiTypes.STR, description="branch, tag or commit (default branch)"),
            OpenApiParameter("path", OpenApiTypes.STR, description="a directory (or one file) in the repo"),
            OpenApiParameter("include", OpenApiTypes.STR, many=True, description="glob on the full path"),
            OpenApiParameter("exclude", OpenApiTypes.STR, many=True, description="glob on the full path"),
            OpenApiParameter("cursor", OpenApiTypes.STR),
            OpenApiParameter("limit", OpenApiTypes.INT, description=f"files per page, ≤ {manifest.MAX_LIMIT}"),
        ],
        responses={200: ManifestSchema, 400: ErrorSchema, 401: ErrorSchema, 403: ErrorSchema, 404: ErrorSchema,
                   409: ErrorSchema},
    )
    def get(self, request: Request, repo_type: str, ns: str, name: str) -> Response:
        params = request.query_params
        actor = Actor.from_request(request)
        repo = services.access_repo(actor, TYPES[repo_type], ns, name)
        revision = params.get("revision") or repo.default_branch
        commit = services.resolve_revision(repo, revision)  # (first: pinning a catalog entry may gate it)
        services.check_gate(actor, repo)
        try:
            path = check_dir_path(params.get("path", "").strip("/"))
            limit = int(params.get("limit") or 1000)
        except ValueError:
            raise BadRequest("limit must be an integer") from None
        page = manifest.list_files(repo, commit, path, include=params.getlist("include"),
                                   exclude=params.getlist("exclude"), after=decode_cursor(params.get("cursor"), hint=CURSOR_HINT),
                                   limit=limit)
        blobs.object_store().check_reachable()  # the URLs below lead to it
        base = base_url(request)
        prefix = "datasets/" if repo.type == Repo.DATASET else ""
        resolve = f"{base}/{prefix}{repo.repo_id}/resolve/{commit.oid}/"
        urls, b3 = manifest.download_urls(page.files, expires=settings.HUB_PRESIGN_SECONDS,
                                          fallback=lambda f: resolve + quote(f.path))
        files = [{"path": f.path, "size": f.entry.size, "sha256": f.entry.ref, "lfs": f.entry.lfs,
                  "etag": f.etag, "url": url, **({"blake3": b3[f.entry.ref]} if f.entry.ref in b3 else {})}
                 for f, url in zip(page.files, urls, strict=True)]
        body = {"repo": repo.repo_id, "type": repo.type, "revision": revision, "commit": commit.oid,
                "files": files, "next": encode_cursor(page.after), "expires_in": settings.HUB_PRESIGN_SECONDS}
        if not params.get("cursor"):
            body["notice"] = services.notice(repo)
        resp = Response(body)
        resp["X-Repo-Commit"] = commit.oid
        resp["Cache-Control"] = "private, no-store"  # URLs inside are capabilities
        return resp


def _own_session(request: Request, upload_id: str) -> UploadSession:
    """The caller's LFS upload session; anyone else's is as missing as one that never existed."""
    if not request.user.is_authenticated:
        raise Unauthorized("this needs a token: send Authorization: Bearer <token>")
    session = UploadSession.objects.filter(pk=upload_id, user=request.user, purpose="lfs").first()
    if session is None:
        raise NotFound("no such upload session (it may belong to someone else or have been cleaned up)")
    return session


class UploadSessionView(APIView):
    permission_classes = [AllowAny]  # checked below, to answer in the hub's error vocabulary

    @extend_schema(
        summary="Parts received by a multipart upload session, and URLs for the missing ones",
        description="For the session's own user only; any other session id is 404.",
        responses={200: UploadSchema, 401: ErrorSchema, 404: ErrorSchema},
    )
    def get(self, request: Request, upload_id: str) -> Response:
        session = sessions.revive(_own_session(request, upload_id))  # (a completion whose worker died: open again, parts listed)
        stored: dict[int, tuple[str, int]] = {}
        part_urls: dict[str, str] = {}
        complete_url = None
        base = base_url(request)
        if session.state == UploadSession.OPEN:
            stored = sessions.received_parts(session)
            missing = [n for n in range(1, session.part_count + 1) if n not in stored]
            urls = sessions.part_urls(session, missing, lifetime=int(sessions.LFS_SESSION_TTL.total_seconds()),
                                      link=lambda n, token: f"{base}/lfs/part/{token}")
            part_urls = {str(n): url for n, url in urls.items()}
            complete_url = sessions.complete_url(session, lambda token: f"{base}/lfs/complete/{token}")
        return Response({
            "upload_id": str(session.id), "sha256": session.sha256, "size": session.size, "checked": session.checked,
            "part_size": session.part_size, "part_count": session.part_count, "state": session.state,
            "parts": [{"part_number": n, "size": size, "etag": etag} for n, (etag, size) in sorted(stored.items())],
            "part_urls": part_urls, "complete_url": complete_url,
        })


    @extend_schema(
        summary="Name the sha256 of a session opened without it",
        description="Once per session (the same value again is fine, another one is 400). From then on a "
                    "killed push's next run resumes the session through the LFS batch.",
        request=inline_serializer("UploadSha256", {"sha256": serializers.CharField()}),
        responses={204: None, 400: ErrorSchema, 401: ErrorSchema, 404: ErrorSchema},
    )
    def patch(self, request: Request, upload_id: str) -> Response:
        session = _own_session(request, upload_id)
        if session.state != UploadSession.OPEN:
            raise NotFound("no such open upload session (it may belong to someone else, or have ended)")
        sha256 = request.data.get("sha256") if isinstance(request.data, dict) else None
        sessions.name_sha256(session, str(sha256 or ""))
        return Response(status=204)

    @extend_schema(
        summary="End your own open upload session",
        description="Its parts are freed in the store and what was reserved of the quota for its bytes is "
                    "released (a client whose file changed under it ends its session this way; a session whose "
                    "completion failed on its bytes may be ended too). 404 for a session that is not yours or "
                    "has completed.",
        responses={204: None, 401: ErrorSchema, 404: ErrorSchema},
    )
    def delete(self, request: Request, upload_id: str) -> Response:
        if not sessions.abandon(_own_session(request, upload_id)):
            raise NotFound("no such upload session to end (it may belong to someone else, or have completed)")
        return Response(status=204)


class UnhashedUploadView(APIView):
    permission_classes = [AllowAny]  # checked below, to answer in the hub's error vocabulary

    @extend_schema(
        summary="Start a checked upload of a new file before its sha256 is known",
        description="For `hub push` of a large file: its parts go up (each URL asked for with that part's "
                    "sha256, POST /api/v1/uploads/{id}/parts) while the client hashes the whole file; "
                    "PATCH the session with the sha256 as soon as it is known, then POST {oid, parts} to "
                    "`complete_url`. The size is reserved against the repo owner's quota. 409 HashFirst: "
                    "this hub's store does not check parts, or an earlier upload of this path may resume — "
                    "hash the file and use the LFS batch.",
        request=inline_serializer("UnhashedUpload", {
            "repo_type": serializers.ChoiceField(list(TYPES)), "repo_id": serializers.CharField(),
            "path": serializers.CharField(), "size": serializers.IntegerField()}),
        responses={201: UploadSchema, 400: ErrorSchema, 401: ErrorSchema, 404: ErrorSchema, 409: ErrorSchema,
                   413: ErrorSchema},
    )
    def post(self, request: Request) -> Response:
        if not request.user.is_authenticated:
            raise Unauthorized("this needs a token: send Authorization: Bearer <token>")
        data = request.data if isinstance(request.data, dict) else {}
        repo_type, repo_id, size = data.get("repo_type"), str(data.get("repo_id") or ""), data.get("size")
        if repo_type not in TYPES or repo_id.count("/") != 1:
            raise BadRequest("give repo_type (model or dataset) and repo_id (namespace/name)")
        if not isinstance(size, int) or not 0 < size <= blobs.MAX_BLOB_SIZE:
            raise BadRequest(f"size must be an integer from 1 to {blobs.MAX_BLOB_SIZE}")
        path = check_path(str(data.get("path") or ""))
        ns, name = repo_id.split("/")
        repo = services.access_repo(Actor.from_request(request), TYPES[repo_type], ns, name, write=True)
        session = transfers.start_unhashed(repo, request.user, path, size)
        base = base_url(request)
        return Response({
            "upload_id": str(session.id), "sha256": "", "size": session.size, "checked": True,
            "part_size": session.part_size, "part_count": session.part_count, "state": session.state,
            "parts": [], "part_urls": {},
            "complete_url": sessions.complete_url(session, lambda token: f"{base}/lfs/complete/{token}"),
        }, status=201)


class CheckedPartsView(APIView):
    permission_classes = [AllowAny]  # checked below, to answer in the hub's error vocabulary

    @extend_schema(
        summary="Part URLs of a checked upload session, each signed with its part's sha256",
        description="A session the LFS batch opened for a client that offered `hub-checked-put` (its "
                    "header says `checked: sha256`) hands out no plain part URLs: send {\"parts\": {\"1\": "
                    "\"<sha256 of part 1>\", …}} and PUT each part with the header `x-amz-content-sha256` set "
                    "to that hash; the store refuses other bytes. For the session's own user only.",
        request=inline_serializer("CheckedParts", {"parts": serializers.DictField(child=serializers.CharField())}),
        responses={200: inline_serializer("CheckedPartUrls", {"part_urls": serializers.DictField(
            child=serializers.CharField())}), 400: ErrorSchema, 401: ErrorSchema, 404: ErrorSchema},
    )
    def post(self, request: Request, upload_id: str) -> Response:
        if not request.user.is_authenticated:
            raise Unauthorized("this needs a token: send Authorization: Bearer <token>")
        session = sessions.access_session(upload_id)
        if session.user_id != request.user.pk or session.purpose != "lfs":
            raise NotFound("no such upload session (it may belong to someone else or have been cleaned up)")
        parts = request.data.get("parts") if isinstance(request.data, dict) else None
        if not isinstance(parts, dict) or not parts or len(parts) > 1000:
            raise BadRequest("'parts' must map 1 to 1000 part numbers to the sha256 of each part")
        try:
            hashes = {int(n): sha for n, sha in parts.items()}
        except ValueError:
            raise BadRequest("part numbers must be integers") from None
        urls = sessions.checked_part_urls(session, hashes, lifetime=int(sessions.LFS_SESSION_TTL.total_seconds()))
        resp = Response({"part_urls": {str(n): url for n, url in urls.items()}})
        resp["Cache-Control"] = "private, no-store"  # capabilities
        return resp


NAME = r"(?P<ns>[A-Za-z0-9][A-Za-z0-9._-]*)/(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)"
UUID = r"(?P<upload_id>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"

AccessSchema = inline_serializer("GateAccess", {
    "repo": serializers.CharField(), "gated": serializers.BooleanField(),
    "approval": serializers.ChoiceField([Repo.AUTO, Repo.MANUAL], allow_null=True, help_text=(
        "auto: a request is accepted as it is made; manual: the repo's owners review each one")),
    "conditions": serializers.CharField(help_text="what the caller agrees to"),
    "accepted": serializers.BooleanField(help_text="whether the caller may download the files"),
    "status": serializers.ChoiceField(list(gating.STATUSES), allow_null=True,
                                      help_text="the caller's request: null if they made none (or need none)"),
    "rejection_reason": serializers.CharField(allow_null=True, help_text="why the owners rejected the request")})
AccessRequestBody = inline_serializer("GateAccessRequest", {
    "fields": serializers.DictField(required=False, help_text="answers to the gate's questions, if it asks any")})


class GateAccessView(APIView):
    permission_classes = [AllowAny]  # access_repo and the services decide

    @extend_schema(operation_id="repo_access_status",
                   summary="A gated repo's conditions, and where your access request stands",
                   parameters=[OpenApiParameter("repo_type", OpenApiTypes.STR, OpenApiParameter.PATH,
                                                enum=list(TYPES))],
                   responses={200: AccessSchema, 404: ErrorSchema})
    def get(self, request: Request, repo_type: str, ns: str, name: str) -> Response:
        actor = Actor.from_request(request)
        repo = services.access_repo(actor, TYPES[repo_type], ns, name)
        return Response(self._state(actor, repo))

    @extend_schema(operation_id="repo_access_accept",
                   summary="Accept a gated repo's conditions: ask for access",
                   description="On an automatic gate the request is accepted at once; on a manual one it is "
                               "pending until an owner of the repo accepts it (`status`).",
                   parameters=[OpenApiParameter("repo_type", OpenApiTypes.STR, OpenApiParameter.PATH,
                                                enum=list(TYPES))],
                   request=AccessRequestBody,
                   responses={200: AccessSchema, 400: ErrorSchema, 401: ErrorSchema, 403: ErrorSchema,
                              404: ErrorSchema})
    def post(self, request: Request, repo_type: str, ns: str, name: str) -> Response:
        actor = Actor.from_request(request)
        repo = services.access_repo(actor, TYPES[repo_type], ns, name)
        data = request.data if isinstance(request.data, dict) else {}
        gating.do_request_access(actor, repo, data.get("fields"))
        return Response(self._state(actor, repo))

    @staticmethod
    def _state(actor, repo) -> dict:
        from hub.errors import GatedRepo

        try:
            services.check_gate(actor, repo)
            accepted = True
        except GatedRepo:
            accepted = False
        mine = gating.request_of(actor, repo)
        return {"repo": repo.repo_id, "gated": repo.gated, "approval": repo.gate_mode if repo.gated else None,
                "conditions": repo.gate_prompt, "accepted": accepted,
                "status": mine.status if mine else None,
                "rejection_reason": (mine.rejection_reason or None) if mine else None}


urlpatterns = [
    re_path(r"^repos/(?P<repo_type>model|dataset)/" + NAME + r"/manifest$", ManifestView.as_view(),
            name="repo-manifest"),
    re_path(r"^repos/(?P<repo_type>model|dataset)/" + NAME + r"/access$", GateAccessView.as_view(),
            name="repo-access"),
    re_path(r"^uploads$", UnhashedUploadView.as_view(), name="upload-sessions"),
    re_path(r"^uploads/" + UUID + r"$", UploadSessionView.as_view(), name="upload-session"),
    re_path(r"^uploads/" + UUID + r"/parts$", CheckedPartsView.as_view(), name="upload-session-parts"),
]
