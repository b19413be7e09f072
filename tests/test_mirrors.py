"""Mirroring into a hub whose tasks run in a real Celery worker (PostgreSQL, Ceph RGW, Redis):
from a second live hub speaking the Hugging Face protocol, from an S3 prefix, and — with the
management command on the embedded default — from a directory on the server. Bytes are compared
through the stock huggingface_hub client; the worker is SIGKILLed mid-job and the job still
finishes with one commit per revision and one object per blob.

Personas: carol publishes upstream; alice mirrors into her own namespace; bob is another user;
ops is an operator (staff); dave has a tiny quota."""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
import requests
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, snapshot_download

from tests.support.files import read_snapshot
from tests.support.relay import Relay
from tests.support.servers import PYTHON, ROOT, Hub, base_env
from tests.support.store import s3_client, stored_objects

MB = 2**20


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def auth(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def start_mirror(hub: Hub, token: str | None, **body) -> requests.Response:
    return requests.post(f"{hub.url}/api/v1/mirrors", json=body, headers=auth(token), timeout=60)


def job_of(hub: Hub, token: str | None, job_id: int) -> dict:
    r = requests.get(f"{hub.url}/api/v1/mirrors/{job_id}", headers=auth(token), timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def wait_for(hub: Hub, token: str, job_id: int, until=lambda j: j["state"] in ("done", "failed"),
             timeout: float = 90) -> dict:
    deadline = time.time() + timeout
    while time.time() < deadline:
        job = job_of(hub, token, job_id)
        if until(job):
            return job
        time.sleep(0.3)
    raise AssertionError(f"mirror job {job_id} did not get there in {timeout} s: {job}")


def retry(hub: Hub, token: str, job_id: int) -> dict:
    r = requests.post(f"{hub.url}/api/v1/mirrors/{job_id}/retry", headers=auth(token), timeout=30)
    assert r.status_code == 202, r.text
    return r.json()


def snapshot(hub: Hub, token: str | None, repo_id: str, revision: str, cache: Path, repo_type: str = "model"
             ) -> dict[str, bytes]:
    return read_snapshot(snapshot_download(repo_id, repo_type=repo_type, revision=revision, endpoint=hub.url,
                                           token=token or False, cache_dir=str(cache)))


def commit_titles(hub: Hub, token: str, repo_id: str, revision: str = "main", repo_type: str = "model"
                  ) -> list[str]:
    return [c.title for c in hub.api(token).list_repo_commits(repo_id, revision=revision, repo_type=repo_type)]


def objects_of_size(hub: Hub, size: int) -> list[str]:
    return [k for k, s in stored_objects(hub, "").items() if s == size]


# --- the upstream hub --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def upstream(tmp_path_factory) -> Hub:
    """A second live hub (embedded engines) to mirror from."""
    data = tmp_path_factory.mktemp("upstream")
    hub = Hub("upstream", base_env() | {"HUB_DATA_DIR": str(data)}, data)
    hub.start(data / "server.log")
    yield hub
    hub.stop()


@pytest.fixture(scope="module")
def carol(upstream) -> str:
    return upstream.token("carol")


def publish(upstream: Hub, token: str, repo_id: str, commits: list[dict[str, bytes | None]],
            tags: dict[str, int] = ()) -> list[str]:
    """Pushes one commit per dict (path → bytes, None deletes) and tags commit i; returns the commit ids."""
    api = upstream.api(token)
    api.create_repo(repo_id)
    oids = []
    for i, files in enumerate(commits):
        ops = [CommitOperationAdd(path_in_repo=p, path_or_fileobj=io.BytesIO(d)) if d is not None
               else CommitOperationDelete(path_in_repo=p) for p, d in files.items()]
        oids.append(api.create_commit(repo_id, operations=ops, commit_message=f"commit {i + 1}").oid)
    for tag, i in dict(tags).items():
        api.create_tag(repo_id, tag=tag, revision=oids[i])
    return oids


@pytest.fixture(scope="module")
def tiny_llm(upstream, carol) -> str:
    """carol/tiny-llm: v1 (a 20 MB LFS file and small files), then main (one file changed, one
    added, one deleted), with tag v1 on the first commit and tag latest on main."""
    repo_id = f"carol/tiny-llm-{uuid.uuid4().hex[:6]}"
    publish(upstream, carol, repo_id, [
        {"config.json": b'{"hidden": 64}', "README.md": b"# tiny\n", "weights/model.safetensors": os.urandom(20 * MB + 7),
         "tokenizer/vocab.txt": b"a\nb\nc\n"},
        {"config.json": b'{"hidden": 128}', "extra.bin": os.urandom(3 * MB), "README.md": None},
    ], tags={"v1": 0, "latest": 1})
    return repo_id


@pytest.fixture(scope="module")
def ops(celery_hub) -> str:
    celery_hub.manage("hub_init", "--admin", "ops")
    return celery_hub.token("ops")


# --- from a second hub -------------------------------------------------------------------------------

def test_it_mirrors_a_hub_repo_with_its_tags_byte_for_byte(celery_hub, upstream, carol, tiny_llm, tmp_path):
    alice = celery_hub.cached_token("alice")
    target = f"alice/{tiny_llm.split('/')[1]}"
    r = start_mirror(celery_hub, alice, repo=target, source=upstream.url, source_repo=tiny_llm)
    assert r.status_code == 202, r.text
    assert r.json()["state"] == "queued" and r.json()["source"]["display"] == f"{upstream.url}/{tiny_llm}"
    job = wait_for(celery_hub, alice, r.json()["id"])
    assert job["state"] == "done", job
    # distinct (path, content) over both revisions; the hub's stock .gitattributes is stored here already
    assert job["files"] == {"total": 7, "done": 7, "skipped": 1}
    assert job["bytes"]["fetched"] == job["bytes"]["total"] - job["bytes"]["skipped"] > 23 * MB
    assert job["eta_seconds"] == 0 and job["percent"] == 100.0
    made = {c["name"]: c for c in job["commits"]}
    assert set(made) == {"main", "v1", "latest"}
    assert made["latest"]["commit"] == made["main"]["commit"]  # one commit per upstream revision

    for rev in ("main", "v1", "latest"):
        theirs = snapshot(upstream, carol, tiny_llm, rev, tmp_path / f"up-{rev}")
        ours = snapshot(celery_hub, alice, target, rev, tmp_path / f"ours-{rev}")
        assert ours == theirs, rev
    refs = celery_hub.api(alice).list_repo_refs(target)
    assert {t.name for t in refs.tags} == {"v1", "latest"}
    assert [b.name for b in refs.branches] == ["main"]  # no scratch branch left behind
    # the upstream history, one commit per revision: v1's commit is main's parent
    titles = commit_titles(celery_hub, alice, target)
    assert len(titles) == 3 and titles[-1] == "initial commit"
    assert titles[0].endswith("(main)") and titles[1].endswith("(v1)") and upstream.url in titles[0]

    # a re-run fetches nothing and commits nothing: every file is found stored
    before = stored_objects(celery_hub, "")
    retry(celery_hub, alice, job["id"])
    again = wait_for(celery_hub, alice, job["id"])
    assert again["state"] == "done", again
    assert again["files"] == {"total": 7, "done": 7, "skipped": 7}
    assert again["bytes"]["fetched"] == 0 and again["bytes"]["skipped"] == again["bytes"]["total"]
    assert sorted(again["commits"], key=str) == sorted(job["commits"], key=str)
    assert len(commit_titles(celery_hub, alice, target)) == 3
    assert stored_objects(celery_hub, "") == before  # no object written


def test_it_mirrors_new_upstream_commits_on_top(celery_hub, upstream, carol, tmp_path, monkeypatch):
    from huggingface_hub import constants

    alice = celery_hub.cached_token("alice")
    repo_id = f"carol/growing-{uuid.uuid4().hex[:6]}"
    publish(upstream, carol, repo_id, [{"a.txt": b"one"}])
    target = f"alice/{repo_id.split('/')[1]}"
    first = wait_for(celery_hub, alice, start_mirror(celery_hub, alice, repo=target, source=upstream.url,
                                                     source_repo=repo_id).json()["id"])
    assert first["state"] == "done", first
    # the new commit's weights went up through Xet, as the default client sends them
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", False)
    weights = os.urandom(300_000)
    upstream.api(carol).upload_file(path_or_fileobj=weights, path_in_repo="b.bin", repo_id=repo_id)
    tree = requests.get(f"{upstream.url}/api/models/{repo_id}/tree/main", headers=auth(carol), timeout=30).json()
    assert "xetHash" in next(e for e in tree if e["path"] == "b.bin")
    second = wait_for(celery_hub, alice, start_mirror(celery_hub, alice, repo=target, source=upstream.url,
                                                      source_repo=repo_id, revisions=["main"]).json()["id"])
    assert second["state"] == "done", second
    # .gitattributes, a.txt stored already
    assert second["files"]["skipped"] == 2 and second["bytes"]["fetched"] == len(weights)
    assert len(commit_titles(celery_hub, alice, target)) == 3
    assert snapshot(celery_hub, alice, target, "main", tmp_path / "o") == snapshot(upstream, carol, repo_id, "main",
                                                                                   tmp_path / "u")


# --- from S3 -------------------------------------------------------------------------------------------

def test_it_mirrors_an_s3_prefix_and_refetches_only_what_changed(celery_hub, ops, rgw_env, tmp_path):
    from boto3.s3.transfer import TransferConfig

    from tests.support.servers import drop_bucket

    s3 = s3_client(celery_hub)
    bucket = f"mirror-src-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    try:
        files = {"train/part-0.csv": b"a,b\n1,2\n", "train/part-1.csv": b"a,b\n3,4\n", "meta.json": b"{}",
                 "shards/big.bin": os.urandom(12 * MB + 5)}
        for path, data in files.items():  # big.bin in 5 MiB parts: its ETag is no MD5
            s3.upload_fileobj(io.BytesIO(data), bucket, f"exports/run1/{path}",
                              Config=TransferConfig(multipart_threshold=5 * MB, multipart_chunksize=5 * MB))
        s3.put_object(Bucket=bucket, Key="exports/run10/not-this.txt", Body=b"x")  # same prefix string, not under it
        target = f"lab-{uuid.uuid4().hex[:6]}/run1"  # the namespace does not exist yet: created as an org
        body = {"repo": target, "type": "dataset", "source": f"s3://{bucket}/exports/run1"}
        job = wait_for(celery_hub, ops, start_mirror(celery_hub, ops, **body).json()["id"])
        assert job["state"] == "done", job
        assert job["files"]["total"] == 4 and job["bytes"]["fetched"] == sum(map(len, files.values()))
        ours = snapshot(celery_hub, ops, target, "main", tmp_path / "a", repo_type="dataset")
        assert ours.pop(".gitattributes")  # the hub's own, kept
        assert ours == files

        again = wait_for(celery_hub, ops, start_mirror(celery_hub, ops, **body).json()["id"])
        assert again["state"] == "done" and again["files"]["skipped"] == 4 and again["bytes"]["fetched"] == 0
        assert again["commits"] == job["commits"]  # same listing: no new commit

        s3.put_object(Bucket=bucket, Key="exports/run1/meta.json", Body=b'{"v": 2}')
        third = wait_for(celery_hub, ops, start_mirror(celery_hub, ops, **body).json()["id"])
        assert third["state"] == "done", third
        assert third["bytes"]["fetched"] == len(b'{"v": 2}') and third["files"]["skipped"] == 3
        assert third["commits"][0]["commit"] != job["commits"][0]["commit"]
        ours = snapshot(celery_hub, ops, target, "main", tmp_path / "b", repo_type="dataset")
        assert ours["meta.json"] == b'{"v": 2}' and ours["shards/big.bin"] == files["shards/big.bin"]
        assert len(commit_titles(celery_hub, ops, target, repo_type="dataset")) == 3
    finally:
        drop_bucket(rgw_env, bucket)


# --- a worker killed mid-job ---------------------------------------------------------------------

def test_a_job_whose_worker_is_killed_finishes_once_when_a_worker_comes_back(celery_hub, upstream, carol,
                                                                             tmp_path):
    alice = celery_hub.cached_token("alice")
    big1, big2 = os.urandom(24 * MB + 11), os.urandom(16 * MB + 13)
    small = {f"shards/{i:03d}.json": f'{{"i": {i}}}'.encode() for i in range(40)}
    repo_id = f"carol/slow-{uuid.uuid4().hex[:6]}"
    publish(upstream, carol, repo_id, [small | {"w/one.safetensors": big1},
                                       {"w/two.safetensors": big2, "shards/000.json": b"{}"}], tags={"v1": 0})
    target = f"alice/{repo_id.split('/')[1]}"
    # throttled so that the kill lands mid-download
    r = start_mirror(celery_hub, alice, repo=target, source=upstream.url, source_repo=repo_id, max_rate=5 * MB)
    job_id = r.json()["id"]
    running = wait_for(celery_hub, alice, job_id, lambda j: j["state"] == "running" and j["bytes"]["done"] > 8 * MB,
                       timeout=60)
    assert 0 < running["rate"] <= 6 * MB and running["eta_seconds"] > 0  # progress, rate and ETA while it runs
    celery_hub.worker.kill()
    time.sleep(1)
    assert job_of(celery_hub, alice, job_id)["state"] == "running"  # nobody is running it now
    celery_hub.worker.start()

    job = wait_for(celery_hub, alice, job_id, timeout=90)
    assert job["state"] == "done", job
    assert job["attempts"] == 2
    assert job["bytes"]["resumed"] > 4 * MB  # the partial downloads were continued, not started over
    made = {c["name"]: c["commit"] for c in job["commits"]}
    assert set(made) == {"main", "v1"} and made["main"] != made["v1"]
    assert len(commit_titles(celery_hub, alice, target)) == 3  # initial + one per upstream revision
    for data in (big1, big2):  # one stored object per blob, however often the bytes came
        assert len(objects_of_size(celery_hub, len(data))) == 1
    for rev in ("main", "v1"):
        assert (snapshot(celery_hub, alice, target, rev, tmp_path / f"o-{rev}")
                == snapshot(upstream, carol, repo_id, rev, tmp_path / f"u-{rev}"))


# --- failures -------------------------------------------------------------------------------------

def test_a_failing_source_fails_the_job_with_its_reason_and_a_retry_works_after_the_fix(celery_hub, upstream,
                                                                                        carol, tmp_path):
    alice = celery_hub.cached_token("alice")
    repo_id = f"carol/later-{uuid.uuid4().hex[:6]}"
    target = f"alice/{repo_id.split('/')[1]}"
    job = wait_for(celery_hub, alice, start_mirror(celery_hub, alice, repo=target, source=upstream.url,
                                                   source_repo=repo_id).json()["id"])
    assert job["state"] == "failed" and job["attempts"] == 1  # a missing repo is not retried on its own
    assert f"model {repo_id} not found at {upstream.url}" in job["error"]

    publish(upstream, carol, repo_id, [{"now.txt": b"it exists"}])  # the fix
    retried = retry(celery_hub, alice, job["id"])
    assert retried["state"] == "queued" and retried["error"] is None
    job = wait_for(celery_hub, alice, job["id"])
    assert job["state"] == "done" and job["attempts"] == 2, job
    assert snapshot(celery_hub, alice, target, "main", tmp_path / "o")["now.txt"] == b"it exists"


def test_an_unreachable_upstream_shows_its_reason_while_retried_and_a_retry_works_once_it_is_back(
        celery_hub, upstream, tiny_llm, tmp_path):
    alice = celery_hub.cached_token("alice")
    relay = Relay(("127.0.0.1", upstream.port))  # bound, not listening: connections are refused
    endpoint = f"http://127.0.0.1:{relay.port}"
    target = f"alice/unreachable-{uuid.uuid4().hex[:6]}"
    r = start_mirror(celery_hub, alice, repo=target, source=endpoint, source_repo=tiny_llm, revisions=["main"])
    job = wait_for(celery_hub, alice, r.json()["id"], lambda j: j["error"], timeout=30)
    assert job["state"] in ("queued", "running")  # waiting for its retry, with backoff
    assert job["error"].startswith(f"attempt {job['attempts']} failed: cannot reach {endpoint}")
    assert "Connection refused" in job["error"] and "retrying" in job["error"]

    relay.start()  # the fix
    r = requests.post(f"{celery_hub.url}/api/v1/mirrors/{job['id']}/retry", headers=auth(alice), timeout=30)
    assert r.status_code in (202, 409), r.text  # now, rather than at the next backoff (409: that is running)
    job = wait_for(celery_hub, alice, job["id"])
    assert job["state"] == "done", job
    assert snapshot(celery_hub, alice, target, "main", tmp_path / "o") == snapshot(upstream, None, tiny_llm, "main",
                                                                                   tmp_path / "u")


class LyingUpstream:
    """A hub-protocol server whose listing claims a file with someone else's sha256 (learnt, say,
    from a leaked model card) but serves other bytes."""

    def __init__(self, path: str, claimed_sha256: str, served: bytes) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        commit = "c" * 40
        routes = {
            "/api/models/evil/x/refs": {"branches": [{"name": "main", "ref": "refs/heads/main", "targetCommit": commit}],
                                        "tags": [], "converts": []},
            f"/api/models/evil/x/tree/{commit}": [{"type": "file", "path": path, "size": len(served), "oid": "d" * 40,
                                                  "lfs": {"oid": claimed_sha256, "size": len(served),
                                                          "pointerSize": 130}}],
            f"/api/models/evil/x/commits/{commit}": [{"id": commit, "title": "x"}],
        }

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                route = self.path.split("?")[0]
                if route in routes:
                    body, kind = json.dumps(routes[route]).encode(), "application/json"
                elif route == f"/evil/x/resolve/{commit}/{path}":
                    body, kind = served, "application/octet-stream"
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def test_a_listed_sha256_does_not_copy_someone_elses_private_bytes(celery_hub):
    bob, alice = celery_hub.cached_token("bob"), celery_hub.cached_token("alice")
    secret = os.urandom(MB + 3)
    private = f"bob/private-{uuid.uuid4().hex[:6]}"
    celery_hub.api(bob).create_repo(private, private=True)
    celery_hub.api(bob).upload_file(path_or_fileobj=secret, path_in_repo="secret.bin", repo_id=private)
    liar = LyingUpstream("secret.bin", sha(secret), os.urandom(len(secret)))
    try:
        target = f"alice/stolen-{uuid.uuid4().hex[:6]}"
        job = wait_for(celery_hub, alice, start_mirror(celery_hub, alice, repo=target, source=liar.url,
                                                       source_repo="evil/x").json()["id"])
    finally:
        liar.server.shutdown()
    assert job["state"] == "failed" and job["files"]["skipped"] == 0  # fetched, not taken on the listing's word
    assert "hash to sha256" in job["error"] and sha(secret) in job["error"]
    assert celery_hub.api(alice).list_repo_files(target) == [".gitattributes"]


def test_over_quota_fails_before_fetching_anything(celery_hub, upstream, tiny_llm):
    celery_hub.manage("hub_token", "dave", "--quota", "5MB")
    dave = celery_hub.cached_token("dave")
    r = start_mirror(celery_hub, dave, repo=f"dave/{tiny_llm.split('/')[1]}", source=upstream.url,
                     source_repo=tiny_llm)
    job = wait_for(celery_hub, dave, r.json()["id"])
    assert job["state"] == "failed"
    assert job["error"].startswith("quota exceeded for dave:") and "5 MB" in job["error"]
    assert job["bytes"]["fetched"] == 0
    quota = requests.get(f"{celery_hub.url}/api/quota", headers=auth(dave), timeout=30).json()
    assert quota["reserved"] == 0  # nothing left reserved


# --- who may mirror what -----------------------------------------------------------------------------

def test_only_operators_mirror_into_any_namespace_or_from_the_servers_own_sources(celery_hub, ops, upstream,
                                                                                   tiny_llm):
    alice, bob = celery_hub.cached_token("alice"), celery_hub.cached_token("bob")
    hf = {"source": upstream.url, "source_repo": tiny_llm}
    r = start_mirror(celery_hub, None, repo="alice/anon", **hf)
    assert r.status_code == 401
    r = start_mirror(celery_hub, bob, repo="alice/bobs", **hf)
    assert r.status_code == 403 and r.headers["X-Error-Code"] == "Forbidden"
    r = start_mirror(celery_hub, bob, repo=f"neworg-{uuid.uuid4().hex[:6]}/x", **hf)
    assert r.status_code == 404 and "only an operator" in r.json()["error"]
    r = start_mirror(celery_hub, alice, repo="alice/etc", source="/etc")
    assert r.status_code == 403 and "operator" in r.json()["error"]
    r = start_mirror(celery_hub, alice, repo="alice/bucket", source="s3://hub-celery-anything")
    assert r.status_code == 403 and "credentials" in r.json()["error"]
    r = start_mirror(celery_hub, celery_hub.token("alice", read_only=True), repo="alice/ro", **hf)
    assert r.status_code == 403
    # the server fetches what a source names: users are limited to the allowed hosts (no SSRF)
    r = start_mirror(celery_hub, alice, repo="alice/internal", source="http://10.1.2.3:5432", source_repo=tiny_llm)
    assert r.status_code == 403 and "10.1.2.3 is for operators" in r.json()["error"]
    r = start_mirror(celery_hub, alice, repo="alice/s3internal", source="s3://b/p", s3_endpoint_url="http://169.254.169.254",
                     s3_credentials={"aws_access_key_id": "a", "aws_secret_access_key": "b"})
    assert r.status_code in (400, 403), r.text
    r = start_mirror(celery_hub, alice, repo="alice/badrev", revisions=["a" * 40], **hf)
    assert r.status_code == 400 and "branches or tags" in r.json()["error"]
    schema = requests.get(f"{celery_hub.url}/api/schema", timeout=30).text
    assert "/api/v1/mirrors/{job_id}/retry" in schema


# --- the management command on the embedded default ----------------------------------------------

def test_the_command_mirrors_over_the_plain_hf_protocol_in_process(embedded_hub, upstream, carol, tiny_llm,
                                                                  tmp_path):
    """As from huggingface.co: tree listings (sha256 for LFS files only) and /resolve, no native manifest."""
    env = embedded_hub.env | {"HUB_MIRROR_MANIFEST": "false"}
    target = f"mirrors/{tiny_llm.split('/')[1]}"
    out = subprocess.run([PYTHON, str(ROOT / "manage.py"), "mirror", target, "--source", upstream.url,
                          "--source-repo", tiny_llm, "--revision", "main", "--revision", "v1", "--token", carol],
                         env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "branch main:" in out.stdout and "tag v1:" in out.stdout and "7 files (0 already stored)" in out.stdout
    for rev in ("main", "v1"):
        assert (snapshot(embedded_hub, None, target, rev, tmp_path / f"o-{rev}")
                == snapshot(upstream, carol, tiny_llm, rev, tmp_path / f"u-{rev}"))


def test_the_mirror_command_mirrors_a_directory_in_process(embedded_hub, tmp_path):
    src = tmp_path / "export"
    files = {"data/train.csv": b"x,y\n1,2\n", "data/test.csv": b"x,y\n3,4\n", "model.bin": os.urandom(11 * MB)}
    for path, data in files.items():
        (src / path).parent.mkdir(parents=True, exist_ok=True)
        (src / path).write_bytes(data)
    (src / ".git").mkdir()
    (src / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    repo_id = f"lab/export-{uuid.uuid4().hex[:6]}"
    out = embedded_hub.manage("mirror", repo_id, "--type", "dataset", "--source", str(src)).stdout
    assert "done: 3 files (0 already stored)" in out and "branch main" in out
    # The command finished the viewer its commit started before exiting (a task thread killed at the
    # interpreter's exit leaves the run half done — or aborts the process from inside pyarrow).
    r = requests.get(f"{embedded_hub.url}/api/datasets-server/first-rows", timeout=30,
                     params={"dataset": repo_id, "config": "default", "split": "train"})
    assert r.status_code == 200, r.text
    assert [row["row"] for row in r.json()["rows"]] == [{"x": 1, "y": 2}]
    ours = snapshot(embedded_hub, None, repo_id, "main", tmp_path / "c", repo_type="dataset")  # public
    ours.pop(".gitattributes")
    assert ours == files
    out = embedded_hub.manage("mirror", repo_id, "--type", "dataset", "--source", str(src)).stdout
    assert "3 files (3 already stored)" in out and "0 B fetched" in out

    missing = embedded_hub.manage("mirror", repo_id, "--type", "dataset", "--source", str(src / "nope"), check=False)
    assert missing.returncode == 1
    assert f"{src / 'nope'} is not a directory on the server" in missing.stderr
    assert "manage.py mirror --retry" in missing.stderr


def test_mirror_credentials_are_sealed_at_rest_and_survive_a_rotation_of_the_secret_key(upstream, carol, tiny_llm,
                                                                                         tmp_path):
    """A job's upstream token is in the database only sealed (not readable from a dump or backup);
    rotating SECRET_KEY with the old key in SECRET_KEY_FALLBACKS and `reseal_secrets` keeps it usable;
    a key that cannot open it makes the job fail with a sentence saying what to do."""
    env = base_env() | {"HUB_DATA_DIR": str(tmp_path / "hub"), "SECRET_KEY": "first-key-" + "x" * 40}
    hub = Hub("sealed", env, tmp_path / "hub")
    hub.manage("hub_init")
    hub.manage("mirror", f"mirrors/{tiny_llm.split('/')[1]}", "--source", upstream.url, "--source-repo", tiny_llm,
               "--revision", "main", "--token", carol)
    db = tmp_path / "hub" / "hub.sqlite3"

    def stored() -> str:
        import sqlite3

        with contextlib.closing(sqlite3.connect(db)) as conn:
            (value,) = conn.execute("SELECT credentials FROM mirrors_mirrorjob").fetchone()
        return value

    sealed = stored()
    assert carol not in sealed and carol not in db.read_bytes().decode("latin-1") and sealed.startswith("gAAAAA")
    opened = ("from hub.mirrors.models import MirrorJob; from hub.mirrors.engine import open_source; "
              "job = MirrorJob.objects.get(); source = open_source(job); "
              "print(job.credentials.get('token') == " + repr(carol) + ")")

    rotated = {"SECRET_KEY": "second-key-" + "y" * 40, "SECRET_KEY_FALLBACKS": env["SECRET_KEY"]}
    hub.env = env | rotated
    out = hub.manage("reseal_secrets")
    assert "1 mirror job credentials sealed under the current SECRET_KEY" in out.stdout, out.stderr
    assert stored() != sealed and carol not in stored()
    hub.env = env | {"SECRET_KEY": rotated["SECRET_KEY"]}  # the old key retired
    assert hub.manage("shell", "-c", opened).stdout.strip().endswith("True")

    hub.env = env | {"SECRET_KEY": "third-key-" + "z" * 40}  # a key that never sealed it
    out = hub.manage("reseal_secrets", check=False)
    assert "0 mirror job credentials sealed" in out.stdout and "could not be opened" in out.stderr
    out = hub.manage("shell", "-c", opened, check=False)
    assert out.returncode != 0 and "cannot be opened with this server's SECRET_KEY" in out.stderr
    assert stored().startswith("gAAAAA")  # left as it was, for the right key to open later
