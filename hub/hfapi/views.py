"""The Hugging Face Hub HTTP protocol, as a thin adapter over hub.repos.services.

Every view parses, authorizes through an access_* function, calls one service and renders. Errors
are HubError subclasses; the middleware turns them into the status + X-Error-Code pairs that
huggingface_hub maps to its own exceptions."""
from __future__ import annotations

import base64
import binascii
import itertools
import json
from datetime import timedelta

from django.conf import settings
from django.core import signing
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from hub.accounts.services import user_orgs
from hub.catalog.services import not_mirrored_notice
from hub.cursors import decode_cursor, encode_cursor
from hub.discussions import pulls
from hub.discussions.services import check_can_participate
from hub.errors import (
    BadRequest,
    Conflict,
    EntryNotFound,
    HubError,
    InvalidPath,
    NotFound,
    RepoNotFound,
    Unauthorized,
    UnprocessableEntity,
    UnprocessablePath,
)
from hub.hfapi import serializers as ser
from hub.quotas import services as quota_services
from hub.repos import attributes, blobs, cards, gating, history, likes, pullrefs, services, serving, trees
from hub.repos.models import Repo, UploadSession
from hub.repos.services import Actor
from hub.repos.validation import check_dir_path, check_path

TYPES = {"models": Repo.MODEL, "datasets": Repo.DATASET, "": Repo.MODEL}
PAGE = 1000
PAGE_EXPANDED = 50
LFS_JSON = "application/vnd.git-lfs+json"
NO_XET = ("This hub has no Xet support: set HF_HUB_DISABLE_XET=1 (or use `hub push`) to upload the files "
          "it stores through LFS (weights, data and other binary files, as .gitattributes marks them, and "
          f"files of {settings.HUB_LFS_THRESHOLD // 10**6} MB or more)")
XET_WARNING = "xet; " + NO_XET


# --- helpers ----------------------------------------------------------------------------------------

def repo_type(prefix: str) -> str:
    t = TYPES.get(prefix.rstrip("/"))
    if t is None:
        raise RepoNotFound(f"repo type {prefix!r} is not served by this hub (models and datasets are)")
    return t


def base_url(request: HttpRequest) -> str:
    if settings.HUB_PUBLIC_URL:
        return settings.HUB_PUBLIC_URL.rstrip("/")
    return f"{request.scheme}://{request.get_host()}"


def repo_url(request: HttpRequest, repo: Repo) -> str:
    prefix = "datasets/" if repo.type == Repo.DATASET else ""
    return f"{base_url(request)}/{prefix}{repo.repo_id}"


