"""A minimal catalog page; the full web catalog is its own issue."""
from __future__ import annotations

import itertools

from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from hub.errors import HubError
from hub.repos import services
from hub.repos.models import Repo


def _user(request: HttpRequest):
    return request.user if request.user.is_authenticated else None


def home(request: HttpRequest) -> HttpResponse:
    repos = services.visible_repos(_user(request)).order_by("-last_modified")
    return render(request, "web/home.html", {
        "models": repos.filter(type=Repo.MODEL)[:50],
        "datasets": repos.filter(type=Repo.DATASET)[:50],
        "n_models": repos.filter(type=Repo.MODEL).count(),
        "n_datasets": repos.filter(type=Repo.DATASET).count(),
    })


def repo_page(request: HttpRequest, prefix: str, ns: str, name: str) -> HttpResponse:
    t = Repo.DATASET if prefix else Repo.MODEL
    try:
        repo = services.access_repo(services.Actor.from_request(request), t, ns, name)
    except HubError as err:
        return render(request, "web/error.html", {"message": err.message}, status=err.status)
    commit = services.resolve_revision(repo, None)
    from hub.repos import trees

    files = list(itertools.islice(trees.walk(trees.NodeStore(), commit.tree), 500))
    return render(request, "web/repo.html", {"repo": repo, "commit": commit, "files": files})


def healthz(request: HttpRequest) -> JsonResponse:
    with connection.cursor() as cur:
        cur.execute("SELECT 1")
    return JsonResponse({"ok": True})
