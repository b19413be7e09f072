"""Faults, each with real parts: the object store going away, PostgreSQL restarting under traffic,
kill -9 of the server in the middle of commits, and a client's disk filling up during `hub pull`.

Every scenario runs a hub of its own (own database, own bucket or directory), so cutting its store
or killing its processes disturbs no other test; the shared Ceph RGW is never stopped (the store
"outage" is a TCP proxy in front of it that the test cuts). The PostgreSQL restart is the one
exception: it restarts the machine's cluster, once, and waits until it answers again.
(The mount with the hub itself unreachable is in tests/test_mount.py; here the hub is up and its store
is not.)"""
from __future__ import annotations

import base64
import contextlib
import errno
import hashlib
import json
import os
import random
import re
import socket
import subprocess
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from tests.support.files import small_disk
from tests.support.servers import (
    PG_ADMIN_URL,
    Hub,
    base_env,
    free_port,
    fresh_database,
    launch_hub,
    scratch_bucket,
)

MIB = 2**20


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


# --- a store the test can cut -------------------------------------------------------------------------

class TcpProxy:
    """Forwards 127.0.0.1:port to a target port. `down()` closes the listener and every open
    connection (clients then get 'connection refused', as from a dead store); `up()` listens again
    on the same port."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self._cut_at: int | None = None  # see cut_after
        self._hold: tuple[bytes, bytes, threading.Event, threading.Event] | None = None  # see hold_request
        self._answered = 0
        self._listener: socket.socket | None = None
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def up(self) -> None:
        lsock = socket.socket()
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lsock.bind(("127.0.0.1", self.port))
        lsock.listen(64)
        lsock.settimeout(0.2)
        self._listener, self._stop = lsock, threading.Event()
        self._thread = threading.Thread(target=self._accept, args=(lsock, self._stop), daemon=True)
        self._thread.start()

    def cut_after(self, nbytes: int) -> None:
        """Goes down by itself once the store has sent `nbytes` more (in answers, to any client):
        an outage in the middle of a large read."""
        with self._lock:
            self._answered, self._cut_at = 0, nbytes

    def hold_request(self, start: bytes, holding: str) -> tuple[threading.Event, threading.Event]:
        """Holds back the next request (client to store) that starts with `start` and holds
        `holding`: returns (held, release) — `held` is set once one is waiting, and it goes on to
        the store when the test sets `release`."""
        held, release = threading.Event(), threading.Event()
        self._hold = (start, holding.encode(), held, release)
        return held, release

    def down(self) -> None:
        self._cut_at = None
        self._stop.set()
        if self._thread:
            self._thread.join(5)
        if self._listener:
            self._listener.close()
            self._listener = None
        with self._lock:
            conns, self._conns = self._conns, set()
        for c in conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
            c.close()

    def _accept(self, lsock: socket.socket, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                client, _ = lsock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            client.settimeout(None)
            with self._lock:
                self._conns |= {client, upstream}
            for a, b, answers in ((client, upstream, False), (upstream, client, True)):
                threading.Thread(target=self._pump, args=(a, b, answers), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, answers: bool) -> None:
        try:
            while data := src.recv(256 * 1024):
                hold = self._hold
                if not answers and hold and data.startswith(hold[0]) and hold[1] in data.split(b"\r\n", 1)[0]:
                    self._hold = None
                    hold[2].set()
                    hold[3].wait(60)
                if answers and self._cut_at is not None:
                    with self._lock:
                        self._answered += len(data)
                        cut = self._cut_at is not None and self._answered >= self._cut_at
                    if cut:  # down before the client can see it, so a test's up() comes after
                        self.down()
                        return
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)


def s3_client(rgw_env: dict[str, str]):
    import boto3

    return boto3.client("s3", endpoint_url=rgw_env["AWS_ENDPOINT_URL"], region_name="us-east-1",
                        aws_access_key_id=rgw_env["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=rgw_env["AWS_SECRET_ACCESS_KEY"])


def bucket_objects(s3, bucket: str) -> dict[str, int]:
    out = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for o in page.get("Contents", []):
            out[o["Key"]] = o["Size"]
    return out


DB_STATE = """
import json
from hub.content.models import Blob
from hub.repos.models import RepoBlob
from hub.content.blobs import key_of
from hub.volumes.models import VolumeEntry
print(json.dumps({
    "blobs": [[b.sha256, key_of(b), b.size, b.verified] for b in Blob.objects.all()],
    "referenced": sorted(set(RepoBlob.objects.values_list("blob_id", flat=True))
                         | set(VolumeEntry.objects.exclude(blob_id=None).values_list("blob_id", flat=True))),
}))
"""


def assert_rows_point_at_stored_bytes(hub: Hub, stored: dict[str, int]) -> int:
    """Every blob the database calls verified, and every blob a repo or volume references, has its
    bytes in the store with the right size. Returns the number of blobs checked."""
    state = json.loads(hub.manage("shell", "-c", DB_STATE).stdout.strip().splitlines()[-1])
    blobs = {sha: (key, size, verified) for sha, key, size, verified in state["blobs"]}
    for sha in state["referenced"]:
        assert sha in blobs and blobs[sha][2], f"{sha} is referenced but not a verified blob"
    checked = 0
    for sha, (key, size, verified) in blobs.items():
        if verified or sha in state["referenced"]:
            assert stored.get(key) == size, f"blob {sha} points at {key}, which the store does not hold ({size} B)"
            checked += 1
    return checked


# Every account's quota as its owner sees it (quotas.report, what GET /api/quota answers) beside a
# recount from the references and reservations themselves.
QUOTAS = """
import json
from hub.accounts.models import Namespace
from hub.quotas import services as q
rows = []
for ns in Namespace.objects.all():
    seen = q.report(ns)
    rows.append([ns.name, seen.used, seen.reserved, *q.recount(ns)])