def read_json(request: HttpRequest) -> dict:
    try:
        data = json.loads(request.body or b"{}")
    except (ValueError, UnicodeDecodeError):
        raise BadRequest("the request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise BadRequest("the request body must be a JSON object")
    return data


def flag(request: HttpRequest, name: str, default: bool = False) -> bool:
    value = request.GET.get(name)
    if value is None:
        return default
    return value.lower() in ("1", "true", "yes")


def _repo(request: HttpRequest, prefix: str, ns: str, name: str, *, write: bool = False) -> Repo:
    return services.access_repo(Actor.from_request(request), repo_type(prefix), ns, name, write=write)


def _paginate(request: HttpRequest, response: HttpResponse, params: dict) -> None:
    query = request.GET.copy()
    for k, v in params.items():
        query[k] = v
    response["Link"] = f'<{base_url(request)}{request.path}?{query.urlencode()}>; rel="next"'


# --- account ----------------------------------------------------------------------------------------

@require_http_methods(["GET"])
def whoami(request: HttpRequest) -> JsonResponse:
    if not request.user.is_authenticated:
        raise Unauthorized("Invalid credentials in Authorization header: no token was sent")
    user = request.user
    token = request.api_token
    return JsonResponse({
        "type": "user",
        "id": str(user.pk),
        "name": user.username,
        "fullname": user.get_full_name() or user.username,
        "email": user.email or None,
        "isPro": False,
        "orgs": [{"type": "org", "name": ns.name, "fullname": ns.fullname or ns.name} for ns in user_orgs(user)],
        "auth": {"type": "access_token", "accessToken": {
            "displayName": token.name if token else "session",
            "role": "read" if token and token.read_only else "write"}},
        "quota": quota_services.report(quota_services.namespace_for(user), top=5).as_dict(),
    })


@require_http_methods(["GET"])
def repo_storage(request: HttpRequest, org: str | None = None) -> JsonResponse:
    """`hf repos ls` (HfApi.list_user_repos): the caller's repos, or an organisation's they belong
    to, with the storage each uses."""
    if not request.user.is_authenticated:
        raise Unauthorized("Invalid credentials in Authorization header: no token was sent")
    ns = quota_services.namespace_for(request.user, org)
    rows = quota_services.repo_storage(ns)
    total = sum(size for _, size in rows) or 1
    return JsonResponse([{"id": r.repo_id, "type": r.type, "updatedAt": ser.hf_date(r.last_modified),
                          "visibility": "private" if r.private else "public", "storage": size,
                          "storagePercent": round(100 * size / total, 2)} for r, size in rows], safe=False)


# --- repos ------------------------------------------------------------------------------------------

def _visibility(data: dict) -> bool:
    if "visibility" in data:
        if data["visibility"] not in ("public", "private"):
            raise BadRequest("visibility must be 'public' or 'private'")
        return data["visibility"] == "private"
    return bool(data.get("private", False))


def _type_from_body(data: dict) -> str:
    t = data.get("type") or "model"
    if t not in (Repo.MODEL, Repo.DATASET):
        raise BadRequest(f"unsupported repo type {t!r}: this hub serves model and dataset repos")
    return t


def _split_name(data: dict) -> tuple[str | None, str]:
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise BadRequest("'name' is required")
    org = data.get("organization")
    if "/" in name:
        org, name = name.split("/", 1)
    return org, name


@csrf_exempt
@require_http_methods(["POST"])
def create_repo(request: HttpRequest) -> JsonResponse:
    data = read_json(request)
    org, name = _split_name(data)
    t = _type_from_body(data)
    actor = Actor.from_request(request)
    try:
        repo = services.do_create_repo(actor, org, name, t, private=_visibility(data))
    except HubError as err:
        if err.status == 409:
            existing = services.find_repo(t, org or (actor.user.username if actor.user else ""), name)
            if existing is not None:
                # exist_ok clients read `url` from the 409 body
                return JsonResponse({"error": err.message, "url": repo_url(request, existing)}, status=409)
        raise
    return JsonResponse({"url": repo_url(request, repo), "name": repo.repo_id, "id": repo.repo_id})


@csrf_exempt
@require_http_methods(["DELETE"])
def delete_repo(request: HttpRequest) -> JsonResponse:
    data = read_json(request)
    org, name = _split_name(data)
    actor = Actor.from_request(request)
    ns = org or (actor.user.username if actor.user else "")
    repo = services.access_repo(actor, _type_from_body(data), ns, name, write=True)
    services.do_delete_repo(actor, repo)
    return JsonResponse({})


@csrf_exempt
@require_http_methods(["POST"])
def move_repo(request: HttpRequest) -> JsonResponse:
    data = read_json(request)
    src, dst = data.get("fromRepo", ""), data.get("toRepo", "")
    if src.count("/") != 1 or dst.count("/") != 1:
        raise BadRequest("fromRepo and toRepo must be of the form namespace/name")
    actor = Actor.from_request(request)
    repo = services.access_repo(actor, _type_from_body(data), *src.split("/"), write=True)
    repo = services.do_move_repo(actor, repo, *dst.split("/"))
    return JsonResponse({"url": repo_url(request, repo)})


@csrf_exempt
@require_http_methods(["POST"])
def duplicate_repo(request: HttpRequest, prefix: str, ns: str, name: str) -> JsonResponse:
    """HfApi.duplicate_repo / `hf repos duplicate`: a metadata copy (the blobs are shared)."""
    data = read_json(request)
    target = data.get("repository")
    if not isinstance(target, str) or target.count("/") != 1:
        raise BadRequest("'repository' must be the new repo's id, namespace/name")
    actor = Actor.from_request(request)
    source = _repo(request, prefix, ns, name)
    private = _visibility(data) if ("visibility" in data or "private" in data) else None
    repo = services.do_duplicate_repo(actor, source, *target.split("/"), private=private)
    return JsonResponse({"url": repo_url(request, repo), "filesCopyPending": False})


@csrf_exempt
@require_http_methods(["PUT"])
def repo_settings(request: HttpRequest, prefix: str, ns: str, name: str) -> JsonResponse:
    data = read_json(request)
    repo = _repo(request, prefix, ns, name, write=True)
    private = _visibility(data) if ("visibility" in data or "private" in data) else None
    repo = services.do_update_settings(Actor.from_request(request), repo, private=private, gated=data.get("gated"))
    return JsonResponse({"private": repo.private, "gated": repo.gating})


@csrf_exempt
@require_http_methods(["POST"])
def validate_yaml(request: HttpRequest) -> JsonResponse:
    data = read_json(request)
    repo_type = data.get("repoType") or Repo.MODEL
    errors, warnings = cards.check_card(str(data.get("content", "")), repo_type)
    return JsonResponse({"errors": [{"message": e} for e in errors], "warnings": [{"message": w} for w in warnings]},
                        status=400 if errors else 200)


@require_http_methods(["GET"])
def list_repos(request: HttpRequest, prefix: str) -> JsonResponse:
    t = repo_type(prefix)
    qs = services.visible_repos(request.user if request.user.is_authenticated else None).filter(type=t)
    search = request.GET.get("search")
    if search:
        qs = qs.filter(name__icontains=search.split("/")[-1]) if "/" not in search else qs.filter(
            namespace__name__iexact=search.split("/")[0], name__icontains=search.split("/", 1)[1])
    author = request.GET.get("author")
    if author:
        qs = qs.filter(namespace__name__iexact=author)
    sort = {"downloads": "downloads", "likes": "likes", "lastModified": "last_modified",
            "last_modified": "last_modified", "createdAt": "created", "created_at": "created",
            "id": "name"}.get(request.GET.get("sort", ""), "id")
    desc = request.GET.get("direction") == "-1" or sort in ("downloads", "likes", "last_modified", "created")
    qs = qs.order_by(("-" if desc else "") + sort, "id")
    limit = _int(request.GET.get("limit"), None)
    offset = _int(request.GET.get("offset"), 0)
    page_size = 100 if limit is None else min(limit, 1000)
    rows = list(qs[offset:offset + page_size + 1])
    more = len(rows) > page_size
    rows = rows[:page_size]
    resp = JsonResponse([ser.repo_info(r, None) | {"sha": r.head_sha or None} for r in rows], safe=False)
    if more and limit is None:
        _paginate(request, resp, {"offset": str(offset + page_size)})
    return resp


def _int(value: str | None, default):
    if value in (None, ""):
        return default
    try:
        n = int(value)
    except ValueError:
        raise BadRequest(f"expected an integer, got {value!r}") from None
    if n < 0:
        raise BadRequest(f"expected a non-negative integer, got {value!r}")
    return n


def _expand(request: HttpRequest) -> list[str]:
    return request.GET.getlist("expand") + request.GET.getlist("expand[]")


@require_http_methods(["GET"])
def repo_info(request: HttpRequest, prefix: str, ns: str, name: str, rev: str | None = None) -> JsonResponse:
    repo = _repo(request, prefix, ns, name)
    commit = services.resolve_revision(repo, rev)
    with_blobs = flag(request, "blobs")
    store = trees.NodeStore()
    siblings = [ser.sibling(path, e, with_blobs) for path, e in trees.walk(store, commit.tree) if not e.is_dir]
    expand = _expand(request)
    info = ser.repo_info(repo, commit, siblings=siblings, expand=expand or None)
    if "xetEnabled" in expand:
        info["xetEnabled"] = False
    resp = JsonResponse(info)
    notice = not_mirrored_notice(repo)
    if notice:  # huggingface_hub logs it, so transformers' and datasets' own errors come with the reason
        resp["X-HF-Warning"] = _not_mirrored_warning(notice)
    return resp


def _not_mirrored_warning(notice: str) -> str:
    return "not-mirrored; " + notice


@require_http_methods(["GET"])
def auth_check(request: HttpRequest, prefix: str, ns: str, name: str, write: str | None = None) -> JsonResponse:
    """HfApi.auth_check: 200 if the caller may read the repo's files (or, with /write, write to
    it); RepoNotFound for a missing or hidden repo; GatedRepo while a gate is not accepted."""
    actor = Actor.from_request(request)
    repo = _repo(request, prefix, ns, name, write=bool(write))
    services.check_gate(actor, repo)
    return JsonResponse({"id": repo.repo_id, "access": "write" if write else "read"})


# --- gated repos' access requests, and likes ----------------------------------------------------------

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
        _paginate(request, resp, {"cursor": encode_cursor(str(rows[-1].pk))})
    return resp


@require_http_methods(["GET"])
def access_requests(request: HttpRequest, prefix: str, ns: str, name: str, status: str) -> JsonResponse:
    """HfApi.list_{pending,accepted,rejected}_access_requests: for writers of the repo's namespace."""
    repo = _repo(request, prefix, ns, name)
    rows = gating.list_requests(Actor.from_request(request), repo, status, before=_before(request), limit=PAGE)
    return _page(request, rows, [ser.access_request(r) for r in rows])


@csrf_exempt
@require_http_methods(["POST"])
def handle_access_request(request: HttpRequest, prefix: str, ns: str, name: str) -> JsonResponse:
    """HfApi.accept/reject/cancel_access_request: {user or requestId, status, rejectionReason?}."""
    data = read_json(request)
    repo = _repo(request, prefix, ns, name)
    gating.do_handle_request(Actor.from_request(request), repo, data.get("status"), user=data.get("user"),
                             request_id=data.get("requestId"), rejection_reason=data.get("rejectionReason"))
    return JsonResponse({})


@csrf_exempt
@require_http_methods(["POST"])
def grant_access(request: HttpRequest, prefix: str, ns: str, name: str) -> JsonResponse:
    """HfApi.grant_access: {user}."""
    data = read_json(request)
    repo = _repo(request, prefix, ns, name)
    return JsonResponse(ser.access_request(gating.do_grant_access(Actor.from_request(request), repo, data.get("user"))))


@csrf_exempt
@require_http_methods(["POST", "DELETE"])
def like(request: HttpRequest, prefix: str, ns: str, name: str) -> JsonResponse:
    """POST likes the repo, DELETE (HfApi.unlike) takes the like back; both idempotent."""
    actor = Actor.from_request(request)
    repo = _repo(request, prefix, ns, name)
    (likes.do_unlike if request.method == "DELETE" else likes.do_like)(actor, repo)
    return JsonResponse({})


@require_http_methods(["GET"])
def likers(request: HttpRequest, prefix: str, ns: str, name: str) -> JsonResponse:
    """HfApi.list_repo_likers: whoever may read the repo may see who likes it."""
    rows = likes.likers(_repo(request, prefix, ns, name), before=_before(request), limit=PAGE)
    return _page(request, rows, [ser.liker(r) for r in rows])


@require_http_methods(["GET"])
def user_likes(request: HttpRequest, username: str) -> JsonResponse:
    """HfApi.list_liked_repos: the repos the user likes that the caller may see."""
    rows = likes.liked_by(Actor.from_request(request), username, before=_before(request), limit=PAGE)
    return _page(request, rows, [ser.liked(r) for r in rows])


def repo_info_or_no_namespace(request: HttpRequest, prefix: str, ns: str, name: str) -> HttpResponse:
    """/api/models/X/like, /api/models/X/settings, …: read (GET), the info of the repo X/like; any
    other method, an endpoint of the one-part id X, which names no repo here (RepoNotFound, as
    upstream answers HfApi.unlike("gpt2") for a missing repo)."""
    if request.method == "GET":
        return repo_info(request, prefix, ns, name)
    return no_namespace(request, ns)


# --- trees ------------------------------------------------------------------------------------------

def _last_commits(repo: Repo, head, paths: list[str]) -> dict[str, dict]:
    """For each path, the newest commit that changed it (walking back at most 100 commits)."""
    commits, _ = services.history(repo, head, 0, 100)
    store = trees.NodeStore()
    out: dict[str, dict] = {}
    current = {p: trees.resolve(store, head.tree, p) for p in paths}
    pending = set(paths)
    for i, commit in enumerate(commits):
        nxt = commits[i + 1] if i + 1 < len(commits) else None
        for p in list(pending):
            before = trees.resolve(store, nxt.tree, p) if nxt else None
            if nxt is None or before != current[p]:
                out[p] = ser.last_commit(commit)
                pending.discard(p)
        if not pending:
            break
    for p in pending:
        out[p] = ser.last_commit(commits[-1])
    return out


@require_http_methods(["GET"])
def tree(request: HttpRequest, prefix: str, ns: str, name: str, rev: str, path: str = "") -> JsonResponse:
    repo = _repo(request, prefix, ns, name)
    commit = services.resolve_revision(repo, rev)
    try:
        path = check_dir_path(path)
    except HubError:
        raise EntryNotFound(f"{path!r} is not a valid path", headers={"X-Repo-Commit": commit.oid}) from None
    notice = not_mirrored_notice(repo)
    if notice:
        # A catalog entry whose files are not here yet: listing its one .gitattributes would make
        # snapshot_download, `hf download` and `datasets` succeed with nothing; say why instead.
        raise EntryNotFound(notice, headers={"X-Repo-Commit": commit.oid, "X-HF-Warning": _not_mirrored_warning(notice)})
    store = trees.NodeStore()
    entry = trees.resolve(store, commit.tree, path)
    if entry is None or not entry.is_dir:
        raise EntryNotFound(f"directory {path!r} not found in {repo.repo_id} at {commit.oid[:12]}",
                            headers={"X-Repo-Commit": commit.oid})
    expand = flag(request, "expand")
    limit = min(_int(request.GET.get("limit"), PAGE_EXPANDED if expand else PAGE),
                PAGE_EXPANDED if expand else PAGE) or 1
    after = decode_cursor(request.GET.get("cursor"))
    base = f"{path}/" if path else ""
    if flag(request, "recursive"):
        items = trees.walk(store, entry.ref, base, after.split("/") if after else None)
    else:
        items = ((base + e.name, e) for e in trees.list_dir(store, entry.ref, after=after))
    page = list(itertools.islice(items, limit + 1))
    more = len(page) > limit
    page = page[:limit]
    out = [ser.tree_entry(p, e) for p, e in page]
    if expand and out:
        last = _last_commits(repo, commit, [p for p, _ in page])
        for item in out:
            item["lastCommit"] = last[item["path"]]
    resp = JsonResponse(out, safe=False)
    if more:
        _paginate(request, resp, {"cursor": encode_cursor(page[-1][0][len(base):])})
    return resp


@csrf_exempt
@require_http_methods(["POST"])
def paths_info(request: HttpRequest, prefix: str, ns: str, name: str, rev: str) -> JsonResponse:
    repo = _repo(request, prefix, ns, name)
    commit = services.resolve_revision(repo, rev)
    if request.content_type == "application/json":
        data = read_json(request)
        paths, expand = data.get("paths", []), bool(data.get("expand"))
    else:
        paths, expand = request.POST.getlist("paths"), request.POST.get("expand", "").lower() == "true"
    if not isinstance(paths, list) or len(paths) > 10_000:
        raise BadRequest("'paths' must be a list of at most 10000 paths")
    store = trees.NodeStore()
    found = []
    for p in paths:
        try:
            p = check_dir_path(str(p))
        except HubError:
            continue
        entry = trees.resolve(store, commit.tree, p) if p else None
        if entry is not None:
            found.append((p, entry))
    out = [ser.tree_entry(p, e) for p, e in found]
    if expand and out:
        last = _last_commits(repo, commit, [p for p, _ in found])
        for item in out:
            item["lastCommit"] = last[item["path"]]
    return JsonResponse(out, safe=False)


# --- refs and history -------------------------------------------------------------------------------

@require_http_methods(["GET"])
def refs(request: HttpRequest, prefix: str, ns: str, name: str) -> JsonResponse:
    repo = _repo(request, prefix, ns, name)
    branches, tags = services.list_refs(repo)
    return JsonResponse({
        "branches": [{"name": r.name, "ref": f"refs/heads/{r.name}", "targetCommit": r.commit.oid} for r in branches],
        "tags": [{"name": r.name, "ref": f"refs/tags/{r.name}", "targetCommit": r.commit.oid} for r in tags],
        "converts": [],
        "pullRequests": [{"name": f"refs/pr/{r.name}", "ref": f"refs/pr/{r.name}", "targetCommit": r.commit.oid}
                         for r in pullrefs.pr_refs(repo)] if flag(request, "include_prs") else None,
    })


@require_http_methods(["GET"])
def commits(request: HttpRequest, prefix: str, ns: str, name: str, rev: str) -> JsonResponse:
    repo = _repo(request, prefix, ns, name)
    head = services.resolve_revision(repo, rev)
    page = _int(request.GET.get("p"), 0)
    limit = min(_int(request.GET.get("limit"), 50), 1000) or 50
    rows, total = services.history(repo, head, page * limit, limit)
    formatted = "formatted" in _expand(request)
    resp = JsonResponse([ser.commit_info(c, formatted) for c in rows], safe=False)
    if (page + 1) * limit < total:
        _paginate(request, resp, {"p": str(page + 1)})
    resp["X-Total-Count"] = str(total)
    return resp


@csrf_exempt
@require_http_methods(["POST", "DELETE"])
def branch(request: HttpRequest, prefix: str, ns: str, name: str, branch: str) -> JsonResponse:
    repo = _repo(request, prefix, ns, name, write=True)
    actor = Actor.from_request(request)
    if request.method == "DELETE":
        services.do_delete_branch(actor, repo, branch)
        return JsonResponse({})
    data = read_json(request)
    if data.get("emptyBranch"):
        raise BadRequest("empty branches are not supported; start from a revision")
    services.do_create_branch(actor, repo, branch, data.get("startingPoint"))
    return JsonResponse({})


@csrf_exempt
@require_http_methods(["POST", "DELETE"])
def tag(request: HttpRequest, prefix: str, ns: str, name: str, rev: str) -> JsonResponse:
    repo = _repo(request, prefix, ns, name, write=True)
    actor = Actor.from_request(request)
    if request.method == "DELETE":
        services.do_delete_tag(actor, repo, rev)
        return JsonResponse({})
    data = read_json(request)
    if not isinstance(data.get("tag"), str):
        raise BadRequest("'tag' is required")
    services.do_create_tag(actor, repo, data["tag"], rev, str(data.get("message") or ""))
    return JsonResponse({})


@csrf_exempt
@require_http_methods(["POST"])
def super_squash(request: HttpRequest, prefix: str, ns: str, name: str, rev: str) -> JsonResponse:
    repo = _repo(request, prefix, ns, name, write=True)
    data = read_json(request)
    title = str(data.get("message") or f"Super-squash branch '{rev}'")
    commit = services.do_super_squash(Actor.from_request(request), repo, rev, title=title)
    return JsonResponse({"commitOid": commit.oid})


@require_http_methods(["GET"])
def lfs_files(request: HttpRequest, prefix: str, ns: str, name: str) -> JsonResponse:
    """HfApi.list_lfs_files: the repo's LFS objects, each with where it was first pushed (for its
    writers: it is the list they pick from to delete for good)."""
    repo = _repo(request, prefix, ns, name, write=True)
    rows = history.lfs_files(repo, after=request.GET.get("cursor") or None, limit=history.PAGE + 1)
    more = len(rows) > history.PAGE
    rows = rows[:history.PAGE]
    resp = JsonResponse([{"fileOid": r.blob_id, "oid": r.blob_id, "size": r.blob.size, "filename": r.path,
                          "ref": r.ref or None, "pushedAt": ser.hf_date(r.created or r.blob.created)}
                         for r in rows], safe=False)
    if more:
        _paginate(request, resp, {"cursor": rows[-1].blob_id})
    return resp


@csrf_exempt
@require_http_methods(["POST"])
def lfs_files_delete(request: HttpRequest, prefix: str, ns: str, name: str) -> JsonResponse:
    """HfApi.permanently_delete_lfs_files: every file with these bytes leaves every revision."""
    repo = _repo(request, prefix, ns, name, write=True)
    deletions = read_json(request).get("deletions")
    if not isinstance(deletions, dict) or not isinstance(deletions.get("sha"), list):
        raise BadRequest("expected {\"deletions\": {\"sha\": [sha256, ...], \"rewriteHistory\": true}}")
    shas = deletions["sha"]
    for sha in shas:
        blobs.check_sha256(sha)
    rewritten = history.do_delete_lfs_files(Actor.from_request(request), repo, shas,
                                            rewrite_history=deletions.get("rewriteHistory", True) is not False)
    return JsonResponse({"deleted": len(shas), "rewrittenCommits": rewritten})


# --- downloads --------------------------------------------------------------------------------------

@csrf_exempt
@require_http_methods(["GET", "HEAD"])
def resolve(request: HttpRequest, prefix: str, ns: str, name: str, rev: str, path: str) -> HttpResponse:
    repo = _repo(request, prefix, ns, name)
    services.check_gate(Actor.from_request(request), repo)
    commit = services.resolve_revision(repo, rev)
    try:
        entry = services.file_at(repo, commit, path)
    except EntryNotFound as err:
        notice = not_mirrored_notice(repo)
        if notice:
            raise EntryNotFound(f"{err.message}: {notice}",
                                headers=err.headers | {"X-HF-Warning": _not_mirrored_warning(notice)}) from None
        raise
    etag = entry.ref if entry.lfs else entry.git_oid
    headers = {
        "X-Repo-Commit": commit.oid,
        "X-Linked-Etag": f'"{etag}"',
        "X-Linked-Size": str(entry.size),
        "ETag": f'"{etag}"',
        "Accept-Ranges": "bytes",
        # Immutable when addressed by commit; a branch may move.
        "Cache-Control": ("public, max-age=31536000, immutable" if rev == commit.oid and not repo.private
                          else "private, no-cache"),
    }
    filename = path.rsplit("/", 1)[-1]
    if request.method == "HEAD":
        resp = HttpResponse(status=200, content_type="application/octet-stream")
        for k, v in headers.items():
            resp[k] = v
        resp["Content-Length"] = str(entry.size)
        return resp
    if path in ("config.json", "README.md") and "HTTP_RANGE" not in request.META:
        services.count_download(repo)
    return serving.blob_response(request, blobs.key_for(entry.ref), entry.size, headers, filename)


# --- uploads ----------------------------------------------------------------------------------------

@csrf_exempt
@require_http_methods(["POST"])
def preupload(request: HttpRequest, prefix: str, ns: str, name: str, rev: str) -> JsonResponse:
    repo = _pr_or_write_access(request, prefix, ns, name, rev)
    data = read_json(request)
    files = data.get("files")
    if not isinstance(files, list):
        raise BadRequest("'files' must be a list")
    try:
        commit = services.resolve_revision(repo, rev)
    except HubError:
        commit = None  # a branch about to be created: nothing there yet
    store = trees.NodeStore()
    rules, ignored = attributes.revision_rules(store, commit.tree if commit else None)
    if data.get("gitIgnore"):  # the .gitignore the commit itself carries
        ignored = attributes.ignore_spec(str(data["gitIgnore"]))
    out = []
    any_lfs = False
    for f in files:
        if not isinstance(f, dict) or not isinstance(f.get("path"), str):
            raise BadRequest("each file needs a 'path'")
        path = _commit_path(f["path"])
        size = f.get("size", 0)
        if not isinstance(size, int) or size < 0:
            raise BadRequest(f"invalid size for {path!r}")
        try:
            sample = base64.b64decode(str(f.get("sample") or ""))
        except (binascii.Error, ValueError):
            raise BadRequest(f"the sample of {path!r} is not valid base64") from None
        mode = attributes.upload_mode(rules, path, size, sample)
        any_lfs |= mode == attributes.LFS
        entry = trees.resolve(store, commit.tree, path) if commit else None
        oid = None
        if entry is not None and not entry.is_dir:  # (as upstream: what is stored there, of its kind)
            oid = entry.ref if entry.lfs else entry.git_oid
        out.append({"path": path, "uploadMode": mode,
                    "shouldIgnore": bool(ignored is not None and ignored.match_file(path)), "oid": oid})
    resp = JsonResponse({"files": out, "commitOid": commit.oid if commit else None})
    if any_lfs:
        resp["X-HF-Warning"] = XET_WARNING
    return resp


def _commit_path(path: str) -> str:
    try:
        return check_path(path)
    except InvalidPath as err:
        raise UnprocessablePath(err.message) from None


def _sign(payload: dict) -> str:
    return signing.dumps(payload, salt="hub.lfs", compress=True)


def _unsign(token: str, max_age: int | timedelta) -> dict:
    try:
        return signing.loads(token, salt="hub.lfs", max_age=max_age)
    except signing.SignatureExpired:
        raise NotFound("this upload URL has expired; start the upload again") from None
    except signing.BadSignature:
        raise NotFound("this upload URL is not valid") from None


@csrf_exempt
@require_http_methods(["POST"])
def lfs_batch(request: HttpRequest, prefix: str, ns: str, name: str) -> JsonResponse:
    if not request.user.is_authenticated:
        raise Unauthorized("LFS requires a token: pass one with write access")
    data = read_json(request)
    operation = data.get("operation")
    if operation not in ("upload", "download"):
        raise BadRequest("operation must be 'upload' or 'download'")
    for_pr = operation == "upload" and _lfs_for_pull_request(data)
    repo = _repo(request, prefix, ns, name, write=operation == "upload" and not for_pr)
    if for_pr:
        check_can_participate(Actor.from_request(request), repo)
    if operation == "download":
        services.check_gate(Actor.from_request(request), repo)
    objects = data.get("objects")
    if not isinstance(objects, list) or len(objects) > 1000:
        raise BadRequest("'objects' must be a list of at most 1000 objects")
    out = []
    valid: dict[str, int] = {}
    for obj in objects:
        oid, size = (obj.get("oid"), obj.get("size")) if isinstance(obj, dict) else (None, None)
        try:
            blobs.check_sha256(oid)
            if not isinstance(size, int) or not 0 <= size <= blobs.MAX_BLOB_SIZE:
                raise BadRequest(f"invalid size {size!r} for {oid}: expected 0 to {blobs.MAX_BLOB_SIZE} bytes")
        except HubError as err:
            out.append({"oid": str(oid), "size": size if isinstance(size, int) else 0,
                        "error": {"code": 422, "message": err.message}})
            continue
        valid[oid] = size
    referable = blobs.can_reference(request.user, list(valid))
    stored = {oid: blobs.stored_blob(oid) for oid in valid}
    if operation == "upload":  # a commit will reference these without uploading: GC's grace starts now
        blobs.touch([oid for oid, b in stored.items() if b is not None and oid in referable])
    with quota_services.Hold() as hold:
        if operation == "upload":
            # Quota before bytes: everything this batch may upload is reserved at once, or nothing is.
            need = {oid: size for oid, size in valid.items() if stored[oid] is None or oid not in referable}
            hold.reserve_many(repo.namespace, need, user=request.user, purpose=f"lfs {repo.repo_id}")
        out = _batch_objects(request, repo, operation, valid, stored, referable, out)
        # Handed on to the uploads the answer starts: they can complete it while their URLs live (a
        # failed batch releases it at once).
        sessions = [o for o in out if "header" in o.get("actions", {}).get("upload", {})]
        hold.keep_until(timezone.now() + (blobs.LFS_SESSION_TTL if sessions
                                          else timedelta(seconds=settings.HUB_PRESIGN_SECONDS)))
    return JsonResponse({"transfer": "basic", "objects": out, "hash_algo": "sha256"}, content_type=LFS_JSON)


def _batch_objects(request: HttpRequest, repo: Repo, operation: str, valid: dict[str, int], stored: dict,
                   referable: set[str], out: list[dict]) -> list[dict]:
    store = blobs.object_store()
    base = base_url(request)
    lfs_base = f"{base}/{'datasets/' if repo.type == Repo.DATASET else ''}{repo.repo_id}.git/info/lfs"
    for oid, size in valid.items():
        item = {"oid": oid, "size": size}
        blob = stored[oid]
        if blob is not None and oid not in referable:
            blob = None  # stored, but this caller has not shown they hold the bytes: upload them
        if operation == "download":
            if blob is None:
                item["error"] = {"code": 404, "message": "object not found"}
            elif oid in blobs.corrupt_shas():
                item["error"] = {"code": 409, "message": "the stored bytes failed their integrity check; "
                                                         "the operator has been told"}
            else:
                url = (store.presign_get(blobs.key_of(blob), expires=settings.HUB_PRESIGN_SECONDS)
                       or f"{base}/lfs/objects/{_sign({'o': oid})}")
                item["actions"] = {"download": {"href": url, "expires_in": settings.HUB_PRESIGN_SECONDS}}
        elif blob is None:
            verify = {"href": f"{lfs_base}/verify"}
            # Basic uploads only where the hub itself receives (and hashes) the bytes. A presigned PUT
            # to the blob's key would stay valid after verification and let its holder overwrite
            # verified, shared bytes; a multipart upload, even of one part, is completed by the hub,
            # after which its part URLs are dead.
            if store.local_path(blobs.blob_key(oid)) is not None and (
                    size < blobs.MIN_PART * 2 or size <= settings.HUB_MULTIPART_CHUNK):
                url = f"{base}/lfs/upload/{_sign({'o': oid, 'z': size, 'u': request.user.pk, 'n': repo.namespace_id})}"
                item["actions"] = {"upload": {"href": url}, "verify": verify}
            else:
                session = blobs.open_session(sha256=oid, size=size, repo=repo, user=request.user)
                # upload_id (not a digit key: huggingface_hub ignores it) lets `hub push` resume
                header = {"chunk_size": str(session.part_size), "upload_id": str(session.id)}
                for n in range(1, session.part_count + 1):
                    header[str(n)] = (store.presign_part(session.key, session.store_upload_id, n,
                                                         expires=int(blobs.LFS_SESSION_TTL.total_seconds()))
                                      or f"{base}/lfs/part/{_sign({'s': str(session.id), 'n': n})}")
                item["actions"] = {"upload": {"href": f"{base}/lfs/complete/{_sign({'s': str(session.id)})}",
                                              "header": header},
                                   "verify": verify}
        out.append(item)
    return out


@csrf_exempt
@require_http_methods(["POST"])
def lfs_verify(request: HttpRequest, prefix: str, ns: str, name: str) -> JsonResponse:
    # (it only answers whether the caller's upload is stored: pull requests' uploads are verified too)
    check_can_participate(Actor.from_request(request), _repo(request, prefix, ns, name))
    data = read_json(request)
    oid, size = data.get("oid"), data.get("size")
    blobs.check_sha256(oid)
    if not isinstance(size, int):
        raise BadRequest("'size' must be an integer")
    blob = blobs.stored_blob(oid)
    if blob is None or not blobs.can_reference(request.user, [oid]):
        raise UnprocessableEntity(f"object {oid} is not stored: it was not uploaded, its upload did not complete, "
                                  "or it was removed as unreferenced before a commit named it; upload it again")
    if blob.size != size:
        raise UnprocessableEntity(f"object {oid} has {blob.size} bytes, not {size}")
    return JsonResponse({"oid": blob.sha256, "size": blob.size}, content_type=LFS_JSON)


@csrf_exempt
@require_http_methods(["PUT"])
def lfs_upload(request: HttpRequest, token: str) -> HttpResponse:
    """Local backend: a basic LFS upload straight into the hub, which verifies as it stores."""
    claims = _unsign(token, max_age=settings.HUB_PRESIGN_SECONDS)
    length = _content_length(request)
    if length != claims["z"]:
        raise BadRequest(f"this upload expects {claims['z']} bytes, the request has {length}")
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.filter(pk=claims.get("u")).first()
    blobs.ingest_stream_verified(request, claims["o"], claims["z"], user)
    if claims.get("n"):
        quota_services.await_commit(claims["n"], claims["o"])
    return HttpResponse(status=200)


@csrf_exempt
@require_http_methods(["PUT"])
def lfs_part(request: HttpRequest, token: str) -> HttpResponse:
    claims = _unsign(token, max_age=blobs.LFS_SESSION_TTL)
    session = blobs.access_session(claims["s"])
    etag = blobs.store_part(session, claims["n"], request, _content_length(request))
    resp = HttpResponse(status=200)
    resp["ETag"] = etag
    return resp


@csrf_exempt
@require_http_methods(["POST"])
def lfs_complete(request: HttpRequest, token: str) -> JsonResponse:
    claims = _unsign(token, max_age=blobs.LFS_SESSION_TTL)
    session = UploadSession.objects.filter(pk=claims["s"]).first()
    if session is not None:
        session = blobs.revive(session)  # (a completion whose worker died: open again)
    if session is not None and session.state == UploadSession.DONE and not blobs.completing(session):
        # Completed already (a retry after a lost answer): say so — but only once the bytes are in.
        if blobs.stored_blob(session.sha256) is not None:
            return JsonResponse({"oid": session.sha256, "size": session.size}, content_type=LFS_JSON)
        raise Conflict("this upload's bytes are no longer stored; upload the file again")
    session = blobs.access_session(claims["s"])  # (409, retry, while another completion is under way)
    data = read_json(request)
    if data.get("oid") not in (None, session.sha256):
        raise BadRequest("the oid does not match this upload")
    parts = [(int(p.get("partNumber", 0)), str(p.get("etag", ""))) for p in data.get("parts", [])
             if isinstance(p, dict)]
    blob = blobs.complete_session(session, parts)
    if session.repo_id is not None:
        quota_services.await_commit(session.repo.namespace_id, blob.sha256)
    return JsonResponse({"oid": blob.sha256, "size": blob.size}, content_type=LFS_JSON)


@require_http_methods(["GET"])
def lfs_object(request: HttpRequest, token: str) -> HttpResponse:
    claims = _unsign(token, max_age=settings.HUB_PRESIGN_SECONDS)
    blob = blobs.stored_blob(claims["o"])
    if blob is None:
        raise NotFound("object not found")
    blobs.check_servable(blob.sha256)
    return serving.blob_response(request, blobs.key_of(blob), blob.size, {}, blob.sha256)


def _content_length(request: HttpRequest) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or "")
    except ValueError:
        raise BadRequest("Content-Length is required") from None


