"""The native volume API (/api/volume/...): thin DRF views over hub.volumes.services and .uploads.

Every view parses, calls one domain function and renders. Errors are HubErrors, rendered as
{"error": ..., "code": ...} with their status; DRF's own exceptions are turned into the same shape.
A token is required (401 without one); read-only tokens may read but not change anything (403).
"""
from __future__ import annotations

from functools import cached_property

from django.http import HttpResponse
from django.utils.http import http_date
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions
from rest_framework.permissions import SAFE_METHODS, AllowAny, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hub.accounts.actor import Actor
from hub.content import blobs, serving, signing
from hub.content.signing import base_url
from hub.cursors import decode_cursor, encode_cursor
from hub.errors import BadRequest, Forbidden, HubError, NotFound, PreconditionFailed, Unauthorized
from hub.volumes import services, uploads
from hub.volumes.models import Volume
from hub.volumes.serializers import (
    CheckedPartsSerializer,
    CheckedPartUrlsSerializer,
    EntrySerializer,
    ErrorSerializer,
    ListingSerializer,
    MkdirSerializer,
    MoveSerializer,
    UploadCompleteSerializer,
    UploadCreateSerializer,
    UploadSerializer,
    entry_data,
    validated,
)

BINARY = {"application/octet-stream": OpenApiTypes.BINARY}


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "hub.accounts.auth.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema) -> dict:
        return {"type": "http", "scheme": "bearer", "description": "a token from `manage.py hub_token`"}


def errors(*statuses: int) -> dict:
    return {s: OpenApiResponse(ErrorSerializer) for s in statuses}


def _as_hub_error(exc: exceptions.APIException) -> HubError:
    detail = exc.detail
    if isinstance(detail, dict):
        detail = "; ".join(f"{k}: {v}" for k, v in detail.items())
    elif isinstance(detail, list):
        detail = " ".join(str(d) for d in detail)
    err = HubError(str(detail))
    err.status = exc.status_code
    err.code = "BadRequest" if isinstance(exc, exceptions.ParseError) else type(exc).__name__
    return err


class VolumeView(APIView):
    # Base of the volume views: the caller's own volume, token required. (No docstring: the
    # OpenAPI schema would show it on every operation.)
    permission_classes = [IsAuthenticated]

    def permission_denied(self, request: Request, message=None, code=None) -> None:
        if request.authenticators and not request.successful_authenticator:
            raise Unauthorized("this needs a token: send Authorization: Bearer <token>",
                               headers={"WWW-Authenticate": "Bearer"})
        raise Forbidden(str(message or "you may not do this"))

    def initial(self, request: Request, *args, **kwargs) -> None:
        super().initial(request, *args, **kwargs)
        self.actor = Actor.from_request(request)
        if request.method not in SAFE_METHODS and not self.actor.can_write_volume:
            raise Forbidden("this token is read-only; create a write token to change your volume")

    def handle_exception(self, exc: Exception):
        if isinstance(exc, exceptions.APIException):
            exc = _as_hub_error(exc)
        return super().handle_exception(exc)

    @cached_property
    def volume(self) -> Volume:
        return services.volume_of(self.request.user)


# --- request helpers --------------------------------------------------------------------------------

def _int_param(value: str | None, default: int, name: str) -> int:
    if value in (None, ""):
        return default
    try:
        n = int(value)
    except ValueError:
        raise BadRequest(f"'{name}' must be an integer, not {value!r}") from None
    if n < 1:
        raise BadRequest(f"'{name}' must be at least 1")
    return n


def _flag(request: Request, name: str) -> bool:
    return (request.query_params.get(name) or "").lower() in ("1", "true", "yes")


