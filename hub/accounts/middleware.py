from __future__ import annotations

from django.http import HttpRequest
from django.utils.translation import gettext
from rest_framework.views import APIView

from hub.errors import Forbidden, HubError, TooManyRequests, error_response


# Where API tokens are accepted: the native API (DRF views) and the Hugging Face protocol's views,
# which hub/hfapi/urls.py marks with accepts_api_tokens. Everything else (web pages, the admin) opens
# to a signed-in session only, so a token, read-only or stolen, can never reach a form that mints
# tokens, changes a password or deletes files.
def _web_only() -> Forbidden:
    return Forbidden("API tokens open the API and the Hugging Face protocol routes, not the web pages or the "
                     "admin: sign in at /accounts/login to use them (send no Authorization header)")


def accepts_api_tokens(view):
    """Marks a (non-DRF) view as a door API tokens may open."""
    view.accepts_api_tokens = True
    return view


def own_bearer_tokens(view):
    """Marks a view that reads `Authorization: Bearer` itself: a capability the hub signed for it (the
    Xet CAS's access tokens), not an API token. Nothing here authenticates its requests."""
    view.own_bearer_tokens = True
    return view


def is_api_view(view) -> bool:
    if getattr(view, "accepts_api_tokens", False):
        return True
    cls = getattr(view, "cls", None)  # DRF's as_view() keeps the class here
    return isinstance(cls, type) and issubclass(cls, APIView)


class TokenAuthMiddleware:
    """`Authorization: Bearer <token>` → request.user and request.api_token (None for sessions), on
    API views only; a bearer token anywhere else is refused (403).

    Runs in process_view, once the view is known, and before CsrfViewMiddleware's: a token request
    to a web form gets this refusal, not a CSRF failure. A token that is present but wrong is an
    error at once (401): silently treating the caller as anonymous would turn "your token is wrong"
    into a misleading "repo not found". API views are exempt from Django's CSRF middleware (token
    clients send no CSRF token); a state-changing request to one that a browser session
    authenticates must pass the CSRF check here instead, so another site (or another port of this
    host) cannot make a signed-in browser write."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest):
        request.api_token = None
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view, args, kwargs):
        if getattr(view, "own_bearer_tokens", False):
            request._dont_enforce_csrf_checks = True  # (no ambient credential: the token is in the request)
            return None
        header = request.META.get("HTTP_AUTHORIZATION", "")
        bearer = header[:7].lower() == "bearer "
        if not is_api_view(view):
            return error_response(_web_only()) if bearer else None
        if not bearer:
            if not getattr(view, "accepts_api_tokens", False):
                return None  # DRF: its SessionAuthentication runs the CSRF check for sessions
            if request.method not in ("GET", "HEAD", "OPTIONS", "TRACE") and request.user.is_authenticated:
                refusal = _csrf_refusal(request)
                if refusal is not None:
                    return refusal
            # Checked (or no credentials to forge): the protocol's answer, not Django's CSRF page.
            request._dont_enforce_csrf_checks = True
            return None
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
        request._dont_enforce_csrf_checks = True  # a token is no ambient credential: nothing to forge
        return None  # (an instance's token is scoped next: hub.instances.middleware)


def _csrf_refusal(request: HttpRequest):
    """Django's CSRF check (Origin/Referer and token) for a session-authenticated write to a view
    that is csrf_exempt for the sake of token clients: None when it passes, else a 403."""
    from rest_framework.authentication import CSRFCheck  # (DRF's own: Django's check, answering the reason)

    check = CSRFCheck(lambda req: None)
    check.process_request(request)
    reason = check.process_view(request, None, (), {})
    if reason is None:
        return None
    return error_response(Forbidden(
        f"CSRF check failed ({reason}): a request signed in by a browser session must come from this hub's "
        "own pages with their CSRF token; scripts and clients send an API token (Authorization: Bearer …)"))


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
        raise TooManyRequests(gettext("too many new tokens in a short time; wait a minute and try again"))
