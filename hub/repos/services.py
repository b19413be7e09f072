"""Repos, revisions and commits: the business rules every front door (HF API, native API, web,
tasks) calls. `access_*` fetch-or-raise with authorization, `do_*` mutate."""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from django.db import IntegrityError, transaction
from django.db.models import F, Q, QuerySet, Sum
from django.utils import timezone
from django.utils.translation import gettext

from hub.accounts.actor import Actor
from hub.accounts.models import Membership, Namespace
from hub.celery import task
from hub.content import blobs
from hub.content.models import Blob
from hub.errors import (
    BadRequest,
    Conflict,
    EntryNotFound,
    Forbidden,
    GatedRepo,
    InvalidPath,
    PreconditionFailed,
    RepoMoved,
    RepoNotFound,
    RevisionNotFound,
    Unauthorized,
)
from hub.quotas import services as quotas
from hub.repos import trees
from hub.repos.cards import check_card, split_card
from hub.repos.models import (
    GITATTRIBUTES,
    AccessRequest,
    Commit,
    Ref,
    Repo,
    RepoBlob,
    RepoRedirect,
    sort_name,
)
from hub.repos.signals import card_changed, commit_landed
from hub.validation import check_name, check_path, check_ref_name

HEX40 = re.compile(r"[0-9a-f]{40}")
SHORT_SHA = re.compile(r"[0-9a-f]{7,39}")
README = "README.md"
CARD_MAX_BYTES = 1_000_000


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


def role_in(user, namespace: Namespace) -> str | None:
    """The user's role in the namespace (its own user and superusers are admins), None for outsiders."""
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
    if not actor.may_read_attached(repo):
        return False, None
    role = _role(actor.user, repo.namespace)
    return not (repo.private and role is None), role


def find_repo(repo_type: str, namespace: str, name: str) -> Repo | None:
    """The repo with this id, in any case (ids are case-insensitive, as upstream's), without any
    access check: callers check access (access_repo) or only need to know it is taken."""
    return (Repo.objects.select_related("namespace")
            .filter(type=repo_type, sort_name=sort_name(namespace, name)).first())


def access_repo(actor: Actor, repo_type: str, namespace: str, name: str, *, write: bool = False) -> Repo:
    """The repo, if the actor may read it (and write it, with write=True). A private repo is
    indistinguishable from a missing one for anyone who cannot read it. A repo moved away from this
    id raises RepoMoved (a redirect to its new id) for those who may read it."""
    repo = find_repo(repo_type, namespace, name)
    readable, role = _readable(actor, repo) if repo is not None else (False, None)
    if not readable:
        if repo is None:
            moved = (RepoRedirect.objects.select_related("repo__namespace")
                     .filter(type=repo_type, key=sort_name(namespace, name)).first())
            if moved is not None and _readable(actor, moved.repo)[0]:
                raise RepoMoved(f"{namespace}/{name}", moved.repo.repo_id)
        raise _not_found(actor, repo_type, namespace, name)
    if write:
        check_can_write(actor, repo.namespace, role)
    return repo


def other_type_seen(actor: Actor, repo_type: str, namespace: str, name: str) -> Repo | None:
    """The repo of the other type (model for dataset, and back) with this id, if the actor may read
    it: what a "not found" may point to without leaking anything private."""
    other = find_repo(Repo.MODEL if repo_type == Repo.DATASET else Repo.DATASET, namespace, name)
    return other if other is not None and _readable(actor, other)[0] else None


def _not_found(actor: Actor, repo_type: str, namespace: str, name: str) -> RepoNotFound:
    """The 404 for a repo the actor cannot see. If they can see a repo of the other type by that id
    (wine is a dataset, asked for as a model), it says so."""
    other = other_type_seen(actor, repo_type, namespace, name)
    if other is not None:
        return RepoNotFound(gettext("no %(type)s %(namespace)s/%(name)s; there is a %(other)s of that name: "
                                    "use %(other)ss/%(repo_id)s") % {"type": repo_type, "namespace": namespace,
                                                                    "name": name, "other": other.type,
                                                                    "repo_id": other.repo_id})
    err = RepoNotFound(gettext("%(type)s %(namespace)s/%(name)s not found (or you do not have access to it)")
                       % {"type": repo_type, "namespace": namespace, "name": name})
    err.plain = True  # (nothing to add to "not found": the HF adapter says it in upstream's words)
    return err


