"""Content addressing must not become a side door: knowing a file's sha256 is not the same as
holding its bytes, and no upload can change bytes another upload already verified."""
from __future__ import annotations

import base64
import hashlib
import io
import json
import os

import pytest
import requests

from tests.support.hf import LFS_JSON, auth, lfs_batch, push_lfs

MIB = 2**20


def raw_commit(hub, token: str, repo_id: str, lines: list[dict]) -> requests.Response:
    body = "\n".join(json.dumps(x) for x in [{"key": "header", "value": {"summary": "raw"}}, *lines])
    return requests.post(f"{hub.url}/api/models/{repo_id}/commit/main", data=body.encode(),
                         headers=auth(token) | {"Content-Type": "application/x-ndjson"}, timeout=60)


@pytest.fixture
def people(hub, unique):
    return {name: hub.token(f"{name}{unique}") for name in ("alice", "bob")}


def test_it_does_not_let_a_hash_stand_in_for_the_bytes_of_a_private_file(hub, people, unique):
    alice, bob = people["alice"], people["bob"]
    secret = os.urandom(11 * MIB)
    oid = hashlib.sha256(secret).hexdigest()
    hub.api(alice).create_repo(f"alice{unique}/vault", private=True)
    hub.api(alice).upload_file(path_or_fileobj=io.BytesIO(secret), path_in_repo="weights.bin",
                               repo_id=f"alice{unique}/vault")
    bob_repo = f"bob{unique}/mine"
    hub.api(bob).create_repo(bob_repo)

    # Bob asks to download by hash, and to upload as if already stored: he must send the bytes.
    answer = lfs_batch(hub, bob, bob_repo, [(oid, len(secret))], operation="download")["objects"][0]
    assert answer["error"]["code"] == 404 and "actions" not in answer
    answer = lfs_batch(hub, bob, bob_repo, [(oid, len(secret))])["objects"][0]
    assert "upload" in answer["actions"]
    # And he cannot commit the hash without uploading.
    resp = raw_commit(hub, bob, bob_repo, [{"key": "lfsFile", "value": {"path": "stolen.bin", "algo": "sha256",
                                                                        "oid": oid, "size": len(secret)}}])
    assert resp.status_code == 400 and "has not been uploaded" in resp.json()["error"]
    assert hub.api(bob).list_repo_files(bob_repo) == [".gitattributes"]

    # Someone who really holds the bytes uploads them (verified, not stored twice) and may commit.
    for r in push_lfs(answer["actions"]["upload"], oid, secret):
        assert r.ok, r.text
    resp = raw_commit(hub, bob, bob_repo, [{"key": "lfsFile", "value": {"path": "mine.bin", "algo": "sha256",
                                                                        "oid": oid, "size": len(secret)}}])
    assert resp.status_code == 200, resp.text
    got = requests.get(f"{hub.url}/{bob_repo}/resolve/main/mine.bin", headers=auth(bob), timeout=60)
    assert got.content == secret


def test_it_lets_anyone_reuse_bytes_of_a_public_repo_without_uploading(hub, people, unique):
    alice, bob = people["alice"], people["bob"]
    data = os.urandom(11 * MIB)
    oid = hashlib.sha256(data).hexdigest()
    hub.api(alice).create_repo(f"alice{unique}/open")
    hub.api(alice).upload_file(path_or_fileobj=io.BytesIO(data), path_in_repo="w.bin", repo_id=f"alice{unique}/open")
    bob_repo = f"bob{unique}/fork"
    hub.api(bob).create_repo(bob_repo)
    answer = lfs_batch(hub, bob, bob_repo, [(oid, len(data))])["objects"][0]
    assert "actions" not in answer  # already stored and readable to bob: nothing to send
    resp = raw_commit(hub, bob, bob_repo, [{"key": "lfsFile", "value": {"path": "w.bin", "algo": "sha256",
                                                                        "oid": oid, "size": len(data)}}])
    assert resp.status_code == 200, resp.text


def test_it_keeps_verified_bytes_when_a_concurrent_upload_of_the_same_hash_lies(hub, people, unique):
    """Two users upload the same new hash at once; the liar completes last. The hub serves the true
    bytes, because every upload session writes to its own key and is verified on its own."""
    alice, bob = people["alice"], people["bob"]
    truth = os.urandom(17 * MIB)  # three 8 MiB parts on the test servers: the multipart path
    lie = truth[:-1] + bytes([truth[-1] ^ 1])
    oid = hashlib.sha256(truth).hexdigest()
    for who, token in (("alice", alice), ("bob", bob)):
        hub.api(token).create_repo(f"{who}{unique}/race", private=True)
    up_alice = lfs_batch(hub, alice, f"alice{unique}/race", [(oid, len(truth))])["objects"][0]["actions"]["upload"]
    up_bob = lfs_batch(hub, bob, f"bob{unique}/race", [(oid, len(truth))])["objects"][0]["actions"]["upload"]
    assert "chunk_size" in up_alice["header"] and "chunk_size" in up_bob["header"]

    *parts, done = push_lfs(up_alice, oid, truth)
    assert done.ok, done.text
    *parts, done = push_lfs(up_bob, oid, lie)
    assert done.status_code == 422 and oid in done.text

    resp = raw_commit(hub, alice, f"alice{unique}/race",
                      [{"key": "lfsFile", "value": {"path": "t.bin", "algo": "sha256", "oid": oid, "size": len(truth)}}])
    assert resp.status_code == 200, resp.text
    got = requests.get(f"{hub.url}/alice{unique}/race/resolve/main/t.bin", headers=auth(alice), timeout=60)
    assert hashlib.sha256(got.content).hexdigest() == oid
    # Bob's failed upload gave him no right to the hash.
    resp = raw_commit(hub, bob, f"bob{unique}/race",
                      [{"key": "lfsFile", "value": {"path": "t.bin", "algo": "sha256", "oid": oid, "size": len(truth)}}])
    assert resp.status_code == 400


def test_it_accepts_inline_files_as_proof_of_holding_them(hub, people, unique):
    alice = people["alice"]
    repo = f"alice{unique}/inline"
    hub.api(alice).create_repo(repo)
    data = b"small file content\n"
    resp = raw_commit(hub, alice, repo, [{"key": "file", "value": {
        "path": "a.txt", "content": base64.b64encode(data).decode(), "encoding": "base64"}}])
    assert resp.status_code == 200, resp.text
    # Verify endpoint for the same oid answers for the uploader.
    oid = hashlib.sha256(data).hexdigest()
    r = requests.post(f"{hub.url}/{repo}.git/info/lfs/verify", data=json.dumps({"oid": oid, "size": len(data)}),
                      headers=auth(alice) | {"Content-Type": LFS_JSON}, timeout=10)
    assert r.status_code == 200
