"""The Hugging Face Hub HTTP protocol, as a thin adapter over hub.repos.services.

Every view parses, authorizes through an access_* function, calls one service and renders. Errors
are HubError subclasses; the middleware turns them into the status + X-Error-Code pairs that
huggingface_hub maps to its own exceptions."""
from __future__ import annotations

import base64
import binascii
import itertools
import json

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from hub.accounts.actor import Actor
from hub.accounts.services import user_orgs
from hub.catalog.services import not_mirrored_notice
from hub.content import blobs, serving
from hub.cursors import decode_cursor, encode_cursor
from hub.discussions import pulls
from hub.discussions.services import check_can_participate
from hub.errors import (
    BadRequest,
    BlobNotLocal,
    EntryNotFound,
    HubError,
    InvalidPath,
    NotFound,
    RepoNotFound,
    Unauthorized,
    UnprocessablePath,
)
from hub.hfapi import serializers as ser
from hub.hfapi.common import (
    base_url,
    expand_of,
    flag,
    int_param,
    paginate,
    read_json,
    repo_of,
    repo_type,
    repo_url,
)
from hub.mirrors import ondemand
from hub.quotas import services as quota_services
from hub.repos import attributes, cards, pullrefs, services, trees
from hub.repos.models import Repo
from hub.validation import check_dir_path, check_path
from hub.xet import cas as xet_cas

PAGE = 1000
PAGE_EXPANDED = 50


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
    source = repo_of(request, prefix, ns, name)
    private = _visibility(data) if ("visibility" in data or "private" in data) else None
    repo = services.do_duplicate_repo(actor, source, *target.split("/"), private=private)
    return JsonResponse({"url": repo_url(request, repo), "filesCopyPending": False})


@csrf_exempt
@require_http_methods(["PUT"])
def repo_settings(request: HttpRequest, prefix: str, ns: str, name: str) -> JsonResponse:
    data = read_json(request)
    repo = repo_of(request, prefix, ns, name, write=True)
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
    limit = int_param(request.GET.get("limit"), None)
    offset = int_param(request.GET.get("offset"), 0)
    page_size = 100 if limit is None else min(limit, 1000)
    rows = list(qs[offset:offset + page_size + 1])
    more = len(rows) > page_size
    rows = rows[:page_size]
    resp = JsonResponse([ser.repo_info(r, None) | {"sha": r.head_sha or None} for r in rows], safe=False)
    if more and limit is None:
        paginate(request, resp, {"offset": str(offset + page_size)})
    return resp


