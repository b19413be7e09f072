"""An account's space, as the protocol manages it: `hf repos ls` (what each repo uses), and taking
back what old revisions hold (super_squash_history, list_lfs_files + permanently_delete_lfs_files)."""
from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from hub.accounts.actor import Actor
from hub.content import blobs
from hub.errors import BadRequest, Unauthorized
from hub.hfapi import serializers as ser
from hub.hfapi.common import paginate, read_json, repo_of
from hub.quotas import services as quota_services
from hub.repos import history, services


@require_http_methods(["GET"])
def repo_storage(request: HttpRequest, org: str | None = None) -> JsonResponse:
    """`hf repos ls` (HfApi.list_user_repos): the caller's repos, or an organisation's they belong
    to, with the storage each uses."""
    if not request.user.is_authenticated:
        raise Unauthorized("Invalid credentials in Authorization header: no token was sent")
    ns = quota_services.namespace_for(request.user, org)
    rows = services.repo_storage(ns)
    total = sum(size for _, size in rows) or 1
    return JsonResponse([{"id": r.repo_id, "type": r.type, "updatedAt": ser.hf_date(r.last_modified),
                          "visibility": "private" if r.private else "public", "storage": size,
                          "storagePercent": round(100 * size / total, 2)} for r, size in rows], safe=False)


@csrf_exempt
@require_http_methods(["POST"])
def super_squash(request: HttpRequest, prefix: str, ns: str, name: str, rev: str) -> JsonResponse:
    repo = repo_of(request, prefix, ns, name, write=True)
    data = read_json(request)
    title = str(data.get("message") or f"Super-squash branch '{rev}'")
    commit = services.do_super_squash(Actor.from_request(request), repo, rev, title=title)
    return JsonResponse({"commitOid": commit.oid})


@require_http_methods(["GET"])
def lfs_files(request: HttpRequest, prefix: str, ns: str, name: str) -> JsonResponse:
    """HfApi.list_lfs_files: the repo's LFS objects, each with where it was first pushed (for its
    writers: it is the list they pick from to delete for good)."""
    repo = repo_of(request, prefix, ns, name, write=True)
    rows = history.lfs_files(repo, after=request.GET.get("cursor") or None, limit=history.PAGE + 1)
    more = len(rows) > history.PAGE
    rows = rows[:history.PAGE]
    resp = JsonResponse([{"fileOid": r.blob_id, "oid": r.blob_id, "size": r.blob.size, "filename": r.path,
                          "ref": r.ref or None, "pushedAt": ser.hf_date(r.created or r.blob.created)}
                         for r in rows], safe=False)
    if more:
        paginate(request, resp, {"cursor": rows[-1].blob_id})
    return resp


@csrf_exempt
@require_http_methods(["POST"])
def lfs_files_delete(request: HttpRequest, prefix: str, ns: str, name: str) -> JsonResponse:
    """HfApi.permanently_delete_lfs_files: every file with these bytes leaves every revision."""
    repo = repo_of(request, prefix, ns, name, write=True)
    deletions = read_json(request).get("deletions")
    if not isinstance(deletions, dict) or not isinstance(deletions.get("sha"), list):
        raise BadRequest("expected {\"deletions\": {\"sha\": [sha256, ...], \"rewriteHistory\": true}}")
    shas = deletions["sha"]
    for sha in shas:
        blobs.check_sha256(sha)
    rewritten = history.do_delete_lfs_files(Actor.from_request(request), repo, shas,
                                            rewrite_history=deletions.get("rewriteHistory", True) is not False)
    return JsonResponse({"deleted": len(shas), "rewrittenCommits": rewritten})