def check_gate(actor: Actor, repo: Repo) -> None:
    """Downloads of a gated repo need the caller's access request accepted (its namespace's members
    need none). Each refusal says what the person can do next: ask, wait for the owners, or nothing."""
    if not repo.gated:
        return
    kind = "dataset" if repo.type == Repo.DATASET else "model"
    where = f"/{'datasets/' if repo.type == Repo.DATASET else ''}{repo.repo_id}"
    if actor.user is None:
        names = {"kind": kind, "repo_id": repo.repo_id, "where": where}
        err = GatedRepo(gettext("Access to %(kind)s %(repo_id)s is restricted: log in (pass a token) and request "
                                "access at %(where)s first") % names if repo.gate_mode == Repo.MANUAL else
                        gettext("Access to %(kind)s %(repo_id)s is restricted: log in (pass a token) and accept its "
                                "conditions at %(where)s first") % names)
        err.status = 401
        raise err
    if _role(actor.user, repo.namespace) is not None:
        return
    found = (AccessRequest.objects.filter(repo=repo, user=actor.user)
             .values_list("status", "rejection_reason").first())
    status, reason = found or (None, "")
    if status == AccessRequest.ACCEPTED:
        return
    if status == AccessRequest.PENDING:
        raise GatedRepo(gettext("Your request to access %(kind)s %(repo_id)s is awaiting a review from "
                                "the repo authors: you can download its files once one of them accepts it") % {"kind": kind, "repo_id": repo.repo_id})
    if status == AccessRequest.REJECTED:
        names = {"kind": kind, "repo_id": repo.repo_id, "reason": reason}
        raise GatedRepo(gettext("Your request to access %(kind)s %(repo_id)s was rejected by the repo authors: "
                                "%(reason)s") % names if reason else
                        gettext("Your request to access %(kind)s %(repo_id)s was rejected by the repo "
                                "authors") % names)
    names = {"kind": kind, "repo_id": repo.repo_id, "where": where}
    if repo.gate_mode == Repo.MANUAL:
        raise GatedRepo(gettext("Access to %(kind)s %(repo_id)s is restricted and you are not in the authorized "
                                "list: request access at %(where)s (or POST /api/v1/repos/%(kind)s/%(repo_id)s/access) "
                                "to download its files (its authors review each request)") % names)
    raise GatedRepo(gettext("Access to %(kind)s %(repo_id)s is restricted and you are not in the authorized list: "
                            "accept its conditions at %(where)s (or POST /api/v1/repos/%(kind)s/%(repo_id)s/access) "
                            "to download its files") % names)


def check_can_write(actor: Actor, namespace: Namespace, role: str | None = "?") -> None:
    if actor.user is None:
        raise Unauthorized(gettext("you must be logged in (pass a token) to write"))
    if role == "?":
        role = _role(actor.user, namespace)
    if role not in (Membership.WRITE, Membership.ADMIN):
        raise Forbidden(gettext("you (%(username)s) cannot write to the namespace %(name)r") % {"username": actor.user.username, "name": namespace.name})
    if actor.on_instance:
        raise Forbidden(gettext("an instance token can only read the repos attached to its instance"))
    if not actor.can_write:
        raise Forbidden(gettext("this token is read-only; create a write token to upload or change repos"))


# --- repos ------------------------------------------------------------------------------------------