@require_http_methods(["GET"])
def repo_info(request: HttpRequest, prefix: str, ns: str, name: str, rev: str | None = None) -> JsonResponse:
    repo = repo_of(request, prefix, ns, name)
    commit = services.resolve_revision(repo, rev)
    with_blobs = flag(request, "blobs")
    store = trees.NodeStore()
    siblings = [ser.sibling(path, e, with_blobs) for path, e in trees.walk(store, commit.tree) if not e.is_dir]
    expand = expand_of(request)
    info = ser.repo_info(repo, commit, siblings=siblings, expand=expand or None)
    if "xetEnabled" in expand:
        info["xetEnabled"] = True
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
    repo = repo_of(request, prefix, ns, name, write=bool(write))
    services.check_gate(actor, repo)
    return JsonResponse({"id": repo.repo_id, "access": "write" if write else "read"})


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
    repo = repo_of(request, prefix, ns, name)
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
    limit = min(int_param(request.GET.get("limit"), PAGE_EXPANDED if expand else PAGE),
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
    _add_xet_hashes(out, [e for _, e in page])
    if expand and out:
        last = _last_commits(repo, commit, [p for p, _ in page])
        for item in out:
            item["lastCommit"] = last[item["path"]]
    resp = JsonResponse(out, safe=False)
    if more:
        paginate(request, resp, {"cursor": encode_cursor(page[-1][0][len(base):])})
    return resp


def _add_xet_hashes(out: list[dict], entries: list) -> None:
    """`xetHash` on the files whose chunks the hub holds: hf_xet downloads those through Xet (the
    others, and clients without Xet, over /resolve/)."""
    lfs = [e.ref for e in entries if not e.is_dir and e.lfs]
    known = xet_cas.files_of_blobs(lfs) if lfs else {}
    for item, e in zip(out, entries, strict=True):
        if not e.is_dir and e.lfs and e.ref in known:
            item["xetHash"] = known[e.ref]


@csrf_exempt
@require_http_methods(["POST"])
def paths_info(request: HttpRequest, prefix: str, ns: str, name: str, rev: str) -> JsonResponse:
    repo = repo_of(request, prefix, ns, name)
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
    _add_xet_hashes(out, [e for _, e in found])
    if expand and out:
        last = _last_commits(repo, commit, [p for p, _ in found])
        for item in out:
            item["lastCommit"] = last[item["path"]]
    return JsonResponse(out, safe=False)


# --- refs and history -------------------------------------------------------------------------------

@require_http_methods(["GET"])
def refs(request: HttpRequest, prefix: str, ns: str, name: str) -> JsonResponse:
    repo = repo_of(request, prefix, ns, name)
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
    repo = repo_of(request, prefix, ns, name)
    head = services.resolve_revision(repo, rev)
    page = int_param(request.GET.get("p"), 0)
    limit = min(int_param(request.GET.get("limit"), 50), 1000) or 50
    rows, total = services.history(repo, head, page * limit, limit)
    formatted = "formatted" in expand_of(request)
    resp = JsonResponse([ser.commit_info(c, formatted) for c in rows], safe=False)
    if (page + 1) * limit < total:
        paginate(request, resp, {"p": str(page + 1)})
    resp["X-Total-Count"] = str(total)
    return resp


@csrf_exempt
@require_http_methods(["POST", "DELETE"])
def branch(request: HttpRequest, prefix: str, ns: str, name: str, branch: str) -> JsonResponse:
    repo = repo_of(request, prefix, ns, name, write=True)
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
    repo = repo_of(request, prefix, ns, name, write=True)
    actor = Actor.from_request(request)
    if request.method == "DELETE":
        services.do_delete_tag(actor, repo, rev)
        return JsonResponse({})
    data = read_json(request)
    if not isinstance(data.get("tag"), str):
        raise BadRequest("'tag' is required")
    services.do_create_tag(actor, repo, data["tag"], rev, str(data.get("message") or ""))
    return JsonResponse({})


# --- downloads --------------------------------------------------------------------------------------

@csrf_exempt
@require_http_methods(["GET", "HEAD"])
def resolve(request: HttpRequest, prefix: str, ns: str, name: str, rev: str, path: str) -> HttpResponse:
    repo = repo_of(request, prefix, ns, name)
    commit = services.resolve_revision(repo, rev)  # (first: pinning a catalog entry may gate it, as upstream)
    services.check_gate(Actor.from_request(request), repo)
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
    xet_file = xet_cas.file_of_blob(entry.ref) if entry.lfs else None
    if xet_file is not None:  # hf_xet downloads it through Xet; other clients ignore these
        headers["X-Xet-Hash"] = xet_file.hash
        token_route = f"{base_url(request)}/api/{repo.type}s/{repo.repo_id}/xet-read-token/{commit.oid}"
        headers["Link"] = f'<{token_route}>; rel="xet-auth"'
    filename = path.rsplit("/", 1)[-1]
    if request.method == "HEAD":
        resp = HttpResponse(status=200, content_type="application/octet-stream")
        for k, v in headers.items():
            resp[k] = v
        resp["Content-Length"] = str(entry.size)
        return resp
    if path in ("config.json", "README.md") and "HTTP_RANGE" not in request.META:
        services.count_download(repo)
    try:
        key = blobs.key_for(entry.ref)
    except BlobNotLocal:  # a catalog entry's file not fetched yet: from its upstream, streamed as it lands
        return ondemand.serve(request, entry.ref, entry.size, headers, filename)
    ondemand.touch(entry.ref)
    return serving.blob_response(request, key, entry.size, headers, filename)


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
    lfs_bytes = 0
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
        lfs_bytes += size if mode == attributes.LFS else 0
        entry = trees.resolve(store, commit.tree, path) if commit else None
        oid = None
        if entry is not None and not entry.is_dir:  # (as upstream: what is stored there, of its kind)
            oid = entry.ref if entry.lfs else entry.git_oid
        out.append({"path": path, "uploadMode": mode,
                    "shouldIgnore": bool(ignored is not None and ignored.match_file(path)), "oid": oid})
    resp = JsonResponse({"files": out, "commitOid": commit.oid if commit else None})
    # hf_xet shows a refusal as a bare "413" and a URL: the figures go ahead as a warning, which
    # huggingface_hub prints. (Only a warning: the hub may hold some of the files' chunks already.)
    full = quota_services.room_for(repo.namespace, lfs_bytes) if lfs_bytes else None
    if full:
        resp["X-HF-Warning"] = f"quota; {full} (If the upload fails with 413, this is why.)"
    return resp


def _commit_path(path: str) -> str:
    try:
        return check_path(path)
    except InvalidPath as err:
        raise UnprocessablePath(err.message) from None


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
        cops.store_inline([(ops[i][1]["path"], data) for i, data in decoded.items()], repo_type=repo.type)
        cops.load_lfs([value["oid"] for key, value in ops if key == "lfsFile"])
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
        repo = repo_of(request, prefix, ns, name)
        check_can_participate(Actor.from_request(request), repo)
        return repo
    return repo_of(request, prefix, ns, name, write=True)


def repo_info_or_no_namespace(request: HttpRequest, prefix: str, ns: str, name: str) -> HttpResponse:
    """/api/models/X/like, /api/models/X/settings, …: read (GET), the info of the repo X/like; any
    other method, an endpoint of the one-part id X, which names no repo here (RepoNotFound, as
    upstream answers HfApi.unlike("gpt2") for a missing repo)."""
    if request.method == "GET":
        return repo_info(request, prefix, ns, name)
    return no_namespace(request, ns)


def no_namespace(request: HttpRequest, name: str) -> JsonResponse:
    raise RepoNotFound(f"{name!r} is not a repo id here: ids are namespace/name (e.g. alice/{name})")


def not_found(request: HttpRequest, path: str = "") -> JsonResponse:
    raise NotFound(f"no such endpoint: {request.method} /{path}")