print(json.dumps(rows))
"""


def assert_quota_settled(hub: Hub, timeout: float = 30) -> None:
    """Once the dust settles after a fault, nothing stays reserved (a failed request gave back what
    it held at once, a dead one's lease lapsed) and every account's usage equals a recount from what
    its repos and volume reference."""
    deadline = time.monotonic() + timeout
    while True:
        rows = json.loads(hub.manage("shell", "-c", QUOTAS).stdout.strip().splitlines()[-1])
        held = {name: reserved for name, _, reserved, _, _ in rows if reserved}
        if not held or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert not held, f"still reserved after {timeout} s: {held}"
    for name, used, reserved, truth_used, truth_reserved in rows:
        assert (used, reserved) == (truth_used, truth_reserved), (name, used, reserved, truth_used, truth_reserved)


# --- 1. the object store goes down ---------------------------------------------------------------------

@pytest.fixture
def store_proxy_hub(tmp_path_factory, rgw_env):
    """A hub (SQLite) whose S3 bucket on the shared Ceph RGW is reached only through a TcpProxy."""
    proxy = TcpProxy(int(rgw_env["AWS_ENDPOINT_URL"].rsplit(":", 1)[1]))
    proxy.up()
    with scratch_bucket(rgw_env, f"hub-fault-{uuid.uuid4().hex[:10]}") as bucket:
        try:
            data = tmp_path_factory.mktemp("store-down")
            env = base_env() | rgw_env | {"HUB_DATA_DIR": str(data), "HUB_STORAGE_URL": f"s3://{bucket}",
                                          "AWS_ENDPOINT_URL": proxy.url}
            with launch_hub("store-down", env, data) as hub:
                hub.proxy, hub.bucket = proxy, bucket
                yield hub
        finally:
            proxy.down()


def _commit(hub: Hub, token: str, repo: str, files: dict[str, bytes], title: str) -> requests.Response:
    """One commit of inline (base64) files through the HF commit endpoint, as huggingface_hub sends it."""
    lines = [{"key": "header", "value": {"summary": title, "description": ""}}]
    lines += [{"key": "file", "value": {"path": p, "content": base64.b64encode(d).decode(), "encoding": "base64"}}
              for p, d in files.items()]
    body = "\n".join(json.dumps(x) for x in lines).encode()
    return requests.post(f"{hub.url}/api/models/{repo}/commit/main", data=body, timeout=60,
                         headers=auth(token) | {"Content-Type": "application/x-ndjson"})


def _store_calls(hub: Hub, token: str, repo: str, n: int) -> dict[str, requests.Response]:
    """One request of each kind that needs the object store: the HF API's downloads (a small file
    and an LFS one), commit and LFS upload; the native API's volume read, write and upload session,
    and the manifest `hub pull` downloads from."""
    big = random.Random(n).randbytes(12 * MIB)  # (the same bytes for the same n: see lfs_bytes)
    sha = hashlib.sha256(big).hexdigest()
    h = auth(token)
    return {
        "hf download": requests.get(f"{hub.url}/{repo}/resolve/main/config.json", headers=h, timeout=60,
                                    allow_redirects=False),
        "hf download lfs": requests.get(f"{hub.url}/{repo}/resolve/main/weights.bin", headers=h, timeout=60,
                                        allow_redirects=False),
        "hf commit": _commit(hub, token, repo, {f"new-{n}.txt": f"new file {n} {uuid.uuid4()}".encode()},
                             f"commit {n}"),
        "hf lfs upload": requests.post(
            f"{hub.url}/{repo}.git/info/lfs/objects/batch", headers=h | {"Accept": "application/vnd.git-lfs+json"},
            json={"operation": "upload", "transfers": ["basic", "multipart"], "objects": [{"oid": sha, "size": len(big)}]},
            timeout=60),
        "volume read": requests.get(f"{hub.url}/api/volume/files/kept.bin", headers=h, timeout=60,
                                    allow_redirects=False),
        "volume write": requests.put(f"{hub.url}/api/volume/files/new-{n}.bin", data=os.urandom(1000), headers=h,
                                     timeout=60),
        "volume upload": requests.post(f"{hub.url}/api/volume/uploads", headers=h, timeout=60,
                                       json={"path": f"big-{n}.bin", "size": 20 * MIB}),
        "manifest": requests.get(f"{hub.url}/api/v1/repos/model/{repo}/manifest", headers=h, timeout=60),
    }


def _send_volume_upload(hub: Hub, h: dict[str, str], path: str, data: bytes) -> tuple[dict, str]:
    """Starts a volume upload of `data` to `path` and sends all its parts (by the URLs the hub gives):
    the session, and the URL that completes it."""
    session = requests.post(f"{hub.url}/api/volume/uploads", headers=h, timeout=60,
                            json={"path": path, "size": len(data)}).json()
    for n, url in session["parts"].items():
        start = (int(n) - 1) * session["part_size"]
        assert requests.put(url, data=data[start:start + session["part_size"]], timeout=60).ok
    return session, f"{hub.url}/api/volume/uploads/{session['id']}/complete"


def test_store_down_answers_503_with_retry_after_writes_nothing_half_and_recovers(store_proxy_hub, rgw_env,
                                                                                  monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
    hub = store_proxy_hub
    token = hub.token("alice")
    repo = "alice/outage"
    api = hub.api(token)
    api.create_repo(repo)
    weights = random.randbytes(11 * MIB)  # above the LFS threshold: an LFS file, bytes by presigned URL
    api.upload_file(path_or_fileobj=b'{"layers": 2}', path_in_repo="config.json", repo_id=repo)
    api.upload_file(path_or_fileobj=weights, path_in_repo="weights.bin", repo_id=repo)
    kept = os.urandom(5000)
    assert requests.put(f"{hub.url}/api/volume/files/kept.bin", data=kept, headers=auth(token),
                        timeout=60).status_code == 201
    # An upload session whose parts are all in: only its completion is left for the outage.
    pending = os.urandom(9 * MIB)
    _, complete = _send_volume_upload(hub, auth(token), "pending.bin", pending)

    hub.proxy.down()
    try:
        time.sleep(3)  # longer than a server process trusts its last look at the store
        down = _store_calls(hub, token, repo, 1)
        for what, r in down.items():
            assert r.status_code == 503, f"{what}: {r.status_code} {r.text[:300]}"
            assert int(r.headers["Retry-After"]) > 0, what
            assert r.headers["X-Error-Code"] == "StorageUnavailable", what
            assert "object store" in r.json()["error"], what
        r = requests.post(complete, headers=auth(token), json={}, timeout=60)
        assert r.status_code == 503 and r.headers["Retry-After"], r.text
        # The refused batch, commit, volume write and upload session gave back what they reserved at
        # once: only the open session whose completion waits holds any.
        assert requests.get(f"{hub.url}/api/quota", headers=auth(token), timeout=30).json()["reserved"] == len(pending)
        # What needs only the database still works.
        assert requests.get(f"{hub.url}/api/models/{repo}/tree/main", headers=auth(token), timeout=30).ok
        assert requests.get(f"{hub.url}/api/volume/ls", headers=auth(token), timeout=30).ok
        # The real client surfaces the hub's sentence.
        from huggingface_hub.errors import HfHubHTTPError

        with pytest.raises(HfHubHTTPError, match="object store"):
            api.upload_file(path_or_fileobj=b"during the outage", path_in_repo="outage.txt", repo_id=repo)
    finally:
        hub.proxy.up()

    s3 = s3_client(rgw_env)
    checked = assert_rows_point_at_stored_bytes(hub, bucket_objects(s3, hub.bucket))
    assert checked >= 3
    files = {f.path for f in api.list_repo_tree(repo)}
    assert "new-1.txt" not in files and "outage.txt" not in files
    assert requests.get(f"{hub.url}/api/volume/stat?path=new-1.bin", headers=auth(token), timeout=30).status_code == 404

    time.sleep(3)
    up = _store_calls(hub, token, repo, 2)
    for what, r in up.items():
        assert r.status_code in (200, 201, 302), f"{what}: {r.status_code} {r.text[:300]}"
    assert requests.get(up["hf download lfs"].headers["Location"], timeout=60).content == weights
    assert requests.get(up["volume read"].headers["Location"], timeout=60).content == kept
    # The session the outage interrupted completes now, with the right bytes.
    r = requests.post(complete, headers=auth(token), json={}, timeout=60)
    assert r.status_code == 200, r.text
    r = requests.get(f"{hub.url}/api/volume/files/pending.bin", headers=auth(token), timeout=60)
    assert r.content == pending
    out = api.hf_hub_download(repo, "new-2.txt", cache_dir=str(hub.data_dir / "hf-cache"))
    assert Path(out).read_bytes().startswith(b"new file 2 ")
    assert_rows_point_at_stored_bytes(hub, bucket_objects(s3, hub.bucket))
    # The second round started two uploads, which hold their reservations while they can complete:
    # the client ends one and finishes the other (the LFS object it announced, committed).
    requests.delete(f"{hub.url}/api/volume/uploads/{up['volume upload'].json()['id']}", headers=auth(token),
                    timeout=30).raise_for_status()
    api.upload_file(path_or_fileobj=random.Random(2).randbytes(12 * MIB), path_in_repo="big.bin", repo_id=repo)
    assert_quota_settled(hub)


def test_store_lost_while_an_upload_is_verified_keeps_its_bytes_for_the_retry(store_proxy_hub, rgw_env):
    """The store goes away after assembling an upload's parts, while the hub reads the bytes back to
    hash them: the completion answers 503, the session stays open, and the retry verifies the
    assembled object and installs the file; the client sends nothing again and no object is left
    over in the bucket."""
    hub = store_proxy_hub
    h = auth(hub.token("carol"))
    data = os.urandom(40 * MIB)
    _, complete = _send_volume_upload(hub, h, "checkpoint.bin", data)
    hub.proxy.cut_after(8 * MIB)  # the assembled 40 MiB read back: cut a fifth of the way in
    try:
        r = requests.post(complete, headers=h, json={}, timeout=120)
        assert r.status_code == 503 and r.headers["X-Error-Code"] == "StorageUnavailable", r.text
    finally:
        hub.proxy.up()
    assert requests.get(f"{hub.url}/api/volume/stat?path=checkpoint.bin", headers=h, timeout=30).status_code == 404
    time.sleep(3)  # longer than a server process trusts its last look at the store
    r = requests.post(complete, headers=h, json={}, timeout=120)
    assert r.status_code == 200, r.text
    assert requests.get(f"{hub.url}/api/volume/files/checkpoint.bin", headers=h, timeout=60).content == data
    stored = bucket_objects(s3_client(rgw_env), hub.bucket)
    assert_rows_point_at_stored_bytes(hub, stored)
    assert sum(1 for size in stored.values() if size == len(data)) == 1, stored  # one copy, no leftover
    assert r.json()["sha256"] == hashlib.sha256(data).hexdigest() and r.json()["size"] == len(data)
    assert_quota_settled(hub)


def test_a_store_that_refuses_to_assemble_the_parts_ends_the_upload_cleanly(store_proxy_hub, rgw_env):
    """Between the hub's look at an upload's parts and its CompleteMultipartUpload (held back by the
    proxy), part 1 is sent again with other bytes: RGW itself refuses the assembly (the part's ETag
    changed). The completion answers 422 saying the upload has ended and must start again; a retry
    says it has ended, nothing is installed, the parts are freed in the store and the quota
    reservation is released. (Before: a 500, and the session stayed claimed with no file.)"""
    hub = store_proxy_hub
    h = auth(hub.token("erin"))
    data = os.urandom(24 * MIB)
    session, complete = _send_volume_upload(hub, h, "refused.bin", data)
    assert requests.get(f"{hub.url}/api/quota", headers=h, timeout=30).json()["reserved"] == len(data)
    held, release = hub.proxy.hold_request(b"POST ", "uploadId=")
    answer: dict[str, requests.Response] = {}
    t = threading.Thread(target=lambda: answer.update(r=requests.post(complete, headers=h, json={}, timeout=120)))
    t.start()
    try:
        assert held.wait(30), "the hub never asked the store to assemble the parts"
        assert requests.put(session["parts"]["1"], data=os.urandom(session["part_size"]), timeout=60).ok
    finally:
        release.set()
        t.join(120)
    r = answer["r"]
    assert r.status_code == 422, r.text
    assert "would not assemble" in r.json()["error"] and "start it again" in r.json()["error"]
    r = requests.post(complete, headers=h, json={}, timeout=60)
    assert r.status_code == 404 and "start the upload again" in r.json()["error"], r.text
    assert requests.get(f"{hub.url}/api/volume/stat?path=refused.bin", headers=h, timeout=30).status_code == 404
    s3 = s3_client(rgw_env)
    assert s3.list_multipart_uploads(Bucket=hub.bucket).get("Uploads", []) == []
    assert len(data) not in bucket_objects(s3, hub.bucket).values()
    assert requests.get(f"{hub.url}/api/quota", headers=h, timeout=30).json()["reserved"] == 0
    assert_quota_settled(hub)


def test_an_lfs_completion_under_way_is_not_reported_done_before_its_bytes_are_in(store_proxy_hub):
    """While one completion of an LFS upload is under way (its CompleteMultipartUpload held back by
    the proxy; a worker that died there looks the same), a second completion answers 409, retry —
    not success for bytes that are not stored (a client would then commit a file the hub lacks).
    Once the first has finished, a retry answers success."""
    from tests.support.hf import LFS_JSON, lfs_batch

    hub = store_proxy_hub
    token = hub.token("fred")
    repo = "fred/held"
    hub.api(token).create_repo(repo)
    data = os.urandom(24 * MIB)
    oid = hashlib.sha256(data).hexdigest()
    upload = lfs_batch(hub, token, repo, [(oid, len(data))])["objects"][0]["actions"]["upload"]
    chunk = int(upload["header"]["chunk_size"])
    for n in range(1, -(-len(data) // chunk) + 1):
        assert requests.put(upload["header"][str(n)], data=data[(n - 1) * chunk:n * chunk], timeout=60).ok

    def complete() -> requests.Response:
        return requests.post(upload["href"], headers={"Accept": LFS_JSON, "Content-Type": LFS_JSON},
                             data=json.dumps({"oid": oid, "parts": []}), timeout=120)

    held, release = hub.proxy.hold_request(b"POST ", "uploadId=")
    answer: dict[str, requests.Response] = {}
    t = threading.Thread(target=lambda: answer.update(r=complete()))
    t.start()
    try:
        assert held.wait(30), "the hub never asked the store to assemble the parts"
        second = complete()
    finally:
        release.set()
        t.join(120)
    assert second.status_code == 409 and "retry" in second.text, second.text
    assert answer["r"].status_code == 200, answer["r"].text
    third = complete()
    assert third.status_code == 200 and third.json()["oid"] == oid, third.text
    # Its reservation waits for the commit (HUB_COMMIT_WINDOW); the commit converts it.
    assert requests.get(f"{hub.url}/api/quota", headers=auth(token), timeout=30).json()["reserved"] == len(data)
    lines = [{"key": "header", "value": {"summary": "held"}},
             {"key": "lfsFile", "value": {"path": "held.bin", "algo": "sha256", "oid": oid, "size": len(data)}}]
    r = requests.post(f"{hub.url}/api/models/{repo}/commit/main", data="\n".join(json.dumps(x) for x in lines),
                      headers=auth(token) | {"Content-Type": "application/x-ndjson"}, timeout=60)
    assert r.ok, r.text
    assert_quota_settled(hub)


@pytest.mark.parametrize("kind", ["lfs", "volume"])
def test_an_upload_whose_completing_server_is_killed_reopens_and_the_retry_completes_it(store_proxy_hub, kind,
                                                                                       monkeypatch):
    """The hub's server (gunicorn master and workers) is killed with SIGKILL while it completes an
    upload: its CompleteMultipartUpload is held by the proxy, then let through to the store. A new
    server starts. A retry at once answers 409 with Retry-After (the dead completion's claim is still
    fresh: nothing tells a dead worker from a slow one but its silence); the hub CLI's client, which
    obeys it, then completes the same session once the claim has gone stale (HUB_UPLOAD_STALE, 10 s
    here) — without a byte sent again — and the file reads back equal. Before: the session stayed
    claimed without its blob for good, and the client had to upload everything again."""
    import psutil
    from huggingface_hub import constants

    from storage.client import COMPLETE_RETRY, HubClient
    from tests.support.hf import LFS_JSON, lfs_batch

    hub = store_proxy_hub
    token = hub.token("kim")
    h = auth(token)
    data = os.urandom(24 * MIB)
    oid = hashlib.sha256(data).hexdigest()
    if kind == "lfs":
        repo = "kim/killed"
        hub.api(token).create_repo(repo)
        upload = lfs_batch(hub, token, repo, [(oid, len(data))])["objects"][0]["actions"]["upload"]
        chunk = int(upload["header"]["chunk_size"])
        for n in range(1, -(-len(data) // chunk) + 1):
            assert requests.put(upload["header"][str(n)], data=data[(n - 1) * chunk:n * chunk], timeout=60).ok
        complete_url, body = upload["href"], json.dumps({"oid": oid, "parts": []}).encode()
        headers = {"Accept": LFS_JSON, "Content-Type": LFS_JSON}
    else:
        _, complete_url = _send_volume_upload(hub, h, "run/ckpt-7.pt", data)
        body, headers = b"{}", {"Content-Type": "application/json"}

    held, release = hub.proxy.hold_request(b"POST ", "uploadId=")
    def first_completion() -> None:
        with contextlib.suppress(requests.RequestException):  # (its server is killed under it)
            requests.post(complete_url, data=body, headers=h | headers, timeout=120)

    t = threading.Thread(target=first_completion, daemon=True)
    t.start()
    try:
        assert held.wait(30), "the hub never asked the store to assemble the parts"
        master = psutil.Process(hub.proc.pid)
        for p in [master] + master.children(recursive=True):
            p.kill()
        hub.proc.wait(10)
    finally:
        release.set()  # (the store may assemble the parts now: the new server copes either way)
        t.join(30)
    old_url = hub.url
    hub.env = hub.env | {"HUB_UPLOAD_STALE": "10"}
    hub.start(hub.data_dir / "server-after-kill.log")
    complete_url = complete_url.replace(old_url, hub.url)

    r = requests.post(complete_url, data=body, headers=h | headers, timeout=60)
    assert r.status_code == 409, r.text
    assert r.headers.get("X-Error-Code") == "CompletionInProgress" and r.headers.get("Retry-After"), r.headers
    assert "retry" in r.text and "lost" in r.text, r.text

    started = time.monotonic()
    done = HubClient(hub.url, token).request("POST", complete_url, body=body, headers=headers,
                                             retry=COMPLETE_RETRY)
    assert time.monotonic() - started < 60
    if kind == "lfs":
        assert json.loads(done.data)["oid"] == oid
        again = lfs_batch(hub, token, repo, [(oid, len(data))])["objects"][0]
        assert "actions" not in again, f"the hub does not hold the bytes for kim: {again}"
        monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
        hub.api(token).upload_file(path_or_fileobj=data, path_in_repo="weights.bin", repo_id=repo)
        got = requests.get(f"{hub.url}/{repo}/resolve/main/weights.bin", headers=h, timeout=60)
    else:
        assert json.loads(done.data)["sha256"] == oid
        got = requests.get(f"{hub.url}/api/volume/files/run/ckpt-7.pt", headers=h, timeout=60)
    assert got.status_code == 200 and got.content == data
    assert_quota_settled(hub)


@pytest.fixture
def small_disk_hub(tmp_path_factory):
    """A hub (SQLite) whose object directory is a 96 MiB tmpfs of its own, so the store can really
    run out of room; its database stays on the ordinary disk."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    data = tmp_path_factory.mktemp("small-disk")
    objects = data / "objects"
    objects.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96m", "tmpfs", str(objects)], check=True)
    try:
        env = base_env() | {"HUB_DATA_DIR": str(data), "HUB_STORAGE_URL": objects.as_uri()}
        with launch_hub("small-disk", env, data) as hub:
            hub.objects = objects
            yield hub
    finally:
        subprocess.run(["umount", "-l", str(objects)], check=False)


