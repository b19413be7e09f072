"""JSON shapes of the Hugging Face Hub protocol (see shared/docs/hf-protocol.md)."""
from __future__ import annotations

import html
from datetime import UTC, datetime

from hub.catalog.services import render_markdown
from hub.content import blobs
from hub.repos import trees
from hub.repos.models import AccessRequest, Commit, Repo, RepoLike


def hf_date(dt: datetime) -> str:
    """Dates must end in Z: huggingface_hub refuses +00:00."""
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def tree_entry(path: str, entry: trees.Entry) -> dict:
    if entry.is_dir:
        return {"type": "directory", "oid": entry.ref, "size": 0, "path": path}
    out = {"type": "file", "oid": entry.git_oid, "size": entry.size, "path": path}
    if entry.lfs:
        out["lfs"] = {"oid": entry.ref, "size": entry.size,
                      "pointerSize": len(blobs.lfs_pointer(entry.ref, entry.size))}
    return out


def last_commit(commit: Commit) -> dict:
    return {"id": commit.oid, "title": commit.title, "date": hf_date(commit.created)}


def repo_info(repo: Repo, commit: Commit | None, *, siblings: list[dict] | None = None,
              expand: list[str] | None = None) -> dict:
    card = repo.card_data or {}
    data = {
        "_id": f"{repo.pk:024x}",
        "id": repo.repo_id,
        "author": repo.namespace.name,
        "sha": commit.oid if commit else None,
        "lastModified": hf_date(repo.last_modified),
        "createdAt": hf_date(repo.created),
        "private": repo.private,
        "gated": repo.gating,
        "disabled": False,
        "downloads": repo.downloads,
        "likes": repo.likes,
        "tags": _tags(card),
        "cardData": card,
        "usedStorage": repo.total_size,
    }
    if repo.type == Repo.MODEL:
        data["modelId"] = repo.repo_id
        data["library_name"] = card.get("library_name")
        data["pipeline_tag"] = card.get("pipeline_tag")
    else:
        data["description"] = card.get("description", "")
        data["citation"] = card.get("citation", "")
    if siblings is not None:
        data["siblings"] = siblings
    if expand:
        wanted = set(expand) | {"id", "_id"}
        data = {k: v for k, v in data.items() if k in wanted}
    return data


def _tags(card: dict) -> list[str]:
    tags = card.get("tags") or []
    out = [str(t) for t in tags] if isinstance(tags, list) else []
    lic = card.get("license")
    if isinstance(lic, str):
        out.append(f"license:{lic}")
    return out


def sibling(path: str, entry: trees.Entry, with_blobs: bool) -> dict:
    if not with_blobs:
        return {"rfilename": path}
    out = {"rfilename": path, "size": entry.size, "blobId": entry.git_oid}
    if entry.lfs:
        out["lfs"] = {"sha256": entry.ref, "size": entry.size,
                      "pointerSize": len(blobs.lfs_pointer(entry.ref, entry.size))}
    return out


def commit_info(commit: Commit, formatted: bool = False) -> dict:
    out = {"id": commit.oid, "title": commit.title, "message": commit.message,
           "authors": [{"user": commit.author_name}], "date": hf_date(commit.created)}
    if formatted:  # (expand[]=formatted) as upstream: the title as escaped text, the message as markdown
        out["formatted"] = {"title": html.escape(commit.title), "message": render_markdown(commit.message)}
    return out


def access_request(req: AccessRequest) -> dict:
    """As huggingface_hub's AccessRequest reads it. The email is not listed for access an owner
    granted: the person shared nothing (as upstream)."""
    user = req.user
    return {"requestId": req.request_id, "status": req.status, "timestamp": hf_date(req.created),
            "user": {"user": user.username, "fullname": user.get_full_name() or user.username,
                     "email": None if req.granted else (user.email or None)},
            "fields": req.fields or None,
            **({"rejectionReason": req.rejection_reason} if req.status == AccessRequest.REJECTED else {})}


def liker(like: RepoLike) -> dict:
    """As huggingface_hub's User reads it (list_repo_likers). This hub keeps no avatars."""
    user = like.user
    return {"user": user.username, "fullname": user.get_full_name() or user.username, "avatarUrl": "",
            "type": "user"}


def liked(like: RepoLike) -> dict:
    """One entry of a user's likes (list_liked_repos)."""
    return {"createdAt": hf_date(like.created), "repo": {"name": like.repo.repo_id, "type": like.repo.type}}
