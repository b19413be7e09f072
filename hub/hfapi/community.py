"""Gated repos' access requests (the owners' side) and likes, as huggingface_hub calls them."""
from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from hub.accounts.actor import Actor
from hub.cursors import decode_cursor, encode_cursor
from hub.errors import BadRequest
from hub.hfapi import serializers as ser
from hub.hfapi.common import paginate, read_json, repo_of
from hub.repos import gating, likes

PAGE = 1000

def _before(request: HttpRequest) -> int | None:
    """The row id a `cursor` (the last one of the previous page) stands for."""
    after = decode_cursor(request.GET.get("cursor"))
    if after is None:
        return None
    if not after.isdigit():
        raise BadRequest("invalid cursor: pass the one of the previous page's Link")
    return int(after)


def _page(request: HttpRequest, rows: list, items: list[dict]) -> JsonResponse:
    resp = JsonResponse(items, safe=False)
    if len(rows) == PAGE:
        paginate(request, resp, {"cursor": encode_cursor(str(rows[-1].pk))})
    return resp


@require_http_methods(["GET"])
def access_requests(request: HttpRequest, prefix: str, ns: str, name: str, status: str) -> JsonResponse:
    """HfApi.list_{pending,accepted,rejected}_access_requests: for writers of the repo's namespace."""
    repo = repo_of(request, prefix, ns, name)
    rows = gating.list_requests(Actor.from_request(request), repo, status, before=_before(request), limit=PAGE)
    return _page(request, rows, [ser.access_request(r) for r in rows])


@csrf_exempt
@require_http_methods(["POST"])
def handle_access_request(request: HttpRequest, prefix: str, ns: str, name: str) -> JsonResponse:
    """HfApi.accept/reject/cancel_access_request: {user or requestId, status, rejectionReason?}."""
    data = read_json(request)
    repo = repo_of(request, prefix, ns, name)
    gating.do_handle_request(Actor.from_request(request), repo, data.get("status"), user=data.get("user"),
                             request_id=data.get("requestId"), rejection_reason=data.get("rejectionReason"))
    return JsonResponse({})


@csrf_exempt
@require_http_methods(["POST"])
def grant_access(request: HttpRequest, prefix: str, ns: str, name: str) -> JsonResponse:
    """HfApi.grant_access: {user}."""
    data = read_json(request)
    repo = repo_of(request, prefix, ns, name)
    return JsonResponse(ser.access_request(gating.do_grant_access(Actor.from_request(request), repo, data.get("user"))))


@csrf_exempt
@require_http_methods(["POST", "DELETE"])
def like(request: HttpRequest, prefix: str, ns: str, name: str) -> JsonResponse:
    """POST likes the repo, DELETE (HfApi.unlike) takes the like back; both idempotent."""
    actor = Actor.from_request(request)
    repo = repo_of(request, prefix, ns, name)
    (likes.do_unlike if request.method == "DELETE" else likes.do_like)(actor, repo)
    return JsonResponse({})


@require_http_methods(["GET"])
def likers(request: HttpRequest, prefix: str, ns: str, name: str) -> JsonResponse:
    """HfApi.list_repo_likers: whoever may read the repo may see who likes it."""
    rows = likes.likers(repo_of(request, prefix, ns, name), before=_before(request), limit=PAGE)
    return _page(request, rows, [ser.liker(r) for r in rows])


@require_http_methods(["GET"])
def user_likes(request: HttpRequest, username: str) -> JsonResponse:
    """HfApi.list_liked_repos: the repos the user likes that the caller may see."""
    rows = likes.liked_by(Actor.from_request(request), username, before=_before(request), limit=PAGE)
    return _page(request, rows, [ser.liked(r) for r in rows])
