"""Integrity checks and garbage collection, against live hubs: the scrub runs in a real Celery
worker (Redis broker) and catches an object corrupted behind the hub's back; GC deletes only what
nothing references, after its grace period, and never a blob a concurrent commit references."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time

import pytest
import requests
from huggingface_hub import hf_hub_download
from huggingface_hub.errors import HfHubHTTPError

from tests.support.servers import ROOT
from tests.support.store import s3_client, stored_objects

MB = 2**20


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def blob_row(hub, sha256: str) -> dict | None:
    out = hub.manage("shell", "-c", (
        "import json; from hub.content.models import Blob; "
        f"b = Blob.objects.filter(pk='{sha256}').values('key', 'verified', 'corrupt_at', 'corrupt_reason').first(); "
        "print(json.dumps(b, default=str))")).stdout
    return json.loads(out.strip().splitlines()[-1])


def object_key(hub, sha256: str) -> str:
    row = blob_row(hub, sha256)
    return row["key"] or f"blobs/{sha256[:2]}/{sha256[2:4]}/{sha256}"


def overwrite_object(hub, key: str, data: bytes) -> None:
    """Changes stored bytes without the hub knowing (a bit rot, a bad disk, a wrong restore)."""
    url = hub.env.get("HUB_STORAGE_URL")
    if not url:
        path = hub.data_dir / "objects" / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        os.utime(path, (time.time() - 10, time.time() - 10))
        return
    bucket = url.split("://", 1)[1].split("/", 1)[0]
    s3_client(hub).put_object(Bucket=bucket, Key=key, Body=data)


def gc(hub, grace: int = 0, *extra: str) -> dict:
    return json.loads(hub.manage("hub_gc", "--grace", str(grace), *extra).stdout.strip().splitlines()[-1])


def test_a_scrub_in_the_worker_catches_bytes_corrupted_behind_the_hubs_back(celery_hub, unique, hf_cache):
    hub = celery_hub
    token = hub.cached_token("alice")
    api = hub.api(token)
    repo = f"alice/scrubbed-{unique}"
    api.create_repo(repo)
    good, bad = os.urandom(3 * MB), os.urandom(2 * MB)
    api.upload_file(path_or_fileobj=good, path_in_repo="good.bin", repo_id=repo)
    api.upload_file(path_or_fileobj=bad, path_in_repo="weights.bin", repo_id=repo)
    key = object_key(hub, sha(bad))
    overwrite_object(hub, key, bytes(len(bad)))  # same size, all zeros

    out = hub.manage("hub_scrub", "--queue", "--sha256", sha(bad)).stdout
    assert out.startswith("queued")
    deadline = time.time() + 60
    while time.time() < deadline and blob_row(hub, sha(bad))["corrupt_at"] is None:
        time.sleep(0.5)
    row = blob_row(hub, sha(bad))
    assert row["corrupt_at"] is not None and "hash to" in row["corrupt_reason"]
    assert "is corrupt" in (hub.data_dir / "worker.log").read_text()  # the operator is told

    time.sleep(6)  # servers re-read the corrupt set every few seconds
    with pytest.raises(HfHubHTTPError) as err:
        hf_hub_download(repo, "weights.bin", endpoint=hub.url, token=token, cache_dir=hf_cache,
                        force_download=True)
    assert err.value.response.status_code == 409
    assert "integrity check" in str(err.value)
    r = requests.get(f"{hub.url}/api/v1/repos/model/{repo}/manifest", headers={"Authorization": f"Bearer {token}"},
                     timeout=30)
    assert r.status_code == 409 and "weights.bin" in r.json()["error"]
    # the rest of the repo is served as before
    path = hf_hub_download(repo, "good.bin", endpoint=hub.url, token=token, cache_dir=hf_cache)
    assert open(path, "rb").read() == good

    # uploading the same file again (anywhere) heals the blob: the upload is not skipped as
    # "already stored", its verified bytes replace the corrupt ones, every repo serves them again
    api.create_repo(f"{repo}-again")
    api.upload_file(path_or_fileobj=bad, path_in_repo="weights.bin", repo_id=f"{repo}-again")
    assert blob_row(hub, sha(bad))["corrupt_at"] is None
    time.sleep(6)
    path = hf_hub_download(repo, "weights.bin", endpoint=hub.url, token=token, cache_dir=hf_cache,
                           force_download=True)
    assert open(path, "rb").read() == bad
    assert json.loads(hub.manage("hub_scrub", "--sha256", sha(bad)).stdout.strip().splitlines()[-1]) == {
        sha(bad): True}


def test_gc_deletes_only_unreferenced_bytes_and_only_after_the_grace_period(hub, unique, hf_cache):
    token = hub.cached_token("gc-user")
    api = hub.api(token)
    kept, dropped = f"gc-user/kept-{unique}", f"gc-user/dropped-{unique}"
    shared, only_dropped, kept_only = os.urandom(MB), os.urandom(MB + 1), os.urandom(MB + 2)
    for repo in (kept, dropped):
        api.create_repo(repo)
        api.upload_file(path_or_fileobj=shared, path_in_repo="shared.bin", repo_id=repo)
    api.upload_file(path_or_fileobj=kept_only, path_in_repo="mine.bin", repo_id=kept)
    api.upload_file(path_or_fileobj=only_dropped, path_in_repo="gone.bin", repo_id=dropped)
    gone_key = object_key(hub, sha(only_dropped))
    api.delete_repo(dropped)

    # within the grace period nothing goes
    report = gc(hub, 3600)
    assert report["blobs_deleted"] == 0
    assert gone_key in stored_objects(hub, "blobs/")

    # an orphan object nothing names (a crashed upload), and one young enough to keep
    overwrite_object(hub, f"staging/crashed-{unique}", b"junk")
    report = gc(hub, 0)
    assert report["blobs_deleted"] >= 1 and report["bytes_freed"] >= len(only_dropped)
    assert report["orphans_deleted"] >= 1
    objects = stored_objects(hub, "")
    assert gone_key not in objects and f"staging/crashed-{unique}" not in objects
    assert blob_row(hub, sha(only_dropped)) is None
    # everything still referenced is intact, byte for byte
    for name, data in (("shared.bin", shared), ("mine.bin", kept_only)):
        path = hf_hub_download(kept, name, endpoint=hub.url, token=token, cache_dir=hf_cache, force_download=True)
        assert open(path, "rb").read() == data
    # usage is the truth: the two blobs of the kept repo (plus its .gitattributes)
    quota = requests.get(f"{hub.url}/api/quota", headers={"Authorization": f"Bearer {token}"}, timeout=30).json()
    assert len(shared) + len(kept_only) <= quota["used"] < len(shared) + len(kept_only) + 10_000
    # a second run finds nothing more to do
    again = gc(hub, 0)
    assert again["blobs_deleted"] == 0 and again["orphans_deleted"] == 0


def test_gc_racing_with_commits_never_loses_a_referenced_blob(celery_hub, unique, hf_cache):
    """A GC loop runs flat out (grace 0) in its own process while the same bytes are dropped and
    committed again by hash, round after round. Every commit that succeeds must serve its bytes;
    a commit that loses the race fails with a clear message and nothing dangles."""
    hub = celery_hub
    token = hub.cached_token("racer")
    api = hub.api(token)
    data = os.urandom(MB)
    loop = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "shell", "-c",
         "import time\nfrom datetime import timedelta\nfrom hub.repos import gc\n"
         "end = time.time() + 60\nwhile time.time() < end:\n    gc.collect_blobs(timedelta(0))\n"],
        env=hub.env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    won = lost = 0
    try:
        for i in range(12):
            repo = f"racer/r{i}-{unique}"
            api.create_repo(repo)
            try:
                api.upload_file(path_or_fileobj=data, path_in_repo="w.bin", repo_id=repo)
            except (HfHubHTTPError, RuntimeError) as err:
                # Lost at the commit, or (an LFS file) already at its upload's verification, which
                # the client reports as "Error while uploading 'w.bin'" caused by the hub's answer.
                said = f"{err} {err.__cause__}"
                assert "no longer stored" in said or "upload it again" in said or "upload them again" in said, said
                lost += 1
            else:
                won += 1
                path = hf_hub_download(repo, "w.bin", endpoint=hub.url, token=token, cache_dir=hf_cache,
                                       force_download=True)
                assert open(path, "rb").read() == data, f"round {i}: a committed file lost its bytes"
            api.delete_repo(repo)  # unreferenced again: the GC loop goes after it
    finally:
        loop.kill()
        loop.wait()
    assert won >= 1, (won, lost)
    # and after all that, nothing in the database points at missing bytes
    out = hub.manage("shell", "-c", (
        "from hub.content.models import Blob; from hub.repos.models import RepoBlob; from hub.content.blobs import object_store, key_of; "
        "s = object_store(); "
        "print(sum(1 for b in Blob.objects.filter(repo_refs__isnull=False).distinct() "
        "if s.size(key_of(b)) is None))")).stdout
    assert out.strip().splitlines()[-1] == "0"
