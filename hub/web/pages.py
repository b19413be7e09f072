"""What every web view shares: errors rendered as pages a person understands, and the caller."""
from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from hub.errors import HubError
from hub.repos.services import Actor

TITLES = {
    400: "That request did not work",
    401: "Please sign in",
    403: "Not allowed",
    404: "Not found",
    409: "That clashes with something already there",
    412: "That changed in the meantime",
    413: "Over your storage quota",
    416: "Range not satisfiable",
    503: "Storage is unavailable",
}


def user_of(request: HttpRequest):
    return request.user if request.user.is_authenticated else None


def actor_of(request: HttpRequest) -> Actor:
    return Actor.from_request(request)


def error_page(request: HttpRequest, err: HubError) -> HttpResponse:
    """The error as a page with the right status. Over quota, it shows the account's figures."""
    context = {"status": err.status, "title": TITLES.get(err.status, "Something went wrong"),
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
        except HubError as err:
            return error_page(request, err)

    return wrapper