@transaction.atomic
def do_create_repo(actor: Actor, namespace: str | None, name: str, repo_type: str, *, private: bool = False
                   ) -> Repo:
    """Creates a repo with an initial commit (.gitattributes), so it always has a head."""
    if actor.user is None:
        raise Unauthorized(gettext("you must be logged in (pass a token) to create a repo"))
    if repo_type not in (Repo.MODEL, Repo.DATASET):
        raise BadRequest(gettext("unsupported repo type %(repo_type)r: use model or dataset") % {"repo_type": repo_type})
    check_name(name, what="repo name")
    ns = _namespace(namespace or actor.user.username)
    check_can_write(actor, ns)
    existing = find_repo(repo_type, ns.name, name)
    if existing is not None:
        raise Conflict(gettext("%(repo_type)s %(repo_id)s already exists") % {"repo_type": repo_type, "repo_id": existing.repo_id})
    try:
        with transaction.atomic():
            repo = Repo.objects.create(namespace=ns, name=name, type=repo_type, private=private)
    except IntegrityError:
        raise Conflict(gettext("%(repo_type)s %(name)s/%(name2)s already exists") % {"repo_type": repo_type, "name": ns.name, "name2": name}) from None
    # The id is a repo's own again: requests for it no longer follow a repo that was moved away.
    RepoRedirect.objects.filter(type=repo_type, key=repo.sort_name).delete()
    blob = blobs.ingest_bytes(GITATTRIBUTES, actor.user)
    entry = trees.Entry(".gitattributes", trees.FILE, blob.size, blob.sha256, blobs.git_blob_oid(GITATTRIBUTES))
    store = trees.NodeStore()
    root, size, files = trees.update_dir(store, None, trees.plan_changes([(trees.PUT, ".gitattributes", entry)]),
                                         keep_empty=True)
    store.flush()
    commit = _new_commit(repo, None, root, actor.user, "initial commit", "", files, size)
    Ref.objects.create(repo=repo, kind=Ref.BRANCH, name=repo.default_branch, commit=commit)
    quotas.charge(quotas.lock(ns), {blob.sha256: blob.size})
    RepoBlob.objects.get_or_create(repo=repo, blob=blob, defaults={
        "path": ".gitattributes", "lfs": False, "ref": repo.default_branch, "created": commit.created})
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


def do_duplicate_repo(actor: Actor, source: Repo, namespace: str, name: str, *, private: bool | None = None
                      ) -> Repo:
    """A new repo holding the source's default branch as it is now, in one commit. Nothing is
    copied but metadata: the commit shares the source's tree (trees are content-addressed) and the
    new repo references the same blobs, charged to its own account (all or nothing, under its lock)."""
    check_gate(actor, source)
    head = resolve_revision(source, None)
    check_name(name, what="repo name")
    ns = _namespace(namespace)
    check_can_write(actor, ns)
    existing = find_repo(source.type, ns.name, name)
    if existing is not None:
        raise Conflict(gettext("%(type)s %(repo_id)s already exists") % {"type": source.type, "repo_id": existing.repo_id})
    shas = sorted(tree_blobs({head.tree}))
    sizes: dict[str, int] = {}
    for i in range(0, len(shas), 500):
        sizes.update(Blob.objects.filter(pk__in=shas[i:i + 500]).values_list("sha256", "size"))
    try:
        with transaction.atomic():
            locked = quotas.lock(ns)
            repo = Repo.objects.create(namespace=ns, name=name, type=source.type,
                                       private=source.private if private is None else private)
            commit = _new_commit(repo, None, head.tree, actor.user, f"Duplicate from {source.repo_id}", "",
                                 head.file_count, head.total_size)
            Ref.objects.create(repo=repo, kind=Ref.BRANCH, name=repo.default_branch, commit=commit)
            quotas.charge(locked, sizes)
            RepoBlob.objects.bulk_create([RepoBlob(repo=repo, blob_id=sha) for sha in sizes], batch_size=1000)
            RepoRedirect.objects.filter(type=repo.type, key=repo.sort_name).delete()
            Repo.objects.filter(pk=repo.pk).update(head_sha=commit.oid, file_count=head.file_count,
                                                   total_size=head.total_size, card_data=source.card_data)
    except IntegrityError:
        raise Conflict(gettext("%(type)s %(name)s/%(name2)s already exists") % {"type": source.type, "name": ns.name, "name2": name}) from None
    transaction.on_commit(lambda: card_changed.send(sender=Repo, repo_pk=repo.pk), robust=True)
    repo.refresh_from_db()
    return repo


