"""Quotas on repos, seen as a user sees them: the 413 text in the client's exception, the figures
in /api/quota, space given back, and a limit that holds under a race."""
from __future__ import annotations

import hashlib
import io
import os
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from huggingface_hub import CommitOperationAdd
from huggingface_hub.errors import HfHubHTTPError

from tests.support.hf import auth, lfs_batch
from tests.support.store import stored_objects

MB = 10**6
MIB = 2**20


def quota(hub, token: str) -> dict:
    resp = requests.get(f"{hub.url}/api/quota", headers=auth(token), timeout=10)
    assert resp.status_code == 200, resp.text
    return resp.json()


@pytest.fixture
def carol(hub, unique):
    """A user with a 30 MB quota."""
    name = f"carol{unique}"
    out = hub.manage("hub_token", name, "--quota", "30MB").stdout.strip().splitlines()
    assert f"quota of {name}: 30 MB" in out
    return name, out[-1]


def test_it_reports_limit_usage_and_consumers(hub, carol):
    name, token = carol
    q = quota(hub, token)
    assert (q["namespace"], q["limit"], q["used"], q["reserved"]) == (name, 30 * MB, 0, 0)
    hub.api(token).create_repo(f"{name}/m")
    data = os.urandom(2 * MB)
    hub.api(token).upload_file(path_or_fileobj=data, path_in_repo="w.bin", repo_id=f"{name}/m")
    q = quota(hub, token)
    assert 2 * MB < q["used"] < 2 * MB + 2000  # the file plus the small .gitattributes
    assert q["largest_consumers"][0] == {"kind": "model", "id": f"{name}/m", "bytes": q["used"]}
    assert hub.api(token).whoami()["quota"]["used"] == q["used"]

    # The same bytes twice in the volume count once, in the usage and in the volume's line.
    before = q["used"]
    copy = os.urandom(5000)
    for path in ("a/w.csv", "b/w2.csv"):
        assert requests.put(f"{hub.url}/api/volume/files/{path}", data=copy, headers=auth(token), timeout=30).ok
    q = quota(hub, token)
    assert q["used"] == before + len(copy)
    assert {"kind": "volume", "id": f"{name}/volume", "bytes": len(copy)} in q["largest_consumers"]


def test_it_refuses_an_lfs_upload_over_quota_with_the_figures_and_stores_nothing(hub, carol):
    name, token = carol
    api = hub.api(token)
    api.create_repo(f"{name}/big")
    before = stored_objects(hub)
    too_big = os.urandom(31 * MIB)
    with pytest.raises(HfHubHTTPError) as err:
        api.upload_file(path_or_fileobj=io.BytesIO(too_big), path_in_repo="huge.bin", repo_id=f"{name}/big")
    assert err.value.response.status_code == 413
    text = str(err.value)
    assert f"quota exceeded for {name}:" in text and "of 30 MB used" in text and "this upload needs 32.5 MB" in text
    assert stored_objects(hub) == before
    q = quota(hub, token)
    assert q["reserved"] == 0 and q["used"] < 2000
    assert api.list_repo_files(f"{name}/big") == [".gitattributes"]


def test_it_refuses_inline_files_over_quota_before_storing_them(hub, carol):
    name, token = carol
    api = hub.api(token)
    api.create_repo(f"{name}/inline")
    before = stored_objects(hub)
    ops = [CommitOperationAdd(path_in_repo=f"f{i}.bin", path_or_fileobj=os.urandom(8 * MB)) for i in range(4)]
    with pytest.raises(HfHubHTTPError) as err:
        api.create_commit(f"{name}/inline", operations=ops, commit_message="too much")
    assert err.value.response.status_code == 413 and "quota exceeded" in str(err.value)
    assert stored_objects(hub) == before
    assert quota(hub, token)["reserved"] == 0


def test_it_counts_a_blob_once_per_account_and_once_for_each_account(hub, carol, unique):
    name, token = carol
    other = hub.token(f"dave{unique}")
    data = os.urandom(5 * MB)
    for repo in ("a", "b"):
        hub.api(token).create_repo(f"{name}/{repo}")
        hub.api(token).upload_file(path_or_fileobj=data, path_in_repo="same.bin", repo_id=f"{name}/{repo}")
    used_by_me = quota(hub, token)["used"]
    assert 5 * MB < used_by_me < 5 * MB + 2000  # two repos, one copy counted
    hub.api(other).create_repo(f"dave{unique}/c")
    hub.api(other).upload_file(path_or_fileobj=data, path_in_repo="same.bin", repo_id=f"dave{unique}/c")
    assert 5 * MB < quota(hub, other)["used"] < 5 * MB + 2000
    assert quota(hub, token)["used"] == used_by_me


