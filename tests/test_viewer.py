"""The dataset viewer, on both backends over HTTP: datasets pushed with the stock huggingface_hub
client (LFS here, Xet from a client process of its own), read back through the datasets-server API
(/api/datasets-server/…, upstream's routes, parameters and JSON) and on the dataset's page.

Personas: alice owns the datasets; bob has no rights on them; an anonymous visitor reads.
Each hub gets its datasets once (module-scoped); HUB_VIEWER_MAX_BYTES is 2 MB on test hubs."""
from __future__ import annotations

import csv
import io
import json
import os
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import requests

from tests.conftest import one_backend
from tests.support.hf_client import check_ok, client_env, run_client
from tests.support.web import SHOTS

CHROMIUM = os.environ.get("HUB_TEST_CHROMIUM", "/usr/bin/chromium")
API = "/api/datasets-server"
LONG = "a long cell " * 40


def text_of(i: int) -> str:
    return LONG if i == 3 else f"row {i} says 你好"


def csv_bytes(n: int, start: int = 0, sep: str = ",") -> bytes:
    out = io.StringIO()
    w = csv.writer(out, delimiter=sep, lineterminator="\n")
    w.writerow(["id", "text", "score"])
    for i in range(start, start + n):
        w.writerow([i, text_of(i), i / 2])
    return out.getvalue().encode()


def parquet_bytes(n: int, *, row_group_size: int | None = None) -> bytes:
    table = pa.table({
        "id": pa.array(range(n), pa.int64()),
        "text": [f"pq {i}" for i in range(n)],
        "tags": [[f"t{i % 3}", "x"] for i in range(n)],
        "meta": [{"a": i, "b": f"b{i}"} for i in range(n)],
    })
    buf = io.BytesIO()
    pq.write_table(table, buf, row_group_size=row_group_size or n)
    return buf.getvalue()


CONFIGS_README = """---
configs:
- config_name: en
  data_files:
  - split: train
    path: en/train.jsonl
  - split: test
    path: en/test.jsonl
- config_name: zh
  data_files: zh/*.json
---
# Two configs
"""

XET_UPLOAD = """
import os
from huggingface_hub import HfApi
api = HfApi()
api.create_repo(os.environ["T_REPO"], repo_type="dataset")
api.upload_folder(folder_path=os.environ["T_FOLDER"], repo_id=os.environ["T_REPO"], repo_type="dataset")
"""


def jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()


