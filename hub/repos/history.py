"""A repo's LFS files across its history, and deleting some for good (upstream's list_lfs_files and
permanently_delete_lfs_files): the way to take back the quota a file holds in old revisions too,
e.g. a checkpoint pushed by mistake, without squashing the rest of the history.

Deleting rewrites history: every commit of every ref (branches, tags, pull requests) that holds
one of the files gets a new commit without it, its parents rewritten likewise; commits that did
not change are kept as they are. Then the commits no ref reaches any more are pruned, which gives
the account back the bytes only they held (services.do_prune_repo)."""
from __future__ import annotations

import hashlib

from django.db import transaction

from hub.accounts.actor import Actor
from hub.errors import BadRequest
from hub.quotas import services as quotas
from hub.repos import services, trees
from hub.repos.models import Commit, Ref, Repo, RepoBlob

PAGE = 1000


def lfs_files(repo: Repo, after: str | None = None, limit: int = PAGE) -> list[RepoBlob]:
    """The LFS objects the repo references (any revision), by sha256, each with where the repo first
    held it; `after` is the last sha256 of the previous page."""
    if RepoBlob.objects.filter(repo=repo, lfs__isnull=True).exists():
        _record_first_paths(repo)
    rows = RepoBlob.objects.filter(repo=repo, lfs=True).select_related("blob").order_by("blob_id")
    if after:
        rows = rows.filter(blob_id__gt=after)
    return list(rows[:limit])


def _record_first_paths(repo: Repo) -> None:
    """Rows from before paths were recorded: a path (and whether it is LFS) from the trees of the
    repo's refs, each tree node read once."""
    store = trees.NodeStore()
    found: dict[str, tuple[str, bool]] = {}
    heads = list(Ref.objects.filter(repo=repo).select_related("commit"))
    seen: set[str] = set()
    for ref in heads:
        stack = [(ref.commit.tree, "")]
        while stack:
            digest, prefix = stack.pop()
            if digest in seen:
                continue
            seen.add(digest)
            for raw in _entries(store, digest):
                if raw[1] == trees.FILE:
                    found.setdefault(raw[3], (prefix + raw[0], bool(raw[5])))
                else:
                    stack.append((raw[3], f"{prefix}{raw[0]}/"))
    for row in RepoBlob.objects.filter(repo=repo, lfs__isnull=True):
        path, lfs = found.get(row.blob_id, ("", False))  # (held only by unreachable commits: pruned soon)
        RepoBlob.objects.filter(pk=row.pk).update(path=path, lfs=lfs, ref=row.ref or repo.default_branch)


def _entries(store: trees.NodeStore, digest: str) -> list[list]:
    node = store.get(digest)
    if node["k"] == "L":
        return node["e"]
    leaves = store.get_many([c[1] for c in node["c"]])
    return [raw for c in node["c"] for raw in leaves[c[1]]["e"]]


def do_delete_lfs_files(actor: Actor, repo: Repo, shas: list[str], *, rewrite_history: bool = True
                        ) -> int:
    """Removes every file whose bytes are one of `shas` from every revision of the repo, and gives
    back the bytes nothing else of the account holds. Returns how many commits were rewritten.

    Runs under the account's lock (quotas.lock), which every commit of the repo takes: no ref moves
    while its history is rewritten."""
    services.check_can_write(actor, repo.namespace)
    if not rewrite_history:
        raise BadRequest("this hub deletes LFS files by rewriting history only (rewriteHistory=true): a "
                         "pointer left in an old revision would name bytes that are gone")
    wanted = set(shas)
    if not wanted:
        return 0
    store = trees.NodeStore()
    memo: dict[str, list[str]] = {}
    rewritten = 0
    with transaction.atomic():
        quotas.lock(repo.namespace_id)
        refs = list(Ref.objects.filter(repo=repo).select_related("commit"))
        parents = dict(Commit.objects.filter(repo=repo).values_list("id", "parent_id"))
        new_of: dict[int, Commit] = {}
        for ref in refs:
            chain = []
            cur = ref.commit_id
            while cur is not None and cur not in new_of:
                chain.append(cur)
                cur = parents.get(cur)
            rows = Commit.objects.in_bulk(chain)
            for cid in reversed(chain):  # oldest first: a commit's parent is rewritten before it
                old = rows[cid]
                parent = new_of.get(old.parent_id) if old.parent_id else None
                gone = _paths_holding(store, old.tree, wanted, memo)
                if not gone and (old.parent_id is None or parent.pk == old.parent_id):
                    new_of[cid] = old
                    continue
                tree, size, files = old.tree, old.total_size, old.file_count
                if gone:
                    plan = trees.plan_changes([(trees.DELETE, p, None) for p in gone])
                    tree, size, files = trees.update_dir(store, old.tree, plan, keep_empty=True)
                new_of[cid] = _rewritten(old, parent, tree, files, size)
                rewritten += 1
            store.flush()
            head = new_of[ref.commit_id]
            if head.pk != ref.commit_id:
                Ref.objects.filter(pk=ref.pk).update(commit=head)
                if ref.kind == Ref.BRANCH and ref.name == repo.default_branch:
                    Repo.objects.filter(pk=repo.pk).update(head_sha=head.oid, file_count=head.file_count,
                                                           total_size=head.total_size)
        services.do_prune_repo(repo)
    return rewritten


def _paths_holding(store: trees.NodeStore, digest: str, shas: set[str], memo: dict[str, list[str]]) -> list[str]:
    """Paths under the directory `digest` of the files whose bytes are in `shas` (memoised per
    directory: a tree shared by many commits is read once)."""
    if digest in memo:
        return memo[digest]
    out = []
    for raw in _entries(store, digest):
        if raw[1] == trees.FILE:
            if raw[3] in shas:
                out.append(raw[0])
        else:
            out += [f"{raw[0]}/{p}" for p in _paths_holding(store, raw[3], shas, memo)]
    memo[digest] = out
    return out


def _rewritten(old: Commit, parent: Commit | None, tree: str, files: int, size: int) -> Commit:
    """`old` again, on a new parent and/or tree: same author, date, title and message."""
    payload = (f"repo {old.repo_id}\ntree {tree}\nparent {parent.oid if parent else ''}\nrewrite of {old.oid}\n"
               f"author {old.author_name}\ntime {old.created.isoformat()}\n\n{old.title}\n\n{old.message}")
    return Commit.objects.create(repo_id=old.repo_id, oid=hashlib.sha1(payload.encode()).hexdigest(), parent=parent,
                                 tree=tree, author_id=old.author_id, author_name=old.author_name, title=old.title,
                                 message=old.message, created=old.created, file_count=files, total_size=size)
