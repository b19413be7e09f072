"""One error vocabulary for the whole server: each failure has a machine-readable code, an HTTP
status and a sentence a person can act on. The middleware renders them for the HF-compatible API
(X-Error-Code / X-Error-Message headers that huggingface_hub maps to its own exceptions), the
native API (JSON) and the web pages."""
from __future__ import annotations

import logging

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


class Unauthorized(HubError):
    status, code = 401, "Unauthorized"


class Forbidden(HubError):
    status, code = 403, "Forbidden"


class RepoNotFound(HubError):
    status, code = 404, "RepoNotFound"


class RevisionNotFound(HubError):
    status, code = 404, "RevisionNotFound"


class EntryNotFound(HubError):
    status, code = 404, "EntryNotFound"


class NotFound(HubError):
    status, code = 404, "NotFound"


class Conflict(HubError):
    status, code = 409, "Conflict"


class PreconditionFailed(HubError):
    status, code = 412, "PreconditionFailed"


class PayloadTooLarge(HubError):
    status, code = 413, "PayloadTooLarge"


class RangeNotSatisfiable(HubError):
    status, code = 416, "RangeNotSatisfiable"


class UnprocessableEntity(HubError):
    status, code = 422, "UnprocessableEntity"


class StorageUnavailable(HubError):
    status, code = 503, "StorageUnavailable"

    def __init__(self, message: str = "the object store is unreachable; retry in a few seconds") -> None:
        super().__init__(message, headers={"Retry-After": "5"})


def error_response(err: HubError) -> HttpResponse:
    resp = JsonResponse({"error": err.message, "code": err.code}, status=err.status)
    resp["X-Error-Code"] = err.code
    # Header values must be latin-1 and one line.
    resp["X-Error-Message"] = err.message.replace("\n", " ").encode("latin-1", "replace").decode("latin-1")
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
            return error_response(exc)
        from storage.objectstore import StoreUnavailableError

        if isinstance(exc, StoreUnavailableError):
            log.warning("object store unavailable: %s", exc)
            return error_response(StorageUnavailable())
        return None


def drf_exception_handler(exc, context):
    from rest_framework.views import exception_handler

    if isinstance(exc, HubError):
        return error_response(exc)
    return exception_handler(exc, context)
