"""Pull requests: commits that go to refs/pr/N, what a pull request changes, and merging it.

A pull request's changes are counted from its base (the commit it started from) to the head of
refs/pr/N. Merging applies them to the target branch's current head as one new commit, through the
same commit path as every other commit (hub.repos.services.do_commit); a file changed both there
since the base and in the pull request (to something else) is a conflict, and the merge is refused
naming it, as upstream's filesWithConflicts do. Comparing trees costs what the changes cost
(hub.repos.treediff), not what the repo holds.

Quota: a pull request's files count against the repo's namespace, whoever opened it. That is
upstream's rule (the repo owner's storage is charged), and the only one that keeps this hub's own
rule whole: an account's usage is what its repos reference, every revision of them, and refs/pr/N
is a revision of the repo. So a stranger's pull request can fill the owner's quota only as far as
it has room (then the stranger gets the owner's 413), and closing a pull request keeps its files
readable, as upstream does."""
from __future__ import annotations

import difflib
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext

from hub.accounts.actor import Actor
from hub.content import blobs
from hub.discussions import services
from hub.discussions.models import Discussion, Event
from hub.errors import BadRequest, Conflict, Forbidden, MergeConflict, RevisionNotFound
from hub.quotas import services as quotas
from hub.repos import pullrefs, treediff, trees
from hub.repos import services as repos
from hub.repos.models import Commit, Ref, Repo

# A diff shows the lines of text files up to DIFF_FILE_MAX bytes, for its first DIFF_FILES files and
# DIFF_TOTAL_MAX bytes of diff (each file is a read from the store); the rest are named only.
DIFF_FILE_MAX = 512 * 1024
DIFF_FILES = 200
DIFF_TOTAL_MAX = 4 * 1024 * 1024
CONFLICTS_NAMED = 20


# --- commits to pull requests -----------------------------------------------------------------------

@dataclass(frozen=True)
class Target:
    """Where an authorized pull-request commit goes: an existing pull request, or (None) a new one
    against `branch`."""

    repo: Repo
    discussion: Discussion | None
    branch: str


def is_pr_revision(revision: str) -> bool:
    return revision.startswith("refs/pr/")


def access_pull_request(repo: Repo, revision: str) -> Discussion:
    """The pull request that refs/pr/N names (404 RevisionNotFound if none: it is a revision)."""
    num = revision[len("refs/pr/"):]
    found = (Discussion.objects.select_related("repo__namespace", "author")
             .filter(repo=repo, num=int(num), is_pull_request=True).first() if num.isdigit() else None)
    if found is None:
        raise RevisionNotFound(gettext("revision %(revision)r not found in %(repo_id)s") % {"revision": revision, "repo_id": repo.repo_id})
    found.repo = repo
    return found


def check_commit(actor: Actor, repo: Repo, revision: str, *, create_pr: bool) -> Target:
    """Authorizes a commit for a pull request, before any byte of it is stored: with `create_pr`,
    one that opens a new pull request against the branch `revision` (anyone who may take part in
    the repo's discussions); else one pushed to `revision` = refs/pr/N (its author, or a
    maintainer, while it is open or a draft)."""
    services.check_can_participate(actor, repo)
    if create_pr:
        if is_pr_revision(revision):
            raise BadRequest(gettext("create_pr opens a new pull request against a branch; to add to "
                                     "%(revision)s, commit to it without create_pr") % {"revision": revision})
        branch = revision.removeprefix("refs/heads/")
        if not Ref.objects.filter(repo=repo, kind=Ref.BRANCH, name=branch).exists():
            # (a tag or a commit id too, as upstream: there is no such branch to merge into)
            raise RevisionNotFound(gettext("a pull request targets a branch, and %(revision)r is not a "
                                           "branch of %(repo_id)s") % {"revision": revision, "repo_id": repo.repo_id})
        return Target(repo, None, branch)
    discussion = access_pull_request(repo, revision)
    if actor.user.pk != discussion.author_id and not services.is_maintainer(actor, repo):
        raise Forbidden(gettext("only the author of pull request #%(num)s or a member of %(name)s with "
                                "write access can push to it; open a pull request of your own (create_pr)") % {"num": discussion.num, "name": repo.namespace.name})
    _check_active(discussion, "push to it")
    return Target(repo, discussion, discussion.target_branch)


