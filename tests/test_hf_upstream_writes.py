"""Writing as upstream does: the stock libraries' upload paths, with the decisions huggingface.co
makes and its clients rely on (upload modes, .gitignore, folder deletes, parallel commits, repo ids
in any case, moved repos, auth-check, card validation, request ids, duplicates, `hf repos ls`).

alice owns the repos, bob is another logged-in user. Every test runs on both backends through the
real huggingface_hub 2.4.0 (and `datasets` for its push_to_hub, in a process of its own, configured
by the environment as users run it). In this process uploads go through LFS (HF_HUB_DISABLE_XET,
tests/conftest.py); `datasets`' and `transformers`' push_to_hub run with default settings, through Xet.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, hf_hub_download
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from tests.support.hf_client import check_ok, client_env, result, run_client

MB = 10**6


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tree(api, repo_id: str, **kw) -> dict[str, object]:
    return {e.path: e for e in api.list_repo_tree(repo_id, recursive=True, **kw)}


def modes(hub, token: str, repo_id: str, files: list[dict], **extra) -> dict[str, tuple[str, bool]]:
    """{path: (uploadMode, shouldIgnore)} as the hub's preupload answers them."""
    resp = requests.post(f"{hub.url}/api/models/{repo_id}/preupload/main", json={"files": files, **extra},
                         headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert resp.status_code == 200, resp.text
    return {f["path"]: (f["uploadMode"], f["shouldIgnore"]) for f in resp.json()["files"]}


# --- datasets' push_to_hub ------------------------------------------------------------------------------

PUSH_DATASET = """
import json, os
from datasets import Dataset, DatasetDict, load_dataset

repo = os.environ["T_REPO"]
DatasetDict({"train": Dataset.from_dict({"text": ["a"] * 1000, "n": list(range(1000))}),
             "test": Dataset.from_dict({"text": ["b"] * 10, "n": list(range(10))})}).push_to_hub(repo)
back = load_dataset(repo, download_mode="force_redownload")
print("RESULT " + json.dumps({split: back[split].to_dict() for split in back}))
"""


def test_datasets_push_to_hub_lands_its_parquet_shards_as_lfs_and_loads_back(hub, alice, unique, tmp_path):
    """datasets preuploads each shard, deletes its temp file once preupload said `lfs` (as upstream
    says for a .parquet), then commits: answering `regular` lost the file (FileNotFoundError)."""
    repo_id = f"alice/pushed-{unique}"
    proc = run_client(PUSH_DATASET, client_env(hub, alice, tmp_path / "home", T_REPO=repo_id))
    got = result(check_ok(proc))
    assert got["train"] == {"text": ["a"] * 1000, "n": list(range(1000))}
    assert got["test"] == {"text": ["b"] * 10, "n": list(range(10))}
    files = tree(hub.api(alice), repo_id, repo_type="dataset")
    shards = [p for p in files if p.endswith(".parquet")]
    assert len(shards) == 2, files.keys()
    assert all(files[p].lfs is not None for p in shards)  # stored as LFS, as upstream stores them
    assert all(files[p].xet_hash for p in shards)  # (they went up through Xet)
    assert "README.md" in files and files["README.md"].lfs is None


PUSH_MODEL = """
import json, os
import torch
from transformers import AutoModel, AutoTokenizer, BertConfig, BertModel, BertTokenizerFast

repo = os.environ["T_REPO"]
torch.manual_seed(0)
model = BertModel(BertConfig(vocab_size=32, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                             intermediate_size=37))
words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "hub"]
tokenizer = BertTokenizerFast(vocab={w: i for i, w in enumerate(words)})
model.push_to_hub(repo)
tokenizer.push_to_hub(repo)
back, tback = AutoModel.from_pretrained(repo), AutoTokenizer.from_pretrained(repo)
same = all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), back.state_dict().values()))
print("RESULT " + json.dumps({"same": same, "ids": tback("hello hub world")["input_ids"]}))
"""


def test_transformers_push_to_hub_of_a_model_and_its_tokenizer_loads_back(hub, alice, unique, tmp_path):
    repo_id = f"alice/bert-{unique}"
    proc = run_client(PUSH_MODEL, client_env(hub, alice, tmp_path / "home", T_REPO=repo_id))
    got = result(check_ok(proc))
    assert got == {"same": True, "ids": [2, 5, 7, 6, 3]}
    files = tree(hub.api(alice), repo_id)
    assert files["model.safetensors"].lfs is not None  # weights through LFS, as .gitattributes says
    assert files["model.safetensors"].xet_hash  # (sent through Xet, the default client's way)
    assert {"config.json", "tokenizer.json", "tokenizer_config.json"} <= set(files)


# --- upload modes and .gitignore -----------------------------------------------------------------------

def test_upload_mode_follows_gitattributes_binary_samples_and_size(hub, alice, unique):
    api = hub.api(alice)
    repo_id = f"alice/modes-{unique}"
    api.create_repo(repo_id)
    api.upload_file(path_or_fileobj=b"data/*.txt filter=lfs diff=lfs merge=lfs -text\n*.bin -filter\n",
                    path_in_repo=".gitattributes", repo_id=repo_id)
    text = base64.b64encode(b"plain text\n").decode()
    binary = base64.b64encode(b"PK\x03\x04\x00\x00").decode()
    assert modes(hub, alice, repo_id, [
        {"path": "notes.txt", "size": 11, "sample": text},
        {"path": "data/rows.txt", "size": 11, "sample": text},       # an LFS rule of the revision
        {"path": "nested/data/rows.txt", "size": 11, "sample": text},  # (the rule names data/ at the root)
        {"path": "weights.bin", "size": 6, "sample": binary},         # a rule unset, but a binary sample
        {"path": "archive.zip", "size": 11, "sample": text},          # the hub's default rules are gone
        {"path": "big.txt", "size": 10 * MB, "sample": text},         # 10 MB or more
    ]) == {"notes.txt": ("regular", False), "data/rows.txt": ("lfs", False),
           "nested/data/rows.txt": ("regular", False), "weights.bin": ("lfs", False),
           "archive.zip": ("regular", False), "big.txt": ("lfs", False)}
    # What is stored that way is reported that way: tree, paths-info and /resolve/.
    api.upload_file(path_or_fileobj=b"row 1\n", path_in_repo="data/rows.txt", repo_id=repo_id)
    api.upload_file(path_or_fileobj=b"row 1\n", path_in_repo="notes.txt", repo_id=repo_id)
    files = tree(api, repo_id)
    assert files["data/rows.txt"].lfs.sha256 == sha256(b"row 1\n") and files["notes.txt"].lfs is None
    info = {e.path: e for e in api.get_paths_info(repo_id, ["data/rows.txt", "notes.txt"])}
    assert info["data/rows.txt"].lfs is not None and info["notes.txt"].lfs is None
    head = requests.head(f"{hub.url}/{repo_id}/resolve/main/data/rows.txt", timeout=30,
                         headers={"Authorization": f"Bearer {alice}"})
    assert head.headers["X-Linked-Etag"].strip('"') == sha256(b"row 1\n")
    head = requests.head(f"{hub.url}/{repo_id}/resolve/main/notes.txt", timeout=30,
                         headers={"Authorization": f"Bearer {alice}"})
    assert len(head.headers["X-Linked-Etag"].strip('"')) == 40  # a git blob id: not LFS


def test_new_repos_gitattributes_make_model_files_lfs_whatever_their_size(hub, alice, unique):
    api = hub.api(alice)
    repo_id = f"alice/small-weights-{unique}"
    api.create_repo(repo_id)
    api.upload_file(path_or_fileobj=b"tiny but a weight file", path_in_repo="model.safetensors", repo_id=repo_id)
    api.upload_file(path_or_fileobj=b'{"a": 1}', path_in_repo="config.json", repo_id=repo_id)
    files = tree(api, repo_id)
    assert files["model.safetensors"].lfs is not None and files["config.json"].lfs is None
    assert open(hf_hub_download(repo_id, "model.safetensors", endpoint=hub.url, token=alice), "rb").read() \
        == b"tiny but a weight file"


def test_the_repos_own_gitignore_is_honoured_by_uploads(hub, alice, unique, tmp_path):
    api = hub.api(alice)
    repo_id = f"alice/ignore-{unique}"
    api.create_repo(repo_id)
    api.upload_file(path_or_fileobj=b"nested/*\n*.log\n!keep.log\n", path_in_repo=".gitignore", repo_id=repo_id)
    for rel in ("nested/file.bin", "run.log", "keep.log", "model/weights.txt"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"x")
    api.upload_folder(folder_path=tmp_path, repo_id=repo_id)
    files = set(api.list_repo_files(repo_id))
    assert {"keep.log", "model/weights.txt"} <= files
    assert not {"nested/file.bin", "run.log"} & files
    # The .gitignore a commit carries is the one that counts for it.
    assert modes(hub, alice, repo_id, [{"path": "run.log", "size": 1}, {"path": "nested/a", "size": 1}],
                 gitIgnore="nested/\n") == {"run.log": ("regular", False), "nested/a": ("regular", True)}


# --- commits -------------------------------------------------------------------------------------------

def test_deleting_a_folder_named_without_its_slash_deletes_the_folder(hub, alice, unique):
    api = hub.api(alice)
    repo_id = f"alice/delfolder-{unique}"
    api.create_repo(repo_id)
    api.create_commit(repo_id, commit_message="add", operations=[
        CommitOperationAdd("sub/a.txt", b"a"), CommitOperationAdd("sub/deep/b.txt", b"b"),
        CommitOperationAdd("subway.txt", b"c")])
    api.create_commit(repo_id, operations=[CommitOperationDelete("sub")], commit_message="drop sub")
    assert set(api.list_repo_files(repo_id)) == {".gitattributes", "subway.txt"}
    with pytest.raises(EntryNotFoundError, match="doesn't exist"):
        api.delete_file("sub", repo_id)


def test_twelve_parallel_uploads_into_one_branch_all_land(hub, unique):
    """One upload_file per worker of a distributed job, all into main at once, with no parent
    commit: each applies to whatever the head is when it lands (before, 4 in 12 got 409)."""
    name = f"erin{unique}"
    token = hub.manage("hub_token", name, "--quota", "1GB").stdout.strip().splitlines()[-1]
    api = hub.api(token)
    repo_id = f"{name}/parallel"
    api.create_repo(repo_id)
    blobs = {f"w-{i}.bin": os.urandom(2000 + i) for i in range(12)}
    with ThreadPoolExecutor(12) as pool:
        list(pool.map(lambda item: api.upload_file(path_or_fileobj=item[1], path_in_repo=item[0], repo_id=repo_id),
                      blobs.items()))
    commits = api.list_repo_commits(repo_id)
    assert len(commits) == 13  # the initial commit and one per upload: a linear history
    for path, data in blobs.items():
        assert open(hf_hub_download(repo_id, path, endpoint=hub.url, token=token, cache_dir=f"/tmp/hfc-{unique}"),
                    "rb").read() == data
    # A stale parent_commit is still refused, as upstream refuses it (412).
    with pytest.raises(HfHubHTTPError) as err:
        api.create_commit(repo_id, operations=[CommitOperationAdd("late.txt", b"x")], commit_message="late",
                          parent_commit=commits[-1].commit_id)
    assert err.value.response.status_code == 412


def test_parallel_uploads_beyond_the_quota_land_until_it_is_full_and_the_rest_say_so(hub, unique):
    name = f"fay{unique}"
    token = hub.manage("hub_token", name, "--quota", "10MB").stdout.strip().splitlines()[-1]
    api = hub.api(token)
    repo_id = f"{name}/full"
    api.create_repo(repo_id)

    def upload(i: int) -> str:
        try:
            api.upload_file(path_or_fileobj=os.urandom(MB), path_in_repo=f"w-{i}.bin", repo_id=repo_id)
            return "ok"
        except HfHubHTTPError as err:
            assert err.response.status_code == 413, err
            assert "quota" in str(err).lower(), err
            return "full"

    with ThreadPoolExecutor(12) as pool:
        outcomes = list(pool.map(upload, range(12)))
    assert outcomes.count("ok") == 9, outcomes  # 10 MB holds the .gitattributes and nine 1 MB files
    landed = {f for f in api.list_repo_files(repo_id) if f.startswith("w-")}
    assert len(landed) == 9
    quota = requests.get(f"{hub.url}/api/quota", headers={"Authorization": f"Bearer {token}"}, timeout=30).json()
    assert quota["reserved"] == 0


# --- repo ids ------------------------------------------------------------------------------------------

def test_repo_ids_are_case_insensitive(hub, alice, unique):
    api = hub.api(alice)
    repo_id = f"alice/CaSe_Is_ImPoRtAnT-{unique}"
    url = api.create_repo(repo_id)
    api.create_commit(repo_id.lower(), commit_message="lower", operations=[
        CommitOperationAdd("file.txt", b"content"), CommitOperationAdd("lfs.bin", b"LFS content")])
    assert {"file.txt", "lfs.bin"} <= set(api.list_repo_files(repo_id))
    assert api.model_info(repo_id.upper()).id == repo_id  # answered, under its own spelling
    assert open(hf_hub_download(f"ALICE/case_is_important-{unique}", "file.txt", endpoint=hub.url, token=alice,
                                cache_dir=f"/tmp/hfc-{unique}"), "rb").read() == b"content"
    with pytest.raises(HfHubHTTPError) as err:
        api.create_repo(f"Alice/case_is_important-{unique}")
    assert err.value.response.status_code == 409 and err.value.response.json()["url"] == url
    assert api.create_repo(f"Alice/case_is_important-{unique}", exist_ok=True) == url


def test_an_id_without_a_namespace_is_a_missing_repo(hub, alice):
    api = hub.api(alice)
    assert api.repo_exists("gpt2") is False
    assert api.file_exists("gpt2", "config.json") is False
    assert api.revision_exists("gpt2", "main") is False
    with pytest.raises(RepositoryNotFoundError):
        api.list_repo_commits("gpt2")
    resp = requests.get(f"{hub.url}/api/datasets/squad/tree/main", timeout=30)
    assert (resp.status_code, resp.headers["X-Error-Code"]) == (404, "RepoNotFound")


def test_a_moved_repo_answers_at_its_old_id_until_one_is_created_there(hub, alice, bob, unique, tmp_path):
    api = hub.api(alice)
    old, new = f"alice/before-{unique}", f"alice/after-{unique}"
    api.create_repo(old, private=True)
    api.upload_file(path_or_fileobj=b"content", path_in_repo="file.txt", repo_id=old)
    api.move_repo(old, new)
    # resolve, the API and the pages follow to the new id
    assert open(api.hf_hub_download(old, "file.txt", cache_dir=tmp_path / "c1"), "rb").read() == b"content"
    assert api.model_info(old).id == new
    api.upload_file(path_or_fileobj=b"more", path_in_repo="more.txt", repo_id=old)  # a write follows too
    assert "more.txt" in api.list_repo_files(new)
    session = hub.session("alice")
    page = session.get(f"{hub.url}/{old}", timeout=30, allow_redirects=False)
    assert page.status_code == 307 and page.headers["Location"] == f"/{new}"
    assert session.get(f"{hub.url}/{old}/tree/main", timeout=30).url == f"{hub.url}/{new}/tree/main"
    # ... but only for those who may read it: the repo is private
    assert not hub.api(bob).repo_exists(old)
    # A repo created at the old id is that repo from then on.
    api.create_repo(old)
    assert api.list_repo_files(old) == [".gitattributes"]
    assert "more.txt" in api.list_repo_files(new)


# --- small endpoints -----------------------------------------------------------------------------------

def test_auth_check_says_who_may_read(hub, alice, bob, unique):
    owner = hub.api(alice)
    private, gated = f"alice/private-{unique}", f"alice/gated-{unique}"
    owner.create_repo(private, private=True)
    owner.create_repo(gated)
    owner.update_repo_settings(gated, gated="auto")
    owner.auth_check(private)
    owner.auth_check(private, write=True)
    with pytest.raises(RepositoryNotFoundError):
        hub.api(bob).auth_check(private)
    with pytest.raises(RepositoryNotFoundError):
        hub.api(bob).auth_check(f"alice/missing-{unique}")
    with pytest.raises(GatedRepoError):
        hub.api(bob).auth_check(gated)
    with pytest.raises(HfHubHTTPError) as err:
        hub.api(bob).auth_check(gated, write=True)
    assert err.value.response.status_code == 403
    requests.post(f"{hub.url}/api/v1/repos/model/{gated}/access", headers={"Authorization": f"Bearer {bob}"},
                  timeout=30).raise_for_status()
    hub.api(bob).auth_check(gated)


INVALID_CARD = "\n---\nmodel-index: foo\n---\n\nA card with broken metadata.\n"  # (a blank line first, as upstream allows)
VALID_CARD = """---
license: apache-2.0
model-index:
- name: tiny
  results:
  - task: {type: text-classification}
    dataset: {type: glue, name: GLUE}
    metrics: [{type: accuracy, value: 0.9}]
---
A card.
"""


def test_cards_are_validated_before_upload_and_at_commit(hub, alice, unique):
    api = hub.api(alice)
    repo_id = f"alice/cards-{unique}"
    api.create_repo(repo_id)
    with pytest.raises(ValueError, match="Invalid metadata in README.md"):
        api.upload_file(path_or_fileobj=INVALID_CARD.encode(), path_in_repo="README.md", repo_id=repo_id)
    with pytest.warns(UserWarning, match="Warnings while validating metadata in README.md"):
        api.upload_file(path_or_fileobj=b"A card without metadata", path_in_repo="README.md", repo_id=repo_id)
    api.upload_file(path_or_fileobj=VALID_CARD.encode(), path_in_repo="README.md", repo_id=repo_id)
    assert api.model_info(repo_id).card_data["license"] == "apache-2.0"
    # A client that skips the check is refused at the commit itself, with the reason.
    resp = requests.post(f"{hub.url}/api/models/{repo_id}/commit/main", timeout=30,
                         headers={"Authorization": f"Bearer {alice}", "Content-Type": "application/x-ndjson"},
                         data=b'{"key": "header", "value": {"summary": "bad card"}}\n'
                              b'{"key": "file", "value": {"path": "README.md", "encoding": "base64", "content": "'
                              + base64.b64encode(INVALID_CARD.encode()) + b'"}}\n')
    assert resp.status_code == 400 and "model-index" in resp.headers["X-Error-Message"]
    assert open(api.hf_hub_download(repo_id, "README.md", cache_dir=f"/tmp/hfc-{unique}")).read() == VALID_CARD


def test_responses_carry_a_request_id_and_commits_their_formatted_text(hub, alice, unique):
    api = hub.api(alice)
    repo_id = f"alice/reqid-{unique}"
    api.create_repo(repo_id)
    api.upload_file(path_or_fileobj=b"x", path_in_repo="a.txt", repo_id=repo_id,
                    commit_message="Add <a.txt>", commit_description="Some **bold** words")
    for url in (f"{hub.url}/api/models/{repo_id}", f"{hub.url}/api/models/{repo_id}/tree/main/missing",
                f"{hub.url}/{repo_id}/resolve/main/a.txt", f"{hub.url}/datasets"):
        resp = requests.get(url, timeout=30, allow_redirects=False)  # (a 302 to the store is ours too)
        assert len(resp.headers.get("X-Request-Id", "")) >= 16, url
    with pytest.raises(EntryNotFoundError) as err:  # the client quotes it, for a user's report
        api.hf_hub_download(repo_id, "missing.txt", cache_dir=f"/tmp/hfc-{unique}")
    assert "Request ID:" in str(err.value)
    plain = api.list_repo_commits(repo_id)
    assert plain[0].formatted_title is None
    latest = api.list_repo_commits(repo_id, formatted=True)[0]
    assert latest.formatted_title == "Add &lt;a.txt&gt;"
    assert "<strong>bold</strong>" in latest.formatted_message


def test_duplicating_a_repo_copies_no_bytes_and_is_charged_to_the_new_owner(hub, alice, bob, unique, tmp_path):
    owner = hub.api(alice)
    source = f"alice/original-{unique}"
    owner.create_repo(source)
    weights = os.urandom(300_000)
    owner.upload_file(path_or_fileobj=weights, path_in_repo="model.safetensors", repo_id=source)
    owner.upload_file(path_or_fileobj=b"{}", path_in_repo="config.json", repo_id=source)
    bob_api = hub.api(bob)
    url = bob_api.duplicate_repo(source, to_id=f"bob/copy-{unique}", private=True)
    assert url.repo_id == f"bob/copy-{unique}"
    assert bob_api.model_info(url.repo_id).private is True
    assert open(bob_api.hf_hub_download(url.repo_id, "model.safetensors", cache_dir=tmp_path), "rb").read() == weights
    # bob's copy is bob's: it changes without touching alice's, and his listing shows what it uses.
    bob_api.delete_file("config.json", url.repo_id)
    assert "config.json" in owner.list_repo_files(source)
    listed = {r.id: r for r in bob_api.list_user_repos()}
    assert listed[url.repo_id].storage >= len(weights) and listed[url.repo_id].visibility == "private"
    with pytest.raises(HfHubHTTPError) as err:
        bob_api.duplicate_repo(source, to_id=f"bob/copy-{unique}")
    assert err.value.response.status_code == 409


def test_hf_repos_ls_lists_your_repos_with_their_storage(hub, alice, unique, tmp_path):
    api = hub.api(alice)
    repo_id = f"alice/listed-{unique}"
    api.create_repo(repo_id, private=True)
    api.upload_file(path_or_fileobj=os.urandom(50_000), path_in_repo="w.bin", repo_id=repo_id)
    proc = run_client("import sys; sys.argv = ['hf', 'repos', 'ls', '--limit', '0', '--format', 'json'];"
                      "from huggingface_hub.cli.hf import main; main()",
                      client_env(hub, alice, tmp_path / "home"), timeout=120)
    rows = {r["id"]: r for r in json.loads(check_ok(proc))}
    assert rows[repo_id]["visibility"] == "private" and rows[repo_id]["type"] == "model"


def test_super_squash_keeps_the_files_and_gives_back_what_only_old_revisions_held(hub, unique, tmp_path):
    name = f"gus{unique}"
    token = hub.manage("hub_token", name, "--quota", "1GB").stdout.strip().splitlines()[-1]
    api = hub.api(token)
    repo_id = f"{name}/squashed"
    api.create_repo(repo_id)
    old, new = os.urandom(400_000), os.urandom(300_000)
    api.upload_file(path_or_fileobj=old, path_in_repo="w.bin", repo_id=repo_id)
    api.upload_file(path_or_fileobj=new, path_in_repo="w.bin", repo_id=repo_id)
    api.create_branch(repo_id, branch="keep")
    api.upload_file(path_or_fileobj=b"on a branch", path_in_repo="b.txt", repo_id=repo_id, revision="keep")

    def used() -> int:
        return requests.get(f"{hub.url}/api/quota", headers={"Authorization": f"Bearer {token}"},
                            timeout=30).json()["used"]

    assert used() >= len(old) + len(new)
    api.super_squash_history(repo_id)
    commits = api.list_repo_commits(repo_id)
    assert [c.title for c in commits] == ["Super-squash branch 'main' using huggingface_hub"]
    assert len(api.list_repo_commits(repo_id, revision="keep")) == 4  # another branch keeps its history
    assert open(api.hf_hub_download(repo_id, "w.bin", cache_dir=tmp_path), "rb").read() == new
    assert used() >= len(old) + len(new)  # the branch "keep" still holds the old bytes
    api.delete_branch(repo_id, branch="keep")
    assert len(new) <= used() < len(new) + 10_000  # only what main holds now
    with pytest.raises(HfHubHTTPError) as err:
        hub.api(hub.cached_token("bob")).super_squash_history(repo_id)
    assert err.value.response.status_code == 403


def test_errors_are_the_ones_upstream_gives(hub, alice, unique):
    """Status codes and the words scripts match on, as huggingface.co answers them."""
    api = hub.api(alice)
    repo_id = f"alice/errors-{unique}"
    api.create_repo(repo_id)
    api.create_repo(f"{repo_id}-other")
    with pytest.raises(RevisionNotFoundError):  # the missing revision, before the bad tag name
        api.create_tag(repo_id, tag="invalid tag", revision="foobar")
    with pytest.raises(HfHubHTTPError) as err:
        api.upload_file(path_or_fileobj=b"content", path_in_repo="..\\ddd", repo_id=repo_id)
    assert err.value.response.status_code == 422
    with pytest.raises(HfHubHTTPError, match=r"A model repository called .* already exists"):
        api.move_repo(repo_id, f"{repo_id}-other")
    with pytest.raises(HfHubHTTPError, match="Reference refs/heads/main already exists"):
        api.create_branch(repo_id, branch="main")
    with pytest.raises(HfHubHTTPError, match="Cannot delete refs/heads/main"):
        api.delete_branch(repo_id, branch="main")
    with pytest.raises(HfHubHTTPError, match="Invalid rev id"):
        api.delete_branch(repo_id, branch="cool-branch")
    head = api.model_info(repo_id).sha
    api.upload_file(path_or_fileobj=b"x", path_in_repo="x.txt", repo_id=repo_id)
    with pytest.raises(HfHubHTTPError, match="The branch was updated since you opened this page") as err:
        api.upload_file(path_or_fileobj=b"y", path_in_repo="y.txt", repo_id=repo_id, parent_commit=head)
    assert err.value.response.status_code == 412


def test_lfs_files_are_listed_and_deleted_for_good_from_every_revision(hub, unique, tmp_path):
    """A checkpoint pushed by mistake holds quota in every revision that has it; deleting it for good
    rewrites those revisions (other files and commits stay) and gives the bytes back."""
    name = f"hal{unique}"
    token = hub.manage("hub_token", name, "--quota", "1GB").stdout.strip().splitlines()[-1]
    api = hub.api(token)
    repo_id = f"{name}/lfs-files"
    api.create_repo(repo_id)
    mistake, keep = os.urandom(500_000), os.urandom(100_000)
    api.upload_file(path_or_fileobj=mistake, path_in_repo="ckpt/step-1.bin", repo_id=repo_id)
    api.upload_file(path_or_fileobj=keep, path_in_repo="model.safetensors", repo_id=repo_id)
    api.upload_file(path_or_fileobj=b"notes", path_in_repo="notes.txt", repo_id=repo_id)
    api.create_branch(repo_id, branch="exp")
    api.upload_file(path_or_fileobj=mistake, path_in_repo="again/copy.bin", repo_id=repo_id, revision="exp")
    api.delete_file("ckpt/step-1.bin", repo_id)  # gone from main's head, still in its history

    listed = {f.filename: f for f in api.list_lfs_files(repo_id)}
    assert set(listed) == {"ckpt/step-1.bin", "model.safetensors"}  # (each object once: where first pushed)
    assert listed["ckpt/step-1.bin"].size == len(mistake) and listed["ckpt/step-1.bin"].ref == "main"
    assert listed["ckpt/step-1.bin"].oid == sha256(mistake)

    def used() -> int:
        return requests.get(f"{hub.url}/api/quota", headers={"Authorization": f"Bearer {token}"},
                            timeout=30).json()["used"]

    before = used()
    titles = [c.title for c in api.list_repo_commits(repo_id)]
    api.permanently_delete_lfs_files(repo_id, [listed["ckpt/step-1.bin"]])
    assert {f.filename for f in api.list_lfs_files(repo_id)} == {"model.safetensors"}
    assert used() == before - len(mistake)
    assert [c.title for c in api.list_repo_commits(repo_id)] == titles  # the history, minus the file
    assert set(api.list_repo_files(repo_id, revision="exp")) == {".gitattributes", "model.safetensors", "notes.txt"}
    for commit in api.list_repo_commits(repo_id):
        assert "ckpt/step-1.bin" not in api.list_repo_files(repo_id, revision=commit.commit_id)
    assert open(api.hf_hub_download(repo_id, "model.safetensors", cache_dir=tmp_path), "rb").read() == keep
    with pytest.raises(HfHubHTTPError) as err:  # only writers see and delete
        list(hub.api(hub.cached_token("bob")).list_lfs_files(repo_id))
    assert err.value.response.status_code in (403, 404)
