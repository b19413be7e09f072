from __future__ import annotations

from rest_framework.authentication import BaseAuthentication


class BearerTokenAuthentication(BaseAuthentication):
    """DRF view of what TokenAuthMiddleware already resolved."""

    def authenticate(self, request):
        row = getattr(request._request, "api_token", None)
        if row is None:
            return None
        return (row.user, row)

    def authenticate_header(self, request) -> str:
        return "Bearer"