def test_a_full_object_store_keeps_an_uploads_parts_and_the_retry_completes_it(small_disk_hub):
    """The object directory fills up while the hub assembles a 40 MiB volume upload's parts: the
    completion answers 507 saying the storage is full and that what was sent is kept; nothing is
    installed, and once space is freed the same completion succeeds without a byte sent again.
    (Before: a 500, and the session was left claimed, so the retry answered that it had ended.)"""
    hub = small_disk_hub
    h = auth(hub.token("dora"))
    filler = hub.objects / "operator-filler.bin"  # what an operator later deletes
    filler.write_bytes(os.urandom(30 * MIB))
    data = os.urandom(40 * MIB)
    _, complete = _send_volume_upload(hub, h, "run/ckpt.bin", data)  # 40 MiB of parts + 30 of filler in 96
    r = requests.post(complete, headers=h, json={}, timeout=120)  # assembling needs 40 MiB more
    assert r.status_code == 507, r.text
    assert r.headers["X-Error-Code"] == "StorageFull" and r.headers["Retry-After"]
    assert "full" in r.json()["error"] and "kept" in r.json()["error"]
    assert requests.get(f"{hub.url}/api/volume/stat?path=run/ckpt.bin", headers=h, timeout=30).status_code == 404
    assert not any((hub.objects / ".tmp").iterdir()), "a half-assembled object was left behind"

    filler.unlink()
    r = requests.post(complete, headers=h, json={}, timeout=120)
    assert r.status_code == 200, r.text
    assert r.json()["sha256"] == hashlib.sha256(data).hexdigest()
    assert requests.get(f"{hub.url}/api/volume/files/run/ckpt.bin", headers=h, timeout=60).content == data
    assert not any((hub.objects / ".uploads").iterdir()), "the parts were not freed"
    assert_quota_settled(hub)