def do_update_settings(actor: Actor, repo: Repo, *, private: bool | None = None, gated: str | bool | None = None,
                       gate_prompt: str | None = None) -> Repo:
    """`gated` as upstream: False, "auto" or "manual" (None leaves it). Switching the mode keeps the
    access requests as they are: accepted ones stay open, pending ones wait."""
    check_can_write(actor, repo.namespace)
    if not (gated is None or gated is False or gated in (Repo.AUTO, Repo.MANUAL)):
        raise BadRequest(gettext("gated must be false, 'auto' or 'manual', not %(gated)r") % {"gated": gated})
    if private is not None:
        Repo.objects.filter(pk=repo.pk).update(private=private)
    if gated is False:
        Repo.objects.filter(pk=repo.pk).update(gated=False)
    elif gated is not None:
        Repo.objects.filter(pk=repo.pk).update(gated=True, gate_mode=gated)
    if gate_prompt is not None:
        Repo.objects.filter(pk=repo.pk).update(gate_prompt=gate_prompt[:10_000])
    repo.refresh_from_db()
    return repo


def _namespace(name: str) -> Namespace:
    ns = Namespace.objects.filter(name__iexact=name).first()
    if ns is None:
        raise BadRequest(gettext("namespace %(name)r does not exist") % {"name": name})
    return ns


def do_move_repo(actor: Actor, repo: Repo, to_namespace: str, to_name: str) -> Repo:
    """Renames or transfers the repo. Its former id keeps answering with a redirect to the new one
    until a repo is created under it. (A change of case only is a rename too.)"""
    check_can_write(actor, repo.namespace)
    check_name(to_name, what="repo name")
    ns = _namespace(to_namespace)
    check_can_write(actor, ns)
    taken = find_repo(repo.type, ns.name, to_name)
    if taken is not None and taken.pk != repo.pk:
        raise Conflict(gettext("A %(type)s repository called %(repo_id)s already exists") % {"type": repo.type, "repo_id": taken.repo_id})
    old, former_id, former_key = repo.namespace, repo.repo_id, repo.sort_name
    new_key = sort_name(ns.name, to_name)
    with transaction.atomic():
        Repo.objects.filter(pk=repo.pk).update(namespace=ns, name=to_name, sort_name=new_key)
        RepoRedirect.objects.filter(type=repo.type, key=new_key).delete()
        if former_key != new_key:
            RepoRedirect.objects.update_or_create(type=repo.type, key=former_key,
                                                  defaults={"repo": repo, "former_id": former_id})
    repo.refresh_from_db()
    quotas.reconcile(old)
    quotas.reconcile(ns)
    return repo


# --- revisions --------------------------------------------------------------------------------------

def resolve_revision(repo: Repo, revision: str | None, *, fetch: bool = True) -> Commit:
    """A branch, tag (also as refs/heads/x, refs/tags/x), pull request (refs/pr/N), or full or short
    (≥7 hex) commit id. `fetch` False: what is here, without asking the revision sources (a page
    that shows an upstream's failure rather than failing with it)."""
    rev = revision or repo.default_branch
    if not fetch:
        return _find_revision(repo, rev)
    for source in _REVISION_SOURCES:
        source(repo, rev, False)
    try:
        return _find_revision(repo, rev)
    except RevisionNotFound:
        for source in _REVISION_SOURCES:
            if (commit := source(repo, rev, True)) is not None:
                return commit
        raise


