"""Repos, revisions and commits: the business rules every front door (HF API, native API, web,
tasks) calls. `access_*` fetch-or-raise with authorization, `do_*` mutate."""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

import yaml
from django.db import IntegrityError, transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from hub.accounts.models import Membership, Namespace
from hub.errors import (
    BadRequest,
    Conflict,
    EntryNotFound,
    Forbidden,
    GatedRepo,
    InvalidPath,
    PreconditionFailed,
    RepoNotFound,
    RevisionNotFound,
    Unauthorized,
)
from hub.quotas import services as quotas
from hub.repos import blobs, trees
from hub.repos.models import GITATTRIBUTES, Blob, Commit, GateAcceptance, Ref, Repo, RepoBlob, sort_name
from hub.repos.signals import card_changed
from hub.repos.validation import check_name, check_path, check_ref_name

HEX40 = re.compile(r"[0-9a-f]{40}")
SHORT_SHA = re.compile(r"[0-9a-f]{7,39}")
README = "README.md"
CARD_MAX_BYTES = 1_000_000


@dataclass
class Actor:
    """Who is calling: a user (or None), and whether their credential may write."""

    user: object | None
    can_write: bool = True
    instance_id: object | None = None  # set for an instance's token: reads only the attached repos

    @classmethod
    def from_request(cls, request) -> Actor:
        user = request.user if request.user.is_authenticated else None
        token = getattr(request, "api_token", None)
        instance = getattr(request, "instance", None)
        return cls(user, can_write=not (token is not None and token.read_only) and instance is None,
                   instance_id=instance.pk if instance is not None else None)


# --- access -----------------------------------------------------------------------------------------

def _role(user, namespace: Namespace) -> str | None:
    if user is None:
        return None
    if user.is_superuser:
        return Membership.ADMIN
    if namespace.user_id == user.id:
        return Membership.ADMIN
    m = Membership.objects.filter(namespace=namespace, user=user).values_list("role", flat=True).first()
    return m


def namespace_role(user, namespace: Namespace) -> str | None:
    """The user's role in the namespace (admin for its owner and for superusers), or None."""
    return _role(user, namespace)


def visible_repos(user) -> QuerySet[Repo]:
    """Repos the user may read: public ones, plus private ones of their namespaces."""
    qs = Repo.objects.select_related("namespace")
    if user is None:
        return qs.filter(private=False)
    if user.is_superuser:
        return qs
    return qs.filter(Q(private=False) | Q(namespace__user=user) | Q(namespace__memberships__user=user)).distinct()


def _readable(actor: Actor, repo: Repo) -> tuple[bool, str | None]:
    """(whether the actor may read the repo, their role in its namespace)."""
    if actor.instance_id is not None:
        from hub.instances.services import can_read_repo

        if not can_read_repo(actor.instance_id, repo):
            return False, None
    role = _role(actor.user, repo.namespace)
    return not (repo.private and role is None), role


def access_repo(actor: Actor, repo_type: str, namespace: str, name: str, *, write: bool = False) -> Repo:
    """The repo, if the actor may read it (and write it, with write=True). A private repo is
    indistinguishable from a missing one for anyone who cannot read it."""
    repo = (Repo.objects.select_related("namespace")
            .filter(type=repo_type, namespace__name=namespace, name=name).first())
    readable, role = _readable(actor, repo) if repo is not None else (False, None)
    if not readable:
        raise _not_found(actor, repo_type, namespace, name)
    if write:
        check_can_write(actor, repo.namespace, role)
    return repo


def other_type_seen(actor: Actor, repo_type: str, namespace: str, name: str) -> Repo | None:
    """The repo of the other type (model for dataset, and back) with this id, if the actor may read
    it: what a "not found" may point to without leaking anything private."""
    other_type = Repo.MODEL if repo_type == Repo.DATASET else Repo.DATASET
    other = (Repo.objects.select_related("namespace")
             .filter(type=other_type, namespace__name=namespace, name=name).first())
    return other if other is not None and _readable(actor, other)[0] else None


def _not_found(actor: Actor, repo_type: str, namespace: str, name: str) -> RepoNotFound:
    """The 404 for a repo the actor cannot see. If they can see a repo of the other type by that id
    (wine is a dataset, asked for as a model), it says so."""
    other = other_type_seen(actor, repo_type, namespace, name)
    if other is not None:
        return RepoNotFound(f"no {repo_type} {namespace}/{name}; there is a {other.type} of that name: "
                            f"use {other.type}s/{other.repo_id}")
    return RepoNotFound(f"{repo_type} {namespace}/{name} not found (or you do not have access to it)")


