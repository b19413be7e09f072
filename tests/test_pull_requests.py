"""Pull requests and discussions, as upstream has them, driven by the stock huggingface_hub client.

alice owns the repos; bob is another signed-in user (who may open pull requests on alice's public
repos but not merge them); carol a third; anonymous callers pass no token. Every test runs on both
backends (the `hub` fixture) unless it says otherwise, and compares what a user sees: the bytes at
refs/pr/N and on the branch after a merge, statuses, the fields the client parses.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import requests
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfFileSystem, constants
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError
from huggingface_hub.utils._runtime import is_xet_available

from tests.conftest import one_backend
from tests.support.files import read_snapshot
from tests.support.hf import auth, git_blob_oid
from tests.support.hub_cli import client_env, ok, run

MiB = 2**20
PASSWORD = "correct horse battery"


@pytest.fixture
def carol(hub) -> str:
    return hub.cached_token("carol")


@pytest.fixture
def no_xet(monkeypatch) -> None:
    """Uploads go through the LFS batch and commits as upload_folder makes them without hf_xet (the
    hub has no Xet: README)."""
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)


def download(hub, token: str | None, repo: str, path: str, cache: Path, *, revision: str | None = None,
             repo_type: str | None = None) -> bytes:
    local = hub.api(token).hf_hub_download(repo, path, revision=revision, repo_type=repo_type, cache_dir=str(cache),
                                           force_download=True)
    return Path(local).read_bytes()


def status_of(err: pytest.ExceptionInfo) -> int:
    return err.value.response.status_code


def quota_used(hub, token: str) -> int:
    return requests.get(f"{hub.url}/api/quota", headers=auth(token), timeout=30).json()["used"]


# --- create_pr and reading refs/pr/N ------------------------------------------------------------------


def test_create_pr_on_upload_file_lands_on_refs_pr_and_reads_everywhere(hub, alice, unique, hf_cache, tmp_path):
    api = hub.api(alice)
    repo = f"alice/pr-read-{unique}"
    api.create_repo(repo)
    base = api.upload_file(path_or_fileobj=b"v1\n", path_in_repo="a.txt", repo_id=repo).oid
    info = api.upload_file(path_or_fileobj=b"v2\n", path_in_repo="a.txt", repo_id=repo, create_pr=True,
                           commit_message="Make it v2", commit_description="Please take **v2**.")
    assert info.pr_url == f"{hub.url}/{repo}/discussions/1"
    assert (info.pr_revision, info.pr_num) == ("refs/pr/1", 1)
    assert info.commit_url == f"{hub.url}/{repo}/commit/{info.oid}"

    # the branch is untouched
    assert api.repo_info(repo).sha == base
    assert download(hub, alice, repo, "a.txt", hf_cache) == b"v1\n"
    # refs/pr/1 reads through every door: resolve, repo info, tree, paths-info, commits, snapshot, fsspec
    assert download(hub, alice, repo, "a.txt", hf_cache, revision="refs/pr/1") == b"v2\n"
    assert download(hub, None, repo, "a.txt", hf_cache, revision="refs/pr/1") == b"v2\n"  # public repo
    assert api.repo_info(repo, revision="refs/pr/1").sha == info.oid
    assert sorted(api.list_repo_files(repo, revision="refs/pr/1")) == [".gitattributes", "a.txt"]
    [entry] = api.get_paths_info(repo, ["a.txt"], revision="refs/pr/1")
    assert entry.blob_id == git_blob_oid(b"v2\n") and entry.size == 3
    assert [c.title for c in api.list_repo_commits(repo, revision="refs/pr/1")] == [
        "Make it v2", "Upload a.txt with huggingface_hub", "initial commit"]
    snapshot = read_snapshot(api.snapshot_download(repo, revision="refs/pr/1", cache_dir=str(hf_cache)))
    assert snapshot["a.txt"] == b"v2\n"
    fs = HfFileSystem(endpoint=hub.url, token=alice, skip_instance_cache=True)
    assert fs.cat(f"{repo}@refs/pr/1/a.txt") == b"v2\n"
    assert fs.cat(f"{repo}/a.txt") == b"v1\n"
    assert sorted(p.rsplit("/", 1)[-1] for p in fs.ls(f"{repo}@refs/pr/1", detail=False)) == [".gitattributes",
                                                                                            "a.txt"]
    refs = api.list_repo_refs(repo, include_pull_requests=True)
    assert [(r.name, r.ref, r.target_commit) for r in refs.pull_requests] == [("refs/pr/1", "refs/pr/1", info.oid)]
    assert [b.name for b in refs.branches] == ["main"] and api.list_repo_refs(repo).pull_requests is None
    with pytest.raises(RevisionNotFoundError):
        api.repo_info(repo, revision="refs/pr/2")

    # the pull request is a discussion with its thread and its changes
    d = api.get_discussion_details(repo, 1)
    assert (d.title, d.status, d.is_pull_request, d.author, d.num) == ("Make it v2", "open", True, "alice", 1)
    assert (d.target_branch, d.merge_commit_oid, d.conflicting_files) == ("refs/heads/main", None, [])
    assert d.git_reference == "refs/pr/1" and d.url == info.pr_url
    assert [e.type for e in d.events] == ["comment", "commit"]
    assert d.events[0].content == "Please take **v2**." and "<strong>v2</strong>" in d.events[0].rendered
    assert (d.events[1].oid, d.events[1].summary) == (info.oid, "Make it v2")
    assert "diff --git a/a.txt b/a.txt\n" in d.diff and "-v1\n+v2\n" in d.diff

    # and our own CLI pulls it
    env = client_env(hub, alice, tmp_path)
    ok(run(env, "pull", repo, "--revision", "refs/pr/1", "--local-dir", str(tmp_path / "pulled")))
    assert (tmp_path / "pulled" / "a.txt").read_bytes() == b"v2\n"


def test_upload_folder_and_create_commit_open_pull_requests_against_any_branch(hub, alice, unique, hf_cache,
                                                                               tmp_path, monkeypatch):
    api = hub.api(alice)
    repo = f"alice/pr-folder-{unique}"
    kw = {"repo_id": repo, "repo_type": "dataset"}
    api.create_repo(repo, repo_type="dataset")
    first = api.upload_file(path_or_fileobj=b"keep\n", path_in_repo="keep.txt", **kw).oid
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "x.csv").write_bytes(b"a,b\n1,2\n")
    (folder / "y.csv").write_bytes(b"a,b\n3,4\n")

    def files_at(revision: str) -> dict[str, bytes]:
        return read_snapshot(api.snapshot_download(repo, repo_type="dataset", revision=revision,
                                                   cache_dir=str(hf_cache)))

    # upload_folder as it runs with hf_xet installed (it opens a draft, then commits to its ref)
    one = api.upload_folder(folder_path=folder, path_in_repo="data", create_pr=True, commit_message="Add data", **kw)
    assert one.pr_url == f"{hub.url}/datasets/{repo}/discussions/1" and one.pr_revision == "refs/pr/1"
    assert files_at("refs/pr/1") == {".gitattributes": files_at("main")[".gitattributes"], "keep.txt": b"keep\n",
                                     "data/x.csv": b"a,b\n1,2\n", "data/y.csv": b"a,b\n3,4\n"}
    assert api.get_discussion_details(repo, 1, repo_type="dataset").status == ("draft" if is_xet_available()
                                                                               else "open")
    # ... and without hf_xet: one commit with create_pr=1 opens it
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
    two = api.upload_folder(folder_path=folder, path_in_repo="more", create_pr=True, commit_message="More data", **kw)
    assert two.pr_revision == "refs/pr/2"
    assert api.get_discussion_details(repo, 2, repo_type="dataset").status == "open"
    assert sorted(files_at("refs/pr/2")) == [".gitattributes", "keep.txt", "more/x.csv", "more/y.csv"]
    assert "data/x.csv" not in files_at("main")

    # create_commit against another branch, adding and deleting
    api.create_branch(repo, branch="dev", repo_type="dataset")
    api.upload_file(path_or_fileobj=b"dev only\n", path_in_repo="dev.txt", revision="dev", **kw)
    three = api.create_commit(operations=[CommitOperationAdd("z.csv", b"z\n"), CommitOperationDelete("keep.txt")],
                              commit_message="Rework dev", revision="dev", create_pr=True, **kw)
    assert three.pr_revision == "refs/pr/3"
    d = api.get_discussion_details(repo, 3, repo_type="dataset")
    assert d.target_branch == "refs/heads/dev"
    assert sorted(files_at("refs/pr/3")) == [".gitattributes", "dev.txt", "z.csv"]
    api.merge_pull_request(repo, 3, repo_type="dataset")
    assert sorted(files_at("dev")) == [".gitattributes", "dev.txt", "z.csv"]
    assert sorted(files_at("main")) == [".gitattributes", "keep.txt"]  # main is another branch

    # create_pr with parent_commit starts the pull request there, not at the branch's head
    api.upload_file(path_or_fileobj=b"newer\n", path_in_repo="keep.txt", **kw)
    four = api.create_commit(operations=[CommitOperationAdd("from-old.txt", b"old\n")], commit_message="From old",
                             parent_commit=first, create_pr=True, **kw)
    at_four = files_at(four.pr_revision)
    assert (at_four["keep.txt"], at_four["from-old.txt"]) == (b"keep\n", b"old\n")
    # a pull request targets a branch: a tag, a commit id or a missing branch is not found, as upstream
    api.create_tag(repo, tag="v1", repo_type="dataset")
    for revision in ("v1", first, "no-such-branch"):
        with pytest.raises(RevisionNotFoundError) as err:
            api.create_commit(operations=[CommitOperationAdd("t.txt", b"t")], commit_message="Not to a branch",
                              revision=revision, create_pr=True, **kw)
        assert "is not a branch" in str(err.value)
    assert [d.num for d in api.get_repo_discussions(repo, repo_type="dataset")] == [4, 3, 2, 1]
    # a commit summary longer than a title may be is shortened for the pull request's title
    long = api.create_commit(operations=[CommitOperationAdd("long.txt", b"l")], commit_message="L" * 300,
                             create_pr=True, **kw)
    title = api.get_discussion_details(repo, long.pr_num, repo_type="dataset").title
    assert len(title) == 200 and title.endswith("L…")


def test_bob_opens_a_pull_request_on_alices_public_repo_and_alice_merges_it(hub, alice, bob, carol, unique,
                                                                           hf_cache, no_xet):
    api, bobs = hub.api(alice), hub.api(bob)
    repo = f"alice/pr-bob-{unique}"
    api.create_repo(repo)
    api.upload_file(path_or_fileobj=b"# model\n", path_in_repo="README.md", repo_id=repo)
    weights = os.urandom(11 * MiB)  # over the LFS threshold: the LFS batch, without a ref, as for create_pr
    alice_used, bob_used = quota_used(hub, alice), quota_used(hub, bob)

    # bob cannot write alice's branches...
    with pytest.raises(HfHubHTTPError) as err:
        bobs.upload_file(path_or_fileobj=b"x", path_in_repo="x.txt", repo_id=repo)
    assert status_of(err) == 403
    # ... but opens a pull request, LFS file and all
    info = bobs.upload_file(path_or_fileobj=io.BytesIO(weights), path_in_repo="weights.bin", repo_id=repo,
                            create_pr=True, commit_message="Add weights")
    assert info.pr_num == 1
    assert download(hub, None, repo, "weights.bin", hf_cache, revision="refs/pr/1") == weights
    [entry] = api.get_paths_info(repo, ["weights.bin"], revision="refs/pr/1")
    assert entry.lfs.sha256 == hashlib.sha256(weights).hexdigest()
    assert "weights.bin" not in api.list_repo_files(repo)
    # its bytes count against the repo's namespace (upstream charges the repo owner), not bob's
    assert quota_used(hub, alice) - alice_used >= len(weights)
    assert quota_used(hub, bob) - bob_used < MiB

    # the author pushes more to it; nobody else but the repo's members may
    bobs.upload_file(path_or_fileobj=b'{"fix": 1}', path_in_repo="config.json", repo_id=repo, revision="refs/pr/1",
                     commit_message="Add config")
    with pytest.raises(HfHubHTTPError) as err:
        hub.api(carol).upload_file(path_or_fileobj=b"carol", path_in_repo="c.txt", repo_id=repo,
                                   revision="refs/pr/1")
    assert status_of(err) == 403 and "only the author" in str(err.value)
    d = api.get_discussion_details(repo, 1)
    assert d.author == "bob" and [e.type for e in d.events] == ["commit", "commit"]
    assert [e.summary for e in d.events] == ["Add weights", "Add config"]

    # bob may close and reopen his pull request, not merge it
    with pytest.raises(HfHubHTTPError) as err:
        bobs.merge_pull_request(repo, 1)
    assert status_of(err) == 403 and "write access can merge" in str(err.value)
    assert bobs.change_discussion_status(repo, 1, "closed").new_status == "closed"
    assert bobs.change_discussion_status(repo, 1, "open", comment="Ready again").new_status == "open"

    # alice merges: main now holds bob's bytes, in one commit of hers
    api.merge_pull_request(repo, 1, comment="Thanks!")
    d = api.get_discussion_details(repo, 1)
    assert d.status == "merged" and d.merge_commit_oid == api.repo_info(repo).sha
    assert [(e.type, getattr(e, "new_status", None)) for e in d.events[-2:]] == [("comment", None),
                                                                                ("status-change", "merged")]
    assert download(hub, None, repo, "weights.bin", hf_cache) == weights
    assert download(hub, None, repo, "config.json", hf_cache) == b'{"fix": 1}'
    [merge] = api.list_repo_commits(repo)[:1]
    assert merge.title == "Add weights (#1)" and merge.authors == ["alice"]
    # refs/pr/1 stays readable after the merge, and is closed to pushes
    assert download(hub, None, repo, "config.json", hf_cache, revision="refs/pr/1") == b'{"fix": 1}'
    with pytest.raises(HfHubHTTPError) as err:
        bobs.upload_file(path_or_fileobj=b"late", path_in_repo="late.txt", repo_id=repo, revision="refs/pr/1")
    assert status_of(err) == 400 and "merged" in str(err.value)


# --- discussions --------------------------------------------------------------------------------------


def test_every_discussion_call_of_the_client(hub, alice, bob, unique):
    api, bobs = hub.api(alice), hub.api(bob)
    repo = f"alice/talk-{unique}"
    api.create_repo(repo)
    head = api.repo_info(repo).sha

    talk = api.create_discussion(repo, "  Which license?  ", description="MIT or Apache-2.0?")
    assert (talk.num, talk.title, talk.author, talk.is_pull_request, talk.status) == (1, "Which license?", "alice",
                                                                                      False, "open")
    assert talk.git_reference is None and talk.url == f"{hub.url}/{repo}/discussions/1"
    assert [(e.type, e.content) for e in talk.events] == [("comment", "MIT or Apache-2.0?")]
    assert api.get_discussion_details(repo, 1) == talk

    # an empty pull request: a draft whose ref is the default branch's head
    pr = bobs.create_pull_request(repo, "Add a card")
    assert (pr.num, pr.status, pr.is_pull_request, pr.git_reference, pr.author) == (2, "draft", True, "refs/pr/2",
                                                                                    "bob")
    assert pr.events[0].content.startswith("Pull Request opened with the [huggingface_hub")
    assert api.repo_info(repo, revision="refs/pr/2").sha == head
    assert pr.diff == "" and pr.conflicting_files == []

    listed = list(api.get_repo_discussions(repo))
    assert [(d.num, d.is_pull_request, d.status) for d in listed] == [(2, True, "draft"), (1, False, "open")]
    assert [d.num for d in api.get_repo_discussions(repo, discussion_type="pull_request")] == [2]
    assert [d.num for d in api.get_repo_discussions(repo, discussion_type="discussion")] == [1]
    assert [d.num for d in api.get_repo_discussions(repo, author="bob")] == [2]
    assert [d.num for d in api.get_repo_discussions(repo, discussion_status="open")] == [2, 1]
    assert list(api.get_repo_discussions(repo, discussion_status="closed")) == []

    # comments, edits, hiding
    reply = bobs.comment_discussion(repo, 1, "Apache-2.0, **please**.")
    assert (reply.author, reply.content, reply.edited, reply.hidden) == ("bob", "Apache-2.0, **please**.", False,
                                                                        False)
    edited = bobs.edit_discussion_comment(repo, 1, reply.id, "Apache-2.0, please (patents).")
    assert edited.id == reply.id and edited.edited and edited.content == "Apache-2.0, please (patents)."
    assert edited.edit_history[-1]["raw"] == "Apache-2.0, **please**." and edited.last_edited_by == "bob"
    details = api.get_discussion_details(repo, 1)
    assert details.events[-1] == edited
    first = details.events[0]
    with pytest.raises(HfHubHTTPError) as err:  # not his comment
        bobs.edit_discussion_comment(repo, 1, first.id, "bob was here")
    assert status_of(err) == 403
    assert api.edit_discussion_comment(repo, 1, reply.id, "(trimmed by the owner)").last_edited_by == "alice"
    with pytest.warns(UserWarning):
        hidden = bobs.hide_discussion_comment(repo, 1, reply.id)
    assert hidden.hidden and hidden.content == "" and hidden.edit_history[0]["raw"] == ""
    again = api.get_discussion_details(repo, 1).events[-1]
    assert again.hidden and again.content == "" and all(v["raw"] == "" for v in again.edit_history)
    with pytest.raises(HfHubHTTPError) as err:
        bobs.edit_discussion_comment(repo, 1, reply.id, "back")
    assert status_of(err) == 400

    # titles and statuses
    renamed = api.rename_discussion(repo, 1, "License: Apache-2.0?")
    assert (renamed.old_title, renamed.new_title, renamed.author) == ("Which license?", "License: Apache-2.0?", "alice")
    assert bobs.rename_discussion(repo, 2, "Add a model card").new_title == "Add a model card"  # his own
    with pytest.raises(HfHubHTTPError) as err:
        bobs.rename_discussion(repo, 1, "Hijacked")
    assert status_of(err) == 403
    with pytest.raises(HfHubHTTPError) as err:
        bobs.change_discussion_status(repo, 1, "closed")
    assert status_of(err) == 403
    closed = api.change_discussion_status(repo, 1, "closed", comment="Apache-2.0 it is.")
    assert (closed.type, closed.new_status) == ("status-change", "closed")
    with pytest.raises(HfHubHTTPError) as err:
        api.change_discussion_status(repo, 1, "closed")
    assert status_of(err) == 400 and "already closed" in str(err.value)
    events = api.get_discussion_details(repo, 1).events
    assert [e.type for e in events] == ["comment", "comment", "title-change", "comment", "status-change"]
    assert events[-2].content == "Apache-2.0 it is."
    assert [d.num for d in api.get_repo_discussions(repo, discussion_status="closed")] == [1]
    assert api.change_discussion_status(repo, 1, "open").new_status == "open"

    # what the client refuses before asking, and what the hub refuses
    with pytest.raises(HfHubHTTPError) as err:
        api.create_discussion(repo, "ab")
    assert status_of(err) == 400
    with pytest.raises(HfHubHTTPError) as err:
        api.comment_discussion(repo, 1, "   ")
    assert status_of(err) == 400
    with pytest.raises(HfHubHTTPError) as err:
        api.get_discussion_details(repo, 99)
    assert status_of(err) == 404 and err.value.response.headers["X-Error-Code"] == "DiscussionNotFound"
    with pytest.raises(HfHubHTTPError) as err:
        api.comment_discussion(repo, 99, "hello?")
    assert status_of(err) == 404
    with pytest.raises(HfHubHTTPError) as err:
        api.merge_pull_request(repo, 1)
    assert status_of(err) == 400 and "not a pull request" in str(err.value)


def test_discussions_are_listed_in_pages(hub, alice, unique):
    api = hub.api(alice)
    repo = f"alice/many-{unique}"
    api.create_repo(repo)
    for i in range(53):
        r = requests.post(f"{hub.url}/api/models/{repo}/discussions", headers=auth(alice), timeout=30,
                          json={"title": f"Question {i + 1}", "description": "?", "pullRequest": False})
        assert r.status_code == 200 and r.json()["num"] == i + 1, r.text
    page = requests.get(f"{hub.url}/api/models/{repo}/discussions", params={"p": 1}, timeout=30).json()
    assert (page["count"], page["start"], len(page["discussions"])) == (53, 50, 3)
    assert [d.num for d in api.get_repo_discussions(repo)] == list(range(53, 0, -1))


def test_discussions_and_pull_requests_opened_at_once_get_distinct_numbers(hub, alice, bob, unique, hf_cache):
    from concurrent.futures import ThreadPoolExecutor

    api = hub.api(alice)
    repo = f"alice/race-{unique}"
    api.create_repo(repo)

    def talk(i: int) -> int:
        r = requests.post(f"{hub.url}/api/models/{repo}/discussions", headers=auth(bob), timeout=60,
                          json={"title": f"Question {i}", "description": f"asked by thread {i}"})
        assert r.status_code == 200, r.text
        return r.json()["num"]

    def propose(i: int) -> int:
        return hub.api(alice).upload_file(path_or_fileobj=f"proposal {i}\n".encode(), path_in_repo="p.txt",
                                          repo_id=repo, create_pr=True, commit_message=f"Proposal {i}").pr_num

    with ThreadPoolExecutor(8) as pool:
        talks = [pool.submit(talk, i) for i in range(8)]
        prs = [(i, pool.submit(propose, i)) for i in range(4)]
        nums = [f.result() for f in talks] + [f.result() for _, f in prs]
    assert sorted(nums) == list(range(1, 13))
    for i, f in prs:  # each pull request has its own ref, with its own bytes
        assert download(hub, alice, repo, "p.txt", hf_cache, revision=f"refs/pr/{f.result()}") == \
            f"proposal {i}\n".encode()


# --- merging ------------------------------------------------------------------------------------------


def test_merging_applies_changes_and_refuses_conflicts(hub, alice, unique, hf_cache):
    api = hub.api(alice)
    repo = f"alice/merge-{unique}"
    api.create_repo(repo)
    api.create_commit(repo, commit_message="base", operations=[
        CommitOperationAdd("a.txt", b"a1\n"), CommitOperationAdd("b.txt", b"b1\n"),
        CommitOperationAdd("dir/c.txt", b"c1\n")])
    one = api.create_commit(repo, commit_message="Change a, drop b, add d", create_pr=True, operations=[
        CommitOperationAdd("a.txt", b"a-from-pr1\n"), CommitOperationDelete("b.txt"),
        CommitOperationAdd("d/new.txt", b"new\n")])
    two = api.create_commit(repo, commit_message="Change a too", create_pr=True,
                            operations=[CommitOperationAdd("a.txt", b"a-from-pr2\n")])
    api.upload_file(path_or_fileobj=b"e on main\n", path_in_repo="e.txt", repo_id=repo)  # main moves meanwhile

    d1 = api.get_discussion_details(repo, one.pr_num)
    assert d1.conflicting_files == []
    assert re.findall(r"^diff --git a/(\S+) ", d1.diff, re.M) == ["a.txt", "b.txt", "d/new.txt"]
    assert "deleted file mode" in d1.diff and "new file mode" in d1.diff
    api.merge_pull_request(repo, one.pr_num)
    files = read_snapshot(api.snapshot_download(repo, cache_dir=str(hf_cache)))
    assert {k: v for k, v in files.items() if k != ".gitattributes"} == {
        "a.txt": b"a-from-pr1\n", "dir/c.txt": b"c1\n", "d/new.txt": b"new\n", "e.txt": b"e on main\n"}
    merged = api.get_discussion_details(repo, one.pr_num)
    assert merged.status == "merged" and merged.merge_commit_oid == api.repo_info(repo).sha
    assert merged.conflicting_files == []
    assert download(hub, alice, repo, "a.txt", hf_cache, revision=one.pr_revision) == b"a-from-pr1\n"

    # the second pull request changed a.txt too: main changed it since, so it conflicts
    d2 = api.get_discussion_details(repo, two.pr_num)
    assert d2.conflicting_files == ["a.txt"]
    with pytest.raises(HfHubHTTPError) as err:
        api.merge_pull_request(repo, two.pr_num)
    assert status_of(err) == 409 and "a.txt" in str(err.value)
    assert err.value.response.json()["filesWithConflicts"] == ["a.txt"]
    assert api.get_discussion_details(repo, two.pr_num).status == "open"
    assert download(hub, alice, repo, "a.txt", hf_cache) == b"a-from-pr1\n"
    # taking main's version in the pull request resolves it: nothing of a.txt is left to apply
    api.upload_file(path_or_fileobj=b"a-from-pr1\n", path_in_repo="a.txt", repo_id=repo, revision=two.pr_revision)
    assert api.get_discussion_details(repo, two.pr_num).conflicting_files == []
    with pytest.raises(HfHubHTTPError) as err:
        api.merge_pull_request(repo, two.pr_num)
    assert status_of(err) == 400 and "nothing to merge" in str(err.value)

    # wrong states: merged, closed, draft
    with pytest.raises(HfHubHTTPError) as err:
        api.merge_pull_request(repo, one.pr_num)
    assert status_of(err) == 400 and "merged" in str(err.value)
    api.change_discussion_status(repo, two.pr_num, "closed")
    with pytest.raises(HfHubHTTPError) as err:
        api.merge_pull_request(repo, two.pr_num)
    assert status_of(err) == 400 and "closed" in str(err.value)
    with pytest.raises(HfHubHTTPError) as err:
        api.change_discussion_status(repo, one.pr_num, "open")
    assert status_of(err) == 400 and "merged" in str(err.value)

    # upstream's flow for an empty pull request: a draft, commits to its ref, open, merge
    pr = api.create_pull_request(repo, "Commit some file")
    api.create_commit(repo, commit_message="Commit some file", revision=pr.git_reference,
                      operations=[CommitOperationAdd("file.test", b"Content")])
    with pytest.raises(HfHubHTTPError) as err:
        api.merge_pull_request(repo, pr.num)
    assert status_of(err) == 400 and "draft" in str(err.value)
    api.change_discussion_status(repo, pr.num, "open")
    api.merge_pull_request(repo, pr.num)
    retrieved = api.get_discussion_details(repo, pr.num)
    assert retrieved.status == "merged" and retrieved.merge_commit_oid is not None
    assert download(hub, alice, repo, "file.test", hf_cache) == b"Content"


def test_a_pull_request_whose_start_commit_is_gone_counts_from_what_its_branch_holds(hub, alice, unique,
                                                                                     hf_cache):
    """A history rewrite (deleting LFS files for good gives every ref new commits) can take away the
    commit a pull request started at: its changes then count from the newest commit of its history
    that its branch holds too, and it still merges as before."""
    api = hub.api(alice)
    repo = f"alice/rebased-{unique}"
    api.create_repo(repo)
    api.create_commit(repo, commit_message="base", operations=[CommitOperationAdd("a.txt", b"a1\n"),
                                                                 CommitOperationAdd("b.txt", b"b1\n")])
    pr = api.create_commit(repo, commit_message="Change a", create_pr=True,
                           operations=[CommitOperationAdd("a.txt", b"a2\n")])
    api.upload_file(path_or_fileobj=b"c\n", path_in_repo="c.txt", repo_id=repo)
    before = api.get_discussion_details(repo, pr.pr_num)
    hub.manage("shell", "-c", "from hub.discussions.models import Discussion; "
               f"Discussion.objects.filter(repo__name='rebased-{unique}').update(base_oid='f' * 40)")
    after = api.get_discussion_details(repo, pr.pr_num)
    assert after.diff == before.diff and "+a2" in after.diff and after.conflicting_files == []
    api.merge_pull_request(repo, pr.pr_num)
    files = read_snapshot(api.snapshot_download(repo, cache_dir=str(hf_cache)))
    assert (files["a.txt"], files["b.txt"], files["c.txt"]) == (b"a2\n", b"b1\n", b"c\n")


# --- who may ------------------------------------------------------------------------------------------


def test_who_may_read_open_comment_merge_public_and_private(hub, alice, bob, carol, unique):
    api, bobs = hub.api(alice), hub.api(bob)
    public, private = f"alice/open-{unique}", f"alice/closed-{unique}"
    api.create_repo(public)
    api.create_repo(private, private=True)
    pr = bobs.create_pull_request(public, "A proposal", description="see files")
    talk = api.create_discussion(private, "Internal notes")

    # anonymous callers read the discussions of public repos, and change nothing
    anon = hub.api(None)
    assert [d.num for d in anon.get_repo_discussions(public)] == [pr.num]
    assert anon.get_discussion_details(public, pr.num).title == "A proposal"
    for call in (lambda: anon.comment_discussion(public, pr.num, "hi"),
                 lambda: anon.create_discussion(public, "Anonymous here")):
        with pytest.raises(HfHubHTTPError) as err:
            call()
        assert status_of(err) == 401
    # a read-only token reads, and changes nothing either
    read_only = hub.api(hub.cached_token("alice", read_only=True))
    assert read_only.get_discussion_details(public, pr.num).num == pr.num
    for call in (lambda: read_only.comment_discussion(public, pr.num, "from a read-only token"),
                 lambda: read_only.create_discussion(public, "From a read-only token"),
                 lambda: read_only.merge_pull_request(public, pr.num),
                 lambda: read_only.upload_file(path_or_fileobj=b"x", path_in_repo="x", repo_id=public,
                                               create_pr=True)):
        with pytest.raises(HfHubHTTPError) as err:
            call()
        assert status_of(err) == 403 and "read-only" in str(err.value)
    # a private repo's discussions are as missing as the repo for outsiders
    for outsider in (bobs, anon):
        with pytest.raises(RepositoryNotFoundError):
            list(outsider.get_repo_discussions(private))
        with pytest.raises(RepositoryNotFoundError):
            outsider.get_discussion_details(private, talk.num)
        with pytest.raises(RepositoryNotFoundError):
            outsider.create_discussion(private, "Let me in")
        with pytest.raises(RepositoryNotFoundError):
            outsider.upload_file(path_or_fileobj=b"x", path_in_repo="x", repo_id=private, create_pr=True)
    assert talk.num in [d.num for d in api.get_repo_discussions(private)]

    # in an organisation: a write member merges what a read member proposed; the read member cannot
    org = f"acme-{unique}"
    hub.manage("hub_org", org, "--owner", "alice", "--member", "bob", "--member", "carol:read")
    repo = f"{org}/shared"
    api.create_repo(repo, private=True)
    carols = hub.api(carol)
    proposal = carols.upload_file(path_or_fileobj=b"from carol\n", path_in_repo="c.txt", repo_id=repo, create_pr=True)
    with pytest.raises(HfHubHTTPError) as err:
        carols.merge_pull_request(repo, proposal.pr_num)
    assert status_of(err) == 403
    bobs.merge_pull_request(repo, proposal.pr_num)
    assert api.get_discussion_details(repo, proposal.pr_num).status == "merged"
    # bob (write) may close carol's discussion; only the org's admin (alice) may edit others' comments
    note = carols.create_discussion(repo, "A question", description="carol asks")
    with pytest.raises(HfHubHTTPError) as err:
        bobs.edit_discussion_comment(repo, note.num, note.events[0].id, "bob rewrites")
    assert status_of(err) == 403
    assert api.edit_discussion_comment(repo, note.num, note.events[0].id, "alice moderates").content == \
        "alice moderates"
    assert bobs.change_discussion_status(repo, note.num, "closed").new_status == "closed"


# --- storage: GC keeps pull requests' files; a deleted repo takes its discussions ---------------------


def test_gc_keeps_pull_request_files_and_deleting_a_repo_deletes_its_discussions(hub, alice, bob, unique,
                                                                                hf_cache):
    api = hub.api(alice)
    repo = f"alice/pr-gc-{unique}"
    api.create_repo(repo)
    only_in_pr = os.urandom(3 * MiB)
    info = hub.api(bob).upload_file(path_or_fileobj=only_in_pr, path_in_repo="only-pr.bin", repo_id=repo,
                                    create_pr=True)
    hub.api(bob).change_discussion_status(repo, info.pr_num, "closed")
    # prune (after a branch is deleted) and garbage collection with no grace period
    api.create_branch(repo, branch="scratch")
    api.delete_branch(repo, branch="scratch")
    report = json.loads(hub.manage("hub_gc", "--grace", "0").stdout.strip().splitlines()[-1])
    assert "blobs_deleted" in report
    assert download(hub, alice, repo, "only-pr.bin", hf_cache, revision=info.pr_revision) == only_in_pr

    title = f"Discussion of {unique}"
    api.create_discussion(repo, title)
    count = ("from hub.discussions.models import Discussion; "
             f"print(Discussion.objects.filter(repo__name='pr-gc-{unique}').count())")
    assert hub.manage("shell", "-c", count).stdout.strip().splitlines()[-1] == "2"
    api.delete_repo(repo)
    assert hub.manage("shell", "-c", count).stdout.strip().splitlines()[-1] == "0"
    api.create_repo(repo)
    assert list(api.get_repo_discussions(repo)) == []
    with pytest.raises(RevisionNotFoundError):
        api.repo_info(repo, revision=info.pr_revision)


# --- pages ----------------------------------------------------------------------------------------------


def _csrf(s: requests.Session) -> str:
    return s.cookies["csrftoken"]


def test_pages_list_show_and_act_on_discussions_in_a_session(hub, alice, bob, unique):
    api = hub.api(alice)
    repo = f"alice/pages-{unique}"
    api.create_repo(repo)
    api.upload_file(path_or_fileobj=b"old\n" * 100, path_in_repo="data/keep.txt", repo_id=repo)
    api.upload_file(path_or_fileobj=b"gone\n", path_in_repo="gone.txt", repo_id=repo)
    pr = hub.api(bob).create_commit(repo, commit_message="Bob's changes", create_pr=True, operations=[
        CommitOperationAdd("data/keep.txt", b"new\n" * 150), CommitOperationAdd("added.txt", b"12345"),
        CommitOperationDelete("gone.txt")])
    api.create_discussion(repo, "A closed question")
    api.change_discussion_status(repo, 2, "closed")
    web = f"{hub.url}/{repo}"

    # anyone sees the list (open ones by default) and the thread with the changed files
    page = requests.get(f"{web}/discussions", timeout=30)
    assert page.status_code == 200
    assert "Bob&#x27;s changes" in page.text and "A closed question" not in page.text
    assert re.search(r'id="tab-discussions" class="on">Discussions<span class="count">1</span>', page.text)
    closed = requests.get(f"{web}/discussions?status=closed", timeout=30).text
    assert "A closed question" in closed and "Bob&#x27;s changes" not in closed
    thread = requests.get(f"{web}/discussions/{pr.pr_num}", timeout=30).text
    rows = {path: status for status, path in re.findall(r'<tr class="(added|modified|deleted)" data-path="([^"]+)"',
                                                         thread)}
    assert rows == {"added.txt": "added", "data/keep.txt": "modified", "gone.txt": "deleted"}
    assert "400 B → 600 B" in thread and "5 B" in thread
    assert 'id="merge"' not in thread and "Sign in</a> to comment" in thread

    # bob comments through the form; it shows rendered; he may not merge
    bobs = hub.session("bob")
    r = bobs.post(f"{web}/discussions/{pr.pr_num}/comment", data={"comment": "Ready for **review**.",
                                                                   "csrfmiddlewaretoken": _csrf(bobs)},
                  timeout=30, allow_redirects=False)
    assert r.status_code == 302 and re.search(rf"/discussions/{pr.pr_num}#event-[0-9a-f]{{24}}$", r.headers["Location"])
    thread = bobs.get(f"{web}/discussions/{pr.pr_num}", timeout=30).text
    assert "Ready for <strong>review</strong>." in thread and 'id="merge"' not in thread and 'id="close"' in thread
    r = bobs.post(f"{web}/discussions/{pr.pr_num}/merge", data={"csrfmiddlewaretoken": _csrf(bobs)}, timeout=30)
    assert r.status_code == 200 and "write access can merge" in r.text
    assert api.get_discussion_details(repo, pr.pr_num).status == "open"
    # a form posted without its CSRF token changes nothing
    r = bobs.post(f"{web}/discussions/{pr.pr_num}/comment", data={"comment": "forged"}, timeout=30)
    assert r.status_code == 403
    assert "forged" not in [getattr(e, "content", "") for e in api.get_discussion_details(repo, pr.pr_num).events]

    # alice opens a discussion through the form, and merges the pull request with the button
    alices = hub.session("alice")
    r = alices.post(f"{web}/discussions/new", data={"title": "From the page", "description": "Hello",
                                                    "csrfmiddlewaretoken": _csrf(alices)},
                    timeout=30, allow_redirects=False)
    assert r.status_code == 302 and r.headers["Location"].endswith(f"/{repo}/discussions/3")
    assert api.get_discussion_details(repo, 3).title == "From the page"
    thread = alices.get(f"{web}/discussions/{pr.pr_num}", timeout=30).text
    assert 'id="merge"' in thread
    r = alices.post(f"{web}/discussions/{pr.pr_num}/merge", data={"csrfmiddlewaretoken": _csrf(alices)}, timeout=30)
    assert r.status_code == 200 and "is merged into main" in r.text and 'id="d-status">merged<' in r.text
    assert api.get_discussion_details(repo, pr.pr_num).status == "merged"
    assert sorted(api.list_repo_files(repo)) == [".gitattributes", "added.txt", "data/keep.txt"]
    # an empty title comes back as an error on the list page, the description kept
    r = alices.post(f"{web}/discussions/new", data={"title": "", "description": "kept text",
                                                    "csrfmiddlewaretoken": _csrf(alices)}, timeout=30)
    assert r.status_code == 200 and "a title needs 3 to 200 characters" in r.text and ">kept text</textarea>" in r.text
    # missing discussions and private repos are 404 pages
    assert requests.get(f"{web}/discussions/99", timeout=30).status_code == 404


def test_a_browser_comments_and_merges_under_the_content_security_policy(hub, alice, bob, unique, hf_cache,
                                                                          browser):
    """One cheap Chromium pass: the pages' forms work with no inline script, and nothing is blocked."""
    one_backend(hub)
    from tests.support.web import CSP_WATCH, PHONE, SHOTS

    api = hub.api(alice)
    repo = f"alice/browser-{unique}"
    api.create_repo(repo)
    pr = hub.api(bob).upload_file(path_or_fileobj=b"hello\n", path_in_repo="hello.txt", repo_id=repo, create_pr=True)
    deep = "/".join(["a-rather-long-directory-name"] * 6) + "/and-an-even-longer-file-name-without-breaks.safetensors"
    long_pr = hub.api(bob).upload_file(path_or_fileobj=b"w", path_in_repo=deep, repo_id=repo, create_pr=True,
                                       commit_message="Averyveryverylongtitlewithoutanyspaceswhatsoever" * 3)
    hub.manage("hub_password", "alice", "--password", PASSWORD)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    phones = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
    try:
        page = context.new_page()
        page.set_default_timeout(20_000)
        page.add_init_script(CSP_WATCH)
        page.goto(f"{hub.url}/accounts/login")
        page.fill("#id_username", "alice")
        page.fill("#id_password", PASSWORD)
        page.click("main form button[type=submit]")
        page.wait_for_url(re.compile(r".*/settings$"))
        page.goto(f"{hub.url}/{repo}/discussions")
        page.click(f"tr[data-num='{pr.pr_num}'] a.title")
        page.wait_for_url(re.compile(rf".*/discussions/{pr.pr_num}$"))
        assert page.inner_text("#files tr[data-path='hello.txt'] .change") == "added"
        page.fill("#c-text", "Looks *good*.")
        page.click("#comment button[type=submit]")
        page.wait_for_selector("#thread em:text('good')")
        page.click("#merge")
        page.wait_for_selector("#d-status:text('merged')")
        assert page.evaluate("window.__csp") == []
        # on a phone nothing scrolls sideways, long paths and titles included
        phone = phones.new_page()
        SHOTS.mkdir(parents=True, exist_ok=True)
        for path in (f"/{repo}/discussions?status=all", f"/{repo}/discussions/{pr.pr_num}",
                     f"/{repo}/discussions/{long_pr.pr_num}"):
            phone.goto(hub.url + path)
            assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"], path
        phone.screenshot(path=str(SHOTS / f"{hub.name}-phone-pull-request.png"), full_page=True)
    finally:
        context.close()
        phones.close()
    assert download(hub, None, repo, "hello.txt", hf_cache) == b"hello\n"


