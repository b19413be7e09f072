"""Small LFS objects from `hub push`: one PUT straight to the store through a URL signed with the
object's sha256, which the store itself checks (x-amz-content-sha256), then verified a batch at a
time — no upload session, no read-back by the hub (hub.uploads.transfers.CheckedPut). Only for
clients that offer it ("hub-checked-put"); stock huggingface_hub keeps its basic/multipart uploads,
and the local backend (which cannot sign such URLs) receives the bytes itself and hashes them."""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest
import requests

from tests.support.hf import LFS_JSON, auth, lfs_batch, push_lfs
from tests.support.hub_cli import client_env, hub_cmd, ok, run, uploaded

CHECKED = ("basic", "multipart", "hub-checked-put")
ROOT = Path(__file__).resolve().parent.parent


def obj(data: bytes) -> tuple[str, int]:
    return hashlib.sha256(data).hexdigest(), len(data)


def verify(hub, token: str, repo_id: str, objects: list[dict]) -> requests.Response:
    return requests.post(f"{hub.url}/{repo_id}.git/info/lfs/verify", data=json.dumps({"objects": objects}),
                         headers=auth(token) | {"Content-Type": LFS_JSON, "Accept": LFS_JSON}, timeout=60)


def token_of(action: dict) -> str:
    return action["verify"]["href"].split("token=", 1)[1]


def commit_lfs(hub, token: str, repo_id: str, files: dict[str, bytes]) -> requests.Response:
    lines = [{"key": "header", "value": {"summary": "checked"}}] + [
        {"key": "lfsFile", "value": {"path": p, "algo": "sha256", "oid": obj(d)[0], "size": len(d)}}
        for p, d in files.items()]
    return requests.post(f"{hub.url}/api/models/{repo_id}/commit/main",
                         data="\n".join(json.dumps(x) for x in lines).encode(),
                         headers=auth(token) | {"Content-Type": "application/x-ndjson"}, timeout=60)


def test_the_store_checks_each_small_object_against_the_sha256_it_was_signed_with(hub, alice, bob, unique):
    repo = f"alice/checked-{unique}"
    hub.api(alice).create_repo(repo, private=True)  # (what bob may not reach by its hash below)
    good, other = os.urandom(4096), os.urandom(5000)
    answer = lfs_batch(hub, alice, repo, [obj(good), obj(other)], transfers=CHECKED)
    assert answer["transfer"] == "basic"
    first, second = answer["objects"]
    if hub.name == "embedded":
        # The local store cannot sign such a URL: the hub takes the bytes itself and hashes them.
        assert "header" not in first["actions"]["upload"] and "/lfs/upload/" in first["actions"]["upload"]["href"]
        assert all(r.status_code == 200 for r in push_lfs(first["actions"]["upload"], obj(good)[0], good))
        assert commit_lfs(hub, alice, repo, {"good.bin": good}).status_code == 200
        assert requests.get(f"{hub.url}/{repo}/resolve/main/good.bin", headers=auth(alice), timeout=30).content == good
        return
    upload = first["actions"]["upload"]
    assert upload["header"] == {"x-amz-content-sha256": obj(good)[0]} and "/blobs/incoming/" in upload["href"]

    # The store refuses other bytes, and a request without the signed header; nothing is stored.
    wrong = requests.put(upload["href"], data=other[:4096], headers=upload["header"], timeout=30)
    assert wrong.status_code == 400 and "XAmzContentSHA256Mismatch" in wrong.text
    assert requests.put(upload["href"], data=good, timeout=30).status_code == 403
    both = [{"oid": o, "size": n, "token": token_of(a)} for (o, n), a in
            [(obj(good), first["actions"]), (obj(other), second["actions"])]]
    resp = verify(hub, alice, repo, both)
    assert resp.status_code == 200
    assert [o.get("error", {}).get("code") for o in resp.json()["objects"]] == [422, 422]
    assert "upload it again" in resp.json()["objects"][0]["error"]["message"]
    assert commit_lfs(hub, alice, repo, {"good.bin": good}).status_code == 400  # not a blob: no commit

    # The right bytes: verified in bulk (only those sent), then committed and served.
    assert requests.put(upload["href"], data=good, headers=upload["header"], timeout=30).status_code == 200
    resp = verify(hub, alice, repo, both)
    assert [o.get("error") is None for o in resp.json()["objects"]] == [True, False]
    assert resp.json()["objects"][0] == {"oid": obj(good)[0], "size": 4096}
    assert verify(hub, alice, repo, both[:1]).json()["objects"][0] == {"oid": obj(good)[0], "size": 4096}  # again
    # git-lfs's own verify (one object, the token in its href) says the same.
    single = requests.post(first["actions"]["verify"]["href"], data=json.dumps({"oid": obj(good)[0], "size": 4096}),
                           headers=auth(alice) | {"Content-Type": LFS_JSON}, timeout=30)
    assert single.status_code == 200, single.text
    assert commit_lfs(hub, alice, repo, {"good.bin": good}).status_code == 200
    assert requests.get(f"{hub.url}/{repo}/resolve/main/good.bin", headers=auth(alice), timeout=30).content == good

    # A verify token is its user's and its object's: bob cannot use alice's, nor verify bytes he
    # never sent though they are stored (his own batch gives him a key of his own, empty).
    stolen = verify(hub, bob, repo, both[:1])
    assert stolen.status_code in (400, 403, 404)
    bob_repo = f"bob/checked-{unique}"
    hub.api(bob).create_repo(bob_repo)
    (mine,) = lfs_batch(hub, bob, bob_repo, [obj(good)], transfers=CHECKED)["objects"]
    assert mine["actions"]["upload"]["href"] != upload["href"]
    resp = verify(hub, bob, bob_repo, [{"oid": obj(good)[0], "size": 4096, "token": token_of(mine["actions"])}])
    assert resp.json()["objects"][0]["error"]["code"] == 422
    assert commit_lfs(hub, bob, bob_repo, {"stolen.bin": good}).status_code == 400
    swapped = [{"oid": obj(other)[0], "size": 5000, "token": token_of(first["actions"])}]
    assert verify(hub, alice, repo, swapped).status_code == 400