def check_gate(actor: Actor, repo: Repo) -> None:
    """Downloads of a gated repo need its conditions accepted (its namespace's members need not)."""
    if not repo.gated:
        return
    kind = "dataset" if repo.type == Repo.DATASET else "model"
    where = f"/{'datasets/' if repo.type == Repo.DATASET else ''}{repo.repo_id}"
    if actor.user is None:
        err = GatedRepo(f"Access to {kind} {repo.repo_id} is restricted: log in (pass a token) and accept its "
                        f"conditions at {where} first")
        err.status = 401
        raise err
    if _role(actor.user, repo.namespace) is not None:
        return
    if not GateAcceptance.objects.filter(repo=repo, user=actor.user).exists():
        raise GatedRepo(f"Access to {kind} {repo.repo_id} is restricted: accept its conditions at {where} "
                        f"(or POST /api/v1/repos/{kind}/{repo.repo_id}/access) to download its files")


def do_accept_gate(actor: Actor, repo: Repo) -> bool:
    """The caller accepts the repo's conditions. Returns True if this is new."""
    if actor.user is None:
        raise Unauthorized("log in (pass a token) to accept a repo's conditions")
    if actor.instance_id is not None or not actor.can_write:
        # Accepting is a change made in the person's name: not for a read-only or an instance token.
        raise Forbidden("this token cannot accept a repo's conditions (it is read-only or an instance's); "
                        "accept them on the repo's page, or with a write token")
    if not repo.gated:
        raise BadRequest(f"{repo.repo_id} is not gated: there is nothing to accept")
    _, created = GateAcceptance.objects.get_or_create(repo=repo, user=actor.user)
    return created


def check_can_write(actor: Actor, namespace: Namespace, role: str | None = "?") -> None:
    if actor.user is None:
        raise Unauthorized("you must be logged in (pass a token) to write")
    if role == "?":
        role = _role(actor.user, namespace)
    if role not in (Membership.WRITE, Membership.ADMIN):
        raise Forbidden(f"you ({actor.user.username}) cannot write to the namespace {namespace.name!r}")
    if actor.instance_id is not None:
        raise Forbidden("an instance token can only read the repos attached to its instance")
    if not actor.can_write:
        raise Forbidden("this token is read-only; create a write token to upload or change repos")


# --- repos ------------------------------------------------------------------------------------------

@transaction.atomic
def do_create_repo(actor: Actor, namespace: str | None, name: str, repo_type: str, *, private: bool = False
                   ) -> Repo:
    """Creates a repo with an initial commit (.gitattributes), so it always has a head."""
    if actor.user is None:
        raise Unauthorized("you must be logged in (pass a token) to create a repo")
    if repo_type not in (Repo.MODEL, Repo.DATASET):
        raise BadRequest(f"unsupported repo type {repo_type!r}: use model or dataset")
    check_name(name, what="repo name")
    ns = Namespace.objects.filter(name=namespace or actor.user.username).first()
    if ns is None:
        raise BadRequest(f"namespace {namespace!r} does not exist")
    check_can_write(actor, ns)
    if Repo.objects.filter(type=repo_type, namespace=ns, name=name).exists():
        raise Conflict(f"{repo_type} {ns.name}/{name} already exists")
    try:
        with transaction.atomic():
            repo = Repo.objects.create(namespace=ns, name=name, type=repo_type, private=private)
    except IntegrityError:
        raise Conflict(f"{repo_type} {ns.name}/{name} already exists") from None
    blob = blobs.ingest_bytes(GITATTRIBUTES, actor.user)
    entry = trees.Entry(".gitattributes", trees.FILE, blob.size, blob.sha256, blobs.git_blob_oid(GITATTRIBUTES))
    store = trees.NodeStore()
    root, size, files = trees.update_dir(store, None, trees.plan_changes([(trees.PUT, ".gitattributes", entry)]),
                                         keep_empty=True)
    store.flush()
    commit = _new_commit(repo, None, root, actor.user, "initial commit", "", files, size)
    Ref.objects.create(repo=repo, kind=Ref.BRANCH, name=repo.default_branch, commit=commit)
    quotas.charge(quotas.lock(ns), {blob.sha256: blob.size})
    RepoBlob.objects.get_or_create(repo=repo, blob=blob)
    Repo.objects.filter(pk=repo.pk).update(head_sha=commit.oid, file_count=files, total_size=size)
    repo.refresh_from_db()
    return repo




