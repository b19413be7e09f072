"""The dataset viewer on the web pages: what templates/web/_viewer.html shows for a dataset (its
splits, schema, row counts, a page of rows) or for one of its data files, read from what the
viewer's task computed (hub.viewer)."""
from __future__ import annotations

import json
from urllib.parse import urlencode

from django.http import HttpRequest

from hub.errors import HubError
from hub.repos.models import Commit, Repo
from hub.viewer import services as viewer
from hub.viewer.models import ViewerRun

PAGE = 20
SHORT = 120  # characters of a cell shown before "more"


def _type_label(t) -> str:
    if isinstance(t, dict) and t.get("_type") == "Value":
        return str(t.get("dtype"))
    if isinstance(t, dict) and t.get("_type") == "List":
        return f"list<{_type_label(t.get('feature'))}>"
    if isinstance(t, dict) and "_type" not in t:
        return "struct{" + ", ".join(f"{k}: {_type_label(v)}" for k, v in t.items()) + "}"
    return str(t.get("_type") if isinstance(t, dict) else t)


def _cell(value, truncated: bool) -> dict:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    long = len(text) > SHORT or "\n" in text or truncated
    return {"text": text, "short": text[:SHORT].split("\n")[0] + ("…" if long else ""), "long": long,
            "truncated": truncated, "null": value is None}


def context(request: HttpRequest, repo: Repo, commit: Commit, path: str | None = None) -> dict | None:
    """The viewer's part of a dataset page (or of the page of its data file `path`); None for a model
    or a file the viewer does not read."""
    run = viewer.run_of(repo, commit)
    if run is None:
        return None
    out: dict = {"state": run.state, "error": run.error}
    if run.state != ViewerRun.READY:
        return out
    if path is not None:
        view = viewer.file_view(run, path)
        if view is None:
            return None
        views = [view]
    else:
        views = viewer.splits(run)
        if not views:
            return None
    try:
        current = viewer.find_split(views, request.GET.get("config"), request.GET.get("split"))
    except HubError:
        current = views[0]
    try:
        number = max(1, int(request.GET.get("vp") or 1))
    except ValueError:
        number = 1
    pages = max(1, -(-current.num_rows // PAGE))
    number = min(number, pages)
    offset = (number - 1) * PAGE
    rows = viewer.rows(current, offset, PAGE) if not current.error else []
    names = [f["name"] for f in current.features]

    def link(page: int, v: viewer.SplitView = current) -> str:
        query = {"vp": page} if path is not None else {"config": v.config, "split": v.split, "vp": page}
        return "?" + urlencode(query) + "#viewer"

    out.update({
        "splits": [{"config": v.config, "split": v.split, "num_rows": v.num_rows, "link": link(1, v),
                    "current": v is current} for v in views] if path is None else [],
        "current": current,
        "columns": [{"name": f["name"], "type": _type_label(f["type"])} for f in current.features],
        "rows": [{"idx": r["row_idx"], "cells": [_cell(r["row"].get(n), n in r["truncated_cells"]) for n in names]}
                 for r in rows],
        "number": number, "pages": pages, "first": offset + 1 if rows else 0, "last": offset + len(rows),
        "prev": link(number - 1) if number > 1 else None, "next": link(number + 1) if number < pages else None,
    })
    return out
