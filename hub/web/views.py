"""Catalog pages: home, the dataset and model lists, and a repo's card, files, history and refs.
Each view parses, calls hub.catalog / hub.repos services, and renders."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect, JsonResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from hub.catalog import services as catalog
from hub.content.signing import base_url
from hub.discussions import services as discussions
from hub.errors import HubError, RepoNotFound, UpstreamUnavailable
from hub.mirrors import ondemand
from hub.mirrors import services as mirrors
from hub.repos import gating, likes
from hub.repos import services as repos
from hub.repos.models import AccessRequest, Repo
from hub.web import viewer as dataset_viewer
from hub.web.pages import actor_of, anonymous_cache, form_action, page, user_of

KINDS = {"datasets": Repo.DATASET, "models": Repo.MODEL}
HISTORY_PAGE = 30
REQUESTS_PAGE = 500  # per list on the owners' page (the API pages through all of them)


@require_GET
@anonymous_cache
def home(request: HttpRequest) -> HttpResponse:
    return render(request, "web/home.html", {"stats": catalog.home(user_of(request))})


@require_GET
@anonymous_cache
def repo_list(request: HttpRequest, kind: str) -> HttpResponse:
    repo_type = KINDS[kind]
    query = catalog.Query.from_params(repo_type, request.GET)
    found = catalog.search(user_of(request), query)
    elsewhere = None  # an empty search says where its words do match
    if not found.object_list and query.q:
        other = "models" if kind == "datasets" else "datasets"
        n = catalog.count_matches(user_of(request), KINDS[other], query.q)
        elsewhere = (other, n) if n else None
    return render(request, "web/list.html", {
        "elsewhere": elsewhere,
        "kind": kind, "nav": kind, "query": query, "page": found,
        "page_range": found.paginator.get_elided_page_range(found.number, on_each_side=2, on_ends=1),
        "facets": catalog.facet_options(repo_type), "sorts": catalog.sort_choices(query),
        "buckets": [(b[0], b[1]) for b in catalog.SIZE_BUCKETS], "params": request.GET,
    })


# --- one repo -----------------------------------------------------------------------------------------

def _repo(request: HttpRequest, prefix: str, ns: str, name: str) -> Repo:
    return repos.access_repo(actor_of(request), Repo.DATASET if prefix else Repo.MODEL, ns, name)


def _gate_open(request: HttpRequest, repo: Repo) -> bool:
    """Whether the caller may download this repo's files (always, unless it is gated)."""
    try:
        repos.check_gate(actor_of(request), repo)
    except HubError:
        return False
    return True


def _context(request: HttpRequest, repo: Repo, tab: str, **extra) -> dict:
    """What every tab of a repo page shows: the header, the catalog entry, whether it is mirrored,
    whether its files are open to the caller (gated repos need their access request accepted) and
    where that request stands, whether the caller likes it."""
    web = catalog.web_path(repo.type, repo.repo_id)
    entry = catalog.entry_of(repo)
    actor = actor_of(request)
    return {"repo": repo, "entry": entry, "tab": tab, "web": web, "mirrored": catalog.is_mirrored(repo),
            # a curated entry (seed file, sample) whose files may be waiting to be mirrored
            "catalogued": entry is not None and entry.source != entry.CARD,
            "gate_open": _gate_open(request, repo),
            "gate_request": gating.request_of(actor, repo) if repo.gated else None,
            "liked": likes.likes_repo(actor, repo),
            "open_discussions": discussions.count_open(repo),
            "kind": "datasets" if repo.type == Repo.DATASET else "models",
            "nav": "datasets" if repo.type == Repo.DATASET else "models", **extra}


def _manages_requests(request: HttpRequest, repo: Repo) -> bool:
    try:
        gating.check_manage_requests(actor_of(request), repo)
    except HubError:
        return False
    return True