def do_delete_repo(actor: Actor, repo: Repo) -> None:
    """Deletes the repo's metadata. Its blobs stay until garbage collection finds them unreferenced."""
    check_can_write(actor, repo.namespace)
    with transaction.atomic():
        ns = quotas.lock(repo.namespace_id)
        candidates = dict(Blob.objects.filter(repo_refs__repo=repo).values_list("sha256", "size"))
        Ref.objects.filter(repo=repo).delete()
        Commit.objects.filter(repo=repo).update(parent=None)
        repo.delete()
        quotas.uncharge(ns, candidates)


def do_update_settings(actor: Actor, repo: Repo, *, private: bool | None = None, gated: bool | None = None,
                       gate_prompt: str | None = None) -> Repo:
    check_can_write(actor, repo.namespace)
    if private is not None:
        Repo.objects.filter(pk=repo.pk).update(private=private)
    if gated is not None:
        Repo.objects.filter(pk=repo.pk).update(gated=gated)
    if gate_prompt is not None:
        Repo.objects.filter(pk=repo.pk).update(gate_prompt=gate_prompt[:10_000])
    repo.refresh_from_db()
    return repo


def do_move_repo(actor: Actor, repo: Repo, to_namespace: str, to_name: str) -> Repo:
    check_can_write(actor, repo.namespace)
    check_name(to_name, what="repo name")
    ns = Namespace.objects.filter(name=to_namespace).first()
    if ns is None:
        raise BadRequest(f"namespace {to_namespace!r} does not exist")
    check_can_write(actor, ns)
    if Repo.objects.filter(type=repo.type, namespace=ns, name=to_name).exists():
        raise Conflict(f"{repo.type} {to_namespace}/{to_name} already exists")
    old = repo.namespace
    Repo.objects.filter(pk=repo.pk).update(namespace=ns, name=to_name, sort_name=sort_name(ns.name, to_name))
    repo.refresh_from_db()
    quotas.reconcile(old)
    quotas.reconcile(ns)
    return repo


# --- revisions --------------------------------------------------------------------------------------

def resolve_revision(repo: Repo, revision: str | None) -> Commit:
    """A branch, tag (also as refs/heads/x, refs/tags/x), pull request (refs/pr/N), or full or short
    (≥7 hex) commit id."""
    rev = revision or repo.default_branch
    kinds = [Ref.BRANCH, Ref.TAG]
    if rev.startswith("refs/heads/"):
        rev, kinds = rev[len("refs/heads/"):], [Ref.BRANCH]
    elif rev.startswith("refs/tags/"):
        rev, kinds = rev[len("refs/tags/"):], [Ref.TAG]
    elif rev.startswith("refs/pr/"):
        rev, kinds = rev[len("refs/pr/"):], [Ref.PR]
    refs = {r.kind: r for r in Ref.objects.select_related("commit").filter(repo=repo, name=rev, kind__in=kinds)}
    for kind in kinds:
        if kind in refs:
            return refs[kind].commit
    if HEX40.fullmatch(rev):
        commit = Commit.objects.filter(repo=repo, oid=rev).first()
        if commit is not None:
            return commit
    elif SHORT_SHA.fullmatch(rev):
        matches = list(Commit.objects.filter(repo=repo, oid__startswith=rev)[:2])
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise RevisionNotFound(f"revision {rev!r} is ambiguous in {repo.repo_id}; give more characters")
    raise RevisionNotFound(f"revision {rev!r} not found in {repo.repo_id}")


def entry_at(commit: Commit, path: str, store: trees.NodeStore | None = None) -> trees.Entry | None:
    return trees.resolve(store or trees.NodeStore(), commit.tree, path)


def file_at(repo: Repo, commit: Commit, path: str) -> trees.Entry:
    try:
        check_path(path)
    except (BadRequest, InvalidPath):  # no such file; a 400 would make hf_hub_download blame the network
        entry = None
    else:
        entry = entry_at(commit, path)
    if entry is None or entry.is_dir:
        raise EntryNotFound(f"{path!r} not found in {repo.repo_id} at {commit.oid[:12]}",
                            headers={"X-Repo-Commit": commit.oid})
    return entry


# --- commits ----------------------------------------------------------------------------------------

