"""The pages' language: English or Simplified Chinese, from the header's switch (kept in the session
and a cookie) or else the browser's Accept-Language. The API and the Hugging Face protocol answer in
English whatever is asked: clients parse their messages."""
from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.middleware.locale import LocaleMiddleware
from django.utils import translation
from django.utils.cache import patch_vary_headers
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from hub.accounts.middleware import is_api_view

SESSION_KEY = "language"  # (Django ≥ 4 keeps the choice in a cookie only; a session follows a person)


def _supported(code: str | None) -> str | None:
    return code if code in dict(settings.LANGUAGES) else None


class LanguageMiddleware(LocaleMiddleware):
    """Django's LocaleMiddleware (cookie, then Accept-Language), with the session's choice first;
    API views get the default language. Pages vary by the cookies too, as the choice is in them."""

    def process_request(self, request: HttpRequest) -> None:
        chosen = None
        if settings.SESSION_COOKIE_NAME in request.COOKIES:  # (no session is loaded for anyone without one)
            chosen = _supported(request.session.get(SESSION_KEY))
        if chosen is None:
            super().process_request(request)
            return
        translation.activate(chosen)
        request.LANGUAGE_CODE = chosen

    def process_view(self, request: HttpRequest, view, args, kwargs) -> None:
        if is_api_view(view) or getattr(view, "own_bearer_tokens", False):  # (the API, the Xet CAS)
            translation.activate(settings.LANGUAGE_CODE)
            request.LANGUAGE_CODE = translation.get_language()

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        response = super().process_response(request, response)
        if response.get("Content-Type", "").startswith("text/html"):
            patch_vary_headers(response, ("Cookie",))
        return response


# No CSRF token: a language is no one's data, and a token in every page's header would set a cookie on
# every page, which keeps anonymous pages out of the page cache (hub.web.pages.anonymous_cache).
@csrf_exempt
@require_POST
def set_language(request: HttpRequest) -> HttpResponse:
    """The header's switch (a form, so it works without JavaScript): the language is kept in the
    session, signed in or not, and in a cookie (which outlives signing out); back to the page it was
    on (`next`, a path of this site)."""
    code = _supported(request.POST.get("language"))
    back = request.POST.get("next") or "/"
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()},
                                           require_https=request.is_secure()):
        back = "/"
    response = HttpResponseRedirect(back)
    if code is not None:
        request.session[SESSION_KEY] = code
        response.set_cookie(settings.LANGUAGE_COOKIE_NAME, code, max_age=settings.LANGUAGE_COOKIE_AGE,
                            path=settings.LANGUAGE_COOKIE_PATH, domain=settings.LANGUAGE_COOKIE_DOMAIN,
                            secure=settings.LANGUAGE_COOKIE_SECURE, httponly=settings.LANGUAGE_COOKIE_HTTPONLY,
                            samesite=settings.LANGUAGE_COOKIE_SAMESITE)
    return response