def _check_active(discussion: Discussion, what: str) -> None:
    if discussion.status == Discussion.MERGED:
        raise BadRequest(gettext("pull request #%(num)s is merged: you can no longer %(what)s") % {"num": discussion.num, "what": services.word(what)})
    if discussion.status == Discussion.CLOSED:
        raise BadRequest(gettext("pull request #%(num)s is closed: reopen it to %(what)s") % {"num": discussion.num, "what": services.word(what)})


def do_commit(actor: Actor, target: Target, ops: repos.CommitOps, *, title: str, message: str = "",
              parent_commit: str | None = None) -> tuple[Commit, Discussion]:
    """Commits `ops` to the target's pull request, opening it first for `create_pr` — from
    `parent_commit` if given (upstream's rule), else from its branch's head — all in one
    transaction: a commit that fails leaves no empty pull request behind.

    Locking: the namespace row first (quotas.lock, as do_commit takes it), so that this and every
    other commit of the account queue in one order; the pull request's status is re-checked with a
    conditional update after the commit, so a push racing a merge or a close loses cleanly."""
    repo = target.repo
    with transaction.atomic():
        quotas.lock(repo.namespace_id)
        discussion = target.discussion
        if discussion is None:
            start = repos.resolve_revision(repo, parent_commit or target.branch)
            discussion = services.do_open(actor, repo, title=_pr_title(title), description=message.strip(),
                                          target_branch=target.branch, start=start)
            parent_commit = None  # (refs/pr/N is at it now)
        ref = pullrefs.pr_ref(repo, discussion.num)
        if ref is None:
            raise RevisionNotFound(gettext("revision refs/pr/%(num)s not found in %(repo_id)s") % {"num": discussion.num, "repo_id": repo.repo_id})
        commit = repos.do_commit(actor, repo, f"refs/pr/{discussion.num}", ops, title=title, message=message,
                                 parent_commit=parent_commit, pr_ref=ref)
        still = (Discussion.objects.filter(pk=discussion.pk, status__in=(Discussion.OPEN, Discussion.DRAFT))
                 .update(updated=timezone.now()))
        if not still:
            raise Conflict(gettext("pull request #%(num)s was merged or closed meanwhile; nothing was "
                                   "committed") % {"num": discussion.num})
        services.do_add_event(discussion, Event.COMMIT, actor.user, data={"oid": commit.oid, "subject": commit.title})
    return commit, discussion


def _pr_title(title: str) -> str:
    """A commit's summary as a pull request's title, within the titles' bounds."""
    title = title.strip()
    if len(title) > services.TITLE_MAX:
        return title[:services.TITLE_MAX - 1].rstrip() + "…"
    return title if len(title) >= services.TITLE_MIN else f"{title} (pull request)".strip()


# --- what it changes -----------------------------------------------------------------------------------

@dataclass
class State:
    head: Commit
    base: Commit
    changes: list[treediff.Change]  # base → head
    conflicts: list[str]  # paths changed on the target branch since the base, differently (active PRs only)
    target_head: Commit | None  # None once the target branch is gone


def state(discussion: Discussion) -> State:
    repo = discussion.repo
    ref = pullrefs.pr_ref(repo, discussion.num)
    if ref is None:
        raise RevisionNotFound(gettext("revision refs/pr/%(num)s not found in %(repo_id)s") % {"num": discussion.num, "repo_id": repo.repo_id})
    head = ref.commit
    target_head = (Ref.objects.select_related("commit")
                   .filter(repo=repo, kind=Ref.BRANCH, name=discussion.target_branch).first())
    target_head = target_head.commit if target_head else None
    base = _base(discussion, head, target_head)
    store = trees.NodeStore()
    changes = list(treediff.diff(store, base.tree, head.tree))
    conflicts: list[str] = []
    if discussion.is_active and target_head is not None and changes:
        conflicts = _conflicts(store, base, target_head, changes)
    return State(head, base, changes, conflicts, target_head)