# --- transformers -------------------------------------------------------------------------------------


def test_transformers_push_to_hub_with_create_pr(hub, alice, bob, unique, tmp_path):
    """transformers' push_to_hub(create_pr=True), as a contributor runs it: a pull request alice's
    repo did not have, which from_pretrained(revision=...) loads."""
    one_backend(hub)
    repo = f"alice/tf-{unique}"
    hub.api(alice).create_repo(repo)
    script = f"""
from transformers import AutoConfig, BertConfig
cfg = BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37)
info = cfg.push_to_hub("{repo}", create_pr=True, commit_message="Tiny BERT config")
print("PR", info.pr_revision)
print("HIDDEN", AutoConfig.from_pretrained("{repo}", revision=info.pr_revision).hidden_size)
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_", "DJANGO_", "HUB_"))}
    env |= {"HF_ENDPOINT": hub.url, "HF_TOKEN": bob, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_DISABLE_XET": "1",
            "HF_HUB_DISABLE_PROGRESS_BARS": "1", "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1"}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "PR refs/pr/1" in proc.stdout and "HIDDEN 32" in proc.stdout
    d = hub.api(alice).get_discussion_details(repo, 1)
    assert (d.author, d.status, d.title) == ("bob", "open", "Tiny BERT config")
    assert "config.json" in hub.api(alice).list_repo_files(repo, revision="refs/pr/1")
    assert "config.json" not in hub.api(alice).list_repo_files(repo)