def _find_revision(repo: Repo, rev: str) -> Commit:
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
            raise RevisionNotFound(gettext("revision %(rev)r is ambiguous in %(repo_id)s; give more "
                                           "characters") % {"rev": rev, "repo_id": repo.repo_id})
    raise RevisionNotFound(gettext("revision %(rev)r not found in %(repo_id)s") % {"rev": rev, "repo_id": repo.repo_id})


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
        raise EntryNotFound(gettext("%(path)r not found in %(repo_id)s at %(value)s") % {"path": path, "repo_id": repo.repo_id, "value": commit.oid[:12]},
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
    # The namespace's usage counts the new blobs but its quota is not enforced: fetched-on-demand
    # catalog content is bounded by the operator's on-demand budget instead (hub.mirrors.ondemand).
    unmetered: bool = False
    _stored: dict = field(default_factory=dict)  # sha256 -> Blob stored by store_inline
    _lfs: dict = field(default_factory=dict)  # sha256 -> Blob (None: not one the user may name), by load_lfs

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

    def store_inline(self, files: list[tuple[str, bytes]], *, repo_type: str = Repo.MODEL) -> None:
        """Checks and stores the files sent inside the commit all at once (in parallel), before
        `add_inline` adds them in the commit's order."""
        for path, data in files:
            self._check_inline(path, data, repo_type)
        self._stored.update(blobs.ingest_many([data for _, data in files], self.user))

    def add_inline(self, path: str, data: bytes, *, repo_type: str = Repo.MODEL) -> None:
        """A file sent inside the commit (stored now unless `store_inline` stored it)."""
        self._check_inline(path, data, repo_type)
        blob = self._stored.get(hashlib.sha256(data).hexdigest()) or blobs.ingest_bytes(data, self.user)
        self.add_file(path, blob, lfs=False, git_oid=blobs.git_blob_oid(data))

    @staticmethod
    def _check_inline(path: str, data: bytes, repo_type: str) -> None:
        """A README.md card whose metadata is invalid is refused before its bytes are stored (as
        upstream: the card is what tools read)."""
        check_path(path)
        if path == README:
            errors, _ = check_card(data.decode("utf-8", "replace"), repo_type)
            if errors:
                raise BadRequest("Invalid metadata in README.md: " + "; ".join(errors))

    def load_lfs(self, sha256s: list[str]) -> None:
        """Looks up, in a few queries, the uploaded blobs `add_lfs` will name (a commit of 5,000
        files, not 10,000 queries): those stored and the user may reference."""
        wanted = list(set(sha256s))
        for i in range(0, len(wanted), 1000):
            found = {b.sha256: b for b in Blob.objects.filter(pk__in=wanted[i:i + 1000], corrupt_at=None,
                                                                remote=False)}
            claimed = blobs.claimed_by(self.user, [sha for sha, b in found.items() if not b.verified])
            found = {sha: b for sha, b in found.items() if b.verified or sha in claimed}
            ok = blobs.can_reference(self.user, list(found))
            self._lfs.update({sha: found.get(sha) if sha in ok else None for sha in wanted[i:i + 1000]})

    def add_lfs(self, path: str, sha256: str, size: int | None) -> None:
        check_path(path)
        blobs.check_sha256(sha256)
        if sha256 in self._lfs:
            blob = self._lfs[sha256]
        else:
            blob = blobs.stored_blob(sha256, self.user)
            blob = blob if blob is not None and blobs.can_reference(self.user, [sha256]) else None
        if blob is None and Blob.objects.filter(pk=sha256, corrupt_at__isnull=False).exists():
            raise BadRequest(gettext("LFS object %(sha256)s for %(path)r failed its integrity check (the "
                                     "stored bytes do not hash to it); upload the file again")
                             % {"sha256": sha256, "path": path})
        if blob is None:
            raise BadRequest(gettext("LFS object %(sha256)s for %(path)r has not been uploaded, or was "
                                     "removed as unreferenced before this commit named it; upload it "
                                     "again") % {"sha256": sha256, "path": path})
        if size is not None and blob.size != size:
            raise BadRequest(gettext("LFS object %(sha256)s has %(size)s bytes, not %(size2)s") % {"sha256": sha256, "size": blob.size, "size2": size})
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

    Bytes are already in the store (CommitOps verified them); this writes only metadata. As upstream,
    a commit that names no `parent_commit` applies to whatever the branch's head is when it lands
    (parallel uploaders into one branch all land); one whose `parent_commit` is no longer the head
    gets 412. The new tree is built from the head read first, outside any lock; if another commit
    moved the branch meanwhile, it is built again from the new head under the account's lock
    (`quotas.lock`, which every commit of the repo takes), where the head cannot move.

    With `pr_ref` the commit goes to that pull request's ref (refs/pr/N) instead, `branch` naming it
    in messages; its caller (hub.discussions) has authorized the actor for that pull request, which
    needs no write access to the repo's branches."""
    if pr_ref is None:
        check_can_write(actor, repo.namespace)
    if not ops:
        raise BadRequest(gettext("the commit changes nothing"))
    if not title.strip():
        raise BadRequest(gettext("a commit needs a title (summary)"))
    ref = pr_ref or _branch_ref(repo, branch)
    head = ref.commit
    _check_parent(branch, head, parent_commit)
    operations = ([(trees.DELETE_TREE, p, None) for p in ops.delete_folders]
                  + [(trees.DELETE, p, None) for p in ops.deletes]
                  + [(trees.PUT, p, e) for p, e in ops.puts])
    plan = trees.plan_changes(operations)
    store = trees.NodeStore()
    root, size, files = trees.update_dir(store, head.tree, plan, keep_empty=True)
    with transaction.atomic():
        ns = quotas.lock(repo.namespace_id)
        current = Ref.objects.select_for_update().select_related("commit").filter(pk=ref.pk).first()
        if current is None:
            raise RevisionNotFound(gettext("branch %(branch)r was deleted while this commit was being made") % {"branch": branch})
        if current.commit_id != head.id:
            head = current.commit
            _check_parent(branch, head, parent_commit)
            store = trees.NodeStore()  # (the nodes built for the old head are not needed)
            root, size, files = trees.update_dir(store, head.tree, plan, keep_empty=True)
        store.flush()
        commit = _new_commit(repo, head, root, actor.user, title.strip(), message, files, size)
        moved = Ref.objects.filter(pk=ref.pk, commit=head).update(commit=commit, updated=timezone.now())
        if not moved:  # (cannot happen under the lock; kept as the last line of defence)
            raise Conflict(gettext("another commit landed on %(branch)r at the same time; retry") % {"branch": branch})
        if ops.blobs:
            # Locked, so garbage collection cannot remove a blob between this check and the refs.
            sizes = dict(Blob.objects.select_for_update().filter(pk__in=ops.blobs).values_list("sha256", "size"))
            if len(sizes) != len(ops.blobs):
                gone = sorted(ops.blobs - set(sizes))
                raise BadRequest(gettext("%(gone)s file(s) of this commit (e.g. sha256 %(gone2)s) are no "
                                         "longer stored: they were removed as unreferenced; upload them "
                                         "again") % {"gone": len(gone), "gone2": gone[0]})
            quotas.charge(ns, sizes, reservations=ops.reservations, enforce=not ops.unmetered)
            first = {}
            for path, entry in ops.puts:
                first.setdefault(entry.ref, (path, entry.lfs))
            RepoBlob.objects.bulk_create([RepoBlob(repo=repo, blob_id=b, path=first[b][0], lfs=first[b][1], ref=branch,
                                                   created=commit.created) for b in ops.blobs],
                                         ignore_conflicts=True)
        fields = {"last_modified": commit.created}
        if branch == repo.default_branch:
            fields.update(head_sha=commit.oid, file_count=files, total_size=size)
            if any(p == README for p, _ in ops.puts) or README in ops.deletes:
                fields["card_data"] = _card_data(commit)
                # (robust: the card's catalog metadata failing to update must not fail the commit)
                transaction.on_commit(lambda: card_changed.send(sender=Repo, repo_pk=repo.pk), robust=True)
        Repo.objects.filter(pk=repo.pk).update(**fields)
        if branch == repo.default_branch and repo.type == Repo.DATASET:
            transaction.on_commit(lambda: commit_landed.send(sender=Repo, repo_pk=repo.pk, commit_pk=commit.pk),
                                  robust=True)
    return commit


def do_super_squash(actor: Actor, repo: Repo, branch: str, *, title: str) -> Commit:
    """Replaces the branch's history with one commit of its current tree (upstream's
    super_squash_history). Commits no branch or tag reaches any more are pruned afterwards, and the
    account gets back the bytes only they held: the way to free quota taken by old revisions."""
    check_can_write(actor, repo.namespace)
    if not title.strip():
        raise BadRequest(gettext("a commit needs a title (message)"))
    ref = _branch_ref(repo, branch)
    with transaction.atomic():
        quotas.lock(repo.namespace_id)  # (every commit of the repo takes it: the head cannot move now)
        head = Ref.objects.select_related("commit").get(pk=ref.pk).commit
        commit = _new_commit(repo, None, head.tree, actor.user, title.strip(), "", head.file_count,
                             head.total_size)
        Ref.objects.filter(pk=ref.pk).update(commit=commit, updated=timezone.now())
        fields = {"last_modified": commit.created}
        if branch == repo.default_branch:
            fields["head_sha"] = commit.oid
        Repo.objects.filter(pk=repo.pk).update(**fields)
    _schedule_prune(repo)
    return commit


def _branch_ref(repo: Repo, branch: str) -> Ref:
    """The branch's ref; refs/pr/N names a pull request's (upstream squashes those too, e.g. the
    dataset viewer's refs/convert/parquet)."""
    kind, name = (Ref.PR, branch[len("refs/pr/"):]) if branch.startswith("refs/pr/") else (Ref.BRANCH, branch)
    ref = Ref.objects.select_related("commit").filter(repo=repo, kind=kind, name=name).first()
    if ref is None:
        if Ref.objects.filter(repo=repo, kind=Ref.TAG, name=branch).exists():
            raise BadRequest(gettext("%(branch)r is a tag; commits go to branches") % {"branch": branch})
        raise RevisionNotFound(gettext("branch %(branch)r not found in %(repo_id)s; create it first") % {"branch": branch, "repo_id": repo.repo_id})
    return ref


def _check_parent(branch: str, head: Commit, parent_commit: str | None) -> None:
    if parent_commit and parent_commit != head.oid:
        # (upstream's words first: scripts match on them)
        raise PreconditionFailed(gettext("The branch was updated since you opened this page. Please "
                                         "refresh and try again. (%(branch)r is at %(oid)s now, not at "
                                         "the parent commit %(parent_commit)s)") % {"branch": branch, "oid": head.oid, "parent_commit": parent_commit})


def _card_data(commit: Commit) -> dict:
    entry = entry_at(commit, README)
    if entry is None or entry.size > CARD_MAX_BYTES:
        return {}
    text = blobs.object_store().read_bytes(blobs.key_for(entry.ref)).decode("utf-8", "replace")
    meta, _ = split_card(text)
    return meta


# --- refs -------------------------------------------------------------------------------------------

def do_create_branch(actor: Actor, repo: Repo, name: str, starting_point: str | None = None) -> Ref:
    check_can_write(actor, repo.namespace)
    check_ref_name(name, "branch")
    commit = resolve_revision(repo, starting_point)
    try:
        with transaction.atomic():
            return Ref.objects.create(repo=repo, kind=Ref.BRANCH, name=name, commit=commit)
    except IntegrityError:
        raise Conflict(gettext("Reference refs/heads/%(name)s already exists in %(repo_id)s") % {"name": name, "repo_id": repo.repo_id}) from None


def do_delete_branch(actor: Actor, repo: Repo, name: str) -> None:
    check_can_write(actor, repo.namespace)
    if name == repo.default_branch:
        raise BadRequest(gettext("Cannot delete refs/heads/%(name)s: it is the default branch of %(repo_id)s") % {"name": name, "repo_id": repo.repo_id})
    if not Ref.objects.filter(repo=repo, kind=Ref.BRANCH, name=name).delete()[0]:
        raise RevisionNotFound(gettext("Invalid rev id: %(name)r is not a branch of %(repo_id)s") % {"name": name, "repo_id": repo.repo_id})
    _schedule_prune(repo)


def do_create_tag(actor: Actor, repo: Repo, name: str, revision: str | None, message: str = "") -> Ref:
    check_can_write(actor, repo.namespace)
    commit = resolve_revision(repo, revision)  # (a missing revision is the error, as upstream: 404)
    check_ref_name(name, "tag")
    try:
        with transaction.atomic():
            return Ref.objects.create(repo=repo, kind=Ref.TAG, name=name, commit=commit, message=message)
    except IntegrityError:
        raise Conflict(gettext("Reference refs/tags/%(name)s already exists in %(repo_id)s") % {"name": name, "repo_id": repo.repo_id}) from None


def do_delete_tag(actor: Actor, repo: Repo, name: str) -> None:
    check_can_write(actor, repo.namespace)
    if not Ref.objects.filter(repo=repo, kind=Ref.TAG, name=name).delete()[0]:
        raise RevisionNotFound(gettext("tag %(name)r not found in %(repo_id)s") % {"name": name, "repo_id": repo.repo_id})
    _schedule_prune(repo)


def _schedule_prune(repo: Repo) -> None:
    prune_repo = task("hub.repos.tasks.prune_repo")
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
    return reachable, tree_blobs(roots)


def tree_blobs(roots: set[str]) -> set[str]:
    """The sha256 of every file the trees `roots` hold; each tree node is read once."""
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
    return shas


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


# --- what the account's repos hold ----------------------------------------------------------------

def repo_storage(ns: Namespace) -> list[tuple[Repo, int]]:
    """Every repo of the account with the bytes of the distinct blobs it references (all revisions),
    largest first: what `hf repos ls` lists."""
    repos = (Repo.objects.filter(namespace=ns).select_related("namespace")
             .annotate(bytes=Sum("blob_refs__blob__size")).order_by(F("bytes").desc(nulls_last=True), "sort_name"))
    return [(r, r.bytes or 0) for r in repos]


def repo_consumers(ns: Namespace, top: int) -> list[tuple[str, str, int]]:
    """The account's largest repos for its quota report (hub.content.refs)."""
    return [(r.type, r.repo_id, size) for r, size in repo_storage(ns)[:top]]


def readable_refs(user) -> Q:
    """RepoBlob rows of repos the user may read (proof of possession: hub.content.refs)."""
    return Q(repo__in=visible_repos(user).values("pk"))


# --- notices about a repo from the apps above (the catalog: "not mirrored yet") -------------------

_NOTICES: list = []
_REVISION_SOURCES: list = []


_UPSTREAM_IDS: list = []


def add_upstream_id(source) -> None:
    """Registers `source(repo) -> str | None`: the upstream (Hugging Face) id of a repo that is a
    catalog entry of this hub, for fetching it on demand (hub.catalog supplies it)."""
    if source not in _UPSTREAM_IDS:
        _UPSTREAM_IDS.append(source)


def upstream_id(repo: Repo) -> str | None:
    for source in _UPSTREAM_IDS:
        if (found := source(repo)) is not None:
            return found
    return None


def add_revision_source(source) -> None:
    """Registers `source(repo, revision, missing) -> Commit | None`, asked by resolve_revision before
    it looks a revision up (missing False: it may bring the repo up to date, e.g. from its upstream)
    and again when the revision is not found (missing True: it may find or make the commit). An app
    above this one supplies it (hub.mirrors.ondemand); it must be cheap when it has nothing to do."""
    if source not in _REVISION_SOURCES:
        _REVISION_SOURCES.append(source)


def add_notice(source) -> None:
    """Registers `source(repo) -> str | None`: a sentence about the repo a client should see when it
    lists the repo's files (an app above this one supplies it, e.g. the catalog)."""
    if source not in _NOTICES:
        _NOTICES.append(source)


def notice(repo: Repo) -> str | None:
    for source in _NOTICES:
        if (text := source(repo)) is not None:
            return text
    return None
