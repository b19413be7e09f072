"""An instance's token, after TokenAuthMiddleware accepted it: refused once the instance is revoked,
limited to the routes an instance needs, and scoped to the repos attached to the instance — that set
is read here once per request (request.instance_repos), for hub.accounts.actor.Actor."""
from __future__ import annotations

from django.http import HttpRequest

from hub.errors import Forbidden, Unauthorized, error_response
from hub.instances import services


class InstanceScopeMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest):
        request.instance = None
        request.instance_repos = None
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view, args, kwargs):
        token = getattr(request, "api_token", None)
        if token is None or token.kind != token.INSTANCE:
            return None
        request.instance = services.instance_of(token)
        if request.instance is None:
            return error_response(Unauthorized("this instance was revoked; its token no longer works"))
        if not services.scope_allows(request.path):
            return error_response(Forbidden(
                "an instance token can only read its mount spec, the repos attached to the instance "
                "and its owner's volume; use your own token for this"))
        request.instance_repos = services.attached_repos(request.instance)
        return None