@page
@require_GET
def repo_page(request: HttpRequest, prefix: str, ns: str, name: str) -> HttpResponse:
    repo = _repo(request, prefix, ns, name)
    try:
        commit = repos.resolve_revision(repo, None)
    except (UpstreamUnavailable, RepoNotFound):  # a catalog entry's upstream failed its first pin: say so
        commit = repos.resolve_revision(repo, None, fetch=False)
    card = catalog.card(commit, catalog.web_path(repo.type, repo.repo_id))
    ctx = _context(request, repo, "card", commit=commit, card=card)
    ctx["ondemand"] = ondemand.status(repo)
    ctx["facts"] = catalog.card_facts(repo, ctx["entry"], card.meta if card else {})
    ctx["snippets"] = catalog.snippets(repo, base_url(request), catalog.example_file(commit), ctx["entry"])
    ctx["mirror_jobs"] = [mirrors.job_progress(j) for j in mirrors.recent_jobs(repo, 1)]
    if request.user.is_authenticated and _manages_requests(request, repo):
        ctx["pending_requests"] = gating.count_pending(repo)
    ctx["viewer"] = dataset_viewer.context(request, repo, commit) if ctx["gate_open"] else None
    return render(request, "web/repo.html", ctx)


@page
@require_GET
def tree(request: HttpRequest, prefix: str, ns: str, name: str, rev: str, path: str = "") -> HttpResponse:
    repo = _repo(request, prefix, ns, name)
    web = catalog.web_path(repo.type, repo.repo_id)
    if request.GET.get("rev"):  # the revision picker (a plain GET form) names the revision in the query
        return redirect(f"{web}/tree/{request.GET['rev'].strip()}")
    commit = repos.resolve_revision(repo, rev)
    entry = catalog.entry_at(repo, commit, path or "")
    if not entry.is_dir:
        return redirect(f"{web}/blob/{rev}/{path}")
    listing = catalog.browse(repo, commit, path or "", after=request.GET.get("after"))
    branches, tags = repos.list_refs(repo)
    crumbs = []
    parts = listing.path.split("/") if listing.path else []
    for i, part in enumerate(parts):
        crumbs.append((part, "/".join(parts[: i + 1])))
    return render(request, "web/tree.html", _context(
        request, repo, "files", commit=commit, rev=rev, listing=listing, crumbs=crumbs, branches=branches,
        tags=tags, parent="/".join(parts[:-1])))


@page
@require_GET
def blob(request: HttpRequest, prefix: str, ns: str, name: str, rev: str, path: str) -> HttpResponse:
    repo = _repo(request, prefix, ns, name)
    commit = repos.resolve_revision(repo, rev)
    entry = catalog.entry_at(repo, commit, path)
    web = catalog.web_path(repo.type, repo.repo_id)
    if entry.is_dir:
        return redirect(f"{web}/tree/{rev}/{path}")
    parts = path.split("/")
    crumbs = [(part, "/".join(parts[: i + 1])) for i, part in enumerate(parts)]
    ctx = _context(request, repo, "files", commit=commit, rev=rev, path=path, file=entry, crumbs=crumbs,
                   download=f"{web}/resolve/{rev}/{path}")
    ctx["text"] = catalog.preview(path, entry) if ctx["gate_open"] else None
    ctx["viewer"] = dataset_viewer.context(request, repo, commit, path) if ctx["gate_open"] else None
    return render(request, "web/blob.html", ctx)


@page
@require_GET
def commits(request: HttpRequest, prefix: str, ns: str, name: str, rev: str) -> HttpResponse:
    repo = _repo(request, prefix, ns, name)
    head = repos.resolve_revision(repo, rev)
    try:
        number = max(1, int(request.GET.get("p") or 1))
    except ValueError:
        number = 1
    rows, total = repos.history(repo, head, (number - 1) * HISTORY_PAGE, HISTORY_PAGE)
    return render(request, "web/commits.html", _context(
        request, repo, "commits", rev=rev, head=head, commits=rows, total=total, number=number,
        has_next=number * HISTORY_PAGE < total, next_page=number + 1, prev_page=number - 1))


@page
@require_GET
def commit(request: HttpRequest, prefix: str, ns: str, name: str, sha: str) -> HttpResponse:
    repo = _repo(request, prefix, ns, name)
    found = repos.resolve_revision(repo, sha)
    return render(request, "web/commit.html", _context(request, repo, "commits", commit=found))


@page
@require_GET
def refs(request: HttpRequest, prefix: str, ns: str, name: str) -> HttpResponse:
    repo = _repo(request, prefix, ns, name)
    branches, tags = repos.list_refs(repo)
    return render(request, "web/refs.html", _context(request, repo, "refs", branches=branches, tags=tags))