def _wait_for(check, timeout: float):
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"not within {timeout} s"
        time.sleep(0.2)
    return found


def test_store_down_the_mount_answers_eio_in_bounded_time_keeps_the_old_file_and_recovers(store_proxy_hub,
                                                                                          tmp_path, monkeypatch):
    from huggingface_hub import constants

    from tests.support.mount import Mounts, _fuse_missing, client_env

    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
    if _fuse_missing():
        pytest.skip(_fuse_missing())
    hub = store_proxy_hub
    token = hub.token("carol")
    repo = "carol/mounted"
    api = hub.api(token)
    api.create_repo(repo)
    files = {"cached.bin": os.urandom(300_000), "cold.bin": os.urandom(12 * MIB)}  # the second one by LFS
    for name, data in files.items():
        api.upload_file(path_or_fileobj=data, path_in_repo=name, repo_id=repo)
    mounts = Mounts(tmp_path / "mnt")
    mounts.base.mkdir()
    try:
        env = client_env(hub, token, tmp_path / "cache", HUB_MOUNT_RETRY_SECONDS="2")
        m = mounts.mount(env, repo, "repo", "--no-prefetch")
        vol = mounts.mount(env, "volume", "vol")
        assert (m / "cached.bin").read_bytes() == files["cached.bin"]
        (vol / "notes.txt").write_bytes(b"before the outage\n")

        hub.proxy.down()
        try:
            time.sleep(3)  # longer than a server process trusts its last look at the store
            t0 = time.monotonic()
            with pytest.raises(OSError) as exc:
                (m / "cold.bin").read_bytes()
            assert exc.value.errno == errno.EIO, exc.value
            with pytest.raises(OSError) as exc:
                (vol / "notes.txt").write_bytes(b"during the outage\n")  # fails at close: nothing half-written
            assert exc.value.errno == errno.EIO, exc.value
            assert time.monotonic() - t0 < 30  # two calls, each told to give up after 2 s of retries
            assert "cold.bin" in mounts.log("repo") and "notes.txt" in mounts.log("vol")
            # The file's last handle goes away after close returned: the mount tries the upload once
            # more, then keeps the bytes where a person finds them (the log says where).
            kept = _wait_for(lambda: re.search(r"the bytes are kept in (\S+)", mounts.log("vol")), 30)
            assert Path(kept.group(1)).read_bytes() == b"during the outage\n"
            # What is already in the local cache still reads; listings need only the hub's database.
            assert (m / "cached.bin").read_bytes() == files["cached.bin"]
            assert sorted(os.listdir(m)) == sorted([".gitattributes", *files])
        finally:
            hub.proxy.up()
        time.sleep(3)
        assert (m / "cold.bin").read_bytes() == files["cold.bin"]
        assert (vol / "notes.txt").read_bytes() == b"before the outage\n"
        (vol / "notes.txt").write_bytes(b"after the outage\n")
        assert requests.get(f"{hub.url}/api/volume/files/notes.txt", headers=auth(token),
                            timeout=60).content == b"after the outage\n"
    finally:
        mounts.cleanup()
    assert_quota_settled(hub)  # (the writes the outage refused held reservations)


