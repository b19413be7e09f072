"""The object-store interface, run against both implementations: a local directory and S3 on a
real Ceph RADOS Gateway. Nothing above this interface may know which one runs, so both must behave
the same."""
from __future__ import annotations

import io
import os
import uuid

import pytest
import requests

from storage.store.objectstore import LocalStore, ObjectMissingError, S3Store, StoreUnavailableError


@pytest.fixture(params=["local", "s3"])
def store(request, tmp_path):
    if request.param == "local":
        yield LocalStore(str(tmp_path / "objects"))
        return
    env = request.getfixturevalue("rgw_env")
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        s3 = S3Store(f"objstore-test-{uuid.uuid4().hex[:8]}")
        s3.ensure_bucket()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    yield s3
    from tests.support.servers import drop_bucket

    drop_bucket(env, s3.bucket)


def test_it_round_trips_bytes_and_ranges(store):
    data = os.urandom(3 * 2**20 + 17)
    store.put_stream("blobs/a/b", io.BytesIO(data), len(data))
    assert store.size("blobs/a/b") == len(data)
    assert store.read_bytes("blobs/a/b") == data
    assert b"".join(store.read("blobs/a/b", 100, 5000)) == data[100:5000]
    assert b"".join(store.read("blobs/a/b", len(data) - 10)) == data[-10:]
    assert store.sha256("blobs/a/b")[1] == len(data)


def test_it_reports_missing_objects(store):
    assert store.size("blobs/none") is None
    with pytest.raises(ObjectMissingError):
        b"".join(store.read("blobs/none"))
    store.delete("blobs/none")  # deleting what is not there is not an error


def test_it_overwrites_atomically_and_deletes(store):
    store.put_bytes("k", b"old")
    store.put_bytes("k", b"new content")
    assert store.read_bytes("k") == b"new content"
    store.delete("k")
    assert store.size("k") is None


def test_it_assembles_multipart_uploads_in_part_order(store):
    part = 5 * 2**20
    chunks = [os.urandom(part), os.urandom(part), os.urandom(1234)]
    upload = store.create_multipart("blobs/mp")
    etags = {}
    for n in (3, 1, 2):  # out of order, as parallel clients send them
        etags[n] = store.put_part("blobs/mp", upload, n, io.BytesIO(chunks[n - 1]), len(chunks[n - 1]))
    listed = store.list_parts("blobs/mp", upload)
    assert {n: size for n, (_, size) in listed.items()} == {1: part, 2: part, 3: 1234}
    store.complete_multipart("blobs/mp", upload, sorted(etags.items()))
    assert store.read_bytes("blobs/mp") == b"".join(chunks)


def test_it_aborts_multipart_uploads(store):
    upload = store.create_multipart("blobs/ab")
    store.put_part("blobs/ab", upload, 1, io.BytesIO(b"x" * 10), 10)
    store.abort_multipart("blobs/ab", upload)
    assert store.size("blobs/ab") is None
    with pytest.raises(ObjectMissingError):
        store.list_parts("blobs/ab", upload)


def test_it_rejects_keys_that_escape_the_local_root(tmp_path):
    local = LocalStore(str(tmp_path / "objects"))
    for key in ("../outside", "/etc/passwd", ".tmp/x", "a/../../b"):
        with pytest.raises(ValueError):
            local.put_bytes(key, b"x")


def test_it_signs_urls_that_work_only_unmodified(store):
    if isinstance(store, LocalStore):
        assert store.presign_get("k", expires=60) is None  # the hub serves local bytes itself
        return
    store.put_bytes("signed", b"secret bytes")
    url = store.presign_get("signed", expires=60, filename="f.bin")
    resp = requests.get(url, timeout=10)
    assert resp.status_code == 200 and resp.content == b"secret bytes"
    assert requests.get(url, headers={"Range": "bytes=0-5"}, timeout=10).content == b"secret"
    tampered = url.replace("signed", "signee", 1)
    assert requests.get(tampered, timeout=10).status_code == 403
    upload = store.create_multipart("parts-here")
    part_url = store.presign_part("parts-here", upload, 1, expires=60)
    resp = requests.put(part_url, data=b"hello", timeout=10)
    assert resp.status_code == 200 and resp.headers["ETag"]
    store.complete_multipart("parts-here", upload, [(1, resp.headers["ETag"])])
    assert store.read_bytes("parts-here") == b"hello"


def test_it_turns_an_unreachable_store_into_store_unavailable(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "y")
    dead = S3Store("bucket", endpoint_url="http://127.0.0.1:9")  # nothing listens on port 9
    with pytest.raises(StoreUnavailableError):
        dead.size("k")
    with pytest.raises(StoreUnavailableError):
        b"".join(dead.read("k"))
