"""The refs of pull requests (refs/pr/N): created at a commit of the repo, moved only by commits
(services.do_commit with its pr_ref), never deleted while the repo lives — a closed or merged pull
request stays readable, and garbage collection keeps what it references (services.reachable_blobs
counts every ref)."""
from __future__ import annotations

from hub.repos.models import Commit, Ref, Repo


def create_pr_ref(repo: Repo, num: int, commit: Commit) -> Ref:
    """Points refs/pr/<num> at `commit`. Raises IntegrityError if that ref exists (call it inside a
    savepoint). No bytes are referenced that the repo does not hold already, so no quota changes."""
    return Ref.objects.create(repo=repo, kind=Ref.PR, name=str(num), commit=commit)


def pr_ref(repo: Repo, num: int) -> Ref | None:
    return Ref.objects.select_related("commit").filter(repo=repo, kind=Ref.PR, name=str(num)).first()


def pr_refs(repo: Repo) -> list[Ref]:
    """Every pull request's ref, by number."""
    refs = list(Ref.objects.select_related("commit").filter(repo=repo, kind=Ref.PR))
    return sorted(refs, key=lambda r: int(r.name) if r.name.isdigit() else 0)