@dataclass
class CommitOps:
    """What a commit does, already validated: puts (path → Entry), deletions, folder deletions."""

    user: object | None = None
    puts: list[tuple[str, trees.Entry]] = field(default_factory=list)
    reservations: list = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)
    delete_folders: list[str] = field(default_factory=list)
    blobs: set[str] = field(default_factory=set)

    def add_file(self, path: str, blob: Blob, *, lfs: bool, git_oid: str | None = None) -> None:
        check_path(path)
        oid = git_oid or blobs.lfs_pointer_oid(blob.sha256, blob.size)
        self.puts.append((path, trees.Entry(path.rsplit("/", 1)[-1], trees.FILE, blob.size, blob.sha256, oid, lfs)))
        self.blobs.add(blob.sha256)

    def reserve_inline(self, hold: quotas.Hold, namespace: Namespace, contents: list[bytes]) -> None:
        """Reserves quota for inline file contents before their bytes are stored, under the
        caller's hold (released when it ends, unless the commit converted them)."""
        sizes = {hashlib.sha256(c).hexdigest(): len(c) for c in contents}
        self.reservations += hold.reserve_many(namespace, sizes, user=self.user, purpose="commit")

    def uploaded_blobs(self) -> set[str]:
        """The blobs of this commit that were uploaded before it (LFS objects), not sent inline."""
        return {e.ref for _, e in self.puts if e.lfs}

    def add_inline(self, path: str, data: bytes) -> None:
        check_path(path)
        blob = blobs.ingest_bytes(data, self.user)
        self.add_file(path, blob, lfs=False, git_oid=blobs.git_blob_oid(data))

    def add_lfs(self, path: str, sha256: str, size: int | None) -> None:
        check_path(path)
        blobs.check_sha256(sha256)
        blob = blobs.stored_blob(sha256)
        if blob is None or not blobs.can_reference(self.user, [sha256]):
            raise BadRequest(f"LFS object {sha256} for {path!r} has not been uploaded; upload it before committing")
        if size is not None and blob.size != size:
            raise BadRequest(f"LFS object {sha256} has {blob.size} bytes, not {size}")
        self.add_file(path, blob, lfs=True)

    def add_copy(self, path: str, entry: trees.Entry) -> None:
        check_path(path)
        self.puts.append((path, trees.Entry(path.rsplit("/", 1)[-1], trees.FILE, entry.size, entry.ref,
                                            entry.git_oid, entry.lfs)))
        self.blobs.add(entry.ref)

    def delete(self, path: str) -> None:
        self.deletes.append(check_path(path))

    def delete_folder(self, path: str) -> None:
        self.delete_folders.append(check_path(path.strip("/")))

    def __bool__(self) -> bool:
        return bool(self.puts or self.deletes or self.delete_folders)


def _new_commit(repo: Repo, parent: Commit | None, tree: str, user, title: str, message: str, files: int,
                size: int) -> Commit:
    now = timezone.now()
    author = user.username if user is not None else "hub"
    payload = (f"repo {repo.pk}\ntree {tree}\nparent {parent.oid if parent else ''}\nauthor {author}\n"
               f"time {now.isoformat()}\n\n{title}\n\n{message}")
    oid = hashlib.sha1(payload.encode()).hexdigest()
    return Commit.objects.create(repo=repo, oid=oid, parent=parent, tree=tree, author=user, author_name=author,
                                 title=title[:500], message=message, created=now, file_count=files,
                                 total_size=size)


