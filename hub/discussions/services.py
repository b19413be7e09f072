"""Discussions and pull requests: the rules every door (the Hugging Face protocol, the web pages)
calls. `access_*` fetch or raise, `check_*` authorize and validate and then call `do_*`, which
write and say how they lock. Pull requests' commits, changes and merging are in pulls.py.

Who may do what, as upstream:
* read a repo's discussions: whoever can read the repo (anonymous callers too, on public repos;
  everyone else gets the repo's 404, as everywhere);
* open a discussion or a pull request, comment: any signed-in user who can read the repo, with a
  credential that may write (a read-only or an instance token may not);
* rename, close and reopen: the discussion's author, or a member of the repo's namespace with write
  access; merge a pull request: such members only;
* edit or hide a comment: its author, or an admin of the repo's namespace.
"""
from __future__ import annotations

from django.db import IntegrityError, transaction
from django.db.models import Count, Max, Q, QuerySet
from django.utils import timezone
from django.utils.translation import gettext, pgettext_lazy

from hub.accounts.actor import Actor
from hub.accounts.models import Membership
from hub.discussions.models import Discussion, Event
from hub.errors import BadRequest, Conflict, DiscussionNotFound, Forbidden, NotFound, Unauthorized
from hub.repos import pullrefs
from hub.repos import services as repos
from hub.repos.models import Commit, Repo

TITLE_MIN, TITLE_MAX = 3, 200
TEXT_MAX = 65_536
PAGE = 50
TYPES = ("all", "discussion", "pull_request")
STATUS_FILTERS = {"all": None, "open": (Discussion.OPEN, Discussion.DRAFT),
                  "closed": (Discussion.CLOSED, Discussion.MERGED), "merged": (Discussion.MERGED,),
                  "draft": (Discussion.DRAFT,)}
# The words the messages below name a text or an action by, in the reader's language (callers pass English).
WORDS = {"comment": pgettext_lazy("a discussion's text", "comment"),
         "description": pgettext_lazy("a discussion's text", "description"),
         "edit": pgettext_lazy("done to a comment", "edit"),
         "hide": pgettext_lazy("done to a comment", "hide"),
         "rename": pgettext_lazy("done to a discussion", "rename"),
         "close or reopen": pgettext_lazy("done to a discussion", "close or reopen"),
         "push to it": pgettext_lazy("done to a pull request", "push to it"),
         "merge it": pgettext_lazy("done to a pull request", "merge it")}


def word(what: str) -> str:
    return str(WORDS.get(what, what))


# --- who may -----------------------------------------------------------------------------------------

def check_can_participate(actor: Actor, repo: Repo) -> None:
    """May the actor (who can read `repo`) open discussions and pull requests there, and comment."""
    if actor.user is None:
        raise Unauthorized(gettext("sign in (pass a token) to open discussions, pull requests or comment"))
    if actor.on_instance:
        raise Forbidden(gettext("an instance token can only read the repos attached to its instance"))
    if not actor.can_write:
        raise Forbidden(gettext("this token is read-only; use a write token to open discussions, pull "
                                "requests or comment"))


def is_maintainer(actor: Actor, repo: Repo) -> bool:
    """A member of the repo's namespace with write access (may merge, close and rename anything)."""
    return repos.role_in(actor.user, repo.namespace) in (Membership.WRITE, Membership.ADMIN)


def is_moderator(actor: Actor, repo: Repo) -> bool:
    """An admin of the repo's namespace (may edit and hide anyone's comments)."""
    return repos.role_in(actor.user, repo.namespace) == Membership.ADMIN


def may_manage(actor: Actor, discussion: Discussion) -> bool:
    """May close, reopen and rename it: its author, or a maintainer."""
    if actor.user is None or actor.on_instance or not actor.can_write:
        return False
    return discussion.author_id == actor.user.pk or is_maintainer(actor, discussion.repo)


