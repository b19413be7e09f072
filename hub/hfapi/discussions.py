"""Discussions and pull requests in the Hugging Face protocol (huggingface_hub's get_repo_discussions,
get_discussion_details, create_discussion / create_pull_request, comment_discussion,
edit_discussion_comment, hide_discussion_comment, rename_discussion, change_discussion_status,
merge_pull_request), as a thin adapter over hub.discussions: the JSON shapes, then the views."""
from __future__ import annotations

from datetime import datetime

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from hub.accounts.actor import Actor
from hub.catalog.services import render_markdown
from hub.discussions import pulls
from hub.discussions import services as discussions
from hub.discussions.models import Discussion, Event
from hub.hfapi.common import flag, int_param, read_json, repo_of, repo_url
from hub.hfapi.serializers import hf_date
from hub.repos.models import Repo

# --- JSON shapes ------------------------------------------------------------------------------------


def discussion_url(request: HttpRequest, repo: Repo, num: int) -> str:
    """Where a discussion's page is; huggingface_hub reads a pull request's number from its end."""
    return f"{repo_url(request, repo)}/discussions/{num}"


def _user(user) -> dict | None:
    if user is None:
        return None  # (the client then says "deleted")
    return {"_id": f"{user.pk:024x}", "name": user.username, "fullname": user.get_full_name() or user.username,
            "type": "user", "isPro": False, "isHf": False, "avatarUrl": ""}


def _with_author(out: dict, user) -> dict:
    author = _user(user)
    if author is not None:
        out["author"] = author
    return out


def event_json(event: Event) -> dict:
    out = {"id": event.hex_id, "type": event.kind, "createdAt": hf_date(event.created)}
    _with_author(out, event.author)
    if event.kind != Event.COMMENT:
        out["data"] = dict(event.data)
        return out
    latest = {"raw": event.content, "html": render_markdown(event.content) if event.content else "",
              "updatedAt": hf_date(event.edited_at or event.created)}
    _with_author(latest, event.edited_by or event.author)
    history = [latest] + [{"raw": v.get("raw", ""), "updatedAt": _iso_to_hf(v.get("at")),
                           **({"author": {"name": v["by"]}} if v.get("by") else {})} for v in event.previous]
    out["data"] = {"edited": bool(event.previous), "hidden": event.hidden, "latest": latest,
                   "numEdits": len(event.previous), "editors": sorted({v.get("by", "") for v in event.previous} - {""}),
                   "history": history, "reactions": [], "isReport": False}
    return out


def _iso_to_hf(value: str | None) -> str | None:
    return hf_date(datetime.fromisoformat(value)) if value else None


def discussion_json(request: HttpRequest, d: Discussion, *, n_comments: int | None = None) -> dict:
    repo = d.repo
    out = {"num": d.num, "title": d.title, "status": d.status, "createdAt": hf_date(d.created),
           "isPullRequest": d.is_pull_request, "pinned": False, "topReactions": [],
           "repo": {"name": repo.repo_id, "type": repo.type},
           "url": discussion_url(request, repo, d.num)}
    if n_comments is not None:
        out["numComments"] = n_comments
    return _with_author(out, d.author)


def details_json(request: HttpRequest, d: Discussion, events: list[Event], with_diff: bool) -> dict:
    out = discussion_json(request, d, n_comments=sum(1 for e in events if e.kind == Event.COMMENT))
    out["events"] = [event_json(e) for e in events]
    if d.is_pull_request:
        state = pulls.state(d)
        out["changes"] = {"base": f"refs/heads/{d.target_branch}", "mergeCommitId": d.merge_oid or None,
                          "headCommitId": state.head.oid, "baseCommitId": state.base.oid}
        out["filesWithConflicts"] = state.conflicts
        out["gitReference"] = d.git_reference
        if with_diff:
            out["diff"] = pulls.diff_text(state.changes)
    return out


# --- views ------------------------------------------------------------------------------------------

