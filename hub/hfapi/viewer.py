"""The dataset viewer's API, in the shape of upstream's datasets-server (is-valid, splits,
first-rows, rows, info, size; the same query parameters and JSON), mounted under
/api/datasets-server/. Each view checks read access as every read door does (a private dataset is
"not found" to those who cannot read it; a gated one needs its conditions accepted), then reads
what the viewer's task computed: a request never reads a data file whole."""
from __future__ import annotations

import time

from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from hub.accounts.actor import Actor
from hub.errors import HubError
from hub.hfapi.common import repo_of
from hub.repos import services as repos
from hub.viewer import services as viewer
from hub.viewer.models import ViewerRun

NOT_FOUND = ("The dataset does not exist, or is not accessible without authentication (private or gated). "
             "Please check the spelling of the dataset name or retry with authentication.")
NOT_READY = "The server is busier than usual and the response is not ready yet. Please retry later."
FIRST_ROWS = 100


class _Error(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _error(status: int, code: str, message: str) -> JsonResponse:
    resp = JsonResponse({"error": message}, status=status)
    resp["X-Error-Code"] = code
    return resp


def _param(request: HttpRequest, name: str) -> str:
    value = request.GET.get(name)
    if not value:
        raise _Error(422, "MissingRequiredParameter", f"Parameter '{name}' is required")
    return value


def _int(request: HttpRequest, name: str, default: int) -> int:
    value = request.GET.get(name)
    if value in (None, ""):
        return default
    try:
        n = int(value)
    except ValueError:
        raise _Error(422, "InvalidParameter", f"Parameter '{name}' must be an integer") from None
    if n < 0:
        raise _Error(422, "InvalidParameter", f"Parameter '{name}' must be positive")
    return n


def _run(request: HttpRequest) -> tuple[str, ViewerRun]:
    """The dataset named by ?dataset= (if the caller may read its rows) and its head's viewer."""
    dataset = _param(request, "dataset")
    ns, _, name = dataset.partition("/")
    if not ns or not name or "/" in name:
        raise _Error(404, "ResponseNotFound", NOT_FOUND)
    try:
        repo = repo_of(request, "datasets", ns, name)
        commit = repos.resolve_revision(repo, None)
        repos.check_gate(Actor.from_request(request), repo)
    except HubError as err:
        if err.status == 404:
            raise _Error(404, "ResponseNotFound", NOT_FOUND) from None
        raise _Error(err.status, err.code, err.message) from None
    return repo.repo_id, viewer.run_of(repo, commit)


def _ready(run: ViewerRun) -> None:
    if run.state in (ViewerRun.PENDING, ViewerRun.RUNNING, ViewerRun.WAITING):
        raise _Error(500, "ResponseNotReady", NOT_READY)
    if run.state == ViewerRun.FAILED:
        raise _Error(500, "ComputationError", run.error)


def _split(request: HttpRequest, run: ViewerRun) -> viewer.SplitView:
    config, split = _param(request, "config"), _param(request, "split")
    _ready(run)
    try:
        view = viewer.find_split(viewer.splits(run), config, split)
    except HubError as err:
        raise _Error(404, "ResponseNotFound", err.message) from None
    if view.error:
        raise _Error(500, "ComputationError", view.error)
    return view


def _api(fn):
    """Renders _Error as upstream does ({"error": ...}, its status, X-Error-Code) and says the server
    time in a Server-Timing header."""
    def view(request: HttpRequest) -> JsonResponse:
        t0 = time.perf_counter()
        try:
            resp = fn(request)
        except _Error as err:
            resp = _error(err.status, err.code, err.message)
        resp["Server-Timing"] = f"app;dur={(time.perf_counter() - t0) * 1000:.1f}"
        return resp

    view.__name__ = view.__qualname__ = fn.__name__
    view.__doc__ = fn.__doc__
    return require_GET(view)


@_api
def is_valid(request: HttpRequest) -> JsonResponse:
    _, run = _run(request)
    ok = run.state == ViewerRun.READY and any(not v.error and v.num_rows for v in viewer.splits(run))
    return JsonResponse({"preview": ok, "viewer": ok, "search": False, "filter": False, "statistics": False})


@_api
def splits(request: HttpRequest) -> JsonResponse:
    dataset, run = _run(request)
    _ready(run)
    views = viewer.splits(run)
    return JsonResponse({"splits": [{"dataset": dataset, "config": v.config, "split": v.split} for v in views],
                         "pending": [], "failed": []})


@_api
def first_rows(request: HttpRequest) -> JsonResponse:
    dataset, run = _run(request)
    view = _split(request, run)
    rows = viewer.rows(view, 0, FIRST_ROWS)
    return JsonResponse({"dataset": dataset, "config": view.config, "split": view.split, "features": view.features,
                         "rows": rows, "truncated": view.num_rows > len(rows)})


@_api
def rows(request: HttpRequest) -> JsonResponse:
    _, run = _run(request)
    offset, length = _int(request, "offset", 0), _int(request, "length", viewer.MAX_LENGTH)
    if length > viewer.MAX_LENGTH:
        raise _Error(422, "InvalidParameter", f"Parameter 'length' must not be greater than {viewer.MAX_LENGTH}")
    view = _split(request, run)
    return JsonResponse({"features": view.features, "rows": viewer.rows(view, offset, length),
                         "num_rows_total": view.num_rows, "num_rows_per_page": viewer.MAX_LENGTH,
                         "partial": view.partial})


def _features_dict(view: viewer.SplitView) -> dict:
    return {f["name"]: f["type"] for f in view.features}


@_api
def info(request: HttpRequest) -> JsonResponse:
    dataset, run = _run(request)
    _ready(run)
    views = viewer.splits(run)
    config = request.GET.get("config") or (views[0].config if views else "default")
    mine = [v for v in views if v.config == config]
    if not mine:
        raise _Error(404, "ResponseNotFound", f"Not found: no config {config!r}.")
    return JsonResponse({"dataset_info": {
        "description": "", "citation": "", "homepage": "", "license": "",
        "features": _features_dict(mine[0]), "builder_name": "parquet", "config_name": config,
        "dataset_name": dataset.split("/")[-1],
        "splits": {v.split: {"name": v.split, "num_bytes": v.num_bytes, "num_examples": v.num_rows,
                             "dataset_name": dataset.split("/")[-1]} for v in mine},
        "dataset_size": sum(v.num_bytes for v in mine)}, "partial": any(v.partial for v in mine)})


@_api
def size(request: HttpRequest) -> JsonResponse:
    dataset, run = _run(request)
    _ready(run)
    views = viewer.splits(run)
    split_sizes = [{"dataset": dataset, "config": v.config, "split": v.split, "num_bytes_memory": v.num_bytes,
                    "num_rows": v.num_rows, "num_columns": len(v.features)} for v in views]
    configs: dict[str, dict] = {}
    for s in split_sizes:
        c = configs.setdefault(s["config"], {"dataset": dataset, "config": s["config"], "num_bytes_memory": 0,
                                             "num_rows": 0, "num_columns": s["num_columns"]})
        c["num_bytes_memory"] += s["num_bytes_memory"]
        c["num_rows"] += s["num_rows"]
    return JsonResponse({"size": {
        "dataset": {"dataset": dataset, "num_bytes_memory": sum(s["num_bytes_memory"] for s in split_sizes),
                    "num_rows": sum(s["num_rows"] for s in split_sizes)},
        "configs": list(configs.values()), "splits": split_sizes},
        "pending": [], "failed": [], "partial": any(v.partial for v in views)})