def may_merge(actor: Actor, discussion: Discussion) -> bool:
    if actor.user is None or actor.on_instance or not actor.can_write:
        return False
    return discussion.is_pull_request and is_maintainer(actor, discussion.repo)


def _check_manage(actor: Actor, discussion: Discussion, what: str) -> None:
    check_can_participate(actor, discussion.repo)
    if not may_manage(actor, discussion):
        raise Forbidden(gettext("only the author of #%(num)s or a member of %(name)s with write access "
                                "can %(what)s it") % {"num": discussion.num, "name": discussion.repo.namespace.name, "what": word(what)})


# --- reading -----------------------------------------------------------------------------------------

def access_discussion(repo: Repo, num: int | str) -> Discussion:
    """Discussion `num` of a repo the caller has already been allowed to read (repos.access_repo)."""
    try:
        n = int(num)
    except (TypeError, ValueError):
        n = 0
    found = (Discussion.objects.select_related("repo__namespace", "author").filter(repo=repo, num=n).first()
             if n > 0 else None)
    if found is None:
        raise DiscussionNotFound(gettext("discussion #%(num)s not found in %(repo_id)s") % {"num": num, "repo_id": repo.repo_id})
    found.repo = repo  # (the caller's instance: its access was checked)
    return found


def list_discussions(repo: Repo, *, kind: str | None = None, status: str | None = None, author: str | None = None,
                     offset: int = 0, limit: int = PAGE) -> tuple[list[Discussion], int]:
    """A page of the repo's discussions, newest first, with `n_comments`: (page, total).
    `kind`: all, discussion, pull_request; `status`: all, open (drafts too), closed (merged
    too), merged, draft; `author`: a username."""
    qs = _filtered(repo, kind, status, author)
    total = qs.count()
    rows = list(qs.select_related("author").annotate(n_comments=Count("events", filter=Q(events__kind=Event.COMMENT)))
                .order_by("-num")[offset:offset + limit])
    return rows, total


def _filtered(repo: Repo, kind: str | None, status: str | None, author: str | None) -> QuerySet[Discussion]:
    if kind not in (None, "", *TYPES):
        raise BadRequest(gettext("unknown discussion type %(kind)r: use one of %(types)s") % {"kind": kind, "types": ', '.join(TYPES)})
    if status not in (None, "", *STATUS_FILTERS):
        raise BadRequest(gettext("unknown discussion status %(status)r: use one of %(status_filters)s") % {"status": status, "status_filters": ', '.join(STATUS_FILTERS)})
    qs = Discussion.objects.filter(repo=repo)
    if kind in ("discussion", "pull_request"):
        qs = qs.filter(is_pull_request=kind == "pull_request")
    if status and STATUS_FILTERS[status]:
        qs = qs.filter(status__in=STATUS_FILTERS[status])
    if author:
        qs = qs.filter(author__username=author)
    return qs


def count_open(repo: Repo) -> int:
    return Discussion.objects.filter(repo=repo, status__in=STATUS_FILTERS["open"]).count()


def thread(discussion: Discussion) -> list[Event]:
    """Its events, oldest first."""
    return list(Event.objects.filter(discussion=discussion).select_related("author", "edited_by")
                .order_by("created", "pk"))


def access_comment(discussion: Discussion, comment_id: str) -> Event:
    try:
        pk = int(comment_id, 16)
    except (TypeError, ValueError):
        pk = 0
    found = Event.objects.select_related("author").filter(discussion=discussion, pk=pk, kind=Event.COMMENT).first()
    if found is None:
        raise NotFound(gettext("comment %(comment_id)s not found in #%(num)s of %(repo_id)s") % {"comment_id": comment_id, "num": discussion.num, "repo_id": discussion.repo.repo_id})
    return found


# --- opening -----------------------------------------------------------------------------------------

def check_title(title) -> str:
    title = title.strip() if isinstance(title, str) else ""
    if not TITLE_MIN <= len(title) <= TITLE_MAX:
        raise BadRequest(gettext("a title needs %(title_min)s to %(title_max)s characters") % {"title_min": TITLE_MIN, "title_max": TITLE_MAX})
    return title


