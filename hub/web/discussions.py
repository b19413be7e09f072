"""A repo's discussions and pull requests as pages: the list, one thread (for a pull request its
changed files too), and the forms that comment, open, close, reopen and merge. Each view parses,
calls hub.discussions and renders; the rules (who may) are there."""
from __future__ import annotations

from dataclasses import dataclass

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_POST

from hub.catalog import services as catalog
from hub.discussions import pulls
from hub.discussions import services as discussions
from hub.discussions.models import Discussion, Event
from hub.errors import HubError
from hub.repos import treediff
from hub.repos.models import Repo
from hub.web.pages import actor_of, form_action, page
from hub.web.views import _context, _repo

PAGE = 30
STATUSES = [("open", gettext_lazy("Open")), ("closed", gettext_lazy("Closed")), ("all", gettext_lazy("All"))]
KINDS = [("all", gettext_lazy("All")), ("pull_request", gettext_lazy("Pull requests")),
         ("discussion", gettext_lazy("Discussions"))]


def _web(repo: Repo) -> str:
    return catalog.web_path(repo.type, repo.repo_id)


def _list_url(request: HttpRequest, prefix: str, ns: str, name: str) -> str:
    return f"/{prefix}{ns}/{name}/discussions"


def _thread_url(request: HttpRequest, prefix: str, ns: str, name: str, num: str) -> str:
    return f"/{prefix}{ns}/{name}/discussions/{num}"


def _may_take_part(request: HttpRequest, repo: Repo) -> bool:
    try:
        discussions.check_can_participate(actor_of(request), repo)
    except HubError:
        return False
    return True


@page
@require_GET
def listing(request: HttpRequest, prefix: str, ns: str, name: str) -> HttpResponse:
    repo = _repo(request, prefix, ns, name)
    status = request.GET.get("status") or "open"
    kind = request.GET.get("type") or "all"
    try:
        number = max(1, int(request.GET.get("p") or 1))
    except ValueError:
        number = 1
    rows, total = discussions.list_discussions(repo, kind=kind, status=status, offset=(number - 1) * PAGE,
                                               limit=PAGE)
    return render(request, "web/discussions.html", _context(
        request, repo, "discussions", rows=rows, total=total, status=status, kind=kind, statuses=STATUSES,
        kinds=KINDS, number=number, has_next=number * PAGE < total, prev_page=number - 1, next_page=number + 1,
        can_open=_may_take_part(request, repo)))


@form_action(_list_url)
@require_POST
def open_discussion(request: HttpRequest, prefix: str, ns: str, name: str) -> HttpResponse:
    repo = _repo(request, prefix, ns, name)
    if not request.user.is_authenticated:
        return redirect(f"/accounts/login?next={_list_url(request, prefix, ns, name)}")
    d = discussions.check_open(actor_of(request), repo, title=request.POST.get("title"),
                               description=request.POST.get("description"))
    messages.success(request, _("Discussion #%(num)s is open.") % {"num": d.num})
    return redirect(f"{_web(repo)}/discussions/{d.num}")


@dataclass
class FileRow:
    path: str
    status: str
    old_size: int | None
    new_size: int | None
    href: str  # the file as the pull request leaves it (as it was, for a deletion)


@dataclass
class EventRow:
    event: Event
    html: str


def _files(repo: Repo, state: pulls.State) -> list[FileRow]:
    web = _web(repo)
    rows = []
    for c in state.changes:
        at = state.base.oid if c.new is None else state.head.oid
        rows.append(FileRow(c.path, c.status, c.old.size if c.old else None, c.new.size if c.new else None,
                            f"{web}/blob/{at}/{c.path}"))
    return rows


@page
@require_GET
def detail(request: HttpRequest, prefix: str, ns: str, name: str, num: str) -> HttpResponse:
    repo = _repo(request, prefix, ns, name)
    d = discussions.access_discussion(repo, num)
    actor = actor_of(request)
    events = [EventRow(e, catalog.render_markdown(e.content) if e.kind == Event.COMMENT and e.content else "")
              for e in discussions.thread(d)]
    state = pulls.state(d) if d.is_pull_request else None
    files = _files(repo, state) if state else []
    return render(request, "web/discussion.html", _context(
        request, repo, "discussions", d=d, events=events, state=state, files=files,
        added=sum(f.status == treediff.ADDED for f in files), modified=sum(f.status == treediff.MODIFIED for f in files),
        deleted=sum(f.status == treediff.DELETED for f in files),
        can_comment=_may_take_part(request, repo), can_manage=discussions.may_manage(actor, d),
        can_merge=discussions.may_merge(actor, d) and d.status == Discussion.OPEN,
        thread_url=f"{_web(repo)}/discussions/{d.num}"))


def _signed_in(request: HttpRequest, prefix: str, ns: str, name: str, num: str) -> HttpResponse | None:
    if request.user.is_authenticated:
        return None
    return redirect(f"/accounts/login?next={_thread_url(request, prefix, ns, name, num)}")


@form_action(_thread_url)
@require_POST
def comment(request: HttpRequest, prefix: str, ns: str, name: str, num: str) -> HttpResponse:
    repo = _repo(request, prefix, ns, name)
    d = discussions.access_discussion(repo, num)
    if (login := _signed_in(request, prefix, ns, name, num)) is not None:
        return login
    event = discussions.check_comment(actor_of(request), d, request.POST.get("comment"))
    return redirect(f"{_web(repo)}/discussions/{d.num}#event-{event.hex_id}")


@form_action(_thread_url)
@require_POST
def status(request: HttpRequest, prefix: str, ns: str, name: str, num: str) -> HttpResponse:
    repo = _repo(request, prefix, ns, name)
    d = discussions.access_discussion(repo, num)
    if (login := _signed_in(request, prefix, ns, name, num)) is not None:
        return login
    new = request.POST.get("status")
    discussions.check_change_status(actor_of(request), d, new, request.POST.get("comment"))
    messages.success(request, (_("#%(num)s is closed.") if new == Discussion.CLOSED else _("#%(num)s is open."))
                     % {"num": d.num})
    return redirect(f"{_web(repo)}/discussions/{d.num}")


@form_action(_thread_url)
@require_POST
def merge(request: HttpRequest, prefix: str, ns: str, name: str, num: str) -> HttpResponse:
    repo = _repo(request, prefix, ns, name)
    d = discussions.access_discussion(repo, num)
    if (login := _signed_in(request, prefix, ns, name, num)) is not None:
        return login
    pulls.check_merge(actor_of(request), d, request.POST.get("comment"))
    messages.success(request, _("Pull request #%(num)s is merged into %(branch)s (commit %(oid)s).")
                     % {"num": d.num, "branch": d.target_branch, "oid": d.merge_oid[:10]})
    return redirect(f"{_web(repo)}/discussions/{d.num}")