def test_it_gives_space_back_when_no_revision_references_the_bytes(hub, carol):
    name, token = carol
    api = hub.api(token)
    repo = f"{name}/history"
    api.create_repo(repo)
    base = quota(hub, token)["used"]
    kept, dropped = os.urandom(3 * MB), os.urandom(4 * MB)
    api.upload_file(path_or_fileobj=kept, path_in_repo="kept.bin", repo_id=repo)
    api.create_branch(repo, branch="experiment")
    api.upload_file(path_or_fileobj=dropped, path_in_repo="dropped.bin", repo_id=repo, revision="experiment")
    assert quota(hub, token)["used"] == base + 7 * MB
    # Deleting a file keeps it in history: no space back.
    api.delete_file("kept.bin", repo_id=repo)
    assert quota(hub, token)["used"] == base + 7 * MB
    # Deleting the branch drops the only revision that held dropped.bin.
    api.delete_branch(repo, branch="experiment")
    assert quota(hub, token)["used"] == base + 3 * MB
    # Deleting the repo gives everything back.
    api.delete_repo(repo)
    assert quota(hub, token)["used"] == 0


def test_it_holds_the_limit_when_fifty_uploads_race_for_the_last_bytes(hub, unique):
    name = f"erin{unique}"
    token = hub.manage("hub_token", name, "--quota", "10MB").stdout.strip().splitlines()[-1]
    hub.api(token).create_repo(f"{name}/race")
    free = 10 * MB - quota(hub, token)["used"]
    size = 1 * MB
    blobs = [os.urandom(16) for _ in range(50)]  # only the hashes travel: reservations come first
    oids = [hashlib.sha256(b).hexdigest() for b in blobs]

    def ask(oid: str) -> int:
        resp = requests.post(f"{hub.url}/{name}/race.git/info/lfs/objects/batch", timeout=60,
                             headers=auth(token) | {"Content-Type": "application/vnd.git-lfs+json"},
                             json={"operation": "upload", "transfers": ["basic", "multipart"],
                                   "objects": [{"oid": oid, "size": size}]})
        return resp.status_code

    with ThreadPoolExecutor(max_workers=25) as pool:
        statuses = list(pool.map(ask, oids))
    granted = statuses.count(200)
    assert statuses.count(413) == 50 - granted
    assert granted == free // size
    q = quota(hub, token)
    assert q["reserved"] == granted * size
    assert q["used"] + q["reserved"] <= q["limit"]


def test_it_does_not_charge_bytes_the_account_already_holds(hub, carol):
    name, token = carol
    data = os.urandom(12 * MIB)
    oid = hashlib.sha256(data).hexdigest()
    hub.api(token).create_repo(f"{name}/one")
    hub.api(token).upload_file(path_or_fileobj=io.BytesIO(data), path_in_repo="w.bin", repo_id=f"{name}/one")
    hub.api(token).create_repo(f"{name}/two")
    used = quota(hub, token)["used"]
    answer = lfs_batch(hub, token, f"{name}/two", [(oid, len(data))])["objects"][0]
    assert "actions" not in answer
    assert quota(hub, token)["reserved"] == 0
    hub.api(token).upload_file(path_or_fileobj=io.BytesIO(data), path_in_repo="w.bin", repo_id=f"{name}/two")
    # Same bytes in a second repo of the same account (and the same .gitattributes): nothing more.
    assert quota(hub, token)["used"] == used


RECOUNT = """
from hub.accounts.models import Namespace
from hub.quotas import services as q
ns = Namespace.objects.get(name={name!r})
print(ns.used_bytes, *q.recount(ns))
"""


@pytest.mark.parametrize("size", [1000, 10 * MB + 1], ids=["inline", "lfs"])
def test_commits_that_fail_give_their_reservations_back_at_once(hub, unique, size, monkeypatch):
    """Twelve workers upload a file each into one branch at once (as a distributed job's workers
    do): whatever becomes of each commit, once every call has returned nothing stays reserved and
    the usage is the recount of what the repo references. (Before, each commit that lost the race
    for the branch kept its LFS reservation for a day.)"""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
    name = f"dave{unique}"
    token = hub.manage("hub_token", name, "--quota", "1GB").stdout.strip().splitlines()[-1]
    repo = f"{name}/parallel"
    api = hub.api(token)
    api.create_repo(repo)

    def upload(i: int) -> str:
        try:
            api.upload_file(path_or_fileobj=os.urandom(size), path_in_repo=f"w-{i}.bin", repo_id=repo)
            return "ok"
        except HfHubHTTPError as err:
            assert err.response.status_code in (409, 412), err
            return str(err.response.status_code)

    with ThreadPoolExecutor(12) as pool:
        outcomes = list(pool.map(upload, range(12)))
    assert "ok" in outcomes, outcomes
    q = quota(hub, token)
    assert q["reserved"] == 0, (outcomes, q)
    used, truth, truth_reserved = map(int, hub.manage("shell", "-c", RECOUNT.format(name=name)).stdout.split()[-3:])
    assert (used, truth_reserved) == (truth, 0)
    assert q["used"] == used
    files = {f.path for f in api.list_repo_tree(repo)} - {".gitattributes"}
    assert len(files) == outcomes.count("ok")
