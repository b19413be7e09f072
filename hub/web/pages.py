"""What every web view shares: errors rendered as pages a person understands, and the caller."""
from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from functools import wraps

from django.conf import settings
from django.contrib import messages
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import get_language
from django.utils.translation import gettext_lazy as _

from hub.accounts.actor import Actor
from hub.catalog.services import facet_version
from hub.errors import HubError, RepoMoved

TITLES = {
    400: _("That request did not work"),
    401: _("Please sign in"),
    403: _("Not allowed"),
    404: _("Not found"),
    409: _("That clashes with something already there"),
    412: _("That changed in the meantime"),
    413: _("Over your storage quota"),
    429: _("Slow down"),
    416: _("Range not satisfiable"),
    503: _("Storage is unavailable"),
    507: _("Storage is full"),
}


def user_of(request: HttpRequest):
    return request.user if request.user.is_authenticated else None


def actor_of(request: HttpRequest) -> Actor:
    return Actor.from_request(request)


def error_page(request: HttpRequest, err: HubError) -> HttpResponse:
    """The error as a page with the right status. Over quota, it shows the account's figures."""
    context = {"status": err.status, "title": TITLES.get(err.status, _("Something went wrong")),
               "message": err.message, "code": err.code}
    if err.status == 413 and request.user.is_authenticated:
        from hub.quotas import services as quotas

        context["quota"] = quotas.report(quotas.namespace_for(request.user))
    response = render(request, "web/error.html", context, status=err.status)
    for k, v in err.headers.items():
        response[k] = v
    return response


def page(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Renders the hub's errors raised by `view` as error pages instead of the API's JSON."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except RepoMoved as err:
            err.locate(request)
            if "Location" not in err.headers:
                return error_page(request, err)
            moved = redirect(err.headers["Location"])
            moved.status_code = 307  # (a form posted to the old id is posted again, not turned into a GET)
            return moved
        except HubError as err:
            return error_page(request, err)

    return wrapper


_CJK = re.compile(r"[\u3400-\u9fff]")


def sentence(text: str) -> str:
    """An error message as a sentence on a page: with a full stop (a Chinese one for a message in
    Chinese on a Chinese page; the services' messages are the API's, in English). Its first letter stays as it is, as a message may begin with a path or a name, whose
    case matters."""
    text = text.strip()
    if not text or text.endswith((".", "!", "?", "。", "！", "？")):
        return text
    return text + ("。" if get_language() == "zh-hans" and _CJK.search(text) else ".")


FORM_KEPT = "form_kept"
# Fields never kept, by a word in their name: the CSRF token, passwords, any secret or token value.
# Uploaded files are not in request.POST, and no page could put them back anyway.
_NOT_KEPT = ("password", "secret", "token")


def keep_form(request: HttpRequest) -> None:
    """Keeps what was typed into the form this POST came from (by its action, the POST's path) in the
    session, for the page the person is sent back to: form_kept hands it to that page's templates."""
    request.session[FORM_KEPT] = {"action": request.path, "values": {
        name: value for name, value in request.POST.items() if not any(w in name.lower() for w in _NOT_KEPT)}}


def form_kept(request: HttpRequest) -> dict[str, dict | None]:
    """Context processor: what keep_form kept, for the first page rendered after it only: it leaves
    the session then, as messages do, so a reload shows empty forms. Read once per request, as one
    request may render several templates. The {% refill %} tag (hubweb) gives it to its form."""
    if not hasattr(request, "_form_kept"):
        request._form_kept = request.session.pop(FORM_KEPT, None) if hasattr(request, "session") else None
    return {"form_kept": request._form_kept}


def form_action(back: Callable[..., str]) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """For a view that handles a form's POST: a hub error it raises becomes an error message on the
    page the form is on (the URL `back(request, *args, **kwargs)` gives), as its successes do,
    instead of an error page, and the form comes back filled in as it was sent (keep_form). The view
    raises errors worded for the form where the service's words are the API's (the API keeps its
    own). A GET it also serves renders errors as pages, like @page."""

    def decorator(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            try:
                return view(request, *args, **kwargs)
            except HubError as err:
                if request.method != "POST":
                    return error_page(request, err)
                messages.error(request, sentence(err.message))
                keep_form(request)
                return redirect(back(request, *args, **kwargs))

        return wrapper

    return decorator


def anonymous_cache(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Keeps the page a visitor without a session gets for HUB_PAGE_CACHE_SECONDS, per process (or in
    the shared cache): every such visitor sees the same page, so list and search pages cost a cache
    lookup under load. Anything signed in, or carrying a session or messages, is rendered fresh, so
    people always see their own changes at once; others' new repos and commits may show up that
    many seconds late. A repo made private or deleted leaves every kept page at once: the key holds
    the catalog's facet version, which those changes bump (hub.catalog.services.facet_version)."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        seconds = settings.HUB_PAGE_CACHE_SECONDS
        if (not seconds or request.method != "GET" or request.user.is_authenticated
                or settings.SESSION_COOKIE_NAME in request.COOKIES or "messages" in request.COOKIES):
            return view(request, *args, **kwargs)
        # The language is part of the page: one kept in English is never served to a Chinese reader.
        page_id = f"{facet_version()}:{get_language()}:{request.get_host()}{request.get_full_path()}"
        key = "web:page:" + hashlib.sha1(page_id.encode()).hexdigest()
        body = cache.get(key)
        if body is not None:
            return HttpResponse(body)
        response = view(request, *args, **kwargs)
        if response.status_code == 200 and not response.cookies and not getattr(response, "streaming", False):
            cache.set(key, response.content, seconds)
        return response

    return wrapper