class Datasets:
    """alice's datasets on one hub, pushed once and read by every test of the module."""

    def __init__(self, hub, tmp: Path) -> None:
        self.hub, s = hub, uuid.uuid4().hex[:6]
        self.alice, self.bob = hub.cached_token("alice"), hub.cached_token("bob")
        api = hub.api(self.alice)
        self.ids = {k: f"alice/v{k}-{s}" for k in ("csv", "pq", "conf", "big", "broken", "priv", "gated", "xet")}
        files = {
            "csv": {"train.csv": csv_bytes(250), "test.csv": csv_bytes(30, 1000), "notes.txt": b"not data",
                    "README.md": b"# CSV splits\n"},
            "pq": {"data/train-00000-of-00001.parquet": parquet_bytes(60_000),
                   "data/test-00000-of-00001.parquet": parquet_bytes(10)},
            "conf": {"README.md": CONFIGS_README.encode(),
                     "en/train.jsonl": jsonl([{"q": f"q{i}", "n": i} for i in range(5)]),
                     "en/test.jsonl": jsonl([{"q": "t", "n": 99}]),
                     "zh/data.json": json.dumps([{"q": "你好", "n": 1}, {"q": "再见", "n": 2}]).encode()},
            "big": {"big.tsv": csv_bytes(60_000, sep="\t")},
            "broken": {"train.jsonl": b'{"a": 1}\n{"a": 2, oops\n'},
            "priv": {"train.csv": csv_bytes(5)},
            "gated": {"train.csv": csv_bytes(5)},
        }
        for kind, content in files.items():
            api.create_repo(self.ids[kind], repo_type="dataset", private=kind == "priv")
            folder = tmp / kind
            for rel, data in content.items():
                (folder / rel).parent.mkdir(parents=True, exist_ok=True)
                (folder / rel).write_bytes(data)
            api.upload_folder(folder_path=str(folder), repo_id=self.ids[kind], repo_type="dataset")
        api.update_repo_settings(self.ids["gated"], gated="auto", repo_type="dataset")
        # through Xet: a client process with default settings
        (tmp / "xet").mkdir()
        (tmp / "xet" / "train.parquet").write_bytes(parquet_bytes(500, row_group_size=100))
        check_ok(run_client(XET_UPLOAD, client_env(hub, self.alice, tmp / "xet-home", T_REPO=self.ids["xet"],
                                                   T_FOLDER=str(tmp / "xet"))))
        for kind in self.ids:
            self.wait(kind)

    def get(self, route: str, kind: str, token: str | None = "alice", **params) -> requests.Response:
        tok = {"alice": self.alice, "bob": self.bob, None: None}[token]
        headers = {"Authorization": f"Bearer {tok}"} if tok else {}
        return requests.get(f"{self.hub.url}{API}/{route}", params={"dataset": self.ids[kind]} | params,
                            headers=headers, timeout=30)

    def wait(self, kind: str, limit: float = 60) -> None:
        deadline = time.time() + limit
        while time.time() < deadline:
            r = self.get("splits", kind)
            if r.status_code != 500 or r.headers.get("X-Error-Code") != "ResponseNotReady":
                return
            time.sleep(0.2)
        raise AssertionError(f"the viewer of {kind} was not ready in {limit} s: {r.text}")

    def runs(self, kind: str) -> list[dict]:
        out = self.hub.manage("shell", "-c", (
            "import json; from hub.viewer.models import ViewerRun; "
            f"print(json.dumps(list(ViewerRun.objects.filter(repo__name='{self.ids[kind].split('/')[1]}')"
            ".order_by('pk').values('state', 'attempts', 'files'))))")).stdout
        return json.loads(out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def all_datasets():
    return {}


@pytest.fixture
def ds(hub, all_datasets, tmp_path_factory) -> Datasets:
    if hub.name not in all_datasets:
        all_datasets[hub.name] = Datasets(hub, tmp_path_factory.mktemp(f"viewer-{hub.name}"))
    return all_datasets[hub.name]


def values(resp: requests.Response, column: str) -> list:
    return [r["row"][column] for r in resp.json()["rows"]]


# --- the API ------------------------------------------------------------------------------------------

def test_it_infers_splits_from_file_names_and_serves_schema_and_rows(ds):
    r = ds.get("splits", "csv")
    assert r.status_code == 200, r.text
    assert r.json() == {"splits": [{"dataset": ds.ids["csv"], "config": "default", "split": "train"},
                                   {"dataset": ds.ids["csv"], "config": "default", "split": "test"}],
                        "pending": [], "failed": []}
    assert ds.get("is-valid", "csv").json() == {"preview": True, "viewer": True, "search": False, "filter": False,
                                                 "statistics": False}
    first = ds.get("first-rows", "csv", config="default", split="train").json()
    assert first["features"] == [
        {"feature_idx": 0, "name": "id", "type": {"dtype": "int64", "_type": "Value"}},
        {"feature_idx": 1, "name": "text", "type": {"dtype": "string", "_type": "Value"}},
        {"feature_idx": 2, "name": "score", "type": {"dtype": "float64", "_type": "Value"}}]
    assert first["dataset"] == ds.ids["csv"] and first["config"] == "default" and first["split"] == "train"
    assert len(first["rows"]) == 100 and first["truncated"] is True
    assert first["rows"][3] == {"row_idx": 3, "row": {"id": 3, "text": LONG, "score": 1.5}, "truncated_cells": []}
    # pages: offset and length
    page = ds.get("rows", "csv", config="default", split="train", offset=240, length=20)
    body = page.json()
    assert body["num_rows_total"] == 250 and body["num_rows_per_page"] == 100 and body["partial"] is False
    assert [r["row_idx"] for r in body["rows"]] == list(range(240, 250))
    assert values(page, "text") == [text_of(i) for i in range(240, 250)]
    assert "app;dur=" in page.headers["Server-Timing"]
    test = ds.get("rows", "csv", config="default", split="test", offset=0, length=100).json()
    assert test["num_rows_total"] == 30 and test["rows"][0]["row"]["id"] == 1000
    assert ds.get("rows", "csv", config="default", split="train", offset=500).json()["rows"] == []
    size = ds.get("size", "csv").json()["size"]
    assert size["dataset"]["num_rows"] == 280 and {s["split"]: s["num_rows"] for s in size["splits"]} == {
        "train": 250, "test": 30}
    info = ds.get("info", "csv").json()["dataset_info"]
    assert info["splits"]["train"]["num_examples"] == 250 and info["features"]["id"] == {"dtype": "int64",
                                                                                       "_type": "Value"}


def test_parquet_row_groups_nested_values_and_the_data_dir_layout(ds):
    assert [s["split"] for s in ds.get("splits", "pq").json()["splits"]] == ["train", "test"]
    page = ds.get("rows", "pq", config="default", split="train", offset=59_990, length=10)
    body = page.json()
    assert body["num_rows_total"] == 60_000
    assert body["rows"][0] == {"row_idx": 59_990, "truncated_cells": [], "row": {
        "id": 59_990, "text": "pq 59990", "tags": ["t2", "x"], "meta": {"a": 59_990, "b": "b59990"}}}
    assert len(body["rows"]) == 10
    assert body["features"][2:] == [
        {"feature_idx": 2, "name": "tags", "type": {"feature": {"dtype": "string", "_type": "Value"}, "_type": "List"}},
        {"feature_idx": 3, "name": "meta", "type": {"a": {"dtype": "int64", "_type": "Value"},
                                                    "b": {"dtype": "string", "_type": "Value"}}}]
    assert ds.get("rows", "pq", config="default", split="test").json()["num_rows_total"] == 10


def test_a_readme_configs_block_names_configs_and_splits(ds):
    splits = [(s["config"], s["split"]) for s in ds.get("splits", "conf").json()["splits"]]
    assert splits == [("en", "train"), ("en", "test"), ("zh", "train")]
    assert values(ds.get("rows", "conf", config="zh", split="train"), "q") == ["你好", "再见"]
    assert values(ds.get("rows", "conf", config="en", split="test"), "n") == [99]
    assert ds.get("rows", "conf", config="default", split="train").status_code == 404


def test_a_file_over_the_limit_shows_its_first_rows_as_partial(ds):
    body = ds.get("rows", "big", config="default", split="train", offset=0, length=5).json()
    assert body["partial"] is True and 1000 < body["num_rows_total"] < 60_000
    last = body["num_rows_total"] - 1
    tail = ds.get("rows", "big", config="default", split="train", offset=last, length=5).json()["rows"]
    assert tail == [{"row_idx": last, "row": {"id": last, "text": text_of(last), "score": last / 2},
                     "truncated_cells": []}]
    assert ds.get("size", "big").json()["partial"] is True


def test_xet_stored_files_are_read_like_lfs_ones(ds):
    tree = requests.get(f"{ds.hub.url}/api/datasets/{ds.ids['xet']}/tree/main", timeout=30,
                        headers={"Authorization": f"Bearer {ds.alice}"}).json()
    assert any(e["path"] == "train.parquet" and e.get("xetHash") for e in tree)
    body = ds.get("rows", "xet", config="default", split="train", offset=195, length=10).json()
    assert body["num_rows_total"] == 500 and values_of(body, "id") == list(range(195, 205))


def values_of(body: dict, column: str) -> list:
    return [r["row"][column] for r in body["rows"]]


def test_errors_and_access_as_the_other_read_doors(ds):
    err = ds.get("rows", "priv", token=None, config="default", split="train")
    assert err.status_code == 404 and set(err.json()) == {"error"} and "does not exist" in err.json()["error"]
    assert ds.get("splits", "priv", token="bob").status_code == 404
    assert ds.get("splits", "priv").status_code == 200
    gated = ds.get("first-rows", "gated", token=None, config="default", split="train")
    assert gated.status_code == 401 and "restricted" in gated.json()["error"]
    assert ds.get("first-rows", "gated", token="bob", config="default", split="train").status_code == 403
    assert ds.get("first-rows", "gated", config="default", split="train").status_code == 200  # (its owner)
    model = f"alice/vmodel-{uuid.uuid4().hex[:6]}"
    ds.hub.api(ds.alice).create_repo(model)
    r = requests.get(f"{ds.hub.url}{API}/splits", params={"dataset": model}, timeout=30,
                     headers={"Authorization": f"Bearer {ds.alice}"})
    assert r.status_code == 404 and r.headers["X-Error-Code"] == "ResponseNotFound"
    missing = ds.get("rows", "csv", config="default", split="nope")
    assert missing.status_code == 404 and "nope" in missing.json()["error"]
    assert ds.get("rows", "csv", config="default").status_code == 422
    assert ds.get("rows", "csv", config="default", split="train", length=101).status_code == 422
    assert requests.get(f"{ds.hub.url}{API}/splits", timeout=30).json() == {"error": "Parameter 'dataset' is required"}
    broken = ds.get("first-rows", "broken", config="default", split="train")
    assert broken.status_code == 500 and "could not read this JSONL file" in broken.json()["error"]
    assert ds.get("is-valid", "broken").json()["viewer"] is False


# --- the pages ----------------------------------------------------------------------------------------

def page(ds, kind: str, path: str = "", **params) -> str:
    r = requests.get(f"{ds.hub.url}/datasets/{ds.ids[kind]}{path}", params=params, timeout=30)
    assert r.status_code == 200, r.text[:300]
    return r.text


def test_the_dataset_page_shows_schema_count_and_a_page_of_rows(ds):
    html = page(ds, "csv")
    assert 'id="viewer-table"' in html and "250 rows" in html and "int64" in html
    assert "row 0 says 你好" in html and "row 19 says 你好" in html and "row 20 says" not in html
    assert "<details><summary>a long cell" in html  # long text is cut, the rest one click away
    second = page(ds, "csv", split="test", config="default", vp=2)
    assert "row 1020 says" in second and "row 1019 says" not in second and "page 2 of 2" in second
    conf = page(ds, "conf", config="zh", split="train")
    assert "再见" in conf and "en / test" in conf
    assert "partial: only the first rows are shown" in page(ds, "big")
    assert "could not read this JSONL file" in page(ds, "broken")
    # a file's own page: a table instead of raw text (CSV) or "no preview" (Parquet)
    blob = page(ds, "pq", "/blob/main/data/train-00000-of-00001.parquet", vp=3)
    assert 'id="viewer-table"' in blob and "No preview" not in blob and "pq 40<" in blob
    assert 'id="viewer-table"' in page(ds, "csv", "/blob/main/test.csv")
    assert "viewer-table" not in page(ds, "csv", "/blob/main/notes.txt")


def test_the_page_says_when_the_viewer_is_being_prepared_or_failed(ds):
    name = ds.ids["csv"].split("/")[1]
    set_state = ("from hub.viewer.models import ViewerRun; "
                 f"ViewerRun.objects.filter(repo__name='{name}').update(state='{{}}')")
    ds.hub.manage("shell", "-c", set_state.format("pending"))
    try:
        assert 'id="viewer-pending"' in page(ds, "csv")
        assert ds.get("rows", "csv", config="default", split="train").headers["X-Error-Code"] == "ResponseNotReady"
    finally:
        ds.hub.manage("shell", "-c", set_state.format("ready"))


def test_a_run_whose_worker_died_is_computed_again_when_someone_asks(ds):
    hub = ds.hub
    repo = f"alice/vdead-{uuid.uuid4().hex[:6]}"
    api = hub.api(ds.alice)
    api.create_repo(repo, repo_type="dataset")
    api.upload_file(path_or_fileobj=csv_bytes(31, 50), path_in_repo="train.csv", repo_id=repo, repo_type="dataset")
    ds.ids["dead"] = repo
    ds.wait("dead")
    # the worker died mid-run an hour ago: the row still says "running", with nothing recorded
    hub.manage("shell", "-c", (
        "import datetime; from django.utils import timezone; from hub.viewer.models import ViewerRun; "
        f"ViewerRun.objects.filter(repo__name='{repo.split('/')[1]}').update(state='running', splits=[], files={{}}, "
        "started=timezone.now() - datetime.timedelta(hours=1))"))
    assert ds.get("rows", "dead", config="default", split="train").headers["X-Error-Code"] == "ResponseNotReady"
    ds.wait("dead")
    assert [(r["state"], r["attempts"]) for r in ds.runs("dead")] == [("ready", 2)]
    assert values(ds.get("rows", "dead", config="default", split="train", length=2), "id") == [50, 51]


def test_the_viewer_is_computed_once_per_commit_and_unchanged_files_are_not_read_again(ds):
    for _ in range(2):
        page(ds, "csv")
        ds.get("rows", "csv", config="default", split="train", offset=100)
    runs = ds.runs("csv")
    assert [(r["state"], r["attempts"]) for r in runs] == [("ready", 1)]
    ds.hub.api(ds.alice).upload_file(path_or_fileobj=b"# CSV splits, edited\n", path_in_repo="README.md",
                                      repo_id=ds.ids["csv"], repo_type="dataset")
    deadline = time.time() + 30
    while time.time() < deadline and [r["state"] for r in ds.runs("csv")] != ["ready", "ready"]:
        time.sleep(0.2)
    first, second = ds.runs("csv")
    assert second["attempts"] == 1 and second["files"] == first["files"]  # (the same readings of the same bytes)
    assert values(ds.get("rows", "csv", config="default", split="train", length=2), "id") == [0, 1]


def test_gc_removes_the_copies_of_a_deleted_dataset_and_keeps_the_rest(ds):
    hub = ds.hub
    repo = f"alice/vgc-{uuid.uuid4().hex[:6]}"
    api = hub.api(ds.alice)
    api.create_repo(repo, repo_type="dataset")
    api.upload_file(path_or_fileobj=csv_bytes(77, 5000), path_in_repo="train.csv", repo_id=repo, repo_type="dataset")
    deadline = time.time() + 60
    while (r := requests.get(f"{hub.url}{API}/rows", params={"dataset": repo, "config": "default", "split": "train"},
                             headers={"Authorization": f"Bearer {ds.alice}"}, timeout=30)).status_code != 200:
        assert time.time() < deadline, r.text
        time.sleep(0.2)
    copies = ("import json; from hub.viewer.models import ViewerFile; "
              "print(json.dumps(sorted(ViewerFile.objects.values_list('key', flat=True))))")

    def keys() -> list[str]:
        return json.loads(hub.manage("shell", "-c", copies).stdout.strip().splitlines()[-1])

    before = keys()
    api.delete_repo(repo, repo_type="dataset")
    # another dataset's viewer being computed meanwhile (as in a full run, where other tests' pushes
    # keep workers busy) holds back nothing but what that run may be writing
    name = ds.ids["csv"].split("/")[1]
    set_state = ("from django.utils import timezone; from hub.viewer.models import ViewerRun; "
                 f"ViewerRun.objects.filter(repo__name='{name}').update(state='{{}}', started=timezone.now())")
    hub.manage("shell", "-c", set_state.format("running"))
    try:
        report = json.loads(hub.manage("hub_gc", "--grace", "0").stdout.strip().splitlines()[-1])
    finally:
        hub.manage("shell", "-c", set_state.format("ready"))
    assert report["collected"]["viewer"]["copies_deleted"] >= 1, report
    assert report["collected"]["viewer"]["objects_deleted"] >= 1, report
    assert len(keys()) < len(before)
    # the other datasets' copies stay
    assert values(ds.get("rows", "csv", config="default", split="train", length=2), "id") == [0, 1]
    assert ds.get("rows", "pq", config="default", split="train", offset=50_000, length=1).status_code == 200


def test_a_celery_worker_computes_the_viewer(celery_hub, tmp_path):
    token = celery_hub.cached_token("alice")
    repo = f"alice/vcelery-{uuid.uuid4().hex[:6]}"
    api = celery_hub.api(token)
    api.create_repo(repo, repo_type="dataset")
    api.upload_file(path_or_fileobj=csv_bytes(42), path_in_repo="train.csv", repo_id=repo, repo_type="dataset")
    deadline, r = time.time() + 60, None
    while time.time() < deadline:
        r = requests.get(f"{celery_hub.url}{API}/rows", params={"dataset": repo, "config": "default",
                                                                "split": "train"}, timeout=30,
                         headers={"Authorization": f"Bearer {token}"})
        if r.status_code == 200:
            break
        time.sleep(0.3)
    assert r.status_code == 200 and r.json()["num_rows_total"] == 42, r.text
    assert "hub.viewer.tasks.compute_viewer" in (celery_hub.data_dir / "worker.log").read_text(errors="replace")


# --- in a browser -------------------------------------------------------------------------------------

@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}")
def test_a_browser_pages_through_the_rows(ds, browser):
    one_backend(ds.hub)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        pg = context.new_page()
        pg.goto(f"{ds.hub.url}/datasets/{ds.ids['csv']}")
        table = pg.locator("#viewer-table")
        assert table.locator("tbody tr").count() == 20
        assert table.locator("tbody tr").first.locator("td").nth(2).inner_text() == "row 0 says 你好"
        assert "250 rows" in pg.locator("#viewer-count").inner_text()
        long_cell = table.locator("details").first
        long_cell.locator("summary").click()
        assert long_cell.locator(".cell-full").is_visible()
        SHOTS.mkdir(parents=True, exist_ok=True)
        pg.screenshot(path=str(SHOTS / f"{ds.hub.name}-dataset-viewer.png"), full_page=True)
        pg.click("#viewer-next")
        pg.wait_for_url("**vp=2**")
        assert table.locator("tbody tr").first.locator("td").nth(2).inner_text() == "row 20 says 你好"
        assert "page 2 of 13" in pg.locator("#viewer-pages").inner_text()
    finally:
        context.close()