def check_text(text, what: str = "comment", *, required: bool = True) -> str:
    if text is None and not required:
        return ""
    if not isinstance(text, str):
        raise BadRequest(gettext("the %(what)s must be text") % {"what": word(what)})
    text = text.strip()
    if required and not text:
        raise BadRequest(gettext("the %(what)s is empty") % {"what": word(what)})
    if len(text) > TEXT_MAX:
        raise BadRequest(gettext("the %(what)s is too long: at most %(text_max)s characters") % {"what": word(what), "text_max": TEXT_MAX})
    return text


def check_open(actor: Actor, repo: Repo, *, title, description=None, pull_request: bool = False) -> Discussion:
    """Opens a discussion, or an empty pull request: refs/pr/N at the default branch's head, a draft
    (as upstream's programmatic pull requests are) to which commits are then pushed."""
    check_can_participate(actor, repo)
    title = check_title(title)
    description = check_text(description, "description", required=False)
    if not pull_request:
        return do_open(actor, repo, title=title, description=description)
    head = repos.resolve_revision(repo, repo.default_branch)
    return do_open(actor, repo, title=title, description=description, target_branch=repo.default_branch,
                   start=head, status=Discussion.DRAFT)


def do_open(actor: Actor, repo: Repo, *, title: str, description: str = "", target_branch: str = "",
            start: Commit | None = None, status: str = Discussion.OPEN) -> Discussion:
    """Creates discussion number max + 1 of the repo — a pull request, with refs/pr/<num> at
    `start`, when `start` is given — and its opening comment (if there is a description).

    Runs in a transaction (a savepoint inside the caller's, which a pull request's first commit
    shares); two openings racing for one number are told apart by the unique constraints, the
    loser takes the next number."""
    with transaction.atomic():
        num = (Discussion.objects.filter(repo=repo).aggregate(m=Max("num"))["m"] or 0) + 1
        for _ in range(50):
            try:
                with transaction.atomic():
                    discussion = Discussion.objects.create(
                        repo=repo, num=num, title=title, author=actor.user, is_pull_request=start is not None,
                        status=status, target_branch=target_branch, base_oid=start.oid if start else "")
                    if start is not None:
                        pullrefs.create_pr_ref(repo, num, start)
                break
            except IntegrityError:
                num += 1  # taken meanwhile (or a pull request ref left without its discussion)
        else:
            raise Conflict(gettext("too many discussions are being opened on %(repo_id)s at once; retry") % {"repo_id": repo.repo_id})
        if description:
            Event.objects.create(discussion=discussion, kind=Event.COMMENT, author=actor.user, content=description,
                                 created=discussion.created)
    discussion.repo = repo
    return discussion


# --- the thread --------------------------------------------------------------------------------------

def do_add_event(discussion: Discussion, kind: str, user, *, content: str = "", data: dict | None = None) -> Event:
    """Appends an event and marks the discussion updated. Locks nothing: events only accumulate."""
    event = Event.objects.create(discussion=discussion, kind=kind, author=user, content=content, data=data or {})
    Discussion.objects.filter(pk=discussion.pk).update(updated=event.created)
    return event


def check_comment(actor: Actor, discussion: Discussion, text) -> Event:
    check_can_participate(actor, discussion.repo)
    return do_add_event(discussion, Event.COMMENT, actor.user, content=check_text(text))


def _check_moderate(actor: Actor, discussion: Discussion, comment: Event, what: str) -> None:
    check_can_participate(actor, discussion.repo)
    if comment.author_id != actor.user.pk and not is_moderator(actor, discussion.repo):
        raise Forbidden(gettext("only its author or an admin of %(name)s can %(what)s this comment") % {"name": discussion.repo.namespace.name, "what": word(what)})