@require_http_methods(["GET"])
def xet_token(request: HttpRequest, **kwargs) -> JsonResponse:
    raise HubError(NO_XET)


# --- commits ----------------------------------------------------------------------------------------

def _parse_commit_lines(request: HttpRequest) -> tuple[dict, list[tuple[str, dict]]]:
    header = None
    ops: list[tuple[str, dict]] = []
    for lineno, raw in enumerate(request, start=1):
        raw = raw.strip()
        if not raw:
            continue
        try:
            item = json.loads(raw)
            key, value = item["key"], item["value"]
        except (ValueError, KeyError, TypeError):
            raise BadRequest(f"line {lineno} of the commit payload is not a {{\"key\", \"value\"}} JSON object") \
                from None
        if not isinstance(value, dict):
            raise BadRequest(f"line {lineno}: 'value' must be an object")
        if key == "header":
            header = value
        elif key in ("file", "lfsFile", "deletedFile", "deletedFolder", "copyFile"):
            if not isinstance(value.get("path"), str):
                raise BadRequest(f"line {lineno}: {key} needs a 'path'")
            ops.append((key, value))
        else:
            raise BadRequest(f"line {lineno}: unknown operation {key!r}")
    if header is None:
        raise BadRequest("the commit payload has no header line")
    return header, ops


