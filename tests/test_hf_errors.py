"""Failures as the stock huggingface_hub client sees them: its own exception classes, messages a
person can act on, and nothing stored when the input is bad.

Personas: alice owns the repos, bob is another user, anonymous callers send no token."""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfFileSystem, hf_hub_download
from huggingface_hub.errors import (
    EntryNotFoundError,
    HfHubHTTPError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

NDJSON = "application/x-ndjson"
SECRET = b"alice's private bytes\n"


@pytest.fixture(scope="module")
def alice(hub) -> str:
    return hub.cached_token("alice")


@pytest.fixture(scope="module")
def bob(hub) -> str:
    return hub.cached_token("bob")


@pytest.fixture
def repo(hub, alice, unique) -> str:
    """A public model repo of alice's with one file besides .gitattributes."""
    repo_id = f"alice/err-{unique}"
    api = hub.api(alice)
    api.create_repo(repo_id)
    api.upload_file(repo_id=repo_id, path_in_repo="config.json", path_or_fileobj=b'{"a": 1}\n')
    return repo_id


@pytest.fixture
def private_repo(hub, alice, unique) -> str:
    repo_id = f"alice/secret-{unique}"
    api = hub.api(alice)
    api.create_repo(repo_id, private=True)
    api.upload_file(repo_id=repo_id, path_in_repo="secret.txt", path_or_fileobj=SECRET)
    return repo_id


def auth(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def head_of(hub, token: str, repo_id: str) -> str:
    return hub.api(token).model_info(repo_id).sha


def commit_count(hub, token: str, repo_id: str) -> int:
    return len(hub.api(token).list_repo_commits(repo_id))


def post_commit(hub, token: str, repo_id: str, body: bytes, content_type: str = NDJSON) -> requests.Response:
    return requests.post(
        f"{hub.url}/api/models/{repo_id}/commit/main",
        data=body,
        timeout=30,
        headers=auth(token) | {"Content-Type": content_type},
    )


def ndjson(*items: dict) -> bytes:
    return b"".join(json.dumps(i).encode() + b"\n" for i in items)


HEADER = {"key": "header", "value": {"summary": "raw commit", "description": ""}}


def inline(path: str, data: bytes = b"x") -> dict:
    return {
        "key": "file",
        "value": {"path": path, "content": base64.b64encode(data).decode(), "encoding": "base64"},
    }


def raw_get(hub, path: str, token: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    """Sends `path` byte for byte: requests/urllib3 would normalise dot segments away."""
    conn = http.client.HTTPConnection(urlsplit(hub.url).hostname, urlsplit(hub.url).port, timeout=30)
    try:
        conn.putrequest(method, path, skip_accept_encoding=True)
        conn.putheader("Authorization", f"Bearer {token}")
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


# --- repos that do not exist or may not be read ---------------------------------------------------


def test_it_raises_repository_not_found_for_a_missing_repo(hub, alice, unique, tmp_path):
    api = hub.api(alice)
    with pytest.raises(RepositoryNotFoundError):
        api.model_info(f"alice/missing-{unique}")
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download(
            f"alice/missing-{unique}", "config.json", endpoint=hub.url, token=alice, cache_dir=tmp_path
        )
    with pytest.raises(RepositoryNotFoundError):
        api.list_repo_files(f"nobody-{unique}/missing")
    assert not api.repo_exists(f"alice/missing-{unique}")


@pytest.mark.parametrize("who", ["bob", "anonymous"])
def test_it_hides_a_private_repo(hub, alice, bob, private_repo, who, tmp_path):
    token = bob if who == "bob" else None
    api = hub.api(token)
    with pytest.raises(RepositoryNotFoundError):
        api.model_info(private_repo)
    with pytest.raises(RepositoryNotFoundError):
        api.list_repo_files(private_repo)
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download(
            private_repo, "secret.txt", endpoint=hub.url, token=token or False, cache_dir=tmp_path
        )
    with pytest.raises(FileNotFoundError):
        HfFileSystem(endpoint=hub.url, token=token or False, skip_instance_cache=True).cat_file(
            f"{private_repo}/secret.txt"
        )
    assert api.repo_exists(private_repo) is False
    assert api.file_exists(private_repo, "secret.txt") is False
    for resp in (
        requests.get(f"{hub.url}/{private_repo}/resolve/main/secret.txt", headers=auth(token), timeout=10),
        requests.head(f"{hub.url}/{private_repo}/resolve/main/secret.txt", headers=auth(token), timeout=10),
        requests.get(f"{hub.url}/api/models/{private_repo}/tree/main", headers=auth(token), timeout=10),
    ):
        assert resp.status_code == 404, resp.url
        assert resp.headers["X-Error-Code"] == "RepoNotFound"
        assert SECRET not in resp.content
    if who == "bob":
        assert private_repo not in {m.id for m in api.list_models(author="alice")}

    # alice, the owner, still reads it.
    owner = hub.api(alice)
    assert owner.repo_exists(private_repo)
    assert private_repo in {m.id for m in owner.list_models(author="alice")}
    path = hf_hub_download(private_repo, "secret.txt", endpoint=hub.url, token=alice, cache_dir=tmp_path)
    assert Path(path).read_bytes() == SECRET


def test_it_answers_private_and_missing_repos_alike(hub, bob, private_repo, unique):
    missing = f"alice/nothing-{unique}"
    for template in (
        "{url}/api/models/{repo}",
        "{url}/api/models/{repo}/revision/main",
        "{url}/api/models/{repo}/tree/main",
        "{url}/{repo}/resolve/main/secret.txt",
    ):
        hidden = requests.get(template.format(url=hub.url, repo=private_repo), headers=auth(bob), timeout=10)
        absent = requests.get(template.format(url=hub.url, repo=missing), headers=auth(bob), timeout=10)
        assert hidden.status_code == absent.status_code == 404
        assert hidden.headers["X-Error-Code"] == absent.headers["X-Error-Code"] == "RepoNotFound"
        # Same sentence, but for the name.
        assert hidden.json()["error"].replace(private_repo, "R") == absent.json()["error"].replace(
            missing, "R"
        )


# --- revisions and paths --------------------------------------------------------------------------


def test_it_raises_revision_not_found(hub, alice, repo, tmp_path):
    api = hub.api(alice)
    with pytest.raises(RevisionNotFoundError):
        hf_hub_download(
            repo, "config.json", revision="no-such-branch", endpoint=hub.url, token=alice, cache_dir=tmp_path
        )
    with pytest.raises(RevisionNotFoundError):
        api.model_info(repo, revision="no-such-branch")
    with pytest.raises(RevisionNotFoundError):
        api.list_repo_files(repo, revision="0" * 40)
    resp = requests.head(f"{hub.url}/{repo}/resolve/deadbeef00/config.json", headers=auth(alice), timeout=10)
    assert resp.status_code == 404
    assert resp.headers["X-Error-Code"] == "RevisionNotFound"


def test_it_raises_entry_not_found_with_the_commit(hub, alice, repo, tmp_path):
    api = hub.api(alice)
    head = head_of(hub, alice, repo)
    with pytest.raises(RemoteEntryNotFoundError) as err:
        hf_hub_download(repo, "missing.json", endpoint=hub.url, token=alice, cache_dir=tmp_path)
    assert isinstance(err.value, EntryNotFoundError)
    # The client remembers the absence under the commit the server named.
    assert (tmp_path / f"models--{repo.replace('/', '--')}" / ".no_exist" / head / "missing.json").exists()
    assert api.file_exists(repo, "missing.json") is False
    assert api.file_exists(repo, "config.json") is True
    for method in ("HEAD", "GET"):
        resp = requests.request(
            method, f"{hub.url}/{repo}/resolve/main/missing.json", headers=auth(alice), timeout=10
        )
        assert resp.status_code == 404
        assert resp.headers["X-Error-Code"] == "EntryNotFound"
        assert resp.headers["X-Repo-Commit"] == head
    # A directory is not a file.
    api.upload_file(repo_id=repo, path_in_repo="sub/a.txt", path_or_fileobj=b"a")
    resp = requests.head(f"{hub.url}/{repo}/resolve/main/sub", headers=auth(alice), timeout=10)
    assert resp.status_code == 404 and resp.headers["X-Error-Code"] == "EntryNotFound"
    with pytest.raises(RemoteEntryNotFoundError):
        list(api.list_repo_tree(repo, "no-such-dir"))


# --- credentials and permissions ------------------------------------------------------------------


def test_it_rejects_a_wrong_token(hub, repo):
    bad = "hub_" + "x" * 40
    for resp in (
        requests.get(f"{hub.url}/api/whoami-v2", headers=auth(bad), timeout=10),
        requests.get(f"{hub.url}/api/models/{repo}", headers=auth(bad), timeout=10),
        requests.head(f"{hub.url}/{repo}/resolve/main/config.json", headers=auth(bad), timeout=10),
    ):
        assert resp.status_code == 401, resp.url
        assert "Invalid credentials" in resp.headers["X-Error-Message"]
    assert (
        "Invalid credentials"
        in requests.get(f"{hub.url}/api/whoami-v2", headers=auth(bad), timeout=10).json()["error"]
    )
    with pytest.raises(HfHubHTTPError) as err:
        hub.api(bad).whoami()
    assert err.value.response.status_code == 401
    assert "Invalid user token" in str(err.value)


def test_it_requires_a_token_to_write(hub, alice, repo):
    before = commit_count(hub, alice, repo)
    with pytest.raises(HfHubHTTPError) as err:
        hub.api(None).upload_file(repo_id=repo, path_in_repo="anon.txt", path_or_fileobj=b"anon")
    assert err.value.response.status_code == 401
    resp = post_commit(hub, None, repo, ndjson(HEADER, inline("anon.txt")))
    assert resp.status_code == 401
    with pytest.raises(HfHubHTTPError) as err:
        hub.api(None).create_repo("alice/anon-made")
    assert err.value.response.status_code == 401
    assert commit_count(hub, alice, repo) == before
    assert not hub.api(alice).file_exists(repo, "anon.txt")


def test_it_refuses_writes_with_a_read_only_token(hub, alice, repo):
    read_only = hub.token("alice", read_only=True)
    before = commit_count(hub, alice, repo)
    # Reading is what the token is for.
    assert hub.api(read_only).model_info(repo).sha == head_of(hub, alice, repo)
    with pytest.raises(HfHubHTTPError) as err:
        hub.api(read_only).upload_file(repo_id=repo, path_in_repo="ro.txt", path_or_fileobj=b"ro")
    assert err.value.response.status_code == 403
    assert "read-only" in str(err.value)
    with pytest.raises(HfHubHTTPError) as err:
        hub.api(read_only).delete_file("config.json", repo_id=repo)
    assert err.value.response.status_code == 403
    assert commit_count(hub, alice, repo) == before
    assert hub.api(alice).list_repo_files(repo) == [".gitattributes", "config.json"]


def test_it_refuses_bob_writing_to_alices_repo(hub, alice, bob, repo):
    before = head_of(hub, alice, repo)
    api = hub.api(bob)
    with pytest.raises(HfHubHTTPError) as err:
        api.upload_file(repo_id=repo, path_in_repo="bob.txt", path_or_fileobj=b"bob was here")
    assert err.value.response.status_code == 403
    assert "bob" in str(err.value)
    with pytest.raises(HfHubHTTPError) as err:
        api.delete_file("config.json", repo_id=repo)
    assert err.value.response.status_code == 403
    with pytest.raises(HfHubHTTPError) as err:
        api.create_branch(repo, branch="bobs")
    assert err.value.response.status_code == 403
    resp = post_commit(hub, bob, repo, ndjson(HEADER, inline("bob.txt")))
    assert resp.status_code == 403
    assert head_of(hub, alice, repo) == before
    assert hub.api(alice).list_repo_files(repo) == [".gitattributes", "config.json"]
    assert [b.name for b in hub.api(alice).list_repo_refs(repo).branches] == ["main"]


# --- malformed commits ----------------------------------------------------------------------------

MALFORMED = {
    "not json": (b"this is not json\n", "line 1"),
    "no header line": (ndjson(inline("a.txt")), "header"),
    "unknown key": (ndjson(HEADER, {"key": "renameFile", "value": {"path": "a.txt"}}), "renameFile"),
    "value not an object": (ndjson(HEADER, {"key": "file", "value": "a.txt"}), "value"),
    "file without path": (ndjson(HEADER, {"key": "file", "value": {"content": "eA=="}}), "path"),
    "bad base64": (
        ndjson(
            HEADER,
            {"key": "file", "value": {"path": "a.txt", "content": "!!not base64!!", "encoding": "base64"}},
        ),
        "base64",
    ),
    "lfs oid never uploaded": (
        ndjson(
            HEADER,
            {
                "key": "lfsFile",
                "value": {
                    "path": "w.bin",
                    "algo": "sha256",
                    "oid": hashlib.sha256(b"never uploaded").hexdigest(),
                    "size": 14,
                },
            },
        ),
        hashlib.sha256(b"never uploaded").hexdigest(),
    ),
    "lfs oid not hex": (
        ndjson(HEADER, {"key": "lfsFile", "value": {"path": "w.bin", "oid": "xyz", "size": 3}}),
        "sha256",
    ),
    "no operation": (ndjson(HEADER), "changes nothing"),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_it_rejects_malformed_commit_payloads(hub, alice, repo, case):
    body, words = MALFORMED[case]
    before = head_of(hub, alice, repo)
    resp = post_commit(hub, alice, repo, body)
    assert resp.status_code in (400, 422), resp.text
    assert words in resp.json()["error"]
    assert words in resp.headers["X-Error-Message"]
    assert head_of(hub, alice, repo) == before
    assert hub.api(alice).list_repo_files(repo) == [".gitattributes", "config.json"]


def test_it_keeps_the_whole_commit_out_when_one_operation_is_bad(hub, alice, repo):
    before = head_of(hub, alice, repo)
    body = ndjson(HEADER, inline("good.txt", b"good"), inline("../evil.txt", b"evil"))
    resp = post_commit(hub, alice, repo, body)
    assert resp.status_code == 422  # (a path a commit cannot hold, as upstream answers it)
    assert head_of(hub, alice, repo) == before
    assert "good.txt" not in hub.api(alice).list_repo_files(repo)


# --- bad paths ------------------------------------------------------------------------------------

BAD_PATHS = [
    "../x",
    "a/../../x",
    "/etc/passwd",
    "a\x00b",
    "a//b",
    ".git/config",
    "./a",
    "a/./b",
    "a\\..\\b",
    "a/" + "b" * 1030,
    "/".join(["d"] * 600),
]


@pytest.mark.parametrize("path", BAD_PATHS, ids=lambda p: repr(p)[:24])
def test_it_rejects_bad_paths_in_commits(hub, alice, repo, path):
    before = head_of(hub, alice, repo)
    for op in (inline(path), {"key": "deletedFile", "value": {"path": path}}):
        resp = post_commit(hub, alice, repo, ndjson(HEADER, op))
        assert resp.status_code == 422, (path, resp.text)
        assert resp.headers["X-Error-Code"] in ("InvalidPath", "BadRequest")
        assert "path" in resp.json()["error"]
    assert head_of(hub, alice, repo) == before
    assert hub.api(alice).list_repo_files(repo) == [".gitattributes", "config.json"]


def test_it_rejects_bad_paths_from_the_client(hub, alice, repo):
    before = head_of(hub, alice, repo)
    for path, words in (
        ("a//b", "empty, '.' or '..' component"),
        ("a/" + "b" * 1030, "longer than 1024 bytes"),
    ):
        with pytest.raises(HfHubHTTPError) as err:
            hub.api(alice).upload_file(repo_id=repo, path_in_repo=path, path_or_fileobj=b"x")
        assert err.value.response.status_code == 422
        assert words in str(err.value)
    assert head_of(hub, alice, repo) == before


@pytest.mark.parametrize(
    "tail",
    [
        "../../../../etc/passwd",
        "%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        "..%2f..%2f..%2fetc%2fpasswd",
        "/etc/passwd",
        "%2Fetc%2Fpasswd",
        "a%00b",
        ".git/config",
        "sub//a.txt",
        "sub/../config.json",
        "./config.json",
        "..%5c..%5cconfig.json",
        "../../secret-{unique}/resolve/main/secret.txt",
    ],
)
def test_it_never_serves_outside_the_repo_from_urls(hub, alice, repo, private_repo, unique, tail):
    """Paths in /resolve/ and /tree/ URLs are repo paths: traversal finds nothing (404 EntryNotFound or
    400), never a file of the host, of the object store or of another repo."""
    hub.api(alice).upload_file(repo_id=repo, path_in_repo="sub/a.txt", path_or_fileobj=b"a")
    tail = tail.format(unique=unique)
    for method, url in (
        ("GET", f"/{repo}/resolve/main/{tail}"),
        ("HEAD", f"/{repo}/resolve/main/{tail}"),
        ("GET", f"/api/models/{repo}/tree/main/{tail}"),
        ("GET", f"/api/models/{repo}/tree/main/{tail}?recursive=true"),
    ):
        status, headers, body = raw_get(hub, url, alice, method)
        assert status in (400, 404), (method, url, status, body[:200])
        if status == 404:
            assert headers.get("x-error-code") == "EntryNotFound", (url, headers)
        assert b"root:" not in body and SECRET not in body and b'{"a": 1}' not in body
        assert "content-range" not in headers


def test_it_answers_invalid_paths_as_missing_files_to_the_client(hub, alice, repo, tmp_path):
    """A path that cannot exist is a missing entry (404 EntryNotFound + X-Repo-Commit): a 400 there
    makes hf_hub_download report "check your connection" instead."""
    head = head_of(hub, alice, repo)
    for path in (".git/config", "a//b.txt", "sub/./a.txt"):
        with pytest.raises(RemoteEntryNotFoundError):
            hf_hub_download(repo, path, endpoint=hub.url, token=alice, cache_dir=tmp_path)
        status, headers, _ = raw_get(hub, f"/{repo}/resolve/main/{path}", alice, "HEAD")
        assert status == 404
        assert headers["x-error-code"] == "EntryNotFound"
        assert headers["x-repo-commit"] == head
    assert hub.api(alice).file_exists(repo, ".git/config") is False


# --- commit preconditions -------------------------------------------------------------------------


def test_it_reports_deleting_a_file_that_does_not_exist(hub, alice, repo):
    before = commit_count(hub, alice, repo)
    with pytest.raises(EntryNotFoundError) as err:
        hub.api(alice).delete_file("no-such-file.txt", repo_id=repo)
    assert isinstance(err.value, HfHubHTTPError)
    assert err.value.response.status_code == 404
    assert err.value.response.headers["X-Error-Code"] == "EntryNotFound"
    assert "A file with this name doesn't exist" in str(err.value)
    with pytest.raises(EntryNotFoundError):
        hub.api(alice).delete_folder("no-such-folder", repo_id=repo)
    # Nothing half-done: a good deletion next to the bad one is not applied either.
    with pytest.raises(EntryNotFoundError):
        hub.api(alice).create_commit(
            repo,
            commit_message="two deletions",
            operations=[CommitOperationDelete("config.json"), CommitOperationDelete("nope.txt")],
        )
    assert commit_count(hub, alice, repo) == before
    assert "config.json" in hub.api(alice).list_repo_files(repo)


def test_it_refuses_a_parent_commit_that_is_not_the_head(hub, alice, repo):
    api = hub.api(alice)
    old = head_of(hub, alice, repo)
    new = api.upload_file(repo_id=repo, path_in_repo="second.txt", path_or_fileobj=b"2").oid
    with pytest.raises(HfHubHTTPError) as err:
        api.create_commit(
            repo,
            commit_message="stale",
            parent_commit=old,
            operations=[CommitOperationAdd("stale.txt", b"stale")],
        )
    assert err.value.response.status_code == 412
    assert new in str(err.value)  # the message names the real head
    assert head_of(hub, alice, repo) == new
    # With the right parent it goes through.
    done = api.create_commit(
        repo,
        commit_message="fresh",
        parent_commit=new,
        operations=[CommitOperationAdd("fresh.txt", b"fresh")],
    )
    assert head_of(hub, alice, repo) == done.oid