def check_edit_comment(actor: Actor, discussion: Discussion, comment_id: str, text) -> Event:
    comment = access_comment(discussion, comment_id)
    _check_moderate(actor, discussion, comment, "edit")
    text = check_text(text)
    if comment.hidden:
        raise BadRequest(gettext("this comment is hidden: it can no longer be edited"))
    return do_edit_comment(comment, actor.user, text)


def do_edit_comment(comment: Event, user, text: str) -> Event:
    """Replaces the comment's text, keeping the version it had. Locks the comment's row, so two
    edits at once both stay in its history."""
    with transaction.atomic():
        current = Event.objects.select_for_update().get(pk=comment.pk)
        if current.hidden:
            raise BadRequest(gettext("this comment is hidden: it can no longer be edited"))
        if current.content != text:
            was = {"raw": current.content, "at": (current.edited_at or current.created).isoformat(),
                   "by": current.edited_by.username if current.edited_by else
                   (current.author.username if current.author else "")}
            Event.objects.filter(pk=comment.pk).update(content=text, previous=[was, *current.previous],
                                                       edited_at=timezone.now(), edited_by=user)
    return Event.objects.select_related("author", "edited_by").get(pk=comment.pk)


def check_hide_comment(actor: Actor, discussion: Discussion, comment_id: str) -> Event:
    comment = access_comment(discussion, comment_id)
    _check_moderate(actor, discussion, comment, "hide")
    return do_hide_comment(comment, actor.user)


def do_hide_comment(comment: Event, user) -> Event:
    """Hides the comment for good: its text and every earlier version are erased (hiding is for
    what must not stay readable, such as a pasted secret). Hiding it again changes nothing."""
    Event.objects.filter(pk=comment.pk, hidden=False).update(
        hidden=True, content="", previous=[], edited_at=timezone.now(), edited_by=user)
    return Event.objects.select_related("author", "edited_by").get(pk=comment.pk)


def check_rename(actor: Actor, discussion: Discussion, title) -> Event:
    _check_manage(actor, discussion, "rename")
    title = check_title(title)
    if title == discussion.title:
        raise BadRequest(gettext("#%(num)s is already titled %(title)r") % {"num": discussion.num, "title": title})
    return do_rename(actor, discussion, title)


def do_rename(actor: Actor, discussion: Discussion, title: str) -> Event:
    with transaction.atomic():
        Discussion.objects.filter(pk=discussion.pk).update(title=title)
        event = do_add_event(discussion, Event.TITLE, actor.user, data={"from": discussion.title, "to": title})
    discussion.title = title
    return event


def check_change_status(actor: Actor, discussion: Discussion, status, comment=None) -> Event:
    """Closes or reopens (open/closed, as the client sends it). A draft pull request set to open is
    ready to merge; a merged one stays merged."""
    _check_manage(actor, discussion, "close or reopen")
    if status not in (Discussion.OPEN, Discussion.CLOSED):
        raise BadRequest(gettext("the new status must be 'open' or 'closed'"))
    comment = check_text(comment, "comment", required=False)
    if discussion.status == Discussion.MERGED:
        raise BadRequest(gettext("#%(num)s is merged: it can no longer be closed or reopened") % {"num": discussion.num})
    if discussion.status == status:
        raise BadRequest(gettext("#%(num)s is already %(status)s") % {"num": discussion.num, "status": status})
    return do_change_status(actor, discussion, status, comment)


def do_change_status(actor: Actor, discussion: Discussion, status: str, comment: str = "") -> Event:
    """Sets the status if it is still what the caller saw (a conditional update: of a close and a
    merge racing, one wins and the other is told)."""
    with transaction.atomic():
        changed = (Discussion.objects.filter(pk=discussion.pk, status=discussion.status)
                   .update(status=status, updated=timezone.now()))
        if not changed:
            raise Conflict(gettext("#%(num)s changed meanwhile; reload it and try again") % {"num": discussion.num})
        if comment:
            do_add_event(discussion, Event.COMMENT, actor.user, content=comment)
        event = do_add_event(discussion, Event.STATUS, actor.user, data={"status": status})
    discussion.status = status
    return event
