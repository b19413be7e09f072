"""Reading repos with the stock huggingface_hub client: downloads by every kind of revision, the cache
layout, snapshots, listings, repo info, HfFileSystem, and the Range/redirect rules of /resolve/.

Repos are made through the real client (create_repo / create_commit / upload_file); every check
compares bytes or exact protocol values, so a server that serves the wrong thing fails here."""

from __future__ import annotations

import hashlib
import io
import random
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests
from huggingface_hub import (
    CommitOperationAdd,
    HfFileSystem,
    file_download,
    hf_hub_download,
    snapshot_download,
)

LFS_SIZE = 10 * 2**20 + 4321  # above the hub's 10 MB LFS threshold
TREE_FILES = 1100  # more than one 1000-entry tree page


def git_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def random_bytes(n: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(n)


@dataclass
class Sample:
    """A model repo with two commits and a tag on the first one."""

    repo_id: str
    token: str
    first: str  # commit id of the first upload, tagged v1
    head: str  # commit id of main
    files: dict[str, bytes]  # content at head
    old_config: bytes  # config.json at `first`


@pytest.fixture(scope="module")
def alice(hub) -> str:
    return hub.cached_token("alice")


@pytest.fixture(scope="module")
def sample(hub, alice) -> Sample:
    # Module-scoped (the function-scoped `unique` fixture cannot feed it): one random name per hub.
    repo_id = f"alice/read-{uuid.uuid4().hex[:8]}"
    api = hub.api(alice)
    api.create_repo(repo_id)
    old_config = b'{"hidden_size": 8}\n'
    files = {
        "config.json": b'{"hidden_size": 16}\n',
        "README.md": b"---\nlicense: mit\n---\n# Sample\n",
        "weights/model.safetensors": random_bytes(300_000, 1),
        "data/train/part-0.csv": b"a,b\n1,2\n",
        "data/train/part-1.csv": b"a,b\n3,4\n",
        "data/test/part-0.csv": b"a,b\n5,6\n",
        "empty.txt": b"",
    }
    first = api.create_commit(
        repo_id,
        commit_message="first",
        operations=[CommitOperationAdd(p, c) for p, c in files.items() if p != "config.json"]
        + [CommitOperationAdd("config.json", old_config)],
    ).oid
    api.create_tag(repo_id, tag="v1", revision=first)
    api.upload_file(repo_id=repo_id, path_in_repo="config.json", path_or_fileobj=files["config.json"])
    files["big.bin"] = random_bytes(LFS_SIZE, 2)
    # A BytesIO stays on the plain LFS path even with hf_xet installed.
    head = api.upload_file(
        repo_id=repo_id, path_in_repo="big.bin", path_or_fileobj=io.BytesIO(files["big.bin"])
    ).oid
    # The hub writes .gitattributes in the repo's initial commit.
    files[".gitattributes"] = requests.get(
        f"{hub.url}/{repo_id}/resolve/{head}/.gitattributes", headers=auth(alice), timeout=30
    ).content
    return Sample(repo_id, alice, first, head, files, old_config)


def resolve_url(hub, repo_id: str, rev: str, path: str) -> str:
    return f"{hub.url}/{repo_id}/resolve/{rev}/{path}"


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def repo_cache(cache: Path, repo_id: str, kind: str = "models") -> Path:
    return cache / f"{kind}--{repo_id.replace('/', '--')}"


def get_bytes(hub, url: str, token: str, headers: dict[str, str] | None = None) -> requests.Response:
    """GET a /resolve/ URL the way the client does. On pg_rgw the hub answers 302 to a presigned URL on
    the RGW origin, followed without the hub's Authorization; on embedded the hub streams the bytes."""
    resp = requests.get(url, headers=auth(token) | (headers or {}), allow_redirects=False, timeout=30)
    if hub.name == "pg_rgw":
        assert resp.status_code == 302, resp.text
        location = resp.headers["Location"]
        assert urlsplit(location)[:2] != urlsplit(hub.url)[:2], (
            "presigned URL must not be on the hub's origin"
        )
        assert urlsplit(location)[:2] == urlsplit(hub.env["AWS_ENDPOINT_URL"])[:2], location
        assert resp.headers["Cache-Control"] == "no-store"
        assert len(resp.headers["X-Repo-Commit"]) == 40
        resp = requests.get(location, headers=headers or {}, allow_redirects=False, timeout=30)
    else:
        assert resp.status_code in (200, 206, 416), (resp.status_code, resp.text)
    return resp


# --- hf_hub_download ------------------------------------------------------------------------------


def test_it_downloads_by_branch_tag_and_full_commit(hub, sample, tmp_path):
    cache = tmp_path / "cache"
    for rev, expected in [
        ("main", sample.files["config.json"]),
        ("v1", sample.old_config),
        (sample.first, sample.old_config),
        (sample.head, sample.files["config.json"]),
    ]:
        path = hf_hub_download(
            sample.repo_id, "config.json", revision=rev, endpoint=hub.url, token=sample.token, cache_dir=cache
        )
        assert Path(path).read_bytes() == expected, rev
    root = repo_cache(cache, sample.repo_id)
    assert (root / "refs" / "main").read_text() == sample.head
    assert (root / "refs" / "v1").read_text() == sample.first
    for commit, expected in [(sample.head, sample.files["config.json"]), (sample.first, sample.old_config)]:
        link = root / "snapshots" / commit / "config.json"
        assert link.is_symlink()
        blob = link.resolve()
        assert blob.parent == (root / "blobs").resolve()
        assert blob.name == git_oid(expected)  # regular files: the git blob sha1 is the etag
        assert blob.read_bytes() == expected
    # Nested path and an LFS file (blob named by its sha256).
    path = hf_hub_download(
        sample.repo_id, "weights/model.safetensors", endpoint=hub.url, token=sample.token, cache_dir=cache
    )
    assert Path(path).read_bytes() == sample.files["weights/model.safetensors"]
    assert Path(path) == root / "snapshots" / sample.head / "weights" / "model.safetensors"
    path = hf_hub_download(sample.repo_id, "big.bin", endpoint=hub.url, token=sample.token, cache_dir=cache)
    assert Path(path).resolve().name == sha256(sample.files["big.bin"])
    assert Path(path).read_bytes() == sample.files["big.bin"]


def test_it_downloads_by_short_commit_id(hub, sample, tmp_path):
    short = sample.first[:10]
    path = hf_hub_download(
        sample.repo_id,
        "config.json",
        revision=short,
        endpoint=hub.url,
        token=sample.token,
        cache_dir=tmp_path,
    )
    assert Path(path).read_bytes() == sample.old_config
    # The snapshot is filed under the full commit id the server resolved the short one to.
    assert Path(path) == repo_cache(tmp_path, sample.repo_id) / "snapshots" / sample.first / "config.json"
    head = requests.head(
        resolve_url(hub, sample.repo_id, short, "config.json"), headers=auth(sample.token), timeout=10
    )
    assert head.status_code == 200
    assert head.headers["X-Repo-Commit"] == sample.first
    resp = get_bytes(hub, resolve_url(hub, sample.repo_id, short, "config.json"), sample.token)
    assert resp.status_code == 200 and resp.content == sample.old_config
    info = hub.api(sample.token).model_info(sample.repo_id, revision=sample.first[:7])
    assert info.sha == sample.first


def test_it_downloads_an_empty_file(hub, sample, tmp_path):
    path = hf_hub_download(
        sample.repo_id, "empty.txt", endpoint=hub.url, token=sample.token, cache_dir=tmp_path
    )
    assert Path(path).read_bytes() == b""
    assert Path(path).resolve().name == git_oid(b"")
    head = requests.head(
        resolve_url(hub, sample.repo_id, "main", "empty.txt"), headers=auth(sample.token), timeout=10
    )
    assert head.headers["X-Linked-Size"] == "0"
    resp = get_bytes(hub, resolve_url(hub, sample.repo_id, "main", "empty.txt"), sample.token)
    assert resp.status_code == 200 and resp.content == b""
    assert resp.headers["Content-Length"] == "0"


def test_it_snapshots_with_patterns_and_revision(hub, sample, tmp_path):
    kw = dict(endpoint=hub.url, token=sample.token)
    folder = Path(
        snapshot_download(
            sample.repo_id, cache_dir=tmp_path / "a", allow_patterns=["data/**", "*.json"], **kw
        )
    )
    assert folder.name == sample.head
    got = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    assert got == {p: c for p, c in sample.files.items() if p.startswith("data/") or p == "config.json"}

    folder = Path(
        snapshot_download(
            sample.repo_id,
            cache_dir=tmp_path / "b",
            ignore_patterns=["*.bin", "data/train/*", "weights/*"],
            **kw,
        )
    )
    got = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    assert got == {
        p: c
        for p, c in sample.files.items()
        if p not in ("big.bin", "weights/model.safetensors") and not p.startswith("data/train/")
    }

    for rev in ("v1", sample.first):
        folder = Path(
            snapshot_download(
                sample.repo_id, cache_dir=tmp_path / "c", revision=rev, allow_patterns="*.json", **kw
            )
        )
        assert folder.name == sample.first
        assert (folder / "config.json").read_bytes() == sample.old_config
        assert not (folder / "big.bin").exists()  # big.bin came later


def test_it_continues_an_interrupted_download_with_a_range_request(hub, sample, tmp_path, monkeypatch):
    """The connection drops mid-body: the client asks for the rest with `Range: bytes=<received>-`
    and the server must answer exactly that rest."""
    data = sample.files["weights/model.safetensors"]
    sent_ranges: list[str | None] = []
    real = file_download.http_stream_backoff
    state = {"cut": False}

    @contextmanager
    def flaky(*args, **kwargs):
        sent_ranges.append((kwargs.get("headers") or {}).get("Range"))
        with real(*args, **kwargs) as response:
            if state["cut"]:
                yield response
                return
            state["cut"] = True
            chunks = response.iter_bytes

            def broken(chunk_size=None):
                got = 0
                for chunk in chunks(chunk_size=chunk_size):
                    yield chunk[: 1000 - got] if got + len(chunk) > 1000 else chunk
                    got += len(chunk)
                    if got >= 1000:
                        raise file_download.httpx2.RemoteProtocolError("simulated drop")

            response.iter_bytes = broken
            yield response

    monkeypatch.setattr(file_download, "http_stream_backoff", flaky)
    # A leftover partial file of an earlier run must not leak into the result either.
    root = repo_cache(tmp_path, sample.repo_id)
    (root / "blobs").mkdir(parents=True)
    (root / "blobs" / f"{git_oid(data)}.incomplete").write_bytes(b"\0" * 5000)
    path = hf_hub_download(
        sample.repo_id, "weights/model.safetensors", endpoint=hub.url, token=sample.token, cache_dir=tmp_path
    )
    assert Path(path).read_bytes() == data
    assert sent_ranges == [None, "bytes=1000-"]


def test_it_resumes_with_a_raw_range_request(hub, sample):
    data = sample.files["big.bin"]
    url = resolve_url(hub, sample.repo_id, "main", "big.bin")
    n = 3 * 2**20 + 7
    first = get_bytes(hub, url, sample.token, {"Range": f"bytes=0-{n - 1}"})
    assert first.status_code == 206 and first.content == data[:n]
    rest = get_bytes(hub, url, sample.token, {"Range": f"bytes={n}-"})
    assert rest.status_code == 206
    assert rest.headers["Content-Range"] == f"bytes {n}-{len(data) - 1}/{len(data)}"
    assert first.content + rest.content == data


# --- Range and headers on /resolve/ ---------------------------------------------------------------


@pytest.mark.parametrize(
    "spec,start,end",
    [
        ("bytes=0-0", 0, 0),
        ("bytes=10-99", 10, 99),
        ("bytes=299990-", 299990, 299999),
        ("bytes=-25", 299975, 299999),
        ("bytes=299000-400000", 299000, 299999),
    ],
)
def test_it_serves_byte_ranges(hub, sample, spec, start, end):
    data = sample.files["weights/model.safetensors"]
    resp = get_bytes(
        hub,
        resolve_url(hub, sample.repo_id, "main", "weights/model.safetensors"),
        sample.token,
        {"Range": spec},
    )
    assert resp.status_code == 206
    assert resp.headers["Content-Range"] == f"bytes {start}-{end}/{len(data)}"
    assert resp.headers["Content-Length"] == str(end - start + 1)
    assert resp.content == data[start : end + 1]


@pytest.mark.parametrize("path", ["weights/model.safetensors", "config.json"])
def test_it_refuses_a_range_starting_past_the_end(hub, sample, path):
    size = len(sample.files[path])
    for start in (size, size + 1000):
        # Followed to wherever the hub sends it: on pg_rgw the hub must refuse it itself, because
        # S3 engines answer 416 without Content-Range.
        resp = requests.get(
            resolve_url(hub, sample.repo_id, "main", path),
            timeout=30,
            headers=auth(sample.token) | {"Range": f"bytes={start}-"},
        )
        assert resp.status_code == 416
        assert resp.headers["Content-Range"] == f"bytes */{size}"


def test_it_answers_head_with_the_metadata_the_client_needs(hub, sample):
    data = sample.files["config.json"]
    resp = requests.head(
        resolve_url(hub, sample.repo_id, "main", "config.json"), headers=auth(sample.token), timeout=10
    )
    assert resp.status_code == 200
    assert resp.headers["X-Repo-Commit"] == sample.head
    assert resp.headers["X-Linked-Etag"].strip('"') == git_oid(data)
    assert resp.headers["X-Linked-Size"] == str(len(data))
    assert resp.headers["Accept-Ranges"] == "bytes"
    assert not any(k.lower().startswith("x-xet") for k in resp.headers)

    big = sample.files["big.bin"]
    resp = requests.head(
        resolve_url(hub, sample.repo_id, sample.head, "big.bin"), headers=auth(sample.token), timeout=10
    )
    assert resp.status_code == 200
    assert resp.headers["X-Repo-Commit"] == sample.head
    assert resp.headers["ETag"].strip('"') == sha256(big)
    assert resp.headers["X-Linked-Etag"].strip('"') == sha256(big)
    assert resp.headers["X-Linked-Size"] == str(len(big))

    resp = requests.head(
        resolve_url(hub, sample.repo_id, "v1", "config.json"), headers=auth(sample.token), timeout=10
    )
    assert resp.headers["X-Repo-Commit"] == sample.first
    assert resp.headers["X-Linked-Etag"].strip('"') == git_oid(sample.old_config)


def test_it_serves_whole_files_with_their_commit(hub, sample):
    data = sample.files["weights/model.safetensors"]
    resp = get_bytes(
        hub, resolve_url(hub, sample.repo_id, sample.first[:12], "weights/model.safetensors"), sample.token
    )
    assert resp.status_code == 200
    assert resp.headers["Content-Length"] == str(len(data))
    assert resp.content == data
    if hub.name == "embedded":
        assert resp.headers["X-Repo-Commit"] == sample.first
        assert "gzip" not in resp.headers.get("Content-Encoding", "")


# --- listings and repo info -----------------------------------------------------------------------


def test_it_lists_files_and_trees(hub, sample):
    api = hub.api(sample.token)
    assert sorted(api.list_repo_files(sample.repo_id)) == sorted(sample.files)
    assert "big.bin" not in api.list_repo_files(sample.repo_id, revision="v1")

    top = {e.path: e for e in api.list_repo_tree(sample.repo_id)}
    assert set(top) == {
        ".gitattributes",
        "README.md",
        "config.json",
        "empty.txt",
        "big.bin",
        "data",
        "weights",
    }
    assert type(top["data"]).__name__ == "RepoFolder"
    assert top["config.json"].size == len(sample.files["config.json"])
    assert top["config.json"].blob_id == git_oid(sample.files["config.json"])
    assert top["config.json"].lfs is None
    assert top["big.bin"].lfs.sha256 == sha256(sample.files["big.bin"])
    assert top["big.bin"].lfs.size == top["big.bin"].size == LFS_SIZE

    sub = {e.path for e in api.list_repo_tree(sample.repo_id, "data")}
    assert sub == {"data/train", "data/test"}
    deep = {e.path: type(e).__name__ for e in api.list_repo_tree(sample.repo_id, "data", recursive=True)}
    assert deep == {
        "data/train": "RepoFolder",
        "data/test": "RepoFolder",
        "data/train/part-0.csv": "RepoFile",
        "data/train/part-1.csv": "RepoFile",
        "data/test/part-0.csv": "RepoFile",
    }
    everything = {e.path for e in api.list_repo_tree(sample.repo_id, recursive=True, revision=sample.first)}
    assert everything == (set(sample.files) - {"big.bin"}) | {"data", "data/train", "data/test", "weights"}


def test_it_gives_paths_info_for_files_and_directories(hub, sample):
    api = hub.api(sample.token)
    got = {
        e.path: e
        for e in api.get_paths_info(
            sample.repo_id,
            ["config.json", "data/train", "big.bin", "no/such/file", "weights/model.safetensors"],
        )
    }
    assert set(got) == {"config.json", "data/train", "big.bin", "weights/model.safetensors"}
    assert type(got["data/train"]).__name__ == "RepoFolder"
    assert got["config.json"].size == len(sample.files["config.json"])
    assert got["big.bin"].lfs.sha256 == sha256(sample.files["big.bin"])
    old = api.get_paths_info(sample.repo_id, ["config.json"], revision="v1")
    assert [e.blob_id for e in old] == [git_oid(sample.old_config)]
    assert api.get_paths_info(sample.repo_id, ["nothing-here"]) == []


def test_it_gives_repo_info_with_siblings(hub, sample):
    api = hub.api(sample.token)
    info = api.model_info(sample.repo_id)
    assert info.id == sample.repo_id
    assert info.sha == sample.head
    assert sorted(s.rfilename for s in info.siblings) == sorted(sample.files)

    info = api.repo_info(sample.repo_id, files_metadata=True)
    sib = {s.rfilename: s for s in info.siblings}
    for path, data in sample.files.items():
        assert sib[path].size == len(data), path
    assert sib["config.json"].blob_id == git_oid(sample.files["config.json"])
    assert sib["config.json"].lfs is None
    assert sib["big.bin"].lfs.sha256 == sha256(sample.files["big.bin"])
    assert sib["big.bin"].lfs.size == LFS_SIZE

    old = api.model_info(sample.repo_id, revision="v1", files_metadata=True)
    assert old.sha == sample.first
    assert "big.bin" not in {s.rfilename for s in old.siblings}


def test_it_gives_dataset_info_and_dataset_downloads(hub, alice, unique, tmp_path):
    api = hub.api(alice)
    repo_id = f"alice/ds-{unique}"
    api.create_repo(repo_id, repo_type="dataset")
    rows = b"x,y\n" + b"".join(b"%d,%d\n" % (i, i * i) for i in range(1000))
    head = api.upload_file(
        repo_id=repo_id, repo_type="dataset", path_in_repo="data/rows.csv", path_or_fileobj=rows
    ).oid
    info = api.dataset_info(repo_id, files_metadata=True)
    assert info.sha == head
    assert {s.rfilename: s.size for s in info.siblings}["data/rows.csv"] == len(rows)
    path = hf_hub_download(
        repo_id, "data/rows.csv", repo_type="dataset", endpoint=hub.url, token=alice, cache_dir=tmp_path
    )
    assert Path(path).read_bytes() == rows
    assert Path(path) == repo_cache(tmp_path, repo_id, "datasets") / "snapshots" / head / "data" / "rows.csv"
    # The model namespace does not know this dataset.
    assert not api.repo_exists(repo_id)
    assert api.repo_exists(repo_id, repo_type="dataset")


def test_it_lists_models_and_datasets_by_search_and_author(hub, alice, unique):
    api = hub.api(alice)
    bob = hub.api(hub.cached_token("bob"))
    api.create_repo(f"alice/find-{unique}-one")
    api.create_repo(f"alice/find-{unique}-two")
    bob.create_repo(f"bob/find-{unique}-three")
    api.create_repo(f"alice/find-{unique}-data", repo_type="dataset")
    api.create_repo(f"alice/find-{unique}-secret", private=True)

    assert {m.id for m in bob.list_models(search=f"find-{unique}")} == {
        f"alice/find-{unique}-one",
        f"alice/find-{unique}-two",
        f"bob/find-{unique}-three",
    }
    assert {m.id for m in api.list_models(search=f"find-{unique}", author="alice")} == {
        f"alice/find-{unique}-one",
        f"alice/find-{unique}-two",
        f"alice/find-{unique}-secret",
    }
    assert {m.id for m in api.list_models(search=f"find-{unique}", author="bob")} == {
        f"bob/find-{unique}-three"
    }
    assert {m.id for m in api.list_models(search=f"-{unique}-tw")} == {f"alice/find-{unique}-two"}
    assert [m.id for m in api.list_models(search=f"nothing-{unique}")] == []
    assert {d.id for d in api.list_datasets(search=f"find-{unique}")} == {f"alice/find-{unique}-data"}
    assert {d.id for d in bob.list_datasets(author="alice", search=unique)} == {f"alice/find-{unique}-data"}
    listed = {m.id: m for m in api.list_models(search=f"find-{unique}-one")}
    assert listed[f"alice/find-{unique}-one"].sha == api.model_info(f"alice/find-{unique}-one").sha


def test_it_pages_trees_of_more_than_1000_entries(hub, alice, unique):
    api = hub.api(alice)
    repo_id = f"alice/many-{unique}"
    api.create_repo(repo_id)
    names = [f"many/f{i:04d}.txt" for i in range(TREE_FILES)]
    api.create_commit(
        repo_id,
        commit_message="many files",
        operations=[CommitOperationAdd(n, b"tiny\n") for n in names]
        + [CommitOperationAdd("top.txt", b"top")],
    )

    assert sorted(api.list_repo_files(repo_id)) == sorted(names + [".gitattributes", "top.txt"])
    assert [e.path for e in api.list_repo_tree(repo_id, "many")] == names
    deep = [e.path for e in api.list_repo_tree(repo_id, recursive=True)]
    assert sorted(deep) == sorted(names + [".gitattributes", "top.txt", "many"])
    assert len(deep) == len(set(deep))

    # The wire: the first page is capped at 1000 and names the next one with an absolute Link.
    url = f"{hub.url}/api/models/{repo_id}/tree/main/many"
    first = requests.get(url, headers=auth(alice), timeout=30)
    assert first.status_code == 200
    assert len(first.json()) == 1000
    assert first.links["next"]["url"].startswith(hub.url + "/")
    second = requests.get(first.links["next"]["url"], headers=auth(alice), timeout=30)
    assert [e["path"] for e in first.json() + second.json()] == names
    assert "next" not in second.links


# --- HfFileSystem ---------------------------------------------------------------------------------


def test_it_works_with_hffilesystem(hub, sample):
    fs = HfFileSystem(endpoint=hub.url, token=sample.token, skip_instance_cache=True)
    rid = sample.repo_id
    top = {e["name"]: e for e in fs.ls(rid, detail=True)}
    assert set(top) == {
        f"{rid}/{p}"
        for p in (".gitattributes", "README.md", "config.json", "empty.txt", "big.bin", "data", "weights")
    }
    assert top[f"{rid}/data"]["type"] == "directory"
    assert top[f"{rid}/config.json"]["size"] == len(sample.files["config.json"])

    info = fs.info(f"{rid}/big.bin")
    assert info["type"] == "file" and info["size"] == LFS_SIZE
    assert info["lfs"]["sha256"] == sha256(sample.files["big.bin"])
    assert fs.info(f"{rid}/data/train")["type"] == "directory"
    with pytest.raises(FileNotFoundError):
        fs.info(f"{rid}/data/nope.csv")

    data = sample.files["weights/model.safetensors"]
    with fs.open(f"{rid}/weights/model.safetensors", "rb", block_size=4096) as f:
        f.seek(123_457)
        assert f.read(10_000) == data[123_457:133_457]
        f.seek(-50, 2)
        assert f.read() == data[-50:]
    big = sample.files["big.bin"]
    with fs.open(f"{rid}/big.bin", "rb", block_size=2**20) as f:
        f.seek(LFS_SIZE - 2**20 - 99)
        assert f.read(2**20) == big[LFS_SIZE - 2**20 - 99 : LFS_SIZE - 99]
    assert fs.cat_file(f"{rid}/config.json") == sample.files["config.json"]
    assert fs.cat_file(f"{rid}@v1/config.json") == sample.old_config
    assert fs.cat_file(f"{rid}/config.json", start=2, end=8) == sample.files["config.json"][2:8]

    assert sorted(fs.glob(f"{rid}/data/**/*.csv")) == sorted(
        f"{rid}/{p}" for p in sample.files if p.endswith(".csv")
    )
    assert sorted(fs.glob(f"{rid}/data/train/*")) == [
        f"{rid}/data/train/part-0.csv",
        f"{rid}/data/train/part-1.csv",
    ]
    assert sorted(fs.find(rid)) == sorted(f"{rid}/{p}" for p in sample.files)
    assert sorted(fs.find(f"{rid}/data", withdirs=True)) == sorted(
        [f"{rid}/data", f"{rid}/data/train", f"{rid}/data/test"]
        + [f"{rid}/{p}" for p in sample.files if p.startswith("data/")]
    )