@csrf_exempt
@require_http_methods(["POST"])
def commit(request: HttpRequest, prefix: str, ns: str, name: str, rev: str) -> JsonResponse:
    repo = _pr_or_write_access(request, prefix, ns, name, rev)
    actor = Actor.from_request(request)
    pr = (pulls.check_commit(actor, repo, rev, create_pr=flag(request, "create_pr"))
          if flag(request, "create_pr") or pulls.is_pr_revision(rev) else None)
    if request.content_type == "application/json":  # very old clients
        data = read_json(request)
        header = {"summary": data.get("summary"), "description": data.get("description"),
                  "parentCommit": data.get("parentCommit")}
        ops = [("file", f) for f in data.get("files", [])] + [("lfsFile", f) for f in data.get("lfsFiles", [])] \
            + [("deletedFile", f) for f in data.get("deletedFiles", [])]
    else:
        header, ops = _parse_commit_lines(request)
    # Validate every path before storing any byte.
    for _, value in ops:
        _commit_path(value["path"].rstrip("/"))
    decoded = {}
    for i, (key, value) in enumerate(ops):
        if key == "file":
            if value.get("encoding", "base64") != "base64":
                raise BadRequest(f"{value['path']}: only base64 encoding is supported")
            try:
                decoded[i] = base64.b64decode(value.get("content", ""), validate=True)
            except (binascii.Error, ValueError):
                raise BadRequest(f"{value['path']}: content is not valid base64") from None
        elif key == "lfsFile":
            blobs.check_sha256(value.get("oid"))
    cops = services.CommitOps(user=actor.user)
    with quota_services.Hold() as hold:
        cops.reserve_inline(hold, repo.namespace, list(decoded.values()))  # quota first, then bytes
        return _commit(request, repo, rev, actor, header, ops, decoded, cops, pr)