def _base(discussion: Discussion, head: Commit, target_head: Commit | None) -> Commit:
    """The commit the pull request's changes count from: the one it started at — or, if that commit
    is gone (a history rewrite gives every ref new commits), the newest commit of its history that
    its target branch holds too; failing both, its head (no changes)."""
    repo = discussion.repo
    found = Commit.objects.filter(repo=repo, oid=discussion.base_oid).first()
    if found is not None or target_head is None:
        return found or head
    parents = dict(Commit.objects.filter(repo=repo).values_list("id", "parent_id"))
    theirs = set()
    cur = target_head.id
    while cur is not None and cur not in theirs:
        theirs.add(cur)
        cur = parents.get(cur)
    cur = head.id
    while cur is not None:
        if cur in theirs:
            return Commit.objects.get(pk=cur)
        cur = parents.get(cur)
    return head


def _conflicts(store: trees.NodeStore, base: Commit, target_head: Commit, changes: list[treediff.Change]
               ) -> list[str]:
    """Paths the pull request changes that the target branch changed too since the base, to
    something else — or that it turned into a directory, or put under what is now a file there."""
    theirs = {c.path: c.new for c in treediff.diff(store, base.tree, target_head.tree)}
    out = []
    for c in changes:
        if c.path in theirs:
            if not treediff.same_file(theirs[c.path], c.new):
                out.append(c.path)
            continue
        if c.old is None and c.new is not None and _blocked(store, target_head.tree, c.path):
            out.append(c.path)
    return out


def _blocked(store: trees.NodeStore, root: str, path: str) -> bool:
    """Whether adding a file at `path` clashes with the tree: a directory there, or a file above."""
    entry = trees.resolve(store, root, path)
    if entry is not None and entry.is_dir:
        return True
    parts = path.split("/")
    for i in range(1, len(parts)):
        above = trees.resolve(store, root, "/".join(parts[:i]))
        if above is None:
            return False
        if not above.is_dir:
            return True
    return False


def diff_text(changes: list[treediff.Change]) -> str:
    """The changes as a git diff, as upstream shows them: LFS files as changes of their pointer
    files (what git stores), text files line by line up to a size, other files as binary."""
    out: list[str] = []
    size = 0
    for i, c in enumerate(changes):
        part = _file_diff(c, with_lines=i < DIFF_FILES and size < DIFF_TOTAL_MAX)
        size += len(part)
        out.append(part)
    return "".join(out)


def _file_diff(c: treediff.Change, *, with_lines: bool) -> str:
    a = "/dev/null" if c.old is None else f"a/{c.path}"
    b = "/dev/null" if c.new is None else f"b/{c.path}"
    old_oid = c.old.git_oid if c.old else "0" * 40
    new_oid = c.new.git_oid if c.new else "0" * 40
    out = f"diff --git a/{c.path} b/{c.path}\n"
    if c.old is None:
        out += f"new file mode 100644\nindex {old_oid[:7]}..{new_oid[:7]}\n"
    elif c.new is None:
        out += f"deleted file mode 100644\nindex {old_oid[:7]}..{new_oid[:7]}\n"
    else:
        out += f"index {old_oid[:7]}..{new_oid[:7]} 100644\n"
    old_text = _text(c.old) if with_lines else None
    new_text = _text(c.new) if with_lines else None
    if old_text is None or new_text is None:
        return out + f"Binary files {a} and {b} differ\n"
    lines = difflib.unified_diff(old_text.splitlines(keepends=True), new_text.splitlines(keepends=True),
                                 fromfile=a, tofile=b)
    return out + "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                         for line in lines)


def _text(entry: trees.Entry | None) -> str | None:
    """A file's text for a diff: '' for no file, the pointer for an LFS file, the content of a small
    UTF-8 file; None for anything else (shown as binary)."""
    if entry is None:
        return ""
    if entry.lfs:
        return blobs.lfs_pointer(entry.ref, entry.size).decode()
    if entry.size > DIFF_FILE_MAX:
        return None
    try:
        data = blobs.object_store().read_bytes(blobs.key_for(entry.ref))
    except Exception:  # noqa: BLE001 - a diff is a view: a file that cannot be read shows as binary
        return None
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


# --- merging -------------------------------------------------------------------------------------------

