"""What every view of the Hugging Face protocol shares: the repo a URL names (with the caller's
rights checked), the client-facing base URL, JSON bodies, query flags and paging links."""
from __future__ import annotations

import json

from django.http import HttpRequest, HttpResponse

from hub.accounts.actor import Actor
from hub.content.signing import base_url
from hub.errors import BadRequest, RepoNotFound
from hub.repos import services
from hub.repos.models import Repo

TYPES = {"models": Repo.MODEL, "datasets": Repo.DATASET, "": Repo.MODEL}


def repo_type(prefix: str) -> str:
    t = TYPES.get(prefix.rstrip("/"))
    if t is None:
        raise RepoNotFound(f"repo type {prefix!r} is not served by this hub (models and datasets are)")
    return t



def repo_url(request: HttpRequest, repo: Repo) -> str:
    prefix = "datasets/" if repo.type == Repo.DATASET else ""
    return f"{base_url(request)}/{prefix}{repo.repo_id}"


def read_json(request: HttpRequest) -> dict:
    try:
        data = json.loads(request.body or b"{}")
    except (ValueError, UnicodeDecodeError):
        raise BadRequest("the request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise BadRequest("the request body must be a JSON object")
    return data


def flag(request: HttpRequest, name: str, default: bool = False) -> bool:
    value = request.GET.get(name)
    if value is None:
        return default
    return value.lower() in ("1", "true", "yes")


def repo_of(request: HttpRequest, prefix: str, ns: str, name: str, *, write: bool = False) -> Repo:
    """The repo the URL names, if the caller may read it (and write it). A plain "not found" is said in
    upstream's words, which huggingface_hub's own message already holds (it names the URL and what
    to check), so the client shows its message alone; a hint (a dataset of that name) is kept."""
    try:
        return services.access_repo(Actor.from_request(request), repo_type(prefix), ns, name, write=write)
    except RepoNotFound as err:
        if getattr(err, "plain", False):
            raise RepoNotFound("Repository not found", headers=err.headers) from None
        raise


def paginate(request: HttpRequest, response: HttpResponse, params: dict) -> None:
    query = request.GET.copy()
    for k, v in params.items():
        query[k] = v
    response["Link"] = f'<{base_url(request)}{request.path}?{query.urlencode()}>; rel="next"'


def int_param(value: str | None, default):
    if value in (None, ""):
        return default
    try:
        n = int(value)
    except ValueError:
        raise BadRequest(f"expected an integer, got {value!r}") from None
    if n < 0:
        raise BadRequest(f"expected a non-negative integer, got {value!r}")
    return n


def expand_of(request: HttpRequest) -> list[str]:
    return request.GET.getlist("expand") + request.GET.getlist("expand[]")
