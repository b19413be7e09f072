"""Xet, as the stock clients speak it with default settings (huggingface_hub 2.4.0 + hf_xet 1.8.0,
HF_HUB_DISABLE_XET unset): uploads go through the hub's CAS and every door reads the files back;
downloads of those files go through Xet; nothing the client sends is trusted that can be checked.

The clients run in processes of their own, configured by the environment as users run them, except
where a test drives the CAS by hand to send what no honest client sends.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest
import requests

from tests.conftest import one_backend
from tests.support import hub_cli
from tests.support.hf_client import check_ok, client_env, result, run_client

MiB = 2**20

UPLOAD_FOLDER = """
import os
from huggingface_hub import HfApi

api = HfApi()
repo = os.environ["T_REPO"]
api.create_repo(repo, exist_ok=True, private=os.environ.get("T_PRIVATE") == "1")
info = api.upload_folder(folder_path=os.environ["T_FOLDER"], repo_id=repo, commit_message="through xet",
                         create_pr=os.environ.get("T_PR") == "1")
print("COMMIT", info.oid, info.pr_num)
"""

DOWNLOAD = """
import hashlib, json, os
from pathlib import Path
from huggingface_hub import hf_hub_download, snapshot_download

def digest(p):
    return hashlib.sha256(Path(p).read_bytes()).hexdigest()