def check_merge(actor: Actor, discussion: Discussion, comment=None) -> Event:
    """Merges a pull request into its target branch (maintainers only)."""
    services.check_can_participate(actor, discussion.repo)
    if not discussion.is_pull_request:
        raise BadRequest(gettext("#%(num)s is a discussion, not a pull request: there is nothing to merge") % {"num": discussion.num})
    if not services.is_maintainer(actor, discussion.repo):
        raise Forbidden(gettext("only members of %(name)s with write access can merge pull requests of "
                                "%(repo_id)s") % {"name": discussion.repo.namespace.name, "repo_id": discussion.repo.repo_id})
    comment = services.check_text(comment, "comment", required=False)
    _check_active(discussion, "merge it")
    if discussion.status == Discussion.DRAFT:
        raise BadRequest(gettext("pull request #%(num)s is a draft: mark it open (ready) before merging it") % {"num": discussion.num})
    return do_merge(actor, discussion, comment)


def do_merge(actor: Actor, discussion: Discussion, comment: str = "") -> Event:
    """Applies the pull request's changes (base → head) to the target branch's current head as one
    commit, and marks it merged. Refuses with MergeConflict, naming the files, when the target
    branch changed any of them since the base.

    Locking: the commit is do_commit's, with the head this read as parent_commit (a commit landing
    meanwhile makes it 412: merge again); the status moves open → merged with a conditional update
    in the same transaction, so a pull request is merged once, and a close racing the merge wins
    or loses whole."""
    repo = discussion.repo
    st = state(discussion)
    if st.target_head is None:
        raise RevisionNotFound(gettext("the target branch %(target_branch)r of pull request #%(num)s no "
                                       "longer exists in %(repo_id)s") % {"target_branch": discussion.target_branch, "num": discussion.num, "repo_id": repo.repo_id})
    if st.conflicts:
        named = ", ".join(st.conflicts[:CONFLICTS_NAMED])
        more = f" and {len(st.conflicts) - CONFLICTS_NAMED} more" if len(st.conflicts) > CONFLICTS_NAMED else ""
        raise MergeConflict(gettext("pull request #%(num)s cannot be merged: %(target_branch)s changed "
                                    "these files since it started, and so does the pull request: "
                                    "%(named)s%(more)s. Update the pull request to match, or open a new "
                                    "one from the current head") % {"num": discussion.num, "target_branch": discussion.target_branch, "named": named, "more": more},
                            st.conflicts)
    store = trees.NodeStore()
    ops = repos.CommitOps(user=actor.user)
    for c in st.changes:
        if treediff.same_file(repos.entry_at(st.target_head, c.path, store), c.new):
            continue  # the target branch has it already
        if c.new is None:
            ops.delete(c.path)
        else:
            ops.add_copy(c.path, c.new)
    if not ops:
        raise BadRequest(gettext("pull request #%(num)s changes nothing on %(target_branch)s: there is "
                                 "nothing to merge (close it instead)") % {"num": discussion.num, "target_branch": discussion.target_branch})
    titles = list(Event.objects.filter(discussion=discussion, kind=Event.COMMIT).order_by("created", "pk")
                  .values_list("data__subject", flat=True))
    message = "\n".join(f"- {t}" for t in titles if t)
    with transaction.atomic():
        commit = repos.do_commit(actor, repo, discussion.target_branch, ops,
                                 title=f"{discussion.title} (#{discussion.num})", message=message,
                                 parent_commit=st.target_head.oid)
        merged = (Discussion.objects.filter(pk=discussion.pk, status=Discussion.OPEN)
                  .update(status=Discussion.MERGED, merge_oid=commit.oid, updated=timezone.now()))
        if not merged:
            raise Conflict(gettext("pull request #%(num)s changed meanwhile (merged or closed); nothing "
                                   "was merged") % {"num": discussion.num})
        if comment:
            services.do_add_event(discussion, Event.COMMENT, actor.user, content=comment)
        event = services.do_add_event(discussion, Event.STATUS, actor.user, data={"status": Discussion.MERGED})
    discussion.status, discussion.merge_oid = Discussion.MERGED, commit.oid
    return event
