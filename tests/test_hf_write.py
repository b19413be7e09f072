"""Writing to the hub with the stock huggingface_hub client: repos, commits, refs, LFS, dedupe.

alice owns the repos, bob is another logged-in user, anonymous callers pass no token. Every test
runs on both backends (`hub` fixture) and compares the bytes it downloads with those it uploaded.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
from pathlib import Path
from urllib.parse import urlparse

import pytest
import requests
from huggingface_hub import CommitOperationAdd, CommitOperationCopy, CommitOperationDelete
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

from tests.support.files import read_snapshot
from tests.support.hf import LFS_JSON, auth, git_blob_oid, lfs_batch, push_lfs, url_prefix
from tests.support.store import stored_objects

MiB = 2**20


# --- helpers ----------------------------------------------------------------------------------------


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def objects_named(hub, oid: str) -> list[str]:
    return [k for k in stored_objects(hub, "") if k.rsplit("/", 1)[-1].startswith(oid)]


@pytest.fixture
def lfs_calls(monkeypatch) -> list[tuple[str, str, int]]:
    """(method, url, status) of every LFS request the client makes in this test (batch, PUTs,
    completion, verify)."""
    import huggingface_hub.lfs as lfs

    calls: list[tuple[str, str, int]] = []
    real = lfs.http_backoff

    def spy(method, url, *args, **kwargs):
        resp = real(method, url, *args, **kwargs)
        calls.append((method, url, resp.status_code))
        return resp

    monkeypatch.setattr(lfs, "http_backoff", spy)
    return calls


# --- repos ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("repo_type", ["model", "dataset"])
def test_it_creates_private_repos_that_only_the_owner_sees(hub, alice, bob, unique, repo_type, hf_cache):
    api = hub.api(alice)
    repo_id = f"alice/private-{repo_type}-{unique}"
    url = api.create_repo(repo_id, repo_type=repo_type, private=True)
    assert url == f"{hub.url}/{url_prefix(repo_type)}{repo_id}"
    assert url.repo_id == repo_id

    info = api.repo_info(repo_id, repo_type=repo_type)
    assert info.private is True
    assert len(info.sha) == 40
    assert [s.rfilename for s in info.siblings] == [".gitattributes"]

    for other in (hub.api(bob), hub.api(None)):
        with pytest.raises(RepositoryNotFoundError):
            other.repo_info(repo_id, repo_type=repo_type)
        assert not other.repo_exists(repo_id, repo_type=repo_type)
        with pytest.raises(RepositoryNotFoundError):
            other.hf_hub_download(repo_id, ".gitattributes", repo_type=repo_type, cache_dir=str(hf_cache))
    listed = hub.api(bob).list_datasets if repo_type == "dataset" else hub.api(bob).list_models
    assert repo_id not in [r.id for r in listed(author="alice")]

    # exist_ok on an existing repo answers its URL; without it the client raises.
    assert api.create_repo(repo_id, repo_type=repo_type, private=True, exist_ok=True) == url
    with pytest.raises(HfHubHTTPError) as err:
        api.create_repo(repo_id, repo_type=repo_type)
    assert err.value.response.status_code == 409
    # bob cannot create a repo in alice's namespace
    with pytest.raises(HfHubHTTPError) as err:
        hub.api(bob).create_repo(f"alice/bob-was-here-{unique}", repo_type=repo_type)
    assert err.value.response.status_code == 403


def test_it_changes_visibility_with_update_repo_settings(hub, alice, bob, unique, hf_cache):
    api = hub.api(alice)
    repo_id = f"alice/visibility-{unique}"
    api.create_repo(repo_id, private=True)
    api.upload_file(path_or_fileobj=b"hello", path_in_repo="hello.txt", repo_id=repo_id)
    with pytest.raises(RepositoryNotFoundError):
        hub.api(bob).repo_info(repo_id)

    api.update_repo_settings(repo_id, private=False)
    assert api.repo_info(repo_id).private is False
    assert hub.api(bob).repo_info(repo_id).private is False
    path = hub.api(None).hf_hub_download(repo_id, "hello.txt", cache_dir=str(hf_cache))
    assert Path(path).read_bytes() == b"hello"

    api.update_repo_settings(repo_id, visibility="private")
    with pytest.raises(RepositoryNotFoundError):
        hub.api(bob).repo_info(repo_id)
    # only the owner may change settings
    with pytest.raises((HfHubHTTPError, RepositoryNotFoundError)):
        hub.api(bob).update_repo_settings(repo_id, private=False)
    assert api.repo_info(repo_id).private is True


@pytest.mark.parametrize("repo_type", ["model", "dataset"])
def test_it_deletes_a_repo(hub, alice, bob, unique, repo_type, hf_cache):
    api = hub.api(alice)
    repo_id = f"alice/doomed-{unique}"
    api.create_repo(repo_id, repo_type=repo_type)
    api.upload_file(path_or_fileobj=b"bye", path_in_repo="bye.txt", repo_id=repo_id, repo_type=repo_type)
    with pytest.raises((HfHubHTTPError, RepositoryNotFoundError)):
        hub.api(bob).delete_repo(repo_id, repo_type=repo_type)
    assert api.repo_exists(repo_id, repo_type=repo_type)

    api.delete_repo(repo_id, repo_type=repo_type)
    with pytest.raises(RepositoryNotFoundError):
        api.repo_info(repo_id, repo_type=repo_type)
    with pytest.raises(RepositoryNotFoundError):
        api.hf_hub_download(repo_id, "bye.txt", repo_type=repo_type, cache_dir=str(hf_cache))
    with pytest.raises(RepositoryNotFoundError):
        api.delete_repo(repo_id, repo_type=repo_type)
    api.delete_repo(repo_id, repo_type=repo_type, missing_ok=True)
    # the name is free again
    api.create_repo(repo_id, repo_type=repo_type)
    assert api.list_repo_files(repo_id, repo_type=repo_type) == [".gitattributes"]


# --- uploads ----------------------------------------------------------------------------------------


def test_it_uploads_a_file_and_a_nested_folder(hub, alice, unique, tmp_path, hf_cache):
    api = hub.api(alice)
    repo_id = f"alice/folder-{unique}"
    api.create_repo(repo_id, repo_type="dataset")
    info = api.upload_file(
        path_or_fileobj=b"a,b\n1,2\n",
        path_in_repo="data/single.csv",
        repo_id=repo_id,
        repo_type="dataset",
        commit_message="one file",
    )
    assert len(info.oid) == 40

    expected = {".gitattributes": None, "data/single.csv": b"a,b\n1,2\n"}
    folder = tmp_path / "folder"
    for i in range(24):
        rel = f"part-{i % 3}/sub-{i % 2}/file-{i:02d}.txt" if i % 4 else f"top-{i:02d}.txt"
        data = f"file {i} of {unique}\n".encode() * (i + 1)
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
        expected[f"nested/{rel}"] = data
    (folder / "empty.txt").write_bytes(b"")
    expected["nested/empty.txt"] = b""
    api.upload_folder(
        folder_path=folder,
        path_in_repo="nested",
        repo_id=repo_id,
        repo_type="dataset",
        commit_message="a folder",
    )

    assert sorted(api.list_repo_files(repo_id, repo_type="dataset")) == sorted(expected)
    snapshot = read_snapshot(api.snapshot_download(repo_id, repo_type="dataset", cache_dir=str(hf_cache)))
    assert set(snapshot) == set(expected)
    for path, data in expected.items():
        if data is not None:
            assert snapshot[path] == data, path
    # directories are listed too, and regular files carry their git blob id and no lfs info
    tree = {e.path: e for e in api.list_repo_tree(repo_id, repo_type="dataset", recursive=True)}
    assert {"nested", "nested/part-1", "nested/part-1/sub-0"} <= {
        p for p, e in tree.items() if not hasattr(e, "lfs")
    }
    assert tree["nested/top-00.txt"].blob_id == git_blob_oid(expected["nested/top-00.txt"])
    assert tree["nested/top-00.txt"].lfs is None
    titles = [c.title for c in api.list_repo_commits(repo_id, repo_type="dataset")]
    assert titles == ["a folder", "one file", "initial commit"]


def test_it_commits_adds_deletes_and_copies_in_one_commit(hub, alice, unique, hf_cache, lfs_calls):
    api = hub.api(alice)
    repo_id = f"alice/mixed-{unique}"
    api.create_repo(repo_id)
    small = b'{"hidden_size": 8}\n'
    first_big = os.urandom(11 * MiB + 17)
    api.create_commit(
        repo_id,
        commit_message="setup",
        operations=[
            CommitOperationAdd("config.json", io.BytesIO(small)),
            CommitOperationAdd("old.txt", io.BytesIO(b"to be deleted")),
            CommitOperationAdd("logs/1.txt", io.BytesIO(b"log 1")),
            CommitOperationAdd("logs/deeper/2.txt", io.BytesIO(b"log 2")),
            CommitOperationAdd("weights/first.bin", io.BytesIO(first_big)),
        ],
    )
    assert api.list_repo_files(repo_id) == sorted(
        [".gitattributes", "config.json", "logs/1.txt", "logs/deeper/2.txt", "old.txt", "weights/first.bin"]
    )

    lfs_calls.clear()
    big = os.urandom(20 * MiB + 5)  # 3 parts of 8 MiB
    tokenizer = b"tokenizer " * 1000
    api.create_commit(
        repo_id,
        commit_message="mix",
        commit_description="adds, deletes, copies",
        operations=[
            CommitOperationAdd("model.safetensors", io.BytesIO(big)),
            CommitOperationAdd("tokenizer.json", io.BytesIO(tokenizer)),
            CommitOperationDelete("old.txt"),
            CommitOperationDelete("logs/"),
            CommitOperationCopy("weights/first.bin", "copies/first-copy.bin"),
            CommitOperationCopy("config.json", "copies/config.json"),
        ],
    )

    # The big file went through the multipart path: batch, 3 part PUTs, completion, verify — all 2xx.
    methods = [(m, urlparse(u).path.split("/")[-1] if m == "POST" else "", s) for m, u, s in lfs_calls]
    assert all(200 <= s < 300 for _, _, s in methods), lfs_calls
    assert [m for m, _, _ in methods].count("PUT") == 3, lfs_calls
    posts = [u for m, u, _ in lfs_calls if m == "POST"]
    assert posts[0].endswith(".git/info/lfs/objects/batch")
    assert any("/lfs/complete/" in u for u in posts), posts
    assert posts[-1].endswith(".git/info/lfs/verify"), posts

    expected = {
        ".gitattributes": None,
        "config.json": small,
        "tokenizer.json": tokenizer,
        "model.safetensors": big,
        "weights/first.bin": first_big,
        "copies/first-copy.bin": first_big,
        "copies/config.json": small,
    }
    snapshot = read_snapshot(api.snapshot_download(repo_id, cache_dir=str(hf_cache)))
    assert set(snapshot) == set(expected)
    for path, data in expected.items():
        if data is not None:
            assert snapshot[path] == data, path

    tree = {e.path: e for e in api.list_repo_tree(repo_id, recursive=True) if hasattr(e, "size")}
    for path in ("model.safetensors", "weights/first.bin", "copies/first-copy.bin"):
        lfs = tree[path].lfs
        assert lfs is not None and lfs.sha256 == sha256(expected[path]) and lfs.size == len(expected[path]), (
            path
        )
        assert tree[path].size == len(expected[path])
    assert tree["config.json"].lfs is None and tree["config.json"].blob_id == git_blob_oid(small)
    siblings = {s.rfilename: s for s in api.model_info(repo_id, files_metadata=True).siblings}
    assert set(siblings) == set(expected)
    assert siblings["model.safetensors"].lfs.sha256 == sha256(big)
    assert siblings["model.safetensors"].size == len(big)
    assert siblings["tokenizer.json"].lfs is None

    # The ETag on resolve is the real sha256 for LFS files (clients key their cache on it).
    head = requests.head(
        f"{hub.url}/{repo_id}/resolve/main/model.safetensors", headers=auth(alice), timeout=30
    )
    assert head.headers["X-Linked-Etag"].strip('"') == sha256(big)
    assert int(head.headers["X-Linked-Size"]) == len(big)

    commits = api.list_repo_commits(repo_id)
    assert [c.title for c in commits] == ["mix", "setup", "initial commit"]
    assert commits[0].message.strip() == "adds, deletes, copies"

    # Deleting a file that is not there fails with the message the client knows.
    with pytest.raises(HfHubHTTPError) as err:
        api.create_commit(repo_id, commit_message="nope", operations=[CommitOperationDelete("old.txt")])
    assert err.value.response.status_code == 404
    assert api.list_repo_commits(repo_id)[0].title == "mix"


def test_it_keeps_branches_and_tags_apart(hub, alice, bob, unique, hf_cache):
    api = hub.api(alice)
    repo_id = f"alice/refs-{unique}"
    api.create_repo(repo_id)
    c1 = api.upload_file(path_or_fileobj=b"v1", path_in_repo="file.txt", repo_id=repo_id, commit_message="v1")
    c2 = api.upload_file(path_or_fileobj=b"v2", path_in_repo="file.txt", repo_id=repo_id, commit_message="v2")

    api.create_branch(repo_id, branch="dev", revision=c1.oid)
    with pytest.raises(HfHubHTTPError) as err:
        api.create_branch(repo_id, branch="dev")
    assert err.value.response.status_code == 409
    api.create_branch(repo_id, branch="dev", exist_ok=True)
    with pytest.raises((HfHubHTTPError, RepositoryNotFoundError)):
        hub.api(bob).create_branch(repo_id, branch="bobs")

    c3 = api.upload_file(
        path_or_fileobj=b"dev work",
        path_in_repo="dev.txt",
        repo_id=repo_id,
        revision="dev",
        commit_message="on dev",
    )
    api.create_tag(repo_id, tag="v1.0", revision=c1.oid, tag_message="first release")
    with pytest.raises(HfHubHTTPError) as err:
        api.create_tag(repo_id, tag="v1.0")
    assert err.value.response.status_code == 409

    def download(path: str, revision: str) -> bytes:
        return Path(
            api.hf_hub_download(repo_id, path, revision=revision, cache_dir=str(hf_cache))
        ).read_bytes()

    assert download("file.txt", "main") == b"v2"
    assert download("file.txt", "dev") == b"v1"
    assert download("dev.txt", "dev") == b"dev work"
    assert download("file.txt", "v1.0") == b"v1"
    assert "dev.txt" not in api.list_repo_files(repo_id)
    assert api.repo_info(repo_id).sha == c2.oid
    assert api.repo_info(repo_id, revision="dev").sha == c3.oid

    refs = api.list_repo_refs(repo_id)
    assert {b.name: b.target_commit for b in refs.branches} == {"main": c2.oid, "dev": c3.oid}
    assert {t.name: t.target_commit for t in refs.tags} == {"v1.0": c1.oid}
    assert {b.ref for b in refs.branches} == {"refs/heads/main", "refs/heads/dev"}

    main_log = api.list_repo_commits(repo_id)
    assert [c.title for c in main_log] == ["v2", "v1", "initial commit"]
    assert [c.commit_id for c in main_log[:2]] == [c2.oid, c1.oid]
    assert all(c.authors == ["alice"] for c in main_log)
    assert main_log[0].created_at >= main_log[1].created_at >= main_log[2].created_at
    dev_log = api.list_repo_commits(repo_id, revision="dev")
    assert [c.title for c in dev_log] == ["on dev", "v1", "initial commit"]
    assert dev_log[0].commit_id == c3.oid

    api.delete_branch(repo_id, branch="dev")
    api.delete_tag(repo_id, tag="v1.0")
    refs = api.list_repo_refs(repo_id)
    assert [b.name for b in refs.branches] == ["main"] and refs.tags == []
    with pytest.raises(RevisionNotFoundError):
        api.hf_hub_download(repo_id, "dev.txt", revision="dev", cache_dir=str(hf_cache / "x"))
    with pytest.raises(HfHubHTTPError):
        api.delete_branch(repo_id, branch="main")
    # the commit stays addressable by its id
    assert download("dev.txt", c3.oid) == b"dev work"


# --- dedupe -----------------------------------------------------------------------------------------


def test_it_stores_the_same_bytes_once_across_ten_repos(hub, alice, unique, hf_cache, lfs_calls):
    api = hub.api(alice)
    big = os.urandom(12 * MiB)
    small = f"small file {unique}\n".encode() * 10
    big_oid, small_oid = sha256(big), sha256(small)
    before = stored_objects(hub)
    repos = [f"alice/dedupe-{unique}-{i}" for i in range(10)]
    puts_per_repo = []
    for repo_id in repos:
        api.create_repo(repo_id)
        lfs_calls.clear()
        api.create_commit(
            repo_id,
            commit_message="same bytes",
            operations=[
                CommitOperationAdd("weights.bin", io.BytesIO(big)),
                CommitOperationAdd("notes.txt", io.BytesIO(small)),
            ],
        )
        puts_per_repo.append(sum(1 for m, _, _ in lfs_calls if m == "PUT"))
    # Only the first repo moved the big bytes (2 parts); the others only asked the batch endpoint.
    assert puts_per_repo == [2] + [0] * 9

    after = stored_objects(hub)
    new = {k: v for k, v in after.items() if k not in before}
    assert sorted(new.values()) == sorted([len(small), len(big)]), new
    assert len(objects_named(hub, big_oid)) == 1 and len(objects_named(hub, small_oid)) == 1

    # A further upload of stored bytes: the batch answers without actions, so nothing is sent.
    answer = lfs_batch(hub, alice, repos[-1], [(big_oid, len(big))])
    assert answer["objects"] == [{"oid": big_oid, "size": len(big)}]
    other = f"alice/dedupe-{unique}-fresh"
    api.create_repo(other, repo_type="dataset")
    answer = lfs_batch(hub, alice, other, [(big_oid, len(big))], repo_type="dataset")
    assert "actions" not in answer["objects"][0] and "error" not in answer["objects"][0]

    for repo_id in (repos[0], repos[-1]):
        folder = read_snapshot(api.snapshot_download(repo_id, cache_dir=str(hf_cache / repo_id)))
        assert folder["weights.bin"] == big and folder["notes.txt"] == small


# --- wrong bytes ------------------------------------------------------------------------------------


def test_it_refuses_lfs_bytes_that_do_not_match_their_sha256(hub, alice, unique, hf_cache, monkeypatch):
    api = hub.api(alice)
    repo_id = f"alice/liar-{unique}"
    api.create_repo(repo_id)
    lfs_base = f"{hub.url}/{repo_id}.git/info/lfs"

    cases = {
        "small": (os.urandom(1 * MiB), os.urandom(1 * MiB)),
        "multipart": (os.urandom(17 * MiB), os.urandom(17 * MiB)),
    }
    for kind, (good, bad) in cases.items():
        oid = sha256(good)
        upload = lfs_batch(hub, alice, repo_id, [(oid, len(good))])["objects"][0]["actions"]["upload"]
        if kind == "multipart":
            assert int(upload["header"]["chunk_size"]) == 8 * MiB
        responses = push_lfs(upload, oid, bad)
        # Refused on the way in (the hub hashes what it receives) or at completion (422 naming the oid).
        refusal = next((r for r in responses if r.status_code >= 400), None)
        assert refusal is not None, [(r.request.method, r.status_code) for r in responses]
        assert refusal.status_code == 422 and oid in refusal.headers.get("X-Error-Message", ""), refusal.text
        verify = requests.post(
            f"{lfs_base}/verify",
            headers=auth(alice) | {"Content-Type": LFS_JSON},
            data=json.dumps({"oid": oid, "size": len(good)}),
            timeout=120,
        )
        assert verify.status_code == 422 and oid in verify.json()["error"], (kind, verify.text)

        # A commit referencing that oid is refused with a message that names it.
        payload = "\n".join(
            json.dumps(line)
            for line in [
                {"key": "header", "value": {"summary": "lie", "description": ""}},
                {
                    "key": "lfsFile",
                    "value": {"path": f"{kind}.bin", "algo": "sha256", "oid": oid, "size": len(good)},
                },
            ]
        )
        commit = requests.post(
            f"{hub.url}/api/models/{repo_id}/commit/main",
            data=payload,
            headers=auth(alice) | {"Content-Type": "application/x-ndjson"},
            timeout=120,
        )
        assert commit.status_code in (400, 422), commit.text
        assert oid in commit.json()["error"] and "upload" in commit.json()["error"]

        # Nothing is served under that hash: not stored, not downloadable, still asked to be uploaded.
        assert objects_named(hub, oid) == []
        down = lfs_batch(hub, alice, repo_id, [(oid, len(good))], operation="download")["objects"][0]
        assert "actions" not in down and down["error"]["code"] == 404
        again = lfs_batch(hub, alice, repo_id, [(oid, len(good))])["objects"][0]
        assert "upload" in again["actions"]

    # The stock client committing an oid whose bytes were never accepted gets the server's message.
    import huggingface_hub._commit_api as commit_api

    refused_oid = sha256(cases["multipart"][0])
    monkeypatch.setattr(commit_api, "_upload_files", lambda **kwargs: None)
    with pytest.raises(HfHubHTTPError) as err:
        api.create_commit(
            repo_id,
            commit_message="lie",
            operations=[CommitOperationAdd("multipart.bin", io.BytesIO(cases["multipart"][0]))],
        )
    assert err.value.response.status_code in (400, 422)
    assert refused_oid in str(err.value) and "upload" in str(err.value), str(err.value)
    monkeypatch.undo()
    assert api.list_repo_files(repo_id) == [".gitattributes"]

    # The right bytes are still accepted afterwards, over both paths.
    api.create_commit(
        repo_id,
        commit_message="truth",
        operations=[CommitOperationAdd(f"{kind}.bin", io.BytesIO(good)) for kind, (good, _) in cases.items()],
    )
    snapshot = read_snapshot(api.snapshot_download(repo_id, cache_dir=str(hf_cache)))
    for kind, (good, _) in cases.items():
        assert snapshot[f"{kind}.bin"] == good
        assert len(objects_named(hub, sha256(good))) == 1


def test_it_keeps_verified_bytes_when_upload_urls_are_replayed(hub, alice, unique, hf_cache):
    """Upload URLs stay usable for a while; once the hub has verified an object, sending other bytes
    to the same URLs must not change what is served under its hash (in every repo sharing it)."""
    api = hub.api(alice)
    repo_id = f"alice/replay-{unique}"
    api.create_repo(repo_id)
    for size in (1 * MiB, 17 * MiB):
        good, bad = os.urandom(size), os.urandom(size)
        oid = sha256(good)
        upload = lfs_batch(hub, alice, repo_id, [(oid, size)])["objects"][0]["actions"]["upload"]
        assert all(r.ok for r in push_lfs(upload, oid, good))
        verify = requests.post(
            f"{hub.url}/{repo_id}.git/info/lfs/verify",
            timeout=120,
            headers=auth(alice) | {"Content-Type": LFS_JSON},
            data=json.dumps({"oid": oid, "size": size}),
        )
        assert verify.status_code == 200, verify.text
        payload = "\n".join(
            json.dumps(line)
            for line in [
                {"key": "header", "value": {"summary": f"{size} bytes"}},
                {
                    "key": "lfsFile",
                    "value": {"path": f"{size}.bin", "algo": "sha256", "oid": oid, "size": size},
                },
            ]
        )
        commit = requests.post(
            f"{hub.url}/api/models/{repo_id}/commit/main",
            data=payload,
            timeout=120,
            headers=auth(alice) | {"Content-Type": "application/x-ndjson"},
        )
        assert commit.status_code == 200, commit.text

        push_lfs(upload, oid, bad)  # whatever the store answers
        path = api.hf_hub_download(repo_id, f"{size}.bin", cache_dir=str(hf_cache / str(size)))
        assert Path(path).read_bytes() == good


def test_concurrent_batches_for_the_same_bytes_share_one_upload_session(hub, alice, unique):
    """A client's batch and its retry (or two processes pushing the same file) arriving together
    get one multipart session, so parts sent under either answer count for both."""
    from concurrent.futures import ThreadPoolExecutor

    repo_id = f"alice/race-{unique}"
    hub.api(alice).create_repo(repo_id)
    size = 24 * MiB  # multipart: several parts
    oid = sha256(os.urandom(64) + unique.encode())  # bytes never sent: only the sessions matter here

    def session_of(_) -> str:
        (obj,) = lfs_batch(hub, alice, repo_id, [(oid, size)])["objects"]
        action = obj["actions"]["upload"]
        return action.get("header", {}).get("upload_id") or action["href"]

    with ThreadPoolExecutor(8) as pool:
        ids = set(pool.map(session_of, range(16)))
    assert len(ids) == 1, ids


def test_it_refuses_commits_from_users_without_write_access(hub, alice, bob, unique):
    repo_id = f"alice/guarded-{unique}"
    hub.api(alice).create_repo(repo_id)
    for token in (bob, hub.cached_token("alice", read_only=True)):
        with pytest.raises(HfHubHTTPError) as err:
            hub.api(token).upload_file(path_or_fileobj=b"x", path_in_repo="x.txt", repo_id=repo_id)
        assert err.value.response.status_code == 403
    payload = base64.b64encode(b"x").decode()
    anon = requests.post(
        f"{hub.url}/api/models/{repo_id}/commit/main",
        timeout=30,
        headers={"Content-Type": "application/x-ndjson"},
        data=json.dumps({"key": "header", "value": {"summary": "x"}})
        + "\n"
        + json.dumps({"key": "file", "value": {"path": "x.txt", "content": payload, "encoding": "base64"}}),
    )
    assert anon.status_code == 401
    assert hub.api(alice).list_repo_files(repo_id) == [".gitattributes"]
