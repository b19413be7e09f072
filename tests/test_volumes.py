"""Each user's volume through the native API, over HTTP on both backends: files and directories,
listing, moves that copy nothing, ETags and If-Match, byte ranges, atomic overwrites, space given
back, clear errors. Personas: alice owns the volume, bob is another user, anonymous has no token."""
from __future__ import annotations

import os
import socket
import threading
import time
from urllib.parse import urlparse

import pytest
import requests

from tests.support.store import stored_objects
from tests.support.volumes import MB, MIB, Vol, error_of, sha


def wait_for(condition, what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.fixture
def alice(hub, unique) -> Vol:
    return Vol(hub, hub.token(f"alice{unique}"))


@pytest.fixture
def bob(hub, unique) -> Vol:
    return Vol(hub, hub.token(f"bob{unique}"))


@pytest.fixture
def prober(hub) -> Vol:
    """One user per server for the many bad-input cases, none of which may leave anything behind."""
    return Vol(hub, hub.cached_token("volume-prober"))


def test_it_writes_reads_overwrites_and_deletes_a_file(alice):
    v1, v2 = os.urandom(300_000), os.urandom(123_457)
    resp = alice.put("notes/run1.bin", v1)
    assert resp.status_code == 201, resp.text
    assert resp.headers["ETag"] == f'"{sha(v1)}"'
    assert resp.json() | {"mtime": None} == {"path": "notes/run1.bin", "name": "run1.bin", "type": "file",
                                             "size": len(v1), "etag": sha(v1), "mtime": None}
    assert alice.get("notes/run1.bin").content == v1
    head = alice.head("notes/run1.bin")
    assert (head.status_code, head.headers["Content-Length"], head.headers["ETag"]) == (200, str(len(v1)),
                                                                                         f'"{sha(v1)}"')
    assert alice.stat("notes").json()["type"] == "directory"  # the parent was created

    resp = alice.put("notes/run1.bin", v2)
    assert resp.status_code == 200 and resp.json()["etag"] == sha(v2)
    assert alice.get("notes/run1.bin").content == v2
    assert alice.stat("notes/run1.bin").json()["size"] == len(v2)

    assert alice.delete("notes/run1.bin").status_code == 204
    status, code, message = error_of(alice.get("notes/run1.bin"))
    assert (status, code) == (404, "EntryNotFound") and "notes/run1.bin" in message
    assert alice.ls("notes").json()["items"] == []


def test_it_writes_empty_files(alice):
    assert alice.put("empty", b"").status_code == 201
    got = alice.get("empty")
    assert (got.status_code, got.content) == (200, b"")
    assert alice.stat("empty").json()["etag"] == sha(b"")


def test_it_keeps_files_and_directories_apart(alice):
    assert alice.put("a/b/c.txt", b"c").status_code == 201
    assert error_of(alice.put("a/b/c.txt/d", b"d"))[:2] == (409, "NotADirectory")
    assert error_of(alice.put("a/b", b"x"))[:2] == (409, "IsADirectory")
    assert error_of(alice.get("a/b"))[:2] == (409, "IsADirectory")
    assert error_of(alice.mkdir("a"))[:2] == (409, "FileExists")
    assert alice.mkdir("a", parents=True).status_code == 200
    assert error_of(alice.mkdir("x/y"))[:2] == (404, "EntryNotFound")
    resp = alice.mkdir("x/y", parents=True)
    assert resp.status_code == 201 and resp.json()["type"] == "directory"
    assert error_of(alice.mkdir("a/b/c.txt/z", parents=True))[:2] == (409, "NotADirectory")
    assert error_of(alice.ls("a/b/c.txt"))[:2] == (409, "NotADirectory")
    assert [(e["name"], e["type"]) for e in alice.ls("").json()["items"]] == [("a", "directory"), ("x", "directory")]


def test_it_deletes_directories_recursively_only_when_asked(alice):
    alice.fill("d/e", 3)
    assert alice.put("d/top.bin", b"t").status_code == 201
    assert error_of(alice.delete("d"))[:2] == (409, "DirectoryNotEmpty")
    assert alice.get("d/top.bin").content == b"t"
    assert alice.delete("d", recursive=True).status_code == 204
    assert alice.stat("d").status_code == 404 and alice.stat("d/e/f0000.bin").status_code == 404
    assert alice.mkdir("empty").status_code == 201
    assert alice.delete("empty").status_code == 204
    assert error_of(alice.delete(""))[:2] == (400, "BadRequest")


def test_it_lists_a_large_directory_page_by_page(alice):
    files = alice.fill("many", 230)
    assert alice.mkdir("many/sub").status_code == 201
    expected = sorted([p.rsplit("/", 1)[1] for p in files] + ["sub"])

    items, pages = alice.ls_all("many")
    assert [e["name"] for e in items] == expected
    assert pages == 3  # default page: 100 entries
    by_name = {e["name"]: e for e in items}
    assert by_name["sub"]["type"] == "directory" and by_name["sub"]["etag"] is None
    assert by_name["f0007.bin"]["etag"] == sha(files["many/f0007.bin"])
    assert by_name["f0007.bin"]["path"] == "many/f0007.bin"

    items, pages = alice.ls_all("many/", limit=17)
    assert [e["name"] for e in items] == expected and pages == -(-len(expected) // 17)
    assert error_of(alice.ls("many", cursor="%%%"))[:2] == (400, "BadRequest")
    assert error_of(alice.ls("many", limit="0"))[:2] == (400, "BadRequest")
    assert error_of(alice.ls("nothing-here"))[:2] == (404, "EntryNotFound")


def test_it_moves_a_directory_of_many_files_by_changing_metadata_only(hub, alice):
    files = {}
    for d in ("big/a", "big/b/c"):
        files |= alice.fill(d, 150)
    objects = stored_objects(hub, "")
    used = alice.quota()["used"]

    started = time.monotonic()
    resp = alice.move("big", "archive/2024/big", parents=True)
    elapsed = time.monotonic() - started
    assert resp.status_code == 200, resp.text
    assert resp.json()["path"] == "archive/2024/big" and resp.json()["type"] == "directory"
    assert elapsed < 1.0, f"moving 300 files took {elapsed:.2f} s: it should not depend on their number"
    # Not a byte copied or deleted: the same objects under the same keys; usage unchanged.
    assert stored_objects(hub, "") == objects
    assert alice.quota()["used"] == used

    assert alice.stat("big").status_code == 404
    listed, _ = alice.ls_all("archive/2024/big/b/c")
    assert {e["path"]: e["etag"] for e in listed} == {
        p.replace("big/", "archive/2024/big/", 1): sha(d) for p, d in files.items() if p.startswith("big/b/c/")}
    assert alice.get("archive/2024/big/a/f0042.bin").content == files["big/a/f0042.bin"]

    # A file too, and the rules of rename(2).
    assert alice.move("archive/2024/big/a/f0001.bin", "top.bin").json()["etag"] == sha(files["big/a/f0001.bin"])
    assert error_of(alice.move("archive", "archive/2024/inside"))[:2] == (400, "BadRequest")
    assert error_of(alice.move("top.bin", "archive/2024/big/a/f0002.bin"))[:2] == (409, "FileExists")
    assert error_of(alice.move("top.bin", "archive", overwrite=True))[:2] == (409, "IsADirectory")
    assert error_of(alice.move("nope", "x"))[:2] == (404, "EntryNotFound")
    assert error_of(alice.move("top.bin", "no/such/dir/x"))[:2] == (404, "EntryNotFound")
    resp = alice.move("top.bin", "archive/2024/big/a/f0002.bin", overwrite=True)
    assert resp.status_code == 200
    assert alice.get("archive/2024/big/a/f0002.bin").content == files["big/a/f0001.bin"]
    assert alice.stat("top.bin").status_code == 404


def test_it_refuses_stale_writes_with_412(alice):
    v1, v2, v3 = b"version one", b"version two!", b"version three"
    e1 = alice.put("cfg.json", v1).json()["etag"]
    resp = alice.put("cfg.json", v2, headers={"If-Match": f'"{e1}"'})
    assert resp.status_code == 200
    e2 = resp.json()["etag"]

    status, code, message = error_of(alice.put("cfg.json", v3, headers={"If-Match": f'"{e1}"'}))
    assert (status, code) == (412, "PreconditionFailed") and e2 in message
    assert alice.get("cfg.json").content == v2
    assert error_of(alice.delete("cfg.json", headers={"If-Match": e1}))[:2] == (412, "PreconditionFailed")
    assert error_of(alice.put("cfg.json", v3, headers={"If-None-Match": "*"}))[:2] == (412, "PreconditionFailed")
    assert error_of(alice.put("new.json", v3, headers={"If-Match": "*"}))[:2] == (412, "PreconditionFailed")
    assert alice.stat("new.json").status_code == 404
    assert alice.put("new.json", v3, headers={"If-None-Match": "*"}).status_code == 201

    assert alice.get("cfg.json", headers={"If-None-Match": f'"{e2}"'}).status_code == 304
    assert alice.delete("cfg.json", headers={"If-Match": f'"{e2}"'}).status_code == 204
    assert alice.quota()["reserved"] == 0


def test_it_verifies_a_sha256_the_writer_sends(alice):
    data = os.urandom(50_000)
    resp = alice.put("checked.bin", data, headers={"X-Content-Sha256": sha(data)})
    assert resp.status_code == 201
    status, code, _ = error_of(alice.put("checked.bin", b"other", headers={"X-Content-Sha256": sha(data)}))
    assert (status, code) == (422, "UnprocessableEntity")
    assert alice.get("checked.bin").content == data


def test_it_serves_byte_ranges(alice):
    data = os.urandom(3 * MIB + 5)
    alice.put("ranged.bin", data)

    def ranged(spec: str) -> requests.Response:
        return alice.get("ranged.bin", headers={"Range": f"bytes={spec}"})

    resp = ranged("100-199")
    assert (resp.status_code, resp.content) == (206, data[100:200])
    assert resp.headers["Content-Range"] == f"bytes 100-199/{len(data)}"
    assert ranged("-10").content == data[-10:]
    assert ranged(f"{2 * MIB}-").content == data[2 * MIB:]
    assert ranged(f"{len(data)}-").status_code == 416


def test_it_shows_readers_the_old_or_the_new_file_never_a_mix(alice):
    """A reader polls a file while it is overwritten again and again with contents of other sizes."""
    versions = [os.urandom(size) for size in (200_000, 1_500_000, 50_000, 2_500_000, 700_000) * 4]
    known = {sha(v): i for i, v in enumerate(versions)}
    assert alice.put("live.bin", versions[0]).status_code == 201
    seen: list[int] = []
    mixed: list[int] = []
    done = threading.Event()

    def reader() -> None:
        while not done.is_set():
            resp = alice.get("live.bin")
            assert resp.status_code == 200
            got = known.get(sha(resp.content))
            if got is None:
                mixed.append(len(resp.content))
            elif not seen or seen[-1] != got:
                seen.append(got)

    readers = [threading.Thread(target=reader) for _ in range(3)]
    for t in readers:
        t.start()
    try:
        for v in versions[1:]:
            assert alice.put("live.bin", v).json()["etag"] == sha(v)
            time.sleep(0.02)
    finally:
        done.set()
        for t in readers:
            t.join()
    assert not mixed, f"readers saw {len(mixed)} bodies that were no complete version: sizes {mixed[:5]}"
    assert len(set(seen)) >= 3, "the readers should have seen several versions"
    assert alice.get("live.bin").content == versions[-1]


def test_it_leaves_the_old_file_untouched_when_a_writer_dies_midway(hub, alice):
    old = os.urandom(100_000)
    alice.put("ckpt.bin", old)
    objects = stored_objects(hub, "")
    u = urlparse(alice.url("ckpt.bin"))
    with socket.create_connection((u.hostname, u.port)) as s:
        s.sendall((f"PUT {u.path} HTTP/1.1\r\nHost: {u.netloc}\r\nAuthorization: Bearer {alice.token}\r\n"
                   f"Content-Length: {4 * MIB}\r\n\r\n").encode() + os.urandom(MIB))
        wait_for(lambda: alice.quota()["reserved"] == 4 * MIB, "the hub to reserve the write's bytes")
    # The writer is gone after a quarter of its bytes. Once the hub notices, nothing is left of it.
    wait_for(lambda: alice.quota()["reserved"] == 0, "the hub to release the reservation")
    q = alice.quota()
    assert q["reserved"] == 0 and q["used"] == len(old)
    assert alice.get("ckpt.bin").content == old
    assert stored_objects(hub, "") == objects


def test_it_gives_space_back_once_nothing_references_the_bytes(hub, unique):
    name = f"dora{unique}"
    token = hub.manage("hub_token", name, "--quota", "30MB").stdout.strip().splitlines()[-1]
    dora = Vol(hub, token)
    data, other = os.urandom(2 * MB), os.urandom(3 * MB)
    assert dora.put("a.bin", data).status_code == 201
    assert dora.put("copy/a.bin", data).status_code == 201
    assert dora.quota()["used"] == 2 * MB  # the same bytes count once
    assert dora.put("dir/b.bin", other).status_code == 201
    assert dora.quota()["used"] == 5 * MB
    assert dora.delete("a.bin").status_code == 204
    assert dora.quota()["used"] == 5 * MB  # copy/a.bin still holds them
    assert dora.delete("dir", recursive=True).status_code == 204
    assert dora.quota()["used"] == 2 * MB

    # Bytes a repo of the account also holds stay counted after the volume lets go of them.
    hub.api(token).create_repo(f"{name}/m")
    hub.api(token).upload_file(path_or_fileobj=data, path_in_repo="w.bin", repo_id=f"{name}/m")
    with_repo = dora.quota()["used"]
    assert dora.delete("copy/a.bin").status_code == 204
    assert dora.quota()["used"] == with_repo

    # Overwriting frees the replaced bytes.
    dora.put("x.bin", other)
    dora.put("x.bin", b"small")
    assert dora.quota()["used"] == with_repo + len(b"small")


def test_it_refuses_a_write_over_quota_with_the_figures(hub, unique):
    name = f"erin{unique}"
    erin = Vol(hub, hub.manage("hub_token", name, "--quota", "30MB").stdout.strip().splitlines()[-1])
    assert erin.put("keep.bin", os.urandom(25 * MB)).status_code == 201
    objects = stored_objects(hub, "")
    status, code, message = error_of(erin.put("more.bin", os.urandom(6 * MB)))
    assert (status, code) == (413, "QuotaExceeded")
    assert f"quota exceeded for {name}: 25 MB of 30 MB used" in message and "needs 6 MB" in message
    assert erin.stat("more.bin").status_code == 404
    assert stored_objects(hub, "") == objects
    assert erin.quota()["reserved"] == 0


@pytest.mark.parametrize("path", ["%2E%2E/etc/passwd", "a/%2E%2E/%2E%2E/b", "a/%2E/b", "a//b", "%2Fabsolute",
                                  "bad%00name", "x" * 300, "/".join(["d"] * 600)])
def test_it_refuses_bad_paths_in_urls(prober, path):
    resp = requests.put(f"{prober.base}/files/{path}", data=b"x", headers=prober.headers(), timeout=30)
    assert error_of(resp)[:2] == (400, "InvalidPath")
    assert error_of(requests.get(f"{prober.base}/files/{path}", headers=prober.headers(), timeout=30))[0] == 400
    assert prober.ls().json()["items"] == []
    assert prober.quota()["reserved"] == 0


@pytest.mark.parametrize("body", [{"path": "../x"}, {"path": "/etc"}, {"path": "a\x00b"}, {"path": "a/./b"},
                                  {"path": ""}, {"path": ["a"]}, {}])
def test_it_refuses_bad_paths_in_requests(prober, body):
    resp = requests.post(f"{prober.base}/mkdir", json=body, headers=prober.headers(), timeout=30)
    status, code, message = error_of(resp)
    assert status == 400 and code in ("InvalidPath", "BadRequest") and message
    resp = requests.post(f"{prober.base}/move", json={"src": "x", "dst": body.get("path", "")},
                         headers=prober.headers(), timeout=30)
    assert resp.status_code == 400
    assert prober.ls().json()["items"] == []


def test_it_keeps_each_volume_to_its_owner(hub, alice, bob, unique):
    assert alice.put("secret.txt", b"alice's").status_code == 201
    assert bob.get("secret.txt").status_code == 404
    assert bob.ls().json()["items"] == []
    assert bob.put("secret.txt", b"bob's").status_code == 201
    assert alice.get("secret.txt").content == b"alice's"

    anonymous = Vol(hub, None)
    for resp in (anonymous.ls(), anonymous.get("secret.txt"), anonymous.put("x", b"x"), anonymous.mkdir("d")):
        assert error_of(resp)[:2] == (401, "Unauthorized")
    bad = Vol(hub, "hub_not-a-token")
    assert bad.ls().status_code == 401

    reader = Vol(hub, hub.token(f"alice{unique}", read_only=True))
    assert reader.get("secret.txt").content == b"alice's"
    for resp in (reader.put("x", b"x"), reader.delete("secret.txt"), reader.mkdir("d"), reader.move("secret.txt", "y")):
        assert error_of(resp)[:2] == (403, "Forbidden")
    assert [e["name"] for e in alice.ls().json()["items"]] == ["secret.txt"]


def test_it_deletes_an_account_with_its_volume(hub, unique):
    name = f"gone{unique}"
    gone = Vol(hub, hub.token(name))
    assert gone.put("a/b/c.bin", b"bytes").status_code == 201
    out = hub.manage("shell", "-c", "from django.contrib.auth import get_user_model; "
                     f"get_user_model().objects.get(username='{name}').delete(); print('deleted')").stdout
    assert out.strip().splitlines()[-1] == "deleted"
    assert gone.ls().status_code == 401


def test_it_documents_the_volume_api_in_the_openapi_schema(hub):
    resp = requests.get(f"{hub.url}/api/schema", params={"format": "json"}, timeout=60)
    assert resp.status_code == 200
    paths = resp.json()["paths"]
    operations = {op["operationId"] for p in paths.values() for op in p.values() if isinstance(op, dict)}
    assert {"volume_ls", "volume_stat", "volume_mkdir", "volume_move", "volume_read", "volume_write",
            "volume_delete", "volume_upload_create", "volume_upload_status", "volume_upload_part",
            "volume_upload_complete", "volume_upload_abort"} <= operations
    assert "/api/volume/files/{path}" in paths and "/api/volume/uploads/{upload_id}/parts/{number}" in paths


@pytest.mark.django_db
def test_it_lists_resolves_and_moves_in_queries_that_do_not_grow_with_the_directory():
    """In process: the query counts that make listing O(depth) and a move O(1) in the files moved."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from hub.accounts.services import do_ensure_user
    from hub.volumes import services

    vol = services.volume_of(do_ensure_user("quentin"))
    for i in range(3):
        services.do_mkdir(vol, f"small/d{i}/x", parents=True)
    for i in range(1500):
        services.do_mkdir(vol, f"deep/er/big/d{i:04d}", parents=True)
    services.do_mkdir(vol, "deep/er/big/d0001/x/y", parents=True)

    def queries(fn) -> int:
        with CaptureQueriesContext(connection) as ctx:
            fn()
        return len(ctx.captured_queries)

    assert queries(lambda: services.list_dir(vol, "small")) == 2  # resolve 1 component, list 1 page
    assert queries(lambda: services.list_dir(vol, "deep/er/big", limit=1000)) == 4
    assert queries(lambda: services.resolve(vol, "deep/er/big/d0001/x/y")) == 6
    assert services.list_dir(vol, "deep/er/big", limit=1000)[1] == "d0999"

    small = queries(lambda: services.do_move(vol, "small", "moved/small", parents=True))
    big = queries(lambda: services.do_move(vol, "deep/er/big", "moved/big", parents=True))
    # A few more for the deeper source path, none for its 1500 children.
    assert small <= 12 and big <= small + 2
    assert services.resolve(vol, "moved/big/d0001/x/y").is_dir
    assert services.resolve(vol, "deep/er/big") is None