def test_stock_clients_are_not_handed_a_checked_put(hub, alice, unique):
    repo = f"alice/stock-{unique}"
    hub.api(alice).create_repo(repo)
    data = os.urandom(3000)
    (item,) = lfs_batch(hub, alice, repo, [obj(data)])["objects"]  # huggingface_hub offers basic + multipart
    assert "x-amz-content-sha256" not in (item["actions"]["upload"].get("header") or {})
    assert all(r.status_code == 200 for r in push_lfs(item["actions"]["upload"], obj(data)[0], data))
    assert commit_lfs(hub, alice, repo, {"x.bin": data}).status_code == 200


def test_hub_push_sends_many_small_files_and_every_byte_arrives(hub, alice, unique, tmp_path):
    src = tmp_path / "src"
    files = {f"d{i % 7}/f{i}.bin": os.urandom(1000 + i) for i in range(240)}
    for path, data in files.items():
        (src / path).parent.mkdir(parents=True, exist_ok=True)
        (src / path).write_bytes(data)
    repo = f"alice/many-{unique}"
    env = os.environ | {"HUB_ENDPOINT": hub.url, "HUB_TOKEN": alice, "HUB_CACHE_DIR": str(tmp_path / "cache"),
                        "HUB_DISABLE_PROGRESS_BARS": "1"}
    out = subprocess.run([str(ROOT / ".venv/bin/hub"), "push", str(src), repo], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "pushed 240 of 240 files" in out.stderr
    pulled = subprocess.run([str(ROOT / ".venv/bin/hub"), "pull", repo], env=env, cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert pulled.returncode == 0, pulled.stderr
    root = Path(pulled.stdout.strip())
    assert {p: (root / p).read_bytes() for p in files} == files
    tree = hub.api(alice).list_repo_tree(repo, path_in_repo="d3", expand=True)
    assert all(e.lfs is not None and e.lfs.sha256 == obj(files[e.path])[0] for e in tree)


# --- checked parts: large objects and volume files ------------------------------------------------------

MIB = 2**20
PART = 8 * MIB  # HUB_MULTIPART_CHUNK of the test servers


def parts_of(data: bytes) -> dict[int, bytes]:
    return {n + 1: data[i:i + PART] for n, i in enumerate(range(0, len(data), PART))}


def ask_parts(hub, token: str, upload_id: str, hashes: dict[int, str]) -> requests.Response:
    return requests.post(f"{hub.url}/api/v1/uploads/{upload_id}/parts", headers=auth(token),
                         json={"parts": {str(n): h for n, h in hashes.items()}}, timeout=30)


def complete(upload: dict, oid: str, etags: dict[int, str]) -> requests.Response:
    return requests.post(upload["href"], data=json.dumps({"oid": oid, "parts": [
        {"partNumber": n, "etag": e} for n, e in sorted(etags.items())]}),
        headers={"Content-Type": LFS_JSON, "Accept": LFS_JSON}, timeout=120)


def send_checked(hub, token: str, upload: dict, data: bytes) -> dict[int, str]:
    hashes = {n: hashlib.sha256(p).hexdigest() for n, p in parts_of(data).items()}
    resp = ask_parts(hub, token, upload["header"]["upload_id"], hashes)
    assert resp.status_code == 200, resp.text
    etags = {}
    for n, url in resp.json()["part_urls"].items():
        put = requests.put(url, data=parts_of(data)[int(n)], headers={"x-amz-content-sha256": hashes[int(n)]},
                           timeout=60)
        assert put.status_code == 200, put.text
        etags[int(n)] = put.headers["ETag"]
    return etags


def wait_for(check, seconds: float = 30.0):
    import time
    deadline = time.time() + seconds
    while True:
        out = check()
        if out or time.time() > deadline:
            return out
        time.sleep(0.2)


def test_large_objects_go_in_parts_the_store_checks_and_are_verified_whole_in_the_background(hub, alice, bob,
                                                                                             unique):
    repo = f"alice/parts-{unique}"
    hub.api(alice).create_repo(repo, private=True)
    data = os.urandom(2 * PART + 12345)
    (item,) = lfs_batch(hub, alice, repo, [obj(data)], transfers=CHECKED)["objects"]
    upload = item["actions"]["upload"]
    if hub.name == "embedded":  # (parts through the hub, which hashes them)
        assert "checked" not in upload["header"] and "1" in upload["header"]
        return
    # No plain part URL is handed out, here or when the session is asked for what is missing.
    assert upload["header"]["checked"] == "sha256" and not any(k.isdigit() for k in upload["header"])
    status = requests.get(f"{hub.url}/api/v1/uploads/{upload['header']['upload_id']}", headers=auth(alice),
                          timeout=30).json()
    assert status["checked"] is True and status["part_urls"] == {}
    # A part URL signed with one hash takes only those bytes.
    first = parts_of(data)[1]
    url = ask_parts(hub, alice, upload["header"]["upload_id"], {1: hashlib.sha256(first).hexdigest()}).json()
    wrong = requests.put(url["part_urls"]["1"], data=os.urandom(PART),
                         headers={"x-amz-content-sha256": hashlib.sha256(first).hexdigest()}, timeout=60)
    assert wrong.status_code == 400 and "XAmzContentSHA256Mismatch" in wrong.text
    assert ask_parts(hub, bob, upload["header"]["upload_id"], {1: SHA_A}).status_code == 404  # not his

    etags = send_checked(hub, alice, upload, data)
    done = complete(upload, obj(data)[0], etags)
    assert done.status_code == 200, done.text
    committed = commit_lfs(hub, alice, repo, {"w.bin": data})
    assert committed.status_code == 200, committed.text
    got = requests.get(f"{hub.url}/{repo}/resolve/main/w.bin", headers=auth(alice), timeout=60)
    assert got.status_code == 200 and got.content == data

    # A client that names a whole-file sha256 its parts do not add up to: accepted as a claim, found
    # out by the background check, and never served.
    liar = os.urandom(len(data))
    (item,) = lfs_batch(hub, alice, repo, [obj(liar)], transfers=CHECKED)["objects"]
    etags = send_checked(hub, alice, item["actions"]["upload"], data)  # (the bytes of another file)
    assert complete(item["actions"]["upload"], obj(liar)[0], etags).status_code == 200
    committed = commit_lfs(hub, alice, repo, {"liar.bin": liar})
    if committed.status_code == 400:  # the check was quicker than this commit: the claim is refused already
        assert "failed its integrity check" in committed.json()["error"]
        return
    assert committed.status_code == 200, committed.text
    refused = wait_for(lambda: [r for r in [requests.get(f"{hub.url}/{repo}/resolve/main/liar.bin",
                                                         headers=auth(alice), timeout=60)] if r.status_code == 409])
    assert refused and "integrity check" in refused[0].json()["error"], "the lie was served"

    # Claiming the hash of bytes someone else holds proves nothing: they are read back, found wrong.
    bob_repo = f"bob/parts-{unique}"
    hub.api(bob).create_repo(bob_repo)
    (item,) = lfs_batch(hub, bob, bob_repo, [obj(data)], transfers=CHECKED)["objects"]
    etags = send_checked(hub, bob, item["actions"]["upload"], os.urandom(len(data)))
    claimed = complete(item["actions"]["upload"], obj(data)[0], etags)
    assert claimed.status_code == 422 and "hash" in claimed.json()["error"]
    assert commit_lfs(hub, bob, bob_repo, {"stolen.bin": data}).status_code == 400


SHA_A = "a" * 64


def test_volume_files_go_in_checked_parts(hub, alice, unique, tmp_path):
    data = os.urandom(2 * PART + 999)
    start = requests.post(f"{hub.url}/api/volume/uploads", headers=auth(alice), timeout=30,
                          json={"path": f"checked-{unique}.bin", "size": len(data), "checked": True}).json()
    if hub.name == "embedded":
        assert start["checked"] is False and len(start["parts"]) == 3
        return
    assert start["checked"] is True and start["parts"] == {}
    hashes = {n: hashlib.sha256(p).hexdigest() for n, p in parts_of(data).items()}
    urls = requests.post(f"{hub.url}/api/volume/uploads/{start['id']}/parts", headers=auth(alice), timeout=30,
                         json={"parts": {str(n): h for n, h in hashes.items()}}).json()["parts"]
    for n, url in urls.items():
        assert requests.put(url, data=parts_of(data)[int(n)], headers={"x-amz-content-sha256": hashes[int(n)]},
                            timeout=60).status_code == 200
    done = requests.post(f"{hub.url}/api/volume/uploads/{start['id']}/complete", headers=auth(alice), timeout=120,
                         json={"sha256": obj(data)[0]})
    assert done.status_code == 200, done.text
    got = requests.get(f"{hub.url}/api/volume/files/checked-{unique}.bin", headers=auth(alice), timeout=60)
    assert got.content == data

    # The CLI uses them: `hub cp` of a file of several parts, read back equal.
    local = tmp_path / "big.bin"
    local.write_bytes(os.urandom(3 * PART + 5))
    env = os.environ | {"HUB_ENDPOINT": hub.url, "HUB_TOKEN": alice, "HUB_DISABLE_PROGRESS_BARS": "1",
                        "HUB_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run([str(ROOT / ".venv/bin/hub"), "cp", str(local), f"volume/cp-{unique}.bin"], env=env,
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    got = requests.get(f"{hub.url}/api/volume/files/cp-{unique}.bin", headers=auth(alice), timeout=60)
    assert got.content == local.read_bytes()


# --- a large new file goes up while `hub push` hashes it --------------------------------------------------

def sessions_of(hub, repo: str, path: str) -> list[dict]:
    out = hub.manage("shell", "-c", (
        "import json; from hub.content.models import UploadSession; "
        f"print(json.dumps(list(UploadSession.objects.filter(repo__name='{repo.split('/')[1]}', "
        f"target__path='{path}').order_by('created').values('state', 'sha256', 'key', 'checked', "
        "'reservation_id'))))")).stdout
    return json.loads(out.strip().splitlines()[-1])


def reserved(hub, token: str) -> int:
    return requests.get(f"{hub.url}/api/quota", headers=auth(token), timeout=30).json()["reserved"]


def test_a_large_new_file_goes_up_while_it_is_hashed(hub, alice, unique, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    data = os.urandom(3 * PART + 7)
    (src / "big.bin").write_bytes(data)
    (src / "small.txt").write_text("beside it\n")
    repo = f"alice/overlap-{unique}"
    env = client_env(hub, alice, tmp_path, HUB_PUSH_UNHASHED_MIN="16MiB")
    before = reserved(hub, alice)
    ok(run(env, "push", str(src), repo))
    root = Path(ok(run(env, "pull", repo)).stdout.strip())
    assert (root / "big.bin").read_bytes() == data and (root / "small.txt").read_text() == "beside it\n"
    (session,) = sessions_of(hub, repo, "big.bin") or [None]
    if hub.name == "embedded":  # (a store that cannot check parts: hashed first, then the LFS batch)
        assert session is None or not session["key"].startswith("blobs/pending/")
        return
    # opened before the hash was known (a key of its own, not under the hash), named, completed
    assert session["key"].startswith("blobs/pending/") and session["checked"] is True
    assert (session["state"], session["sha256"]) == ("done", obj(data)[0])
    assert reserved(hub, alice) == before  # the commit turned what the upload reserved into usage


@pytest.mark.parametrize("how,change", [("push", "truncated"), ("push", "rewritten"), ("cp", "rewritten")])
def test_a_file_that_changes_while_it_goes_up_fails_clearly_and_lands_nowhere(hub, alice, unique, tmp_path, how,
                                                                              change):
    """Parts are hashed ahead of the streams that send them, so a file written to meanwhile is caught
    by whatever sees it first: a read that comes up short, or the store refusing a part that no longer
    hashes to what its URL was signed with (then the client hashes the part again to tell a changed
    file from bytes damaged on the way). Either way: one clear line, nothing committed or written, and
    the upload session ended (DELETE) so that its reservation is released at once."""
    src = tmp_path / "src"
    src.mkdir()
    big = src / "big.bin"
    big.write_bytes(os.urandom(2 * PART + 7))
    repo, dst = f"alice/changing-{unique}", f"volume/changing-{unique}/big.bin"
    env = client_env(hub, alice, tmp_path, HUB_PUSH_UNHASHED_MIN="16MiB")
    args = ["push", str(src), repo] if how == "push" else ["cp", str(big), f"hub://{dst}"]
    before = reserved(hub, alice)
    proc = subprocess.Popen([*hub_cmd(), *args, "--limit-rate", "4M"], env=env, cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while reserved(hub, alice) <= before:  # its upload session is open: the parts are being hashed
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.05)
    time.sleep(1.0)  # ~8 MiB of 16 sent (4 at once, then 4 MiB/s; ~2.7 of each part): every part hashed
    assert proc.poll() is None, proc.stderr.read()
    if change == "truncated":
        os.truncate(big, PART)
    else:
        with open(big, "r+b") as fh:
            fh.seek(2 * PART - MIB)
            fh.write(os.urandom(MIB))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and out == "", (out, err)
    line = err.strip().splitlines()[-1]
    assert re.fullmatch(rf"error: {re.escape(str(big))} (changed|shrank) while it was being uploaded.*", line), err
    assert "run the command again once nothing is writing to it" in line, line  # what to do about it
    if how == "push":
        assert "deleted the empty model" in line
        assert requests.get(f"{hub.url}/api/models/{repo}", headers=auth(alice), timeout=30).status_code == 404
    else:
        assert requests.get(f"{hub.url}/api/volume/stat", params={"path": dst}, headers=auth(alice),
                            timeout=30).status_code == 404
    # its session can never complete (another file now): ended at once, what it reserved given back
    assert reserved(hub, alice) == before


def test_unhashed_sessions_answer_like_every_door(hub, alice, bob, unique):
    repo = f"alice/unhashed-{unique}"
    hub.api(alice).create_repo(repo)

    def start(token: str | None, **body) -> requests.Response:
        return requests.post(f"{hub.url}/api/v1/uploads", headers=auth(token) if token else {}, timeout=30,
                             json={"repo_type": "model", "repo_id": repo, "path": "w.bin", "size": 3 * PART} | body)

    assert start(None).status_code == 401
    assert start(bob).status_code in (403, 404)  # (not his to write)
    assert start(alice, size=0).status_code == 400
    bad = start(alice, path="../etc/passwd")
    assert bad.status_code == 400 and bad.json()["code"] == "InvalidPath"
    if hub.name == "embedded":
        refused = start(alice)
        assert refused.status_code == 409 and refused.json()["code"] == "HashFirst"
        return
    over = start(alice, size=400 * 10**9)  # over the quota: nothing reserved
    assert over.status_code == 413 and "quota" in over.json()["error"], over.text
    before = reserved(hub, alice)
    up = start(alice)
    assert up.status_code == 201, up.text
    upload = up.json()
    assert upload["checked"] is True and upload["part_size"] == PART and reserved(hub, alice) == before + 3 * PART
    session = f"{hub.url}/api/v1/uploads/{upload['upload_id']}"
    assert requests.patch(session, headers=auth(bob), json={"sha256": SHA_A}, timeout=30).status_code == 404
    assert requests.patch(session, headers=auth(alice), json={"sha256": "nope"}, timeout=30).status_code == 400
    assert requests.patch(session, headers=auth(alice), json={"sha256": SHA_A}, timeout=30).status_code == 204
    assert requests.patch(session, headers=auth(alice), json={"sha256": SHA_A}, timeout=30).status_code == 204
    other = requests.patch(session, headers=auth(alice), json={"sha256": "b" * 64}, timeout=30)
    assert other.status_code == 400 and SHA_A in other.json()["error"]
    # named: the next start for that path says to hash first (the LFS batch resumes it)
    again = start(alice)
    assert again.status_code == 409 and again.json()["code"] == "HashFirst"
    hub.manage("shell", "-c", "from hub.content.models import UploadSession; from hub.uploads import sessions; "
               f"sessions.abort_session(UploadSession.objects.get(pk='{upload['upload_id']}'))")
    assert reserved(hub, alice) == before  # (ended: what it held is released)


def test_a_killed_push_of_an_unhashed_upload_resumes_or_starts_over(hub, alice, unique, tmp_path):
    if hub.name == "embedded":
        return  # (no unhashed sessions there: see test_unhashed_sessions_answer_like_every_door)
    src = tmp_path / "src"
    src.mkdir()
    data = os.urandom(4 * PART + 3)
    (src / "w.bin").write_bytes(data)
    repo = f"alice/unhashed-kill-{unique}"
    hub.api(alice).create_repo(repo)
    env = client_env(hub, alice, tmp_path, HUB_PUSH_UNHASHED_MIN="16MiB")

    # A session that never got its hash (the push died within its first moments), with a part in:
    # the next push ends it (its part freed, its reservation released) and starts a new one.
    before = reserved(hub, alice)
    dead = requests.post(f"{hub.url}/api/v1/uploads", headers=auth(alice), timeout=30, json={
        "repo_type": "model", "repo_id": repo, "path": "w.bin", "size": len(data)}).json()
    send_checked(hub, alice, {"header": {"upload_id": dead["upload_id"]}}, data[:PART])
    assert reserved(hub, alice) == before + len(data)

    # Killed once the hash is named and two parts are in (2 MiB/s, two workers): the next push
    # hashes first, and the LFS batch hands it the same session, which holds those parts.
    proc = subprocess.Popen([*hub_cmd(), "push", str(src), repo, "--limit-rate", "2M", "--workers", "2"], env=env,
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def live_parts() -> list | None:
        sid = live_id(hub, repo)
        if sid == "None":
            return None
        held = requests.get(f"{hub.url}/api/v1/uploads/{sid}", headers=auth(alice), timeout=30).json()["parts"]
        return held if len(held) >= 2 else None

    parts = wait_for(live_parts, 60)
    proc.kill()
    proc.wait()
    assert parts, "two parts of a named session did not land in 60 s"
    held = len(parts)
    states = [s["state"] for s in sessions_of(hub, repo, "w.bin")]
    assert states[0] == "aborted"  # the nameless one, ended by the push
    again = ok(run(env, "push", str(src), repo))
    assert uploaded(again) <= len(data) - held * PART
    root = Path(ok(run(env, "pull", repo)).stdout.strip())
    assert (root / "w.bin").read_bytes() == data
    assert reserved(hub, alice) == before  # nothing left held by either session


def live_id(hub, repo: str) -> str:
    out = hub.manage("shell", "-c", (
        "from hub.content.models import UploadSession; "
        f"print(UploadSession.objects.filter(repo__name='{repo.split('/')[1]}', state='open')"
        ".exclude(sha256='').values_list('id', flat=True).first())")).stdout
    return out.strip().splitlines()[-1]


def test_the_whole_files_hash_is_refused_when_the_file_was_written_to_while_it_was_read(tmp_path):
    """The parts' hashes and the whole file's read the file on threads of their own (two reads): a
    file rewritten in place meanwhile could give parts the store accepts under a whole-file sha256
    the assembled object does not have. The whole file's digest is handed out only if the file still
    has the size and modification time it had before the first read. (The client's hashing alone,
    on a real file: no hub is needed to show it.)"""
    import hashlib

    from storage.client import HubClient, IntegrityError
    from storage.transfer.engine import Context, PartHashes

    path = tmp_path / "f.bin"
    data = os.urandom(3 * MIB + 5)
    path.write_bytes(data)
    ctx = Context(HubClient("http://127.0.0.1:9", "unused"))
    hashes = PartHashes(ctx, path, len(data), MIB, [1, 2, 3, 4], whole=True).start()
    assert hashes.whole() == hashlib.sha256(data).hexdigest()  # untouched: the digest
    assert hashes.part(2) == hashlib.sha256(data[MIB:2 * MIB]).hexdigest()

    hashes = PartHashes(ctx, path, len(data), MIB, [1, 2, 3, 4], whole=True).start()
    hashes.join()
    time.sleep(0.05)  # (a file's mtime moves with the kernel's clock tick)
    with open(path, "r+b") as fh:  # same size, other bytes, after both reads
        fh.write(b"x")
    with pytest.raises(IntegrityError) as err:
        hashes.whole()
    assert err.value.code == "FileChanged", err.value
    assert "changed while it was being uploaded" in str(err.value)