def _discussion(request: HttpRequest, prefix: str, ns: str, name: str, num: str) -> Discussion:
    return discussions.access_discussion(repo_of(request, prefix, ns, name), num)


@csrf_exempt
@require_http_methods(["GET", "POST"])
def discussions_view(request: HttpRequest, prefix: str, ns: str, name: str) -> JsonResponse:
    repo = repo_of(request, prefix, ns, name)
    if request.method == "POST":
        data = read_json(request)
        d = discussions.check_open(Actor.from_request(request), repo, title=data.get("title"),
                                   description=data.get("description"), pull_request=bool(data.get("pullRequest")))
        return JsonResponse({"num": d.num, "url": discussion_url(request, repo, d.num),
                             "isPullRequest": d.is_pull_request, "gitReference": d.git_reference})
    page = max(0, int_param(request.GET.get("p"), 0))
    rows, total = discussions.list_discussions(
        repo, kind=request.GET.get("type"), status=request.GET.get("status"), author=request.GET.get("author"),
        offset=page * discussions.PAGE, limit=discussions.PAGE)
    for d in rows:
        d.repo = repo
    return JsonResponse({"discussions": [discussion_json(request, d, n_comments=d.n_comments) for d in rows],
                         "count": total, "start": page * discussions.PAGE})


@require_http_methods(["GET"])
def details(request: HttpRequest, prefix: str, ns: str, name: str, num: str) -> JsonResponse:
    d = _discussion(request, prefix, ns, name, num)
    return JsonResponse(details_json(request, d, discussions.thread(d), flag(request, "diff")))


@csrf_exempt
@require_http_methods(["POST"])
def comment(request: HttpRequest, prefix: str, ns: str, name: str, num: str) -> JsonResponse:
    d = _discussion(request, prefix, ns, name, num)
    event = discussions.check_comment(Actor.from_request(request), d, read_json(request).get("comment"))
    return JsonResponse({"newMessage": event_json(event)})


@csrf_exempt
@require_http_methods(["POST"])
def edit_comment(request: HttpRequest, prefix: str, ns: str, name: str, num: str, comment_id: str) -> JsonResponse:
    d = _discussion(request, prefix, ns, name, num)
    event = discussions.check_edit_comment(Actor.from_request(request), d, comment_id,
                                           read_json(request).get("content"))
    return JsonResponse({"updatedComment": event_json(event)})


@csrf_exempt
@require_http_methods(["POST"])
def hide_comment(request: HttpRequest, prefix: str, ns: str, name: str, num: str, comment_id: str) -> JsonResponse:
    d = _discussion(request, prefix, ns, name, num)
    event = discussions.check_hide_comment(Actor.from_request(request), d, comment_id)
    return JsonResponse({"updatedComment": event_json(event)})


@csrf_exempt
@require_http_methods(["POST"])
def title(request: HttpRequest, prefix: str, ns: str, name: str, num: str) -> JsonResponse:
    d = _discussion(request, prefix, ns, name, num)
    event = discussions.check_rename(Actor.from_request(request), d, read_json(request).get("title"))
    return JsonResponse({"newTitle": event_json(event)})


@csrf_exempt
@require_http_methods(["POST"])
def status(request: HttpRequest, prefix: str, ns: str, name: str, num: str) -> JsonResponse:
    d = _discussion(request, prefix, ns, name, num)
    data = read_json(request)
    event = discussions.check_change_status(Actor.from_request(request), d, data.get("status"), data.get("comment"))
    return JsonResponse({"newStatus": event_json(event)})


@csrf_exempt
@require_http_methods(["POST"])
def merge(request: HttpRequest, prefix: str, ns: str, name: str, num: str) -> JsonResponse:
    d = _discussion(request, prefix, ns, name, num)
    data = read_json(request) if request.body else {}
    event = pulls.check_merge(Actor.from_request(request), d, data.get("comment"))
    return JsonResponse({"newStatus": event_json(event), "mergeCommitId": d.merge_oid})
