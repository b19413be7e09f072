from __future__ import annotations

from django.http import HttpRequest

from hub.errors import Forbidden, HubError, TooManyRequests, Unauthorized, error_response


class TokenAuthMiddleware:
    """`Authorization: Bearer <token>` → request.user and request.api_token (None for sessions).

    A token that is present but wrong is an error at once (401): silently treating the caller as
    anonymous would turn "your token is wrong" into a misleading "repo not found"."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest):
        request.api_token = None
        request.instance = None
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if header[:7].lower() == "bearer ":
            from hub.accounts.services import authenticate_token

            try:
                row = authenticate_token(header[7:].strip())
            except HubError as failed:
                if limit_failures(request):
                    return error_response(TooManyRequests("too many requests with a wrong token from your "
                                                          "address; wait a minute, then use a valid token"))
                return error_response(failed)
            request.api_token = row
            request.user = row.user
            if row.kind == row.INSTANCE:
                from hub.instances import services as instances

                request.instance = instances.instance_of(row)
                if request.instance is None:
                    return error_response(Unauthorized("this instance was revoked; its token no longer works"))
                if not instances.scope_allows(request.path):
                    return error_response(Forbidden(
                        "an instance token can only read its mount spec, the repos attached to the instance "
                        "and its owner's volume; use your own token for this"))
            request._dont_enforce_csrf_checks = True
        return self.get_response(request)


def limit_failures(request: HttpRequest) -> bool:
    """Counts a failed authentication (wrong token or password) against the client address; True
    once the address is over HUB_AUTH_FAIL_RATE: answer 429, so guessing tokens stays hopeless."""
    from django.conf import settings
    from django_ratelimit.core import is_ratelimited

    return is_ratelimited(request, group="hub.auth-failures", key="ip", rate=settings.HUB_AUTH_FAIL_RATE,
                          increment=True)


def limit_token_creation(request: HttpRequest, user) -> None:
    """New tokens (API tokens, instances) per user: at most HUB_TOKEN_CREATE_RATE."""
    from django.conf import settings
    from django_ratelimit.core import is_ratelimited

    if is_ratelimited(request, group="hub.token-create", key=lambda group, req: str(user.pk),
                      rate=settings.HUB_TOKEN_CREATE_RATE, increment=True):
        raise TooManyRequests("too many new tokens in a short time; wait a minute and try again")