repo = os.environ["T_REPO"]
one = hf_hub_download(repo, os.environ["T_FILE"], revision=os.environ.get("T_REV"))
root = Path(snapshot_download(repo, revision=os.environ.get("T_REV")))
files = {p.relative_to(root).as_posix(): digest(p) for p in root.rglob("*") if p.is_file()}
print("RESULT " + json.dumps({"one": digest(one), "files": files}))
"""


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def make_folder(root: Path, big: bytes) -> dict[str, str]:
    files = {"model.safetensors": big, "config.json": b'{"layers": 2}\n', "data/notes.bin": os.urandom(3000)}
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return {rel: sha(data) for rel, data in files.items()}


def xet_stats(hub) -> dict:
    """What the hub holds for Xet: xorbs (count, stored bytes) and Xet files."""
    out = hub.manage("shell", "-c", "import json; from django.db.models import Sum; "
                     "from hub.xet.models import Xorb, XetFile; "
                     "print(json.dumps({'xorbs': Xorb.objects.count(), "
                     "'xorb_bytes': Xorb.objects.aggregate(s=Sum('size'))['s'] or 0, "
                     "'files': XetFile.objects.count()}))").stdout
    return json.loads(out.strip().splitlines()[-1])


def reconstructions(hub) -> int:
    """How many Xet reconstructions the hub has answered (its log says each)."""
    return Path(hub.log_path).read_text(errors="replace").count("xet reconstruction v")


def test_a_default_client_uploads_through_xet_and_every_door_reads_the_bytes(hub, alice, unique, tmp_path):
    repo = f"alice/xet-{unique}"
    big = os.urandom(16 * MiB)
    expected = make_folder(tmp_path / "folder", big)
    before = xet_stats(hub)
    up = run_client(UPLOAD_FOLDER, client_env(hub, alice, tmp_path / "home-up", T_REPO=repo,
                                              T_FOLDER=str(tmp_path / "folder")))
    check_ok(up)
    after = xet_stats(hub)
    # the weights arrived as xorbs (not through LFS), and the hub rebuilt them into a file it knows
    assert after["xorbs"] > before["xorbs"] and after["files"] >= before["files"] + 1
    assert after["xorb_bytes"] - before["xorb_bytes"] >= 16 * MiB  # (random bytes do not compress)

    api = hub.api(alice)
    tree = {e["path"]: e for e in requests.get(f"{hub.url}/api/models/{repo}/tree/main", timeout=30,
                                               headers={"Authorization": f"Bearer {alice}"}).json()}
    assert tree["model.safetensors"]["lfs"]["oid"] == expected["model.safetensors"]
    assert len(tree["model.safetensors"]["xetHash"]) == 64
    siblings = {s.rfilename: s for s in api.model_info(repo, files_metadata=True).siblings}
    assert siblings["model.safetensors"].lfs.sha256 == expected["model.safetensors"]

    # through Xet (default settings), and over plain HTTP (Xet disabled), in fresh caches
    for home, extra in (("down-xet", {}), ("down-http", {"HF_HUB_DISABLE_XET": "1"})):
        seen = reconstructions(hub)
        got = result(check_ok(run_client(DOWNLOAD, client_env(hub, alice, tmp_path / home, T_REPO=repo,
                                                              T_FILE="model.safetensors", **extra))))
        assert got["one"] == expected["model.safetensors"], home
        assert {k: v for k, v in got["files"].items() if k != ".gitattributes"} == expected, home
        # hf_xet asked the CAS how to rebuild the file; with Xet disabled nothing did
        assert (reconstructions(hub) > seen) == (home == "down-xet"), home

    # /resolve/ with a Range, and its HEAD advertising Xet to the clients that want it
    auth = {"Authorization": f"Bearer {alice}"}
    r = requests.get(f"{hub.url}/{repo}/resolve/main/model.safetensors", timeout=60,
                     headers=auth | {"Range": "bytes=1000-2999999"})
    assert r.status_code == 206 and r.content == big[1000:3_000_000]
    head = requests.head(f"{hub.url}/{repo}/resolve/main/model.safetensors", headers=auth, timeout=30)
    assert head.headers["X-Xet-Hash"] == tree["model.safetensors"]["xetHash"]
    assert 'rel="xet-auth"' in head.headers["Link"]

    # the hub's own client, and hub:// (what the mount reads through)
    hub_cli.ok(hub_cli.run(hub_cli.client_env(hub, alice, tmp_path / "cli"), "pull", repo,
                           "--local-dir", str(tmp_path / "pulled")))
    assert sha((tmp_path / "pulled" / "model.safetensors").read_bytes()) == expected["model.safetensors"]
    from storage.fs.hubfs import HubFileSystem

    fs = HubFileSystem(endpoint=hub.url, token=alice, skip_instance_cache=True)
    with fs.open(f"models/{repo}/model.safetensors", "rb") as fh:
        fh.seek(5 * MiB)
        assert fh.read(MiB) == big[5 * MiB:6 * MiB]
    # the web page of the file
    page = requests.get(f"{hub.url}/{repo}/blob/main/model.safetensors", timeout=30,
                        cookies=hub.session("alice").cookies)
    assert page.status_code == 200 and "model.safetensors" in page.text and "16.8 MB" in page.text
    # the log carries no warning for the protocol's routine 404s (hf_xet's probe for xorb upload
    # grants, dedup queries about unknown chunks), and still one for a missing repo
    assert requests.get(f"{hub.url}/api/models/alice/none-{unique}", timeout=30).status_code == 404
    logged = Path(hub.log_path).read_text(errors="replace")
    assert "Not Found: /cas/v1/xorb-grants/" not in logged and "Not Found: /cas/v1/chunks/" not in logged
    assert f"Not Found: /api/models/alice/none-{unique}" in logged


def test_xet_token_routes_answer_as_the_rest_of_the_api(hub, alice, bob, unique):
    repo = f"alice/xet-tokens-{unique}"
    private = f"alice/xet-private-{unique}"
    api = hub.api(alice)
    api.create_repo(repo)
    api.create_repo(private, private=True)
    url = f"{hub.url}/api/models/{repo}/xet-write-token/main"
    r = requests.get(url, headers={"Authorization": f"Bearer {alice}"}, timeout=30)
    assert r.status_code == 200
    body = r.json()
    assert set(body) == {"accessToken", "exp", "casUrl"} and body["casUrl"] == f"{hub.url}/cas"
    assert r.headers["X-Xet-Access-Token"] == body["accessToken"]
    # no token, a read-only token, someone else's repo, a private repo of someone else
    assert requests.get(url, timeout=30).status_code == 401
    read_only = hub.cached_token("alice", read_only=True)
    r = requests.get(url, headers={"Authorization": f"Bearer {read_only}"}, timeout=30)
    assert r.status_code == 403 and "read-only" in r.json()["error"]
    r = requests.get(url, headers={"Authorization": f"Bearer {bob}"}, timeout=30)
    assert r.status_code == 403
    r = requests.get(f"{hub.url}/api/models/{private}/xet-read-token/main", headers={"Authorization": f"Bearer {bob}"},
                     timeout=30)
    assert r.status_code == 404
    # a read token opens reads, not writes
    read = requests.get(f"{hub.url}/api/models/{repo}/xet-read-token/main", timeout=30).json()
    r = requests.post(f"{read['casUrl']}/v1/xorbs/default/{'0' * 64}", data=b"x",
                      headers={"Authorization": f"Bearer {read['accessToken']}"}, timeout=30)
    assert r.status_code == 403 and "read-only" in r.json()["error"]
    r = requests.post(f"{read['casUrl']}/v1/xorbs/default/{'0' * 64}", data=b"x",
                      headers={"Authorization": "Bearer forged"}, timeout=30)
    assert r.status_code == 401
    # a Xet token lives no longer than the token it was made from: revoking that ends it at once
    doomed = hub.token("alice")
    cas, auth = cas_token(hub, doomed, repo)
    assert requests.get(f"{cas}/v1/chunks/default/{'0' * 64}", headers=auth, timeout=30).status_code == 404
    hub.manage("shell", "-c", "from django.utils import timezone; from hub.accounts.models import ApiToken; "
               f"ApiToken.objects.filter(prefix='{doomed[:10]}').update(revoked_at=timezone.now())")
    r = requests.post(f"{cas}/v1/xorbs/default/{'0' * 64}", data=b"x", headers=auth, timeout=30)
    assert r.status_code == 401 and "revoked" in r.json()["error"]


@pytest.fixture
def with_xet(monkeypatch):
    """huggingface_hub in this process as users run it by default: hf_xet takes the LFS files (the
    suite's other modules upload through LFS, tests/conftest.py)."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", False)


def test_create_commit_adds_deletes_copies_and_pull_requests_go_through_xet(hub, alice, bob, unique, tmp_path,
                                                                            with_xet):
    from huggingface_hub import CommitOperationAdd, CommitOperationCopy, CommitOperationDelete

    api = hub.api(alice)
    repo = f"alice/xet-ops-{unique}"
    api.create_repo(repo)
    weights, more = os.urandom(3 * MiB), os.urandom(2 * MiB + 17)
    (tmp_path / "w.bin").write_bytes(weights)
    before = xet_stats(hub)
    api.create_commit(repo, commit_message="adds", operations=[
        CommitOperationAdd("w.bin", str(tmp_path / "w.bin")),  # a path
        CommitOperationAdd("more.safetensors", more),  # bytes (hf_xet takes those too)
        CommitOperationAdd("old.txt", b"to be deleted\n")])
    assert xet_stats(hub)["files"] >= before["files"] + 2
    api.create_commit(repo, commit_message="copy and delete", operations=[
        CommitOperationCopy("w.bin", "copies/w.bin"), CommitOperationDelete("old.txt")])
    files = {e.path: e for e in api.list_repo_tree(repo, recursive=True) if hasattr(e, "size")}
    assert set(files) == {".gitattributes", "w.bin", "more.safetensors", "copies/w.bin"}
    assert files["copies/w.bin"].lfs.sha256 == files["w.bin"].lfs.sha256 == sha(weights)
    for path, data in (("w.bin", weights), ("copies/w.bin", weights), ("more.safetensors", more)):
        got = requests.get(f"{hub.url}/{repo}/resolve/main/{path}", timeout=60,
                           headers={"Authorization": f"Bearer {alice}"})
        assert got.content == data, path

    # bob may not write to alice's repo, but may propose a change: a pull request through Xet
    proposal = os.urandom(MiB + 5)
    bobs = hub.api(bob)
    with pytest.raises(Exception) as denied:
        bobs.upload_file(path_or_fileobj=proposal, path_in_repo="bob.bin", repo_id=repo)
    assert "403" in str(denied.value) or "Forbidden" in str(denied.value)
    pr = bobs.upload_file(path_or_fileobj=proposal, path_in_repo="bob.bin", repo_id=repo, create_pr=True)
    assert pr.pr_num is not None
    got = requests.get(f"{hub.url}/{repo}/resolve/refs%2Fpr%2F{pr.pr_num}/bob.bin", timeout=60)
    assert got.status_code == 200 and got.content == proposal
    assert "bob.bin" not in api.list_repo_files(repo)


def test_a_large_folder_and_hf_upload_go_through_xet(hub, alice, unique, tmp_path, with_xet):
    import shutil
    import sys

    api = hub.api(alice)
    repo = f"alice/xet-large-{unique}"
    api.create_repo(repo)
    folder = tmp_path / "large"
    # (huggingface_hub 2.x has no upload_large_folder: with hf_xet, upload_folder is that pipeline —
    # streamed, committed in batches, resumable)
    expected = {f"shard-{i:02}.bin": os.urandom(100_000 + i) for i in range(40)} | {"README.md": b"# large\n"}
    for rel, data in expected.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
    api.upload_folder(repo_id=repo, folder_path=str(folder))
    shutil.rmtree(folder / ".cache", ignore_errors=True)
    snap = Path(api.snapshot_download(repo, cache_dir=str(tmp_path / "c1")))
    assert {p.name: p.read_bytes() for p in snap.iterdir() if p.is_file() and p.name != ".gitattributes"} == expected

    # `hf upload` in a process of its own, default settings
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli" / "model.safetensors").write_bytes(data := os.urandom(2 * MiB))
    hf = str(Path(sys.executable).parent / "hf")
    proc = subprocess.run([hf, "upload", repo, str(tmp_path / "cli"), ".", "--commit-message", "from the cli"],
                          env=client_env(hub, alice, tmp_path / "home"), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tree = {e["path"]: e for e in requests.get(f"{hub.url}/api/models/{repo}/tree/main", timeout=30).json()}
    assert tree["model.safetensors"]["lfs"]["oid"] == sha(data) and "xetHash" in tree["model.safetensors"]


# --- nothing is trusted that can be checked -----------------------------------------------------------


def cas_token(hub, token: str, repo: str, access: str = "write") -> tuple[str, dict]:
    r = requests.get(f"{hub.url}/api/models/{repo}/xet-{access}-token/main",
                     headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert r.status_code == 200, r.text
    body = r.json()
    return body["casUrl"], {"Authorization": f"Bearer {body['accessToken']}"}


def build_xorb(data: bytes, chunk: int = 64 * 1024) -> tuple[str, bytes, list[tuple[bytes, int]]]:
    """A xorb as a client makes one: (its hash, its bytes, [(chunk hash, size)])."""
    from hub.xet import format as xf

    pieces = [data[i:i + chunk] for i in range(0, len(data), chunk)]
    entries = [(xf.chunk_hash(p), len(p)) for p in pieces]
    return xf.hash_hex(xf.xorb_hash(entries)), b"".join(xf.encode_chunk(p) for p in pieces), entries


def build_shard(xorb_hash: str, entries: list[tuple[bytes, int]], sha256: bytes, *,
                verification: bytes | None = None) -> bytes:
    from hub.xet import format as xf

    term = xf.Term(xf.hash_from_hex(xorb_hash), 0, len(entries), sum(s for _, s in entries))
    check = verification or xf.verification_hash([h for h, _ in entries])
    f = xf.ShardFile(xf.file_hash(entries), [term], [check], sha256)
    return xf.encode_shard(xf.Shard([f], []))


def test_hostile_xorbs_are_refused_with_the_reason_and_nothing_is_stored(hub, alice, unique):
    repo = f"alice/xet-hostile-{unique}"
    hub.api(alice).create_repo(repo)
    cas, auth = cas_token(hub, alice, repo)
    good_hash, good, _ = build_xorb(os.urandom(200_000))
    before = xet_stats(hub)

    def post(name: str, body: bytes) -> requests.Response:
        return requests.post(f"{cas}/v1/xorbs/default/{name}", data=body, headers=auth, timeout=60)

    r = post("ab" * 32, good)  # the bytes are another xorb than the name says
    assert r.status_code == 400 and "hash" in r.json()["error"], r.text
    flipped = bytearray(good)
    flipped[100] ^= 1
    r = post(good_hash, bytes(flipped))
    assert r.status_code == 400, r.text
    r = post(good_hash, good[: len(good) // 2])  # truncated
    assert r.status_code == 400 and ("truncated" in r.json()["error"] or "beyond" in r.json()["error"]), r.text
    # a header claiming 16 MB of compressed data: refused without reading (or allocating) it
    r = post(good_hash, bytes([0, 0xFF, 0xFF, 0xFF, 1, 0, 0, 1]) + b"x" * 100)
    assert r.status_code == 400, r.text
    r = post(good_hash, bytes([0, 10, 0, 0, 9, 10, 0, 0]) + b"x" * 10)  # compression scheme 9
    assert r.status_code == 400 and "scheme" in r.json()["error"], r.text
    r = post("not-a-hash", good)
    assert r.status_code in (400, 404)
    assert xet_stats(hub) == before
    assert post(good_hash, good).json() == {"was_inserted": True}
    assert post(good_hash, good).json() == {"was_inserted": False}


def test_a_shard_cannot_name_chunks_its_sender_does_not_hold_nor_lie_about_the_sha256(hub, alice, bob, unique):
    from hub.xet import format as xf

    secret = os.urandom(300_000)
    repo, bobs_repo = f"alice/xet-secret-{unique}", f"bob/xet-thief-{unique}"
    hub.api(alice).create_repo(repo, private=True)
    hub.api(bob).create_repo(bobs_repo)
    cas, alice_auth = cas_token(hub, alice, repo)
    xorb_hash, body, entries = build_xorb(secret)
    assert requests.post(f"{cas}/v1/xorbs/default/{xorb_hash}", data=body, headers=alice_auth,
                         timeout=60).status_code == 200
    # bob learnt the xorb's hash and the file's sizes, not its chunk hashes: his verification is a guess
    _, bob_auth = cas_token(hub, bob, bobs_repo)
    fake = build_shard(xorb_hash, entries, hashlib.sha256(secret).digest(), verification=b"\x01" * 32)
    r = requests.post(f"{cas}/v1/shards", data=fake, headers=bob_auth, timeout=60)
    assert r.status_code == 400 and "verification" in r.json()["error"], r.text
    # a xorb the hub does not hold
    r = requests.post(f"{cas}/v1/shards", data=build_shard("cd" * 32, entries, b"\0" * 32), headers=bob_auth,
                      timeout=60)
    assert r.status_code == 400 and "does not hold" in r.json()["error"], r.text
    # malformed
    r = requests.post(f"{cas}/v1/shards", data=b"\0" * 100, headers=bob_auth, timeout=60)
    assert r.status_code == 400, r.text
    # alice's own shard, but claiming the bytes are another file: the sha256 is bound only to what they are
    other = hashlib.sha256(b"another file").digest()
    r = requests.post(f"{cas}/v1/shards", data=build_shard(xorb_hash, entries, other), headers=alice_auth,
                      timeout=60)
    assert r.status_code == 422 and "hash to" in r.json()["error"], r.text
    assert requests.get(f"{hub.url}/api/models/{repo}", headers={"Authorization": f"Bearer {alice}"},
                        timeout=30).ok
    # the truth is accepted; the file is then hers to commit, and still not bob's to read
    r = requests.post(f"{cas}/v2/shards", data=build_shard(xorb_hash, entries, hashlib.sha256(secret).digest()),
                      headers=alice_auth, timeout=60)
    assert r.status_code == 200 and json.loads(r.text.strip().splitlines()[-1]) == {"type": "result"}, r.text
    file_hash = xf.hash_hex(xf.file_hash(entries))
    r = requests.get(f"{cas}/v2/reconstructions/{file_hash}", headers=bob_auth, timeout=30)
    assert r.status_code == 404
    r = requests.get(f"{cas}/v2/reconstructions/{file_hash}", headers=alice_auth | {"Range": "bytes=0-99"},
                     timeout=30)
    assert r.status_code == 200 and r.json()["terms"][0]["hash"] == xorb_hash
    r = requests.get(f"{cas}/v1/reconstructions/{file_hash}", headers=alice_auth | {"Range": "bytes=300000-"},
                     timeout=30)
    assert r.status_code == 416
    # the global dedup: alice learns which stored xorb holds her file's first chunk, with its chunk
    # hashes keyed (no raw hash she did not have); bob, who may not read the file, learns nothing
    first_chunk = xf.hash_hex(entries[0][0])
    r = requests.get(f"{cas}/v1/chunks/default-merkledb/{first_chunk}", headers=alice_auth, timeout=30)
    assert r.status_code == 200, r.text
    offered = xf.parse_shard(r.content)
    key = r.content[-200 + 72:-200 + 104]  # the footer's HMAC key
    assert [xf.hash_hex(x.hash) for x in offered.xorbs] == [xorb_hash] and not offered.files
    assert [h for h, _, _ in offered.xorbs[0].chunks] == [xf.keyed_hash(h, key) for h, _ in entries]
    assert not {h for h, _, _ in offered.xorbs[0].chunks} & {h for h, _ in entries}
    r = requests.get(f"{cas}/v1/chunks/default-merkledb/{first_chunk}", headers=bob_auth, timeout=30)
    assert r.status_code == 404
    r = requests.get(f"{cas}/v1/chunks/default-merkledb/{'ef' * 32}", headers=alice_auth, timeout=30)
    assert r.status_code == 404


# --- quota, dedup, interruptions ------------------------------------------------------------------------


UPLOAD_FILE = """
import os
from huggingface_hub import HfApi

api = HfApi()
api.create_repo(os.environ["T_REPO"], exist_ok=True)
api.upload_file(path_or_fileobj=os.environ["T_PATH"], path_in_repo=os.path.basename(os.environ["T_PATH"]),
                repo_id=os.environ["T_REPO"], commit_message="upload")
print("UPLOADED")
"""


def test_over_quota_the_client_shows_the_hubs_message_and_nothing_stays_reserved(hub, unique, tmp_path):
    name = f"dora{unique}"
    token = hub.manage("hub_token", name, "--quota", "10MB").stdout.strip().splitlines()[-1]
    (tmp_path / "big.safetensors").write_bytes(os.urandom(12 * MiB))
    proc = run_client(UPLOAD_FILE, client_env(hub, token, tmp_path / "home", T_REPO=f"{name}/m",
                                              T_PATH=str(tmp_path / "big.safetensors")))
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "UPLOADED" not in proc.stdout
    assert f"quota exceeded for {name}" in output, output[-3000:]
    q = requests.get(f"{hub.url}/api/quota", headers={"Authorization": f"Bearer {token}"}, timeout=30).json()
    assert q["reserved"] == 0 and q["used"] < 5000, q
    assert hub.api(token).list_repo_files(f"{name}/m") == [".gitattributes"]


def upload_sent(hub, token: str, repo: str, path: Path, data: bytes, home: Path) -> int:
    """Uploads `data` as `path`'s name with the default client from the machine whose HF_HOME is
    `home`, checks it reads back, and returns the xorb bytes the hub received for it."""
    path.write_bytes(data)
    before = xet_stats(hub)["xorb_bytes"]
    check_ok(run_client(UPLOAD_FILE, client_env(hub, token, home, T_REPO=repo, T_PATH=str(path))))
    got = requests.get(f"{hub.url}/{repo}/resolve/main/{path.name}", timeout=60,
                       headers={"Authorization": f"Bearer {token}"})
    assert got.content == data
    return xet_stats(hub)["xorb_bytes"] - before


def test_a_changed_file_sends_only_its_new_chunks_from_this_machine_or_another(hub, alice, bob, unique, tmp_path):
    """An appended log, a checkpoint with one tensor changed: the next upload sends what changed —
    from the machine that sent the first (its shard cache knows the chunks) and from a fresh instance
    (the hub's global dedup tells it), but never by way of a file the uploader may not read."""
    repo = f"alice/xet-dedup-{unique}"
    hub.api(alice).create_repo(repo, private=True)
    first = os.urandom(12 * MiB)
    second = first[:5 * MiB] + os.urandom(MiB) + first[6 * MiB:]  # 1 MiB in the middle rewritten
    third = second + os.urandom(MiB // 2)                          # and then something appended
    path = tmp_path / "ckpt.safetensors"

    assert upload_sent(hub, alice, repo, path, first, tmp_path / "machine-1") >= 12 * MiB
    # the changed MiB and its edges
    assert upload_sent(hub, alice, repo, path, second, tmp_path / "machine-1") < 2 * MiB
    # a new instance: an empty shard cache
    assert upload_sent(hub, alice, repo, path, third, tmp_path / "machine-2") < 2 * MiB
    # bob cannot read alice's private repo: the hub offers him none of its chunks, so his client
    # sends his copy whole (stored once all the same: it is the same xorb)
    answered = Path(hub.log_path).read_text(errors="replace").count("xet dedup: chunk")
    upload_sent(hub, bob, f"bob/xet-dedup-{unique}", path, third, tmp_path / "machine-3")
    assert Path(hub.log_path).read_text(errors="replace").count("xet dedup: chunk") == answered


def test_a_known_run_of_chunks_is_found_in_the_middle_of_a_new_file_from_another_machine(hub, alice, unique,
                                                                                         tmp_path):
    """Besides a file's first chunk the client asks the hub about about one chunk in 1,024, chosen by
    its hash, at most one every 256 chunks. These seeded 20 MiB hold one such chunk at 12.2 MiB (the
    same every run: chunk boundaries depend only on the bytes); behind 8 MiB of new bytes it is past
    the client's spacing, so it is asked about and the file is found from there on."""
    import random

    one_backend(hub)  # (the protocol, not the store: the first-chunk case runs on both)
    repo = f"alice/xet-middle-{unique}"
    known = random.Random(8).randbytes(20 * MiB)
    path = tmp_path / "shards.bin"
    sent = [upload_sent(hub, alice, repo, path, known, tmp_path / "machine-1"),
            upload_sent(hub, alice, repo, path, os.urandom(8 * MiB) + known, tmp_path / "machine-2")]
    assert sent[0] >= 20 * MiB
    assert sent[1] < 22 * MiB, sent  # (all 28 MiB when the hub misses the chunk the client asks about)


def test_an_upload_killed_between_xorbs_finishes_when_run_again(hub, alice, unique, tmp_path):
    repo = f"alice/xet-killed-{unique}"
    path = tmp_path / "weights.safetensors"
    data = os.urandom(130 * MiB)  # three xorbs
    path.write_bytes(data)
    env = client_env(hub, alice, tmp_path / "home", T_REPO=repo, T_PATH=str(path))
    before = xet_stats(hub)["xorbs"]
    import sys
    import time

    def stored() -> int:  # (the hub logs each xorb it stored: cheaper to watch than to query)
        return Path(hub.log_path).read_text(errors="replace").count("xet xorb ")

    logged = stored()
    proc = subprocess.Popen([sys.executable, "-c", UPLOAD_FILE], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while stored() == logged and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    proc.kill()
    out = proc.communicate()[0].decode(errors="replace")
    assert "UPLOADED" not in out, "the upload finished before it could be killed: make the file bigger"
    landed = xet_stats(hub)["xorbs"] - before
    assert landed >= 1, out[-3000:]
    assert "weights.safetensors" not in hub.api(alice).list_repo_files(repo)
    check_ok(run_client(UPLOAD_FILE, env))
    got = requests.get(f"{hub.url}/{repo}/resolve/main/weights.safetensors", timeout=120,
                       headers={"Authorization": f"Bearer {alice}"})
    assert sha(got.content) == sha(data)


def test_xorbs_go_after_their_retention_and_the_files_stay_readable_over_http(hub, alice, unique, tmp_path,
                                                                           with_xet):
    repo = f"alice/xet-retention-{unique}"
    api = hub.api(alice)
    api.create_repo(repo)
    data = os.urandom(MiB + 3)
    api.upload_file(path_or_fileobj=data, path_in_repo="w.bin", repo_id=repo)
    entry = next(e for e in requests.get(f"{hub.url}/api/models/{repo}/tree/main", timeout=30).json()
                 if e["path"] == "w.bin")
    # its xorbs were last named 60 days ago: past HUB_XET_RETENTION (30 days), so hub_gc takes them
    hub.manage("shell", "-c", "from datetime import timedelta; from django.utils import timezone; "
               "from hub.xet.models import XetFile; "
               f"f = XetFile.objects.get(pk='{entry['xetHash']}'); "
               "f.xorbs.update(touched=timezone.now() - timedelta(days=60))")
    report = json.loads(hub.manage("hub_gc").stdout.strip().splitlines()[-1])
    assert report["xorbs_deleted"] >= 1
    entry = next(e for e in requests.get(f"{hub.url}/api/models/{repo}/tree/main", timeout=30).json()
                 if e["path"] == "w.bin")
    assert "xetHash" not in entry  # no longer offered through Xet …
    head = requests.head(f"{hub.url}/{repo}/resolve/main/w.bin", timeout=30)
    assert "X-Xet-Hash" not in head.headers
    # … and every client still reads it, hf_xet installed or not
    got = result(check_ok(run_client(DOWNLOAD, client_env(hub, alice, tmp_path / "down", T_REPO=repo,
                                                          T_FILE="w.bin"))))
    assert got["one"] == sha(data)


def test_the_mount_reads_a_file_uploaded_through_xet(hub, alice, unique, tmp_path, with_xet):
    from tests.support.mount import Mounts, _fuse_missing
    from tests.support.mount import client_env as mount_env

    if _fuse_missing():
        pytest.skip(_fuse_missing())
    repo = f"alice/xet-mounted-{unique}"
    api = hub.api(alice)
    api.create_repo(repo)
    data = os.urandom(3 * MiB + 1)
    api.upload_file(path_or_fileobj=data, path_in_repo="ckpt/last.safetensors", repo_id=repo)
    mounts = Mounts(tmp_path / "mnt")
    mounts.base.mkdir()
    try:
        point = mounts.mount(mount_env(hub, alice, tmp_path / "cache"), repo, "ro")
        assert (point / "ckpt" / "last.safetensors").read_bytes() == data
    finally:
        mounts.cleanup()


# --- write-behind (hub.xet.staging): on S3 an upload waits for one write of its bytes -------------


def xorb_rows(hub, file_hash: str) -> dict[str, dict]:
    """{xorb hash: {in_store, staged_on}} of the xorbs a Xet file reads."""
    out = hub.manage("shell", "-c", "import json; from hub.xet.models import XetFile; "
                     f"f = XetFile.objects.get(pk='{file_hash}'); "
                     "print(json.dumps({x.hash: {'in_store': x.in_store, 'staged_on': x.staged_on} "
                     "for x in f.xorbs.all()}))").stdout
    return json.loads(out.strip().splitlines()[-1])


def wait_in_store(hub, file_hash: str, limit: float = 60) -> None:
    """Waits for the server's write-behind thread to write the xorbs of a Xet file to the store."""
    import time

    deadline = time.monotonic() + limit
    while not all(x["in_store"] for x in xorb_rows(hub, file_hash).values()):
        assert time.monotonic() < deadline, "the write-behind thread did not write the staged xorbs"
        time.sleep(1)


def words(n: int) -> bytes:
    """Text that compresses (the client sends its chunks LZ4-compressed) and does not repeat."""
    import random

    rng = random.Random(n)
    vocab = [os.urandom(6).hex() for _ in range(500)]
    return " ".join(rng.choice(vocab) for _ in range(n)).encode()


def test_xorbs_reach_the_store_after_the_upload_and_every_door_reads_meanwhile(hub, alice, unique, tmp_path,
                                                                               with_xet):
    if hub.name == "embedded":
        pytest.skip("the local backend writes xorbs at once: there is no second network write to put off")
    from tests.support.store import stored_objects

    repo = f"alice/xet-behind-{unique}"
    api = hub.api(alice)
    api.create_repo(repo)
    first, second = os.urandom(3 * MiB + 7), words(600_000)
    api.upload_file(path_or_fileobj=first, path_in_repo="a.bin", repo_id=repo)
    api.upload_file(path_or_fileobj=second, path_in_repo="b.bin", repo_id=repo)
    tree = {e["path"]: e for e in requests.get(f"{hub.url}/api/models/{repo}/tree/main", timeout=30,
                                               headers={"Authorization": f"Bearer {alice}"}).json()}
    # the upload returned with the blobs written and the xorbs still on the hub's disk
    # (HUB_XET_WRITE_BEHIND is 10 s for the test servers)
    rows = {name: xorb_rows(hub, tree[name]["xetHash"]) for name in ("a.bin", "b.bin")}
    stored = stored_objects(hub, "xorbs/")
    for name, xorbs in rows.items():
        assert xorbs and not any(x["in_store"] for x in xorbs.values()), (name, xorbs)
        assert not any(k.endswith(h) for k in stored for h in xorbs), name
        assert all((hub.data_dir / "xet-staged" / h).exists() for h in xorbs), name
    assert {e["lfs"]["oid"] for e in tree.values() if "lfs" in e} == {sha(first), sha(second)}
    # meanwhile: plain HTTP reads the blob; Xet is advertised by the server holding the xorbs, and a
    # Xet download writes them to the store first
    auth = {"Authorization": f"Bearer {alice}"}
    r = requests.get(f"{hub.url}/{repo}/resolve/main/a.bin", headers=auth | {"Range": "bytes=10-99"}, timeout=30)
    assert r.status_code == 206 and r.content == first[10:100]
    head = requests.head(f"{hub.url}/{repo}/resolve/main/a.bin", headers=auth, timeout=30)
    assert head.headers["X-Xet-Hash"] == tree["a.bin"]["xetHash"]
    got = result(check_ok(run_client(DOWNLOAD, client_env(hub, alice, tmp_path / "down", T_REPO=repo,
                                                          T_FILE="a.bin"))))
    assert got["one"] == sha(first)
    assert all(x["in_store"] for x in xorb_rows(hub, tree["a.bin"]["xetHash"]).values())
    # the other file's xorbs are written by the server's write-behind thread, then read by Xet
    wait_in_store(hub, tree["b.bin"]["xetHash"])
    stored = stored_objects(hub, "xorbs/")
    for h in rows["b.bin"]:
        assert any(k.endswith(h) for k in stored) and not (hub.data_dir / "xet-staged" / h).exists()
    got = result(check_ok(run_client(DOWNLOAD, client_env(hub, alice, tmp_path / "down2", T_REPO=repo,
                                                          T_FILE="b.bin"))))
    assert got["one"] == sha(second)


def test_xorbs_staged_by_a_server_that_died_are_rebuilt_from_the_blobs(hub, alice, unique, tmp_path, with_xet):
    if hub.name == "embedded":
        pytest.skip("the local backend writes xorbs at once: nothing is ever staged")
    repo = f"alice/xet-lost-{unique}"
    api = hub.api(alice)
    api.create_repo(repo)
    data = words(500_000)  # (compressed by the client: the rebuilt xorb stores its chunks uncompressed)
    api.upload_file(path_or_fileobj=data, path_in_repo="corpus.bin", repo_id=repo)
    # and a xorb no file reads (an upload killed before its shard)
    cas, cas_auth = cas_token(hub, alice, repo)
    stray, stray_bytes, _ = build_xorb(os.urandom(100_000))
    assert requests.post(f"{cas}/v1/xorbs/default/{stray}", data=stray_bytes, headers=cas_auth,
                         timeout=30).status_code == 200
    entry = next(e for e in requests.get(f"{hub.url}/api/models/{repo}/tree/main", timeout=30,
                                         headers={"Authorization": f"Bearer {alice}"}).json()
                 if e["path"] == "corpus.bin")
    xorbs = list(xorb_rows(hub, entry["xetHash"])) + [stray]
    # the server that received them is gone, with its disk
    names = ",".join(f"'{h}'" for h in xorbs)
    hub.manage("shell", "-c", "from hub.xet.models import Xorb; "
               f"print(Xorb.objects.filter(pk__in=[{names}], in_store=False).update(staged_on='gone:0'))")
    for h in xorbs:
        (hub.data_dir / "xet-staged" / h).unlink()
    auth = {"Authorization": f"Bearer {alice}"}
    # nobody is sent to Xet for it meanwhile; HTTP serves the blob
    head = requests.head(f"{hub.url}/{repo}/resolve/main/corpus.bin", headers=auth, timeout=30)
    assert head.status_code == 200 and "X-Xet-Hash" not in head.headers
    assert requests.get(f"{hub.url}/{repo}/resolve/main/corpus.bin", headers=auth, timeout=30).content == data
    # hub_gc's recovery: the file's xorbs rebuilt from its blob, the stray one dropped
    out = hub.manage("shell", "-c", "from datetime import timedelta; from hub.xet import staging; "
                     "print(staging.recover(timedelta(0)))").stdout
    done, dropped = json.loads(out.strip().splitlines()[-1].replace("(", "[").replace(")", "]"))
    assert done >= len(xorbs) - 1 and dropped >= 1  # (other tests' staged xorbs are written too)
    assert all(x["in_store"] for x in xorb_rows(hub, entry["xetHash"]).values())
    left = hub.manage("shell", "-c", f"from hub.xet.models import Xorb; print(Xorb.objects.filter(pk='{stray}').count())")
    assert left.stdout.strip().splitlines()[-1] == "0"
    head = requests.head(f"{hub.url}/{repo}/resolve/main/corpus.bin", headers=auth, timeout=30)
    assert head.headers["X-Xet-Hash"] == entry["xetHash"]
    seen = reconstructions(hub)
    got = result(check_ok(run_client(DOWNLOAD, client_env(hub, alice, tmp_path / "down", T_REPO=repo,
                                                          T_FILE="corpus.bin"))))
    assert got["one"] == sha(data) and reconstructions(hub) > seen


def test_a_second_replica_serves_xorbs_another_one_staged(hub, alice, unique, tmp_path, with_xet):
    """Two web servers on one database and bucket, each with its own disk, behind no sticky balancer:
    a file whose xorbs one staged reads on the other over HTTP (Xet advertised only where they are),
    and a shard sent to the other has the first one write them at once instead of failing."""
    if hub.name == "embedded":
        pytest.skip("the local backend writes xorbs at once: nothing is ever staged")
    import time

    from tests.support.servers import launch_hub

    data = tmp_path / "replica"
    data.mkdir()
    env = hub.env | {"HUB_DATA_DIR": str(data), "SECRET_KEY": (hub.data_dir / "secret-key").read_text().strip()}
    with launch_hub("replica", env, data) as other:
        repo = f"alice/xet-replicas-{unique}"
        api = hub.api(alice)
        api.create_repo(repo)
        content = os.urandom(2 * MiB + 5)
        api.upload_file(path_or_fileobj=content, path_in_repo="w.bin", repo_id=repo)
        auth = {"Authorization": f"Bearer {alice}"}
        heads = {h.name: requests.head(f"{h.url}/{repo}/resolve/main/w.bin", headers=auth, timeout=30)
                 for h in (hub, other)}
        assert "X-Xet-Hash" in heads["pg_rgw"].headers and "X-Xet-Hash" not in heads["replica"].headers
        assert requests.get(f"{other.url}/{repo}/resolve/main/w.bin", headers=auth, timeout=30).content == content
        # a xorb staged by the first server, its shard sent to the second
        cas, cas_auth = cas_token(hub, alice, repo)
        more = os.urandom(300_000)
        xorb_hash, body, entries = build_xorb(more)
        assert requests.post(f"{cas}/v1/xorbs/default/{xorb_hash}", data=body, headers=cas_auth,
                             timeout=30).status_code == 200
        t0 = time.monotonic()
        r = requests.post(f"{cas.replace(hub.url, other.url)}/v1/shards", headers=cas_auth, timeout=120,
                          data=build_shard(xorb_hash, entries, hashlib.sha256(more).digest()))
        assert r.status_code == 200, r.text
        # (it asked the first server to write the xorb now rather than after its 10 s write-behind)
        assert time.monotonic() - t0 < 7, time.monotonic() - t0
        rows = hub.manage("shell", "-c", "from hub.xet.models import Xorb; "
                          f"print(Xorb.objects.get(pk='{xorb_hash}').in_store)").stdout
        assert rows.strip().splitlines()[-1] == "True"
        # once written (the first server's write-behind), both servers send Xet clients to the store
        wait_in_store(hub, heads["pg_rgw"].headers["X-Xet-Hash"])
        head = requests.head(f"{other.url}/{repo}/resolve/main/w.bin", headers=auth, timeout=30)
        assert head.headers["X-Xet-Hash"] == heads["pg_rgw"].headers["X-Xet-Hash"]
        got = result(check_ok(run_client(DOWNLOAD, client_env(other, alice, tmp_path / "down", T_REPO=repo,
                                                              T_FILE="w.bin"))))
        assert got["one"] == sha(content)