def _commit(request: HttpRequest, repo: Repo, rev: str, actor: Actor, header: dict, ops: list, decoded: dict,
            cops: services.CommitOps, pr: pulls.Target | None = None) -> JsonResponse:
    try:
        for i, (key, value) in enumerate(ops):
            path = value["path"]
            if key == "file":
                cops.add_inline(path, decoded[i], repo_type=repo.type)
            elif key == "lfsFile":
                size = value.get("size")
                cops.add_lfs(path, value["oid"], size if isinstance(size, int) else None)
            elif key == "deletedFile":
                cops.delete(path)
            elif key == "deletedFolder":
                cops.delete_folder(path)
            elif key == "copyFile":
                src_commit = services.resolve_revision(repo, value.get("srcRevision") or rev)
                cops.add_copy(path, services.file_at(repo, src_commit, check_path(str(value.get("srcPath", "")))))
        if pr is not None:
            new, discussion = pulls.do_commit(actor, pr, cops, title=str(header.get("summary") or ""),
                                              message=str(header.get("description") or ""),
                                              parent_commit=header.get("parentCommit"))
        else:
            new = services.do_commit(actor, repo, rev, cops, title=str(header.get("summary") or ""),
                                     message=str(header.get("description") or ""),
                                     parent_commit=header.get("parentCommit"))
    except BaseException:
        # What was reserved for the uploaded files it names goes back too: nothing completes it now.
        quota_services.release_blobs(repo.namespace, cops.uploaded_blobs())
        raise
    return JsonResponse({"commitUrl": f"{repo_url(request, repo)}/commit/{new.oid}", "commitOid": new.oid,
                         "pullRequestUrl": f"{repo_url(request, repo)}/discussions/{discussion.num}" if pr else None})


def _pr_or_write_access(request: HttpRequest, prefix: str, ns: str, name: str, rev: str) -> Repo:
    """The repo an upload or commit goes to: one for a pull request (create_pr, or refs/pr/N) needs
    only read access here — hub.discussions.pulls decides who may open or push to one —, any other
    write access."""
    if flag(request, "create_pr") or pulls.is_pr_revision(rev):
        repo = _repo(request, prefix, ns, name)
        check_can_participate(Actor.from_request(request), repo)
        return repo
    return _repo(request, prefix, ns, name, write=True)


def _lfs_for_pull_request(data: dict) -> bool:
    """An LFS upload for a pull request: huggingface_hub names no ref for create_pr, refs/pr/N else."""
    ref = data.get("ref")
    name = ref.get("name") if isinstance(ref, dict) else None
    return not isinstance(name, str) or pulls.is_pr_revision(name)


def no_namespace(request: HttpRequest, name: str) -> JsonResponse:
    raise RepoNotFound(f"{name!r} is not a repo id here: ids are namespace/name (e.g. alice/{name})")


def not_found(request: HttpRequest, path: str = "") -> JsonResponse:
    raise NotFound(f"no such endpoint: {request.method} /{path}")