def do_commit(actor: Actor, repo: Repo, branch: str, ops: CommitOps, *, title: str, message: str = "",
              parent_commit: str | None = None, pr_ref: Ref | None = None) -> Commit:
    """Commits `ops` on `branch`.

    Bytes are already in the store (CommitOps verified them); this writes only metadata. The branch
    moves with a conditional update, so of two commits racing on one head exactly one wins and the
    other gets 409; a stale `parent_commit` gets 412.

    With `pr_ref` the commit goes to that pull request's ref (refs/pr/N) instead, `branch` naming it
    in messages; its caller (hub.discussions) has authorized the actor for that pull request, which
    needs no write access to the repo's branches."""
    if pr_ref is None:
        check_can_write(actor, repo.namespace)
    if not ops:
        raise BadRequest("the commit changes nothing")
    if not title.strip():
        raise BadRequest("a commit needs a title (summary)")
    ref = pr_ref or Ref.objects.select_related("commit").filter(repo=repo, kind=Ref.BRANCH, name=branch).first()
    if ref is None:
        if Ref.objects.filter(repo=repo, kind=Ref.TAG, name=branch).exists():
            raise BadRequest(f"{branch!r} is a tag; commits go to branches")
        raise RevisionNotFound(f"branch {branch!r} not found in {repo.repo_id}; create it first")
    head = ref.commit
    if parent_commit and parent_commit != head.oid:
        raise PreconditionFailed(f"branch {branch!r} has moved: its head is {head.oid}, not {parent_commit}; "
                                 "pull and retry")
    operations = ([(trees.DELETE_TREE, p, None) for p in ops.delete_folders]
                  + [(trees.DELETE, p, None) for p in ops.deletes]
                  + [(trees.PUT, p, e) for p, e in ops.puts])
    plan = trees.plan_changes(operations)
    store = trees.NodeStore()
    root, size, files = trees.update_dir(store, head.tree, plan, keep_empty=True)
    with transaction.atomic():
        ns = quotas.lock(repo.namespace_id)
        store.flush()
        commit = _new_commit(repo, head, root, actor.user, title.strip(), message, files, size)
        moved = Ref.objects.filter(pk=ref.pk, commit=head).update(commit=commit, updated=timezone.now())
        if not moved:
            raise Conflict(f"another commit landed on {branch!r} at the same time; retry")
        if ops.blobs:
            # Locked, so garbage collection cannot remove a blob between this check and the refs.
            sizes = dict(Blob.objects.select_for_update().filter(pk__in=ops.blobs).values_list("sha256", "size"))
            if len(sizes) != len(ops.blobs):
                gone = sorted(ops.blobs - set(sizes))
                raise BadRequest(f"{len(gone)} file(s) of this commit (e.g. sha256 {gone[0]}) are no longer stored: "
                                 "they were removed as unreferenced; upload them again")
            quotas.charge(ns, sizes, reservations=ops.reservations)
            RepoBlob.objects.bulk_create([RepoBlob(repo=repo, blob_id=b) for b in ops.blobs], ignore_conflicts=True)
        fields = {"last_modified": commit.created}
        if branch == repo.default_branch:
            fields.update(head_sha=commit.oid, file_count=files, total_size=size)
            if any(p == README for p, _ in ops.puts) or README in ops.deletes:
                fields["card_data"] = _card_data(commit)
                # (robust: the card's catalog metadata failing to update must not fail the commit)
                transaction.on_commit(lambda: card_changed.send(sender=Repo, repo_pk=repo.pk), robust=True)
        Repo.objects.filter(pk=repo.pk).update(**fields)
    return commit


def _card_data(commit: Commit) -> dict:
    entry = entry_at(commit, README)
    if entry is None or entry.size > CARD_MAX_BYTES:
        return {}
    text = blobs.object_store().read_bytes(blobs.key_for(entry.ref)).decode("utf-8", "replace")
    meta, _ = split_card(text)
    return meta


def split_card(text: str) -> tuple[dict, str]:
    """README card → (YAML front matter as a dict, markdown body). Bad YAML gives an empty dict."""
    if text.startswith("---"):
        end = text.find("\n---", 3)
        if end != -1:
            try:
                meta = yaml.safe_load(text[3:end]) or {}
            except yaml.YAMLError:
                meta = {}
            body = text[end + 4:].lstrip("\n")
            return (meta if isinstance(meta, dict) else {}), body
    return {}, text


def validate_card(text: str) -> list[str]:
    if text.startswith("---"):
        end = text.find("\n---", 3)
        if end != -1:
            try:
                meta = yaml.safe_load(text[3:end])
            except yaml.YAMLError as err:
                return [f"invalid YAML in the README front matter: {err}"]
            if meta is not None and not isinstance(meta, dict):
                return ["the README front matter must be a YAML mapping"]
    return []


# --- refs -------------------------------------------------------------------------------------------

def do_create_branch(actor: Actor, repo: Repo, name: str, starting_point: str | None = None) -> Ref:
    check_can_write(actor, repo.namespace)
    check_ref_name(name, "branch")
    commit = resolve_revision(repo, starting_point)
    try:
        with transaction.atomic():
            return Ref.objects.create(repo=repo, kind=Ref.BRANCH, name=name, commit=commit)
    except IntegrityError:
        raise Conflict(f"branch {name!r} already exists in {repo.repo_id}") from None


def do_delete_branch(actor: Actor, repo: Repo, name: str) -> None:
    check_can_write(actor, repo.namespace)
    if name == repo.default_branch:
        raise BadRequest(f"cannot delete the default branch {name!r}")
    if not Ref.objects.filter(repo=repo, kind=Ref.BRANCH, name=name).delete()[0]:
        raise RevisionNotFound(f"branch {name!r} not found in {repo.repo_id}")
    _schedule_prune(repo)


