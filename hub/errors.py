"""One error vocabulary for the whole server: each failure has a machine-readable code, an HTTP
status and a sentence a person can act on. The middleware renders them for the HF-compatible API
(X-Error-Code / X-Error-Message headers that huggingface_hub maps to its own exceptions), the
native API (JSON) and the web pages."""
from __future__ import annotations

import logging
import re
import sys

from django.http import HttpRequest, HttpResponse, JsonResponse

log = logging.getLogger(__name__)


class HubError(Exception):
    status = 400
    code = "BadRequest"

    def __init__(self, message: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.headers = headers or {}


class BadRequest(HubError):
    status, code = 400, "BadRequest"


class InvalidPath(HubError):
    status, code = 400, "InvalidPath"


class UnprocessablePath(InvalidPath):
    """A path the Hugging Face protocol's commit or preupload cannot take: 422, as upstream answers
    a well-formed request naming one (the other doors say 400)."""

    status = 422


class Unauthorized(HubError):
    status, code = 401, "Unauthorized"


class TokenExpired(Unauthorized):
    """A token that was good but is past its expiry: a code of its own, so that a client can say
    "make a new one" rather than "check the token"."""

    status, code = 401, "TokenExpired"


class Forbidden(HubError):
    status, code = 403, "Forbidden"


class RepoNotFound(HubError):
    status, code = 404, "RepoNotFound"


class RevisionNotFound(HubError):
    status, code = 404, "RevisionNotFound"


class EntryNotFound(HubError):
    status, code = 404, "EntryNotFound"


class RepoMoved(HubError):
    """The repo was moved (renamed or transferred): a 307 to the same request at its new id, which
    clients follow (huggingface_hub follows redirects that stay on the hub, keeping the method and
    body). `locate` fills in Location from the request, where the error is rendered."""

    status, code = 307, "RepoMoved"

    def __init__(self, asked: str, new_id: str) -> None:
        super().__init__(f"{asked} was moved to {new_id}; use the new id")
        self.asked, self.new_id = asked, new_id

    def locate(self, request: HttpRequest) -> None:
        path = request.get_full_path()
        old = f"/{self.asked}"
        at = path.find(old)  # the first occurrence is the repo's segment: what comes before is fixed
        if at != -1:
            self.headers["Location"] = path[:at] + f"/{self.new_id}" + path[at + len(old):]


class NotFound(HubError):
    status, code = 404, "NotFound"


class Conflict(HubError):
    status, code = 409, "Conflict"


class DiscussionNotFound(HubError):
    """No discussion or pull request of that number on a repo the caller can read."""

    status, code = 404, "DiscussionNotFound"


class MergeConflict(Conflict):
    """A pull request's changes touch files its target branch changed since the pull request
    started: merging would overwrite them, so it is refused, naming them (also as a list in the
    body's filesWithConflicts, upstream's name)."""

    code = "MergeConflict"

    def __init__(self, message: str, files: list[str]) -> None:
        super().__init__(message)
        self.body = {"filesWithConflicts": files}


class CompletionInProgress(HubError):
    """Another request is completing this upload session: come back (Retry-After), do not start over."""

    status, code = 409, "CompletionInProgress"

    def __init__(self, stale_seconds: int) -> None:
        super().__init__(
            "another request is completing this upload (assembling and verifying its bytes); retry in a few "
            f"seconds. Nothing you sent is lost: if the server doing it died, the upload reopens after "
            f"{stale_seconds} s and a retry completes it", headers={"Retry-After": "5"})


class GatedRepo(HubError):
    """The repo is gated and the caller has not accepted its conditions (huggingface_hub raises
    GatedRepoError on this code)."""

    status, code = 403, "GatedRepo"


class BlobCorrupt(HubError):
    """Stored bytes failed their integrity check: never served, so no client gets wrong bytes."""

    status, code = 409, "BlobCorrupt"


class BlobNotLocal(HubError):
    """The blob's bytes are at an upstream, not in the store: the door that reads them asks the
    on-demand fetch (hub.mirrors.ondemand) instead. Only a door without that path lets it out."""

    status, code = 503, "BlobNotLocal"

    def __init__(self, sha256: str) -> None:
        super().__init__(f"the bytes of {sha256} are not on this hub yet (fetched from upstream on first "
                         "download); download the file to fetch them, then retry", headers={"Retry-After": "5"})
        self.sha256 = sha256


class UpstreamUnavailable(HubError):
    """An upstream this hub fetches from on demand cannot be reached, is too slow or fails."""

    status, code = 503, "UpstreamUnavailable"

    def __init__(self, message: str, *, retry_after: int = 30, status: int = 503) -> None:
        super().__init__(message, headers={"Retry-After": str(retry_after)})
        self.status = status


class PreconditionFailed(HubError):
    status, code = 412, "PreconditionFailed"


class PayloadTooLarge(HubError):
    status, code = 413, "PayloadTooLarge"


class RangeNotSatisfiable(HubError):
    status, code = 416, "RangeNotSatisfiable"


class UnprocessableEntity(HubError):
    status, code = 422, "UnprocessableEntity"


class TooManyRequests(HubError):
    status, code = 429, "TooManyRequests"

    def __init__(self, message: str, retry_after: int = 60) -> None:
        super().__init__(message, headers={"Retry-After": str(retry_after)})


class StorageUnavailable(HubError):
    status, code = 503, "StorageUnavailable"

    def __init__(self, message: str = "the object store is unreachable; retry in a few seconds") -> None:
        super().__init__(message, headers={"Retry-After": "5"})


class StorageFull(HubError):
    status, code = 507, "StorageFull"

    def __init__(self) -> None:
        super().__init__("the hub's object storage is full, so it cannot take these bytes now; what you sent so "
                         "far is kept. Retry later (an operator has to free space or add more)",
                         headers={"Retry-After": "60"})


def store_error(exc: Exception) -> HubError:
    """The HubError for a StoreUnavailableError: full, or unreachable."""
    from storage.store.objectstore import StoreFullError

    return StorageFull() if isinstance(exc, StoreFullError) else StorageUnavailable()


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class DatabaseUnavailable(HubError):
    status, code = 503, "DatabaseUnavailable"

    def __init__(self, message: str = "the database is unreachable (restarting?); retry in a few seconds") -> None:
        super().__init__(message, headers={"Retry-After": "2"})


def database_down(exc: BaseException) -> bool:
    """Is `exc` the database being unreachable (restarting, network), rather than a bad query?
    A connection that failed or no longer answers says so; an error on a live connection does not."""
    from django.db import InterfaceError, OperationalError, connection

    if isinstance(exc, InterfaceError):
        return True
    if not isinstance(exc, OperationalError):
        return False
    if connection.connection is None:
        return True
    try:
        return not connection.is_usable()
    except Exception:  # noqa: BLE001 - whatever the driver raises, the connection is gone
        return True


def error_response(err: HubError) -> HttpResponse:
    status, code = err.status, err.code
    if isinstance(err, RepoMoved) and "Location" not in err.headers:
        # Named in a body (a move, a delete), not in the URL: nothing to redirect, so "not here".
        status, code = RepoNotFound.status, RepoNotFound.code
    resp = JsonResponse({"error": err.message, "code": code, **getattr(err, "body", {})}, status=status)
    resp["X-Error-Code"] = code
    # Header values must be latin-1 without control characters (a message may quote a hostile path).
    resp["X-Error-Message"] = _CONTROL.sub(" ", err.message).encode("latin-1", "replace").decode("latin-1")
    for k, v in err.headers.items():
        resp[k] = v
    return resp


class HubErrorMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        if isinstance(exc, HubError):
            if isinstance(exc, RepoMoved):
                exc.locate(request)
            return error_response(exc)
        if too_big(exc):
            return error_response(body_too_large())
        from storage.store.objectstore import StoreUnavailableError

        if isinstance(exc, StoreUnavailableError):
            log.warning("object store unavailable: %s", exc)
            return error_response(store_error(exc))
        if database_down(exc):
            log.warning("database unavailable: %s", exc)
            return error_response(DatabaseUnavailable())
        return None


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: an exception outside any view (in a middleware, e.g. the token lookup) that is
    the database or the store being away is a 503 with a retry hint too, not an opaque 500."""
    from django.views.defaults import server_error as default

    from storage.store.objectstore import StoreUnavailableError

    exc = sys.exc_info()[1]
    if isinstance(exc, StoreUnavailableError):
        return error_response(store_error(exc))
    if exc is not None and database_down(exc):
        return error_response(DatabaseUnavailable())
    return default(request)


def _documented_error(description: str, codes: list[str]) -> dict:
    """An error answer as the schema documents it: Retry-After, and {"error", "code"} with `codes`."""
    return {
        "description": description,
        "headers": {"Retry-After": {"schema": {"type": "integer"}, "description": "seconds to wait"}},
        "content": {"application/json": {"schema": {
            "type": "object", "required": ["error", "code"],
            "properties": {"error": {"type": "string"}, "code": {"type": "string", "enum": codes}},
        }}},
    }


def document_unavailable(result: dict, generator, request, public) -> dict:
    """drf-spectacular hook: any operation may meet the database or the object store away (a
    restart, a network cut) and answer 503 with Retry-After, and any write may find the store full
    (507); the schema says so once for all."""
    for operations in result.get("paths", {}).values():
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            if method.lower() in ("post", "put", "patch") and "507" not in responses:
                responses["507"] = _documented_error(
                    "the object store is full; what was sent so far is kept; retry after Retry-After seconds (an "
                    "operator has to free space)", ["StorageFull"])
            if "503" not in responses:
                responses["503"] = _documented_error(
                    "the database or the object store is unreachable; retry after Retry-After seconds",
                    ["StorageUnavailable", "DatabaseUnavailable"])
    return result


_DRF_CODES = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed",
              406: "NotAcceptable", 415: "UnsupportedMediaType", 429: "TooManyRequests"}


def too_big(exc: Exception) -> bool:
    from django.core.exceptions import RequestDataTooBig

    return isinstance(exc, RequestDataTooBig)


def body_too_large() -> PayloadTooLarge:
    from django.conf import settings

    return PayloadTooLarge(f"the request body is too large: this hub takes at most "
                           f"{settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes in one request (HUB_MAX_REQUEST_BODY); "
                           "send big files through LFS or a volume upload session")


def drf_exception_handler(exc, context):
    """DRF's own errors (authentication, parsing, validation) in the hub's one error shape."""
    from rest_framework.views import exception_handler

    if isinstance(exc, HubError):
        if isinstance(exc, RepoMoved) and context.get("request") is not None:
            exc.locate(context["request"])
        return error_response(exc)
    if too_big(exc):
        return error_response(body_too_large())
    response = exception_handler(exc, context)
    if response is None:
        return None
    data = response.data
    if isinstance(data, dict) and "detail" in data and len(data) == 1:
        message = str(data["detail"])
    elif isinstance(data, dict):
        message = "; ".join(f"{k}: {' '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in data.items())
    else:
        message = " ".join(map(str, data)) if isinstance(data, list) else str(data)
    if response.status_code == 401:
        message = "authentication required: pass a token as 'Authorization: Bearer <token>'"
    err = HubError(message)
    err.status, err.code = response.status_code, _DRF_CODES.get(response.status_code, "Error")
    out = error_response(err)
    for k, v in response.items():
        if k.lower() in ("www-authenticate", "retry-after", "allow"):
            out[k] = v
    return out