def _etag(value: str | None) -> str | None:
    """An ETag from a header or a JSON field, unquoted ('*' stays '*')."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    if "," in value:
        raise BadRequest("If-Match takes a single ETag here")
    if value.startswith("W/"):
        value = value[2:]
    return value.strip('"')


def _if_none_match_star(request: Request) -> bool:
    value = request.headers.get("If-None-Match")
    if value is None:
        return False
    if value.strip() != "*":
        raise BadRequest("on writes, If-None-Match takes only '*' (create, never replace)")
    return True


def _content_length(request: Request) -> int:
    try:
        n = int(request.META.get("CONTENT_LENGTH") or "")
    except ValueError:
        raise BadRequest("Content-Length is required (chunked uploads are not accepted)") from None
    if n < 0:
        raise BadRequest("Content-Length cannot be negative")
    return n


def _file_headers(entry) -> dict[str, str]:
    return {"ETag": f'"{entry.blob_id}"', "Last-Modified": http_date(entry.mtime.timestamp()),
            "Accept-Ranges": "bytes", "Cache-Control": "private, no-cache"}


def _with_etag(response: Response, entry) -> Response:
    if entry.blob_id:
        response["ETag"] = f'"{entry.blob_id}"'
    return response


PATH_PARAM = OpenApiParameter("path", OpenApiTypes.STR, OpenApiParameter.PATH,
                              description="file path in the volume, '/'-separated, percent-encoded")
IF_MATCH = OpenApiParameter("If-Match", OpenApiTypes.STR, OpenApiParameter.HEADER,
                            description="write or delete only if the file's ETag is this ('*': if it exists)")


# --- tree -------------------------------------------------------------------------------------------

class ListView(VolumeView):
    @extend_schema(operation_id="volume_ls", summary="List a directory, one page at a time (ordered by name)",
                   parameters=[OpenApiParameter("path", OpenApiTypes.STR, description="directory; empty = root"),
                               OpenApiParameter("cursor", OpenApiTypes.STR, description="next_cursor of the page before"),
                               OpenApiParameter("limit", OpenApiTypes.INT,
                                                description=f"entries per page (default {services.PAGE}, "
                                                            f"at most {services.MAX_PAGE})")],
                   responses={200: ListingSerializer, **errors(400, 401, 404, 409)})
    def get(self, request: Request) -> Response:
        path = services.check_volume_path(request.query_params.get("path"), root_ok=True, directory=True)
        limit = _int_param(request.query_params.get("limit"), services.PAGE, "limit")
        cursor = decode_cursor(request.query_params.get("cursor"),
                               hint="pass back the next_cursor of the previous page")
        rows, after = services.list_dir(self.volume, path, cursor, limit)
        base = f"{path}/" if path else ""
        return Response({"path": path, "items": [entry_data(e, base + e.name) for e in rows],
                         "next_cursor": encode_cursor(after)})


class StatView(VolumeView):
    @extend_schema(operation_id="volume_stat", summary="Type, size, mtime and ETag of a path",
                   parameters=[OpenApiParameter("path", OpenApiTypes.STR, description="empty = root")],
                   responses={200: EntrySerializer, **errors(400, 401, 404)})
    def get(self, request: Request) -> Response:
        path = services.check_volume_path(request.query_params.get("path"), root_ok=True, directory=True)
        entry = services.access_entry(self.volume, path)
        return _with_etag(Response(entry_data(entry, path)), entry)


class MkdirView(VolumeView):
    @extend_schema(operation_id="volume_mkdir", summary="Create a directory",
                   request=MkdirSerializer,
                   responses={201: EntrySerializer, 200: OpenApiResponse(EntrySerializer, "existed (parents=true)"),
                              **errors(400, 401, 403, 404, 409)})
    def post(self, request: Request) -> Response:
        data = validated(MkdirSerializer, request.data)
        path = services.check_volume_path(data["path"], directory=True)
        entry, created = services.do_mkdir(self.volume, path, parents=data["parents"])
        return Response(entry_data(entry, path), status=201 if created else 200)


class MoveView(VolumeView):
    @extend_schema(operation_id="volume_move",
                   summary="Rename or move a file or a directory (metadata only, whatever its size)",
                   request=MoveSerializer, responses={200: EntrySerializer, **errors(400, 401, 403, 404, 409)})
    def post(self, request: Request) -> Response:
        data = validated(MoveSerializer, request.data)
        src, dst = services.check_volume_path(data["src"]), services.check_volume_path(data["dst"])
        entry = services.do_move(self.volume, src, dst, overwrite=data["overwrite"], parents=data["parents"])
        return _with_etag(Response(entry_data(entry, dst)), entry)


class FileView(VolumeView):
    @extend_schema(operation_id="volume_read",
                   summary="Read a file (Range supported; with S3, a 302 to a short-lived URL of the bytes)",
                   parameters=[PATH_PARAM, OpenApiParameter("Range", OpenApiTypes.STR, OpenApiParameter.HEADER),
                               OpenApiParameter("If-Match", OpenApiTypes.STR, OpenApiParameter.HEADER,
                                                description="read only this version (412 once the file changed)")],
                   responses={(200, "application/octet-stream"): OpenApiTypes.BINARY,
                              (206, "application/octet-stream"): OpenApiTypes.BINARY,
                              302: OpenApiResponse(description="redirect to the bytes"),
                              304: OpenApiResponse(description="If-None-Match matched"),
                              **errors(400, 401, 404, 409, 412, 416)})
    def get(self, request: Request, path: str) -> HttpResponse:
        path = services.check_volume_path(path)
        entry = services.access_file(self.volume, path)
        headers = _file_headers(entry)
        wanted = _etag(request.headers.get("If-Match"))
        if wanted and wanted not in ("*", entry.blob_id):
            raise PreconditionFailed(f"{path} has changed (its ETag is now {entry.blob_id}); open it again",
                                     headers={"ETag": f'"{entry.blob_id}"'})
        known = request.headers.get("If-None-Match")
        if known and (known.strip() == "*" or entry.blob_id in {_etag(t) for t in known.split(",")}):
            resp = HttpResponse(status=304)
            for k, v in headers.items():
                resp[k] = v
            return resp
        return serving.blob_response(request._request, blobs.key_for(entry.blob_id), entry.size, headers,
                                     path.rsplit("/", 1)[-1])

    @extend_schema(operation_id="volume_head", summary="Size and ETag of a file", parameters=[PATH_PARAM],
                   responses={200: OpenApiResponse(description="headers only"), **errors(401, 404, 409)})
    def head(self, request: Request, path: str) -> HttpResponse:
        path = services.check_volume_path(path)
        entry = services.access_file(self.volume, path)
        resp = HttpResponse(status=200, content_type="application/octet-stream")
        for k, v in _file_headers(entry).items():
            resp[k] = v
        resp["Content-Length"] = str(entry.size)
        return resp

    @extend_schema(operation_id="volume_write",
                   summary="Write a whole file from the request body; visible atomically once complete",
                   description="Missing parent directories are created. For large files use upload sessions.",
                   parameters=[PATH_PARAM, IF_MATCH,
                               OpenApiParameter("If-None-Match", OpenApiTypes.STR, OpenApiParameter.HEADER,
                                                description="'*': create only, never replace"),
                               OpenApiParameter("X-Content-Sha256", OpenApiTypes.STR, OpenApiParameter.HEADER,
                                                description="optional: reject the write unless the bytes hash to this")],
                   request=BINARY,
                   responses={200: EntrySerializer, 201: EntrySerializer, **errors(400, 401, 403, 409, 412, 413, 422)})
    def put(self, request: Request, path: str) -> Response:
        path = services.check_volume_path(path)
        length = _content_length(request)
        sha256 = request.headers.get("X-Content-Sha256")
        if sha256:
            blobs.check_sha256(sha256)
        entry, created = services.do_write(
            self.volume, path, request._request, length, user=request.user,
            if_match=_etag(request.headers.get("If-Match")), if_none_match=_if_none_match_star(request),
            sha256=sha256)
        return _with_etag(Response(entry_data(entry, path), status=201 if created else 200), entry)

    @extend_schema(operation_id="volume_delete", summary="Delete a file or a directory",
                   parameters=[PATH_PARAM, IF_MATCH,
                               OpenApiParameter("recursive", OpenApiTypes.BOOL,
                                                description="needed to delete a directory that is not empty")],
                   responses={204: None, **errors(400, 401, 403, 404, 409, 412)})
    def delete(self, request: Request, path: str) -> Response:
        path = services.check_volume_path(path, directory=True)
        services.do_delete(self.volume, path, recursive=_flag(request, "recursive"),
                           if_match=_etag(request.headers.get("If-Match")))
        return Response(status=204)


# --- upload sessions --------------------------------------------------------------------------------

def _upload_data(request: Request, session) -> dict:
    received, missing = uploads.parts_status(session)
    base = base_url(request)

    def link(n: int, token: str) -> str:
        return f"{base}/api/volume/uploads/{session.id}/parts/{n}?sig={token}"

    urls = uploads.part_urls(session, missing, link)
    return {"id": session.id, "status": "open", "path": session.target["path"], "size": session.size,
            "sha256": session.sha256, "part_size": session.part_size, "part_count": session.part_count,
            "received": received, "parts": {str(n): u for n, u in urls.items()}, "expires": session.expires,
            "checked": session.checked, "entry": None}


def _done_data(session_id, path: str, entry) -> dict:
    return {"id": session_id, "status": "done", "path": path, "size": entry.size, "sha256": entry.blob_id,
            "part_size": None, "part_count": None, "received": [], "parts": {}, "expires": None,
            "checked": False, "entry": entry_data(entry, path)}


class UploadsView(VolumeView):
    @extend_schema(operation_id="volume_upload_create",
                   summary="Start (or resume) a resumable upload of one file",
                   description=("Reserves `size` bytes of quota. Send each part to its URL in `parts` "
                                "(HTTP PUT, the part's bytes as the body, no credentials), then complete. "
                                "Starting again with the same path, size and sha256 resumes the open session. "
                                "If you may already use these bytes, the file is written at once (status done)."),
                   request=UploadCreateSerializer,
                   responses={201: UploadSerializer, 200: OpenApiResponse(UploadSerializer, "resumed"),
                              **errors(400, 401, 403, 409, 412, 413)})
    def post(self, request: Request) -> Response:
        data = validated(UploadCreateSerializer, request.data)
        path = services.check_volume_path(data["path"])
        start = uploads.do_create_upload(self.volume, request.user, path, size=data["size"], sha256=data["sha256"],
                                         part_size=data["part_size"], if_match=_etag(data["if_match"]),
                                         if_none_match=data["if_none_match"], checked=data["checked"])
        if start.session is None:
            return _with_etag(Response(_done_data(None, path, start.entry), status=201), start.entry)
        return Response(_upload_data(request, start.session), status=200 if start.resumed else 201)


class UploadView(VolumeView):
    @extend_schema(operation_id="volume_upload_status",
                   summary="Parts received so far, and fresh URLs for the missing ones",
                   responses={200: UploadSerializer, **errors(401, 404)})
    def get(self, request: Request, upload_id: str) -> Response:
        session = uploads.access_upload(request.user, upload_id)
        uploads.touch(session)
        return Response(_upload_data(request, session))

    @extend_schema(operation_id="volume_upload_abort", summary="Abort an upload and release its reservation",
                   responses={204: None, **errors(401, 403, 404)})
    def delete(self, request: Request, upload_id: str) -> Response:
        uploads.do_abort(uploads.access_upload(request.user, upload_id))
        return Response(status=204)


class UploadCheckedPartsView(VolumeView):
    @extend_schema(operation_id="volume_upload_checked_parts",
                   summary="URLs for parts of a checked upload, each signed with its part's sha256",
                   request=CheckedPartsSerializer, responses={200: CheckedPartUrlsSerializer, **errors(400, 401, 404)})
    def post(self, request: Request, upload_id: str) -> Response:
        data = validated(CheckedPartsSerializer, request.data or {})
        session = uploads.access_upload(request.user, upload_id)
        if len(data["parts"]) > 1000:
            raise BadRequest("ask for at most 1000 parts at once")
        try:
            hashes = {int(n): sha for n, sha in data["parts"].items()}
        except ValueError:
            raise BadRequest("part numbers must be integers") from None
        urls = uploads.checked_part_urls(session, hashes)
        resp = Response({"parts": {str(n): url for n, url in urls.items()}})
        resp["Cache-Control"] = "private, no-store"  # capabilities
        return resp


class UploadCompleteView(VolumeView):
    @extend_schema(operation_id="volume_upload_complete",
                   summary="Verify size and sha256 and install the file atomically",
                   request=UploadCompleteSerializer,
                   responses={200: UploadSerializer, **errors(400, 401, 403, 404, 409, 412, 413, 422)})
    def post(self, request: Request, upload_id: str) -> Response:
        data = validated(UploadCompleteSerializer, request.data or {})
        session = uploads.access_upload(request.user, upload_id, open_only=False)
        entry = uploads.do_complete(self.volume, session, sha256=data["sha256"])
        return _with_etag(Response(_done_data(session.id, session.target["path"], entry)), entry)


class UploadPartView(VolumeView):
    # Local backend: a part through the hub. The URL's signature authorizes it (as a presigned S3
    # URL would); without one, the session owner's token does.

    permission_classes = [AllowAny]

    @extend_schema(operation_id="volume_upload_part", summary="Upload one part (local backend)",
                   parameters=[OpenApiParameter("sig", OpenApiTypes.STR, description="from the part's URL")],
                   request=BINARY, responses={200: OpenApiResponse(description="stored; ETag header"),
                                              **errors(400, 401, 404)})
    def put(self, request: Request, upload_id: str, number: str) -> Response:
        n = int(number)
        sig = request.query_params.get("sig")
        if sig:
            claims = signing.unsign("part", sig, what="part URL (ask the session for fresh ones)")
            if claims != {"s": upload_id, "n": n}:
                raise NotFound("this part URL belongs to another part")
            session = uploads.access_upload_by_id(upload_id)
        elif request.user.is_authenticated:
            session = uploads.access_upload(request.user, upload_id)
        else:
            raise Unauthorized("a part needs its signed URL or the owner's token")
        etag = uploads.do_upload_part(session, n, request._request, _content_length(request))
        resp = Response({"part": n, "etag": etag})
        resp["ETag"] = etag
        return resp