def do_create_tag(actor: Actor, repo: Repo, name: str, revision: str | None, message: str = "") -> Ref:
    check_can_write(actor, repo.namespace)
    check_ref_name(name, "tag")
    commit = resolve_revision(repo, revision)
    try:
        with transaction.atomic():
            return Ref.objects.create(repo=repo, kind=Ref.TAG, name=name, commit=commit, message=message)
    except IntegrityError:
        raise Conflict(f"tag {name!r} already exists in {repo.repo_id}") from None


def do_delete_tag(actor: Actor, repo: Repo, name: str) -> None:
    check_can_write(actor, repo.namespace)
    if not Ref.objects.filter(repo=repo, kind=Ref.TAG, name=name).delete()[0]:
        raise RevisionNotFound(f"tag {name!r} not found in {repo.repo_id}")
    _schedule_prune(repo)


def _schedule_prune(repo: Repo) -> None:
    from hub.repos.tasks import prune_repo

    transaction.on_commit(lambda: prune_repo.delay(repo.pk))


def reachable_blobs(repo: Repo) -> tuple[set[int], set[str]]:
    """(ids of commits reachable from a ref — branch, tag or pull request (refs/pr/N, open, closed or
    merged: its files stay readable) —, sha256 of every blob their trees hold). Each tree node is
    read once however many commits share it."""
    parents = dict(Commit.objects.filter(repo=repo).values_list("id", "parent_id"))
    heads = set(Ref.objects.filter(repo=repo).values_list("commit_id", flat=True))
    reachable: set[int] = set()
    for head in heads:
        cur = head
        while cur is not None and cur not in reachable:
            reachable.add(cur)
            cur = parents.get(cur)
    roots = set(Commit.objects.filter(id__in=reachable).values_list("tree", flat=True))
    store = trees.NodeStore()
    seen: set[str] = set()
    shas: set[str] = set()
    stack = list(roots)
    while stack:
        batch = [d for d in stack[:500] if d not in seen]
        del stack[:500]
        seen.update(batch)
        for node in store.get_many(batch).values() if batch else ():
            if node["k"] == "I":
                stack.extend(c[1] for c in node["c"] if c[1] not in seen)
                continue
            for raw in node["e"]:
                if raw[1] == trees.FILE:
                    shas.add(raw[3])
                elif raw[3] not in seen:
                    stack.append(raw[3])
    return reachable, shas


def do_prune_repo(repo: Repo) -> int:
    """Drops commits no ref reaches any more, and the repo's references to blobs only they
    held; the account gets those bytes back unless something else of it references them. Returns
    the bytes given back."""
    reachable, shas = reachable_blobs(repo)
    with transaction.atomic():
        ns = quotas.lock(repo.namespace_id)
        stale = set(RepoBlob.objects.filter(repo=repo).values_list("blob_id", flat=True)) - shas
        dead = Commit.objects.filter(repo=repo).exclude(id__in=reachable)
        if dead.exists():
            dead.update(parent=None)
            Commit.objects.filter(repo=repo).exclude(id__in=reachable).delete()
        if not stale:
            return 0
        sizes = dict(Blob.objects.filter(pk__in=stale).values_list("sha256", "size"))
        stale_list = list(stale)
        for i in range(0, len(stale_list), 500):
            RepoBlob.objects.filter(repo=repo, blob_id__in=stale_list[i:i + 500]).delete()
        return quotas.uncharge(ns, sizes)


def list_refs(repo: Repo) -> tuple[list[Ref], list[Ref]]:
    refs = list(Ref.objects.select_related("commit").filter(repo=repo).order_by("name"))
    return [r for r in refs if r.kind == Ref.BRANCH], [r for r in refs if r.kind == Ref.TAG]


def history(repo: Repo, head: Commit, offset: int = 0, limit: int = 50) -> tuple[list[Commit], int]:
    """Commits reachable from `head`, newest first: (page, total)."""
    parents = dict(Commit.objects.filter(repo=repo).values_list("id", "parent_id"))
    chain = []
    cur = head.id
    while cur is not None:
        chain.append(cur)
        cur = parents.get(cur)
    page_ids = chain[offset:offset + limit]
    rows = Commit.objects.select_related("author").in_bulk(page_ids)
    return [rows[i] for i in page_ids], len(chain)


def count_download(repo: Repo) -> None:
    Repo.objects.filter(pk=repo.pk).update(downloads=F("downloads") + 1)