# --- 2. PostgreSQL restarts under traffic ----------------------------------------------------------------

def _pg_cluster() -> tuple[str, str] | None:
    """(version, name) of the local cluster the tests' PostgreSQL URL points at, if it is local."""
    port = PG_ADMIN_URL.rsplit(":", 1)[-1].split("/")[0]
    try:
        out = subprocess.run(["pg_lsclusters", "-h"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in out.splitlines():
        version, name, cport, status, *_ = line.split()
        if cport == port and status == "online":
            return version, name
    return None


def _pg_ready(timeout: float) -> bool:
    host_port = PG_ADMIN_URL.split("@")[-1].split("/")[0]
    host, port = host_port.rsplit(":", 1)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if subprocess.run(["pg_isready", "-q", "-h", host, "-p", port], timeout=10).returncode == 0:
            return True
        time.sleep(0.2)
    return False


@pytest.fixture
def pg_hub(tmp_path_factory):
    """A hub on a PostgreSQL database of its own (bytes in a local directory)."""
    with fresh_database(f"hub_fault_{uuid.uuid4().hex[:10]}") as db:
        try:
            data = tmp_path_factory.mktemp("pg-restart")
            # A write the restart cuts off cannot give its reservation back (no database): it lapses
            # this soon.
            env = base_env() | {"HUB_DATA_DIR": str(data), "DATABASE_URL": db, "HUB_RESERVATION_LEASE": "5"}
            with launch_hub("pg-restart", env, data) as hub:
                yield hub
        finally:
            _pg_ready(120)  # (the cluster may still be restarting: the database is dropped after this)


def test_postgres_restart_mid_traffic_gives_503s_then_the_hub_serves_again_without_a_restart(pg_hub):
    cluster = _pg_cluster()
    if cluster is None:
        pytest.skip("the tests' PostgreSQL is not a local cluster pg_ctlcluster can restart")
    hub = pg_hub
    token = hub.token("alice")
    hub.api(token).create_repo("alice/steady")
    h = auth(token)
    calls = [
        lambda s, n: s.get(f"{hub.url}/api/volume/ls", headers=h, timeout=30),
        lambda s, n: s.get(f"{hub.url}/api/models/alice/steady", headers=h, timeout=30),
        lambda s, n: s.put(f"{hub.url}/api/volume/files/t/{n % 50}.txt", data=b"x" * (n % 1000), headers=h,
                           timeout=30),
        lambda s, n: s.get(f"{hub.url}/api/whoami-v2", headers=h, timeout=30),
        lambda s, n: s.get(f"{hub.url}/api/quota", headers=h, timeout=30),
    ]
    log: list[tuple[float, float, int, requests.Response | None]] = []  # start, end, call, response
    stop = threading.Event()

    def traffic(seed: int) -> None:
        session = requests.Session()
        n = seed
        while not stop.is_set():
            n += 1
            start = time.monotonic()
            try:
                r = calls[n % len(calls)](session, n)
            except requests.RequestException:
                r = None
            log.append((start, time.monotonic(), n % len(calls), r))

    threads = [threading.Thread(target=traffic, args=(i * 1000,)) for i in range(4)]
    for t in threads:
        t.start()
    try:
        time.sleep(2)
        restart_at = time.monotonic()
        subprocess.run(["pg_ctlcluster", *cluster, "restart"], check=True, timeout=120,
                       capture_output=True)
        assert _pg_ready(120), "PostgreSQL did not come back"
        ready_at = time.monotonic()
        time.sleep(4)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
        _pg_ready(120)

    before = [r for s, e, c, r in log if e < restart_at]
    during = [(c, r) for s, e, c, r in log if e >= restart_at and s <= ready_at]
    after = [(c, r) for s, e, c, r in log if s > ready_at + 1.0]
    assert before and during and after, (len(before), len(during), len(after))
    assert all(r is not None and r.ok for r in before)
    for c, r in during:
        assert r is not None, f"call {c}: the connection failed instead of an answer"
        assert r.ok or r.status_code == 503, f"call {c}: {r.status_code} {r.text[:300]}"
        if r.status_code == 503:
            assert int(r.headers["Retry-After"]) > 0
            assert r.headers["X-Error-Code"] == "DatabaseUnavailable", r.headers
            assert "database" in r.json()["error"]
    failures = [(c, r.status_code if r is not None else None, r.text[:200] if r is not None else "")
                for c, r in after if r is None or not r.ok]
    assert not failures, failures
    unavailable = sum(1 for c, r in during if r.status_code == 503)
    assert_quota_settled(hub)  # (volume writes cut off by the restart held reservations)
    print(f"\npg restart: {len(before)} requests before, {len(during)} during ({unavailable} answered 503), "
          f"{len(after)} after, all 2xx")


# --- 3. kill -9 of the server in the middle of commits -----------------------------------------------------

def _commit_changes(i: int) -> tuple[dict[str, bytes], list[str]]:
    """What commit number `i` writes and deletes, the same on every call: several new files (a few
    hundred KB in all, so each commit spends a while writing bytes), one file rewritten each time,
    and, from the fifth on, one file of an earlier commit deleted."""
    rnd = random.Random(i)
    files = {f"d{i % 7}/f{i}-{k}.bin": rnd.randbytes(rnd.randint(1, 120_000)) for k in range(4)}
    files["shared.txt"] = f"written by commit {i}\n".encode()
    deletes = [f"d{(i - 5) % 7}/f{i - 5}-0.bin"] if i >= 5 else []
    return files, deletes


def _state_after(i: int) -> dict[str, bytes]:
    state: dict[str, bytes] = {}
    for n in range(i + 1):
        files, deletes = _commit_changes(n)
        state.update(files)
        for path in deletes:
            del state[path]
    return state


def _commit_payload(i: int) -> bytes:
    files, deletes = _commit_changes(i)
    lines = [{"key": "header", "value": {"summary": f"commit {i}", "description": ""}}]
    lines += [{"key": "file", "value": {"path": p, "content": base64.b64encode(d).decode(), "encoding": "base64"}}
              for p, d in files.items()]
    lines += [{"key": "deletedFile", "value": {"path": p}} for p in deletes]
    return "\n".join(json.dumps(x) for x in lines).encode()


HISTORY = """
import json
from hub.repos.models import Commit, Ref, Repo
repo = Repo.objects.get(namespace__name="alice", name="crash")
head = Ref.objects.get(repo=repo, kind=Ref.BRANCH, name="main").commit
commits = {c.oid: (c.parent.oid if c.parent_id else None, c.title) for c in Commit.objects.filter(repo=repo)
           .select_related("parent")}
print(json.dumps({"head": head.oid, "commits": commits}))
"""


def _kill_9(hub: Hub) -> None:
    """SIGKILL the gunicorn master and its workers at once, as a power cut would."""
    import psutil

    master = psutil.Process(hub.proc.pid)
    procs = [master, *master.children(recursive=True)]
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    hub.proc.wait(30)
    psutil.wait_procs(procs, timeout=30)
    hub.log.close()


@pytest.fixture
def crash_hub(tmp_path_factory, rgw_env):
    """A hub as production runs it (PostgreSQL + S3 on Ceph RGW), on a database and bucket of its own."""
    suffix = uuid.uuid4().hex[:10]
    with scratch_bucket(rgw_env, f"hub-crash-{suffix}") as bucket, \
            fresh_database(f"hub_crash_{suffix}") as db:
        data = tmp_path_factory.mktemp("crash")
        env = base_env() | rgw_env | {"HUB_DATA_DIR": str(data), "DATABASE_URL": db,
                                      "HUB_STORAGE_URL": f"s3://{bucket}",
                                      # the in-flight commit's reservation lapses this soon after its
                                      # process died
                                      "HUB_RESERVATION_LEASE": "4"}
        with launch_hub("crash", env, data) as hub:
            hub.bucket = bucket
            yield hub


ROUNDS = 3


def test_kill_9_during_commits_leaves_the_old_or_the_new_revision_never_a_broken_one(crash_hub, rgw_env):
    hub = crash_hub
    token = hub.token("alice")
    hub.api(token).create_repo("alice/crash")
    s3 = s3_client(rgw_env)
    rng = random.Random(8)
    next_i = 0
    outcomes = []
    for _round in range(ROUNDS):
        acked: list[int] = []
        stop = threading.Event()

        def commits(start: int, acked=acked, stop=stop) -> None:
            session = requests.Session()
            i = start
            while not stop.is_set():
                try:
                    r = session.post(f"{hub.url}/api/models/alice/crash/commit/main", data=_commit_payload(i),
                                     headers=auth(token) | {"Content-Type": "application/x-ndjson"}, timeout=60)
                except requests.RequestException:
                    return  # the server died under this request
                assert r.ok, r.text
                acked.append(i)
                i += 1

        thread = threading.Thread(target=commits, args=(next_i,))
        thread.start()
        time.sleep(rng.uniform(1.5, 4.0))
        _kill_9(hub)
        stop.set()
        thread.join(60)
        assert acked, "no commit went through before the kill; the test proves nothing"
        hub.start(hub.data_dir / "server.log")  # same database, same bucket, new processes

        history = json.loads(hub.manage("shell", "-c", HISTORY).stdout.strip().splitlines()[-1])
        head, chain = history["head"], history["commits"]
        head_i = int(chain[head][1].removeprefix("commit "))
        # The one in flight either committed whole (its answer lost) or not at all.
        assert head_i in (acked[-1], acked[-1] + 1), (head_i, acked[-1])
        # History intact: from the head, every parent exists, back to the repo's first commit.
        oid, seen = head, []
        while oid is not None:
            assert oid in chain, f"commit {oid} is missing"
            seen.append(chain[oid][1])
            oid = chain[oid][0]
        assert seen[:head_i + 1] == [f"commit {n}" for n in range(head_i, -1, -1)]
        # Every file of the head is there with the right bytes; nothing else is.
        want = _state_after(head_i)
        tree = {f.path: f.size for f in hub.api(token).list_repo_tree("alice/crash", recursive=True)
                if f.__class__.__name__ == "RepoFile"}
        tree.pop(".gitattributes", None)
        assert tree == {p: len(d) for p, d in want.items()}
        session = requests.Session()
        session.mount("http://", requests.adapters.HTTPAdapter(pool_maxsize=8))

        def read(path: str, session=session, head=head) -> tuple[str, int, bytes]:
            r = session.get(f"{hub.url}/alice/crash/resolve/{head}/{path}", headers=auth(token), timeout=60)
            return path, r.status_code, r.content

        with ThreadPoolExecutor(8) as pool:  # hundreds of files by the last round
            for path, status, content in pool.map(read, want):
                assert status == 200 and content == want[path], path
        assert_rows_point_at_stored_bytes(hub, bucket_objects(s3, hub.bucket))
        assert_quota_settled(hub)
        outcomes.append("new" if head_i == acked[-1] + 1 else "old")
        next_i = head_i + 1

    # And the hub goes on committing on top.
    r = requests.post(f"{hub.url}/api/models/alice/crash/commit/main", data=_commit_payload(next_i), timeout=60,
                      headers=auth(token) | {"Content-Type": "application/x-ndjson"})
    assert r.ok, r.text
    print(f"\nkill -9 during commits: {ROUNDS} rounds, the commit in flight ended up {outcomes}")


# --- 4. the client's disk fills up during `hub pull` --------------------------------------------------------

def test_disk_full_during_pull_is_one_clear_line_and_the_pull_resumes(embedded_hub, tmp_path, monkeypatch):
    from huggingface_hub import constants

    from tests.support.hub_cli import client_env, failed, fetched, ok, run

    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
    hub = embedded_hub
    token = hub.cached_token("alice")
    repo = f"alice/too-big-{uuid.uuid4().hex[:6]}"
    files = {f"shard-{k}.bin": random.randbytes(8 * MIB + k) for k in range(4)}
    files |= {f"small/{k}.json": json.dumps({"k": k}).encode() for k in range(20)}
    src = tmp_path / "src"
    for rel, data in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(data)
    hub.api(token).create_repo(repo)
    hub.api(token).upload_folder(folder_path=src, repo_id=repo)
    total = sum(len(d) for d in files.values())
    env = client_env(hub, token, tmp_path)

    with small_disk(tmp_path / "disk", "20m") as disk:  # the repo is 32 MiB
        target = disk / "repo"
        proc = run(env, "pull", repo, "--local-dir", str(target))
        line = failed(proc, "no space left")
        assert "free" in line and "again" in line, line  # what to do about it
        # Room again: the same command finishes, verified, and fetches only what was missing.
        subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
        proc = ok(run(env, "pull", repo, "--local-dir", str(target)))
        for rel, data in files.items():
            assert (target / rel).read_bytes() == data, rel
        assert 0 < fetched(proc) < total, (fetched(proc), total)
        print(f"\ndisk full: {line!r}; the second pull fetched {fetched(proc)} of {total} bytes")


def test_a_large_file_the_disk_cannot_hold_fails_before_its_bytes_are_fetched(embedded_hub, tmp_path):
    """A file fetched in parallel ranges claims its blocks first (fallocate): on a disk too small the
    pull stops at once with the same clear line, and leaves none of its blocks behind."""
    from tests.support.hub_cli import client_env, failed, fetched, ok, run

    hub = embedded_hub
    token = hub.cached_token("alice")
    repo = f"alice/large-{uuid.uuid4().hex[:6]}"
    data = random.randbytes(24 * MIB)
    hub.api(token).create_repo(repo)
    hub.api(token).upload_file(path_or_fileobj=data, path_in_repo="weights.bin", repo_id=repo)
    env = client_env(hub, token, tmp_path) | {"HUB_SEGMENT_SIZE": "4MiB"}  # 24 MiB: six ranges

    with small_disk(tmp_path / "disk", "16m") as disk:
        target = disk / "repo"
        proc = run(env, "pull", repo, "--local-dir", str(target))
        line = failed(proc, "no space left", "weights.bin")
        assert "free" in line and "again" in line, line
        st = os.statvfs(disk)
        used = (st.f_blocks - st.f_bfree) * st.f_frsize
        assert used < MIB, f"{used} bytes left on the disk after the failed pull"
        subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
        proc = ok(run(env, "pull", repo, "--local-dir", str(target)))
        assert (target / "weights.bin").read_bytes() == data
        assert len(data) <= fetched(proc) < len(data) + 4096  # (+ .gitattributes): nothing was kept