@page
@require_POST
def accept_gate(request: HttpRequest, prefix: str, ns: str, name: str) -> HttpResponse:
    repo = _repo(request, prefix, ns, name)
    if not request.user.is_authenticated:
        return redirect(f"/accounts/login?next={request.path.removesuffix('/access')}")
    made = gating.do_request_access(actor_of(request), repo)
    if made is not None and made.status == AccessRequest.PENDING:
        messages.success(request, _("You asked for access to %(repo)s: its authors review each request, and its "
                                    "files open to you once one of them accepts yours.") % {"repo": repo.repo_id})
    elif made is None or made.status == AccessRequest.ACCEPTED:
        messages.success(request, _("You accepted the conditions of %(repo)s: its files are yours to download.")
                         % {"repo": repo.repo_id})
    return redirect(catalog.web_path(repo.type, repo.repo_id))


@login_required
@require_POST
@page
def pin(request: HttpRequest, prefix: str, ns: str, name: str) -> HttpResponse:
    """An operator pins an entry served on demand: all of it is fetched now and never evicted."""
    repo = _repo(request, prefix, ns, name)
    job = ondemand.check_pin(actor_of(request), repo)
    messages.success(request, _("%(repo)s is pinned: mirror job #%(job)s fetches all of it now, and its files are "
                                "never evicted.") % {"repo": repo.repo_id, "job": job.pk})
    return redirect(catalog.web_path(repo.type, repo.repo_id))


@login_required
@require_POST
@page
def like(request: HttpRequest, prefix: str, ns: str, name: str) -> HttpResponse:
    """The like button: `liked` is what the person wants it to be (1 or 0), so a form sent twice
    does what it said once."""
    repo = _repo(request, prefix, ns, name)
    (likes.do_like if request.POST.get("liked") == "1" else likes.do_unlike)(actor_of(request), repo)
    return redirect(catalog.web_path(repo.type, repo.repo_id))


# --- a gated repo's access requests, for its owners ---------------------------------------------------------

def _requests_page(request: HttpRequest, prefix: str, ns: str, name: str) -> str:
    return f"/{prefix}{ns}/{name}/access-requests"


@login_required
@require_GET
@page
def access_requests(request: HttpRequest, prefix: str, ns: str, name: str) -> HttpResponse:
    repo = _repo(request, prefix, ns, name)
    actor = actor_of(request)
    lists = [(status, gating.list_requests(actor, repo, status, limit=REQUESTS_PAGE)) for status in gating.STATUSES]
    return render(request, "web/access_requests.html", _context(request, repo, "access", lists=lists,
                                                                 limit=REQUESTS_PAGE))


@login_required
@require_POST
@form_action(_requests_page)
def handle_access_request(request: HttpRequest, prefix: str, ns: str, name: str) -> HttpResponse:
    repo = _repo(request, prefix, ns, name)
    status = request.POST.get("status") or ""
    reason = (request.POST.get("reason") or "").strip() if status == AccessRequest.REJECTED else None
    done = gating.do_handle_request(actor_of(request), repo, status, user=request.POST.get("user") or "",
                                    rejection_reason=reason)
    said = {AccessRequest.ACCEPTED: _("Accepted the request of %(user)s: they can download the files."),
            AccessRequest.REJECTED: _("Rejected the request of %(user)s."),
            AccessRequest.PENDING: _("Moved the request of %(user)s back to pending: they cannot download the files.")}
    messages.success(request, said[done.status] % {"user": done.user.username})
    return redirect(_requests_page(request, prefix, ns, name))


@login_required
@require_POST
@form_action(_requests_page)
def grant_access(request: HttpRequest, prefix: str, ns: str, name: str) -> HttpResponse:
    repo = _repo(request, prefix, ns, name)
    done = gating.do_grant_access(actor_of(request), repo, (request.POST.get("user") or "").strip())
    messages.success(request, _("Granted %(user)s access to %(repo)s.") % {"user": done.user.username, "repo": repo.repo_id})
    return redirect(_requests_page(request, prefix, ns, name))


@require_GET
def model_alias(request: HttpRequest, rest: str) -> HttpResponse:
    """/models/NS/NAME[/...] is where one looks for a model after `hub pull models/NS/NAME` or
    hub://models/...; its page is at /NS/NAME, as on Hugging Face."""
    query = request.META.get("QUERY_STRING")
    return HttpResponsePermanentRedirect(f"/{rest}" + (f"?{query}" if query else ""))


def healthz(request: HttpRequest) -> JsonResponse:
    with connection.cursor() as cur:
        cur.execute("SELECT 1")
    return JsonResponse({"ok": True})
