"""Every response carries an X-Request-Id, as upstream's do: huggingface_hub quotes it in the
errors it raises, so a user's report names the request an operator can find in the logs."""
from __future__ import annotations

import re
import uuid

from django.http import HttpRequest, HttpResponse

# An id a proxy in front set is kept (if it looks like one), so both logs name the same request.
_SAFE = re.compile(r"[A-Za-z0-9._:=/+-]{8,128}")


class RequestIdMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        given = request.META.get("HTTP_X_REQUEST_ID", "")
        request.request_id = given if _SAFE.fullmatch(given) else uuid.uuid4().hex
        response = self.get_response(request)
        response["X-Request-Id"] = request.request_id
        return response
