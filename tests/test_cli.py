"""The `hub` command against live hubs, as a user runs it: a separate process with only an endpoint
and a token, its stdout (data), stderr (messages) and exit status.

alice owns the repos, bob is another user, anonymous callers have no token. Every round trip
compares bytes; resumption is tested by SIGKILLing the client in the middle and counting the bytes
the second run moves. The native endpoints the client relies on (manifest, upload sessions) are
tested here too, with raw HTTP.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
import requests

from tests.conftest import django_modules_after, one_backend
from tests.support.files import make_tree, read_tree
from tests.support.hf import auth, lfs_batch
from tests.support.hub_cli import (
    client_env,
    failed,
    fetched,
    hub_cmd,
    manifest_with_blake3,
    ok,
    run,
    set_blake3,
    uploaded,
    watch_requests,
)

ROOT = Path(__file__).resolve().parent.parent
MiB = 2**20
MB = 10**6


# --- helpers ----------------------------------------------------------------------------------------

def sample_files(big: int = 20 * MiB) -> dict[str, bytes]:
    rnd = os.urandom(big)
    return {
        "config.json": b'{"hidden_size": 8}\n',
        "README.md": b"# a model\n",
        "empty.txt": b"",
        "sub/deeper/notes.txt": b"notes\n" * 1000,
        "sub/copy-of-config.json": b'{"hidden_size": 8}\n',  # same bytes as another path
        "weights/model.safetensors": rnd,  # LFS, multipart (8 MiB parts on the test hubs)
    }


def snapshot_dir(tmp_path: Path, repo_type: str, repo_id: str) -> Path:
    root = tmp_path / "hf-cache" / f"{repo_type}s--{repo_id.replace('/', '--')}"
    (commit,) = (root / "snapshots").iterdir()
    return commit


# --- round trips ------------------------------------------------------------------------------------

def test_it_pushes_a_folder_and_pulls_it_back_byte_for_byte(hub, alice, unique, tmp_path):
    src = tmp_path / "src"
    files = make_tree(src, sample_files())
    repo = f"alice/rt-{unique}"
    env = client_env(hub, alice, tmp_path, HUB_SEGMENT_SIZE="4MiB")  # the big file comes in 5 ranges

    push = ok(run(env, "push", str(src), repo, "-m", "weights v1", "--private"))
    assert re.fullmatch(rf"{re.escape(hub.url)}/{repo}/commit/[0-9a-f]{{40}}\n", push.stdout)
    assert "created private model" in push.stderr
    commit = push.stdout.strip().rsplit("/", 1)[1]

    pull = ok(run(env, "pull", repo))
    snap = Path(pull.stdout.strip())
    assert snap == snapshot_dir(tmp_path, "model", repo) and snap.name == commit
    got = read_tree(snap)
    assert got.pop(".gitattributes").startswith(b"*.7z")
    assert got == files
    assert fetched(pull) == sum(len(v) for v in files.values()) - len(files["sub/copy-of-config.json"]) + 557
    assert (snap.parent.parent / "refs" / "main").read_text() == commit
    assert not list((snap.parent.parent / "blobs").glob("*incomplete*"))

    # Everything there and verified: nothing moves the second time.
    again = ok(run(env, "pull", repo))
    assert fetched(again) == 0 and "6 already present" not in again.stderr and "7 already present" in again.stderr

    # Pushing the same folder again changes nothing.
    same = ok(run(env, "push", str(src), repo))
    assert same.stdout == "" and "nothing to commit" in same.stderr

    # A second commit; the first stays reachable by its id.
    (src / "config.json").write_bytes(b'{"hidden_size": 16}\n')
    ok(run(env, "push", str(src), repo, "-m", "v2"))
    old = ok(run(env, "pull", repo, "--revision", commit, "--local-dir", str(tmp_path / "old")))
    assert read_tree(tmp_path / "old")["config.json"] == b'{"hidden_size": 8}\n'
    assert old.stdout.strip() == str(tmp_path / "old")

    # Filters, into a plain directory with huggingface_hub's metadata records.
    part = tmp_path / "part"
    ok(run(env, "pull", repo, "--local-dir", str(part), "--include", "sub/*", "--exclude", "*.txt"))
    assert read_tree(part) == {"sub/copy-of-config.json": files["sub/copy-of-config.json"]}
    meta = (part / ".cache/huggingface/download/sub/copy-of-config.json.metadata").read_text().splitlines()
    assert len(meta[0]) == 40 and meta[1] == hashlib.sha1(b"blob 19\x00" + files["config.json"]).hexdigest()


def test_it_fills_a_cache_that_huggingface_hub_reads_offline(hub, alice, unique, tmp_path):
    from huggingface_hub import hf_hub_download, snapshot_download

    src = tmp_path / "src"
    config = b'{"model_type": "bert", "hidden_size": 48, "num_attention_heads": 4, "num_hidden_layers": 2}\n'
    files = make_tree(src, {"config.json": config, "model.bin": os.urandom(11 * 10**6)})
    repo = f"alice/cache-{unique}"
    env = client_env(hub, alice, tmp_path)
    ok(run(env, "push", str(src), repo))
    snap = Path(ok(run(env, "pull", repo)).stdout.strip())

    cache = tmp_path / "hf-cache"
    offline = snapshot_download(repo, cache_dir=str(cache), local_files_only=True)
    assert Path(offline) == snap
    path = hf_hub_download(repo, "model.bin", cache_dir=str(cache), local_files_only=True)
    assert Path(path).read_bytes() == files["model.bin"]
    from transformers import AutoConfig

    loaded = AutoConfig.from_pretrained(repo, cache_dir=str(cache), local_files_only=True)
    assert (loaded.model_type, loaded.hidden_size, loaded.num_hidden_layers) == ("bert", 48, 2)
    # and the other way round: what huggingface_hub cached, hub pull does not fetch again
    other = tmp_path / "hf-cache-2"
    api = hub.api(alice)
    api.snapshot_download(repo, cache_dir=str(other))
    again = ok(run(client_env(hub, alice, tmp_path, HF_HUB_CACHE=str(other)), "pull", repo))
    assert fetched(again) == 0


@pytest.mark.parametrize("segment,then", [("4MiB", "4MiB"), ("64MiB", "64MiB"), ("4MiB", "64MiB"), ("64MiB", "4MiB")],
                         ids=["ranges", "one-stream", "ranges-then-one-stream", "one-stream-then-ranges"])
def test_it_resumes_a_pull_killed_with_sigkill(hub, alice, unique, tmp_path, segment, then):
    src = tmp_path / "src"
    size = 24 * MiB
    files = make_tree(src, {"big.bin": os.urandom(size)})
    repo = f"alice/resume-{unique}"
    env = client_env(hub, alice, tmp_path, HUB_SEGMENT_SIZE=segment)
    ok(run(env, "push", str(src), repo))
    blobs = tmp_path / "hf-cache" / f"models--{repo.replace('/', '--')}" / "blobs"

    proc = subprocess.Popen([*hub_cmd(), "pull", repo, "--limit-rate", "8M"], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while time.time() < deadline and _bytes_on_disk(blobs) < 6 * MiB:
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    on_disk = _bytes_on_disk(blobs)
    # (what the pull said, should it not have got this far: once, in a full run, it had written nothing in 60 s)
    assert 6 * MiB <= on_disk < size, (on_disk, proc.stderr.read().decode(errors="replace")[-3000:])
    assert not (blobs / hashlib.sha256(files["big.bin"]).hexdigest()).exists()  # nothing unverified in place

    again = ok(run(env | {"HUB_SEGMENT_SIZE": then}, "pull", repo))  # the second run may fetch otherwise
    if segment == then:
        assert fetched(again) <= size - on_disk + 557
    else:  # one stream reuses only the prefix a ranged run left; ranges reuse all a one-stream run left
        assert fetched(again) <= size + 557 if then == "64MiB" else fetched(again) <= size - on_disk + 557
    assert read_tree(Path(again.stdout.strip()))["big.bin"] == files["big.bin"]
    assert not list(blobs.glob("*incomplete*"))

    # Bytes left by an earlier run that turn out bad are thrown away and fetched again, once.
    other = tmp_path / "other-cache"
    bad_blobs = other / f"models--{repo.replace('/', '--')}" / "blobs"
    bad_blobs.mkdir(parents=True)
    partial = bad_blobs / f"{hashlib.sha256(files['big.bin']).hexdigest()}.hub.incomplete"
    partial.write_bytes(b"\0" * (size if then == "4MiB" else MiB))
    if then == "4MiB":
        (bad_blobs / (partial.name + ".journal")).write_text(f"0 {MiB}\n")
    fixed = ok(run(env | {"HF_HUB_CACHE": str(other), "HUB_SEGMENT_SIZE": then}, "pull", repo))
    assert (Path(fixed.stdout.strip()) / "big.bin").read_bytes() == files["big.bin"]


def test_the_ranges_of_a_large_file_cover_it_once_and_get_smaller_at_its_end():
    """The hash follows the contiguous prefix of the file, so what is in flight past it when the last
    byte lands is hashed after it: the last 8 segments' worth goes in quarter-size ranges."""
    from storage.transfer.engine import _segments

    def check(missing, seg):
        got = _segments(missing, seg)
        assert got == sorted(got) and all(a < b for a, b in got)
        assert sum(b - a for a, b in got) == sum(b - a for a, b in missing)
        assert all(any(x <= a and b <= y for x, y in missing) for a, b in got)  # nothing outside the holes
        return [b - a for a, b in got]

    sizes = check([(0, 1 << 30)], 32 * MiB)  # 1 GiB: 24 ranges of 32 MiB, then 32 of 8 MiB
    assert sizes == [32 * MiB] * 24 + [8 * MiB] * 32
    sizes = check([(0, 5 * MiB), (100 * MiB, 300 * MiB + 7)], 32 * MiB)  # a resumed file's holes
    assert sizes[0] == 5 * MiB and sizes[-1] == 8 * MiB + 7 and set(sizes[1:-1]) == {8 * MiB}
    assert check([(0, 24 * MiB)], 4 * MiB) == [4 * MiB] * 6  # small segments: 4 MiB is the floor


def test_a_pull_whose_connections_are_cut_mid_file_finishes_with_the_right_bytes(hub, alice, unique, tmp_path):
    """The segments of a large file are spliced from the socket into the file: a connection cut in
    the middle of one (the bytes come through a relay on the embedded hub) is picked up again from
    the last byte on disk, and the file is still verified whole."""
    from tests.support.relay import Relay

    one_backend(hub)
    size = 24 * MiB
    data = os.urandom(size)
    repo = f"alice/cut-{unique}"
    api = hub.api(alice)
    api.create_repo(repo)
    api.upload_file(path_or_fileobj=data, path_in_repo="big.bin", repo_id=repo)
    relay = Relay(("127.0.0.1", hub.port)).start()
    relay.rate = MiB  # per connection: four segments at a time, ~6 s for the file
    env = client_env(hub, alice, tmp_path, HUB_SEGMENT_SIZE="4MiB", HUB_ENDPOINT=relay.url)
    proc = subprocess.Popen([*hub_cmd(), "pull", repo], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        for _ in range(2):  # twice, 1.5 s into segments that take 4 s each: every stream mid-body
            time.sleep(1.5)
            assert proc.poll() is None, proc.stderr.read()
            relay.cut()
            time.sleep(0.3)
            relay.start()
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
        relay.cut()
    assert proc.returncode == 0, err.decode(errors="replace")[-3000:]
    assert (Path(out.decode().strip()) / "big.bin").read_bytes() == data


def _bytes_on_disk(blobs: Path) -> int:
    """Bytes of the big file a killed pull leaves: the journal's ranges, or the partial's length."""
    for journal in blobs.glob("*.journal") if blobs.exists() else ():
        try:
            spans = [line.split() for line in journal.read_text().splitlines()]
            return sum(int(b) - int(a) for a, b in spans if a.isdigit() and b.isdigit())
        except OSError:
            return 0
    for partial in blobs.glob("*.hub.incomplete") if blobs.exists() else ():
        return partial.stat().st_size
    return 0


def test_it_resumes_a_push_killed_with_sigkill(hub, alice, unique, tmp_path):
    src = tmp_path / "src"
    size = 40 * MiB  # 5 parts of 8 MiB
    data = make_tree(src, {"w.bin": os.urandom(size)})["w.bin"]
    oid = hashlib.sha256(data).hexdigest()
    repo = f"alice/push-resume-{unique}"
    env = client_env(hub, alice, tmp_path)
    # 2 MiB/s: the first two parts land after ~8 s, the next two ~8 s later; the watch below has that
    # long to see 2 or 3 (at 4 MiB/s a loaded box once let the whole push finish unseen).
    proc = subprocess.Popen([*hub_cmd(), "push", str(src), repo, "--limit-rate", "2M", "--workers", "2"],
                            env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # Watch the hub's upload session (the LFS batch hands the same session to the same user and bytes).
    deadline = time.time() + 60
    parts: list = []
    while time.time() < deadline and len(parts) < 2:
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.2)
        try:
            # (offering what `hub push` offers: on S3 its session takes checked parts)
            (obj,) = lfs_batch(hub, alice, repo, [(oid, size)],
                               transfers=("basic", "multipart", "hub-checked-put"))["objects"]
        except AssertionError:
            continue  # the repo is not created yet
        if "upload" not in obj.get("actions", {}):
            continue  # no session handed out yet (or an error answer): look again
        upload_id = obj["actions"]["upload"]["header"]["upload_id"]
        parts = requests.get(f"{hub.url}/api/v1/uploads/{upload_id}", headers=auth(alice), timeout=10).json()["parts"]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert 2 <= len(parts) < 5

    again = ok(run(env, "push", str(src), repo))
    assert uploaded(again) <= size - len(parts) * 8 * MiB
    pulled = ok(run(env, "pull", repo))
    assert (Path(pulled.stdout.strip()) / "w.bin").read_bytes() == data


# --- reading commands -------------------------------------------------------------------------------

def test_it_lists_copies_and_shows_the_quota(hub, alice, unique, tmp_path):
    src = tmp_path / "src"
    files = make_tree(src, {"a.txt": b"alpha\n", "d/b.txt": b"beta\n", "d/e/c.bin": os.urandom(3000)})
    repo = f"datasets/alice/ls-{unique}"
    env = client_env(hub, alice, tmp_path)
    commit = ok(run(env, "push", str(src), repo)).stdout.strip().rsplit("/", 1)[1]

    top = ok(run(client_env(hub, None, tmp_path), "ls", repo)).stdout.splitlines()  # public: no token needed
    assert [line.split() for line in top] == [["557", ".gitattributes"], ["6", "a.txt"], ["-", "d/"]]
    deep = ok(run(env, "ls", f"alice/ls-{unique}@{commit[:10]}/d", "--type", "dataset", "-R")).stdout
    assert [line.split()[-1] for line in deep.splitlines()] == ["d/b.txt", "d/e/", "d/e/c.bin"]
    assert ok(run(env, "ls", f"{repo}/d/b.txt")).stdout.split() == ["5", "d/b.txt"]
    failed(run(env, "ls", f"{repo}/nope"), "'nope' not found")

    ok(run(env, "cp", f"hub://{repo}/d", str(tmp_path / "out"), "-r"))
    assert read_tree(tmp_path / "out") == {"b.txt": files["d/b.txt"], "e/c.bin": files["d/e/c.bin"]}
    (tmp_path / "one").mkdir()
    ok(run(env, "cp", f"hub://{repo}@{commit}/d/e/c.bin", str(tmp_path / "one")))
    assert (tmp_path / "one" / "c.bin").read_bytes() == files["d/e/c.bin"]
    failed(run(env, "cp", f"hub://{repo}/d", str(tmp_path / "x")), "is a directory: use -r")
    failed(run(env, "cp", str(src), f"hub://{repo}"), "use `hub push")

    quota = ok(run(env, "quota")).stdout.splitlines()
    assert quota[0].startswith("alice: ") and " used of " in quota[0] and " reserved " in quota[0]
    assert re.fullmatch(r"\[[#.]{40}\]\s+\d+\.\d%", quota[1])


def test_quota_says_which_uploads_hold_its_reservations_and_aborts_them(hub, alice, unique, tmp_path):
    """An interrupted upload keeps its bytes reserved (so that it can be resumed): `hub quota` lists
    what makes up the reserved figure, with the upload holding each part of it, the 413 says where to
    look, and `hub quota --abort` gives an upload's bytes back — its owner's only."""
    name = f"dora{unique}"
    token = hub.manage("hub_token", name, "--quota", "60MB").stdout.strip().splitlines()[-1]
    env = client_env(hub, token, tmp_path / "dora")
    # What a killed `hub cp` and a killed `hub push` leave: sessions opened, never completed.
    vol = requests.post(f"{hub.url}/api/volume/uploads", headers=auth(token), timeout=30,
                        json={"path": "ckpt/step-100.pt", "size": 20 * MB, "checked": True})
    assert vol.status_code == 201, vol.text
    hub.api(token).create_repo(f"{name}/m")
    big, small = hashlib.sha256(b"big" + unique.encode()).hexdigest(), hashlib.sha256(b"small" + unique.encode()).hexdigest()
    objects = {o["oid"]: o for o in lfs_batch(hub, token, f"{name}/m", [(big, 25 * MB), (small, 1 * MB)])["objects"]}
    lfs_id = objects[big]["actions"]["upload"]["header"]["upload_id"]
    # (on S3 the small object too goes up in a session; the local store takes it in one PUT, no session)
    small_id = (objects[small]["actions"]["upload"].get("header") or {}).get("upload_id")

    shown = ok(run(env, "quota")).stdout.splitlines()
    assert shown[0] == f"{name}: 557 B used of 60 MB, 46 MB reserved by uploads in progress, 14 MB available"  # (.gitattributes)
    held = shown[shown.index(next(line for line in shown if line.startswith("reserved (46 MB)"))) + 1:]
    assert [line.split()[:-4] for line in held] == [
        ["25", "MB", f"{name}/m", "(sha256", f"{big[:12]})", "upload", lfs_id],
        ["20", "MB", "volume:", "ckpt/step-100.pt", "upload", vol.json()["id"]],
        ["1", "MB", f"{name}/m", "(sha256", f"{small[:12]})", "upload", small_id] if small_id else
        ["1", "MB", "lfs", f"{name}/m", "(sha256", f"{small[:12]})"],  # (the batch's reservation: no session)
    ], held
    assert all(re.search(r"  lapses in (2[3-5]) h$", line) for line in held), held  # (a day, as the sessions)

    # Over quota, the message says where the bytes went and how to get them back.
    over = requests.post(f"{hub.url}/api/volume/uploads", headers=auth(token), timeout=30,
                         json={"path": "ckpt/step-200.pt", "size": 20 * MB, "checked": True})
    assert over.status_code == 413 and "46 MB of it reserved by uploads in progress: `hub quota` lists them, " \
        "`hub quota --abort` gives their bytes back" in over.text, over.text

    # Nobody else can end them: to another account they are not there.
    failed(run(client_env(hub, alice, tmp_path / "alice"), "quota", "--abort", vol.json()["id"]),
           f"{vol.json()['id']}: no upload of your account holding a reservation has this id")
    aborted = ok(run(env, "quota", "--abort", vol.json()["id"]))
    assert aborted.stderr.splitlines() == ["aborted the upload to volume: ckpt/step-100.pt (20 MB)",
                                           "gave back 20 MB"]
    assert requests.get(f"{hub.url}/api/quota", headers=auth(token), timeout=10).json()["reserved"] == 26 * MB
    assert requests.delete(f"{hub.url}/api/volume/uploads/{vol.json()['id']}", headers=auth(token),
                           timeout=10).status_code == 404  # ended: it can no more be resumed
    aborted = ok(run(env, "quota", "--abort", "all"))
    assert aborted.stderr.splitlines() == [f"aborted the upload to {name}/m (sha256 {big[:12]}) (25 MB)"] + (
        [f"aborted the upload to {name}/m (sha256 {small[:12]}) (1 MB)", "gave back 26 MB"] if small_id else
        ["gave back 25 MB"])
    q = requests.get(f"{hub.url}/api/quota", headers=auth(token), timeout=10).json()
    if small_id:
        assert (q["reserved"], q["reservations"]) == (0, [])
    else:  # the one PUT's URL lapses on its own
        assert q["reserved"] == 1 * MB and [r["upload"] for r in q["reservations"]] == [None]
    assert requests.get(f"{hub.url}/api/v1/uploads/{lfs_id}", headers=auth(token), timeout=10).json()["state"] == "aborted"
    failed(run(env, "quota", "--abort", lfs_id), "no upload of your account holding a reservation has this id")


def test_it_logs_in_and_out(hub, alice, tmp_path):
    env = client_env(hub, None, tmp_path)
    failed(run(env, "whoami"), "not logged in")
    login = ok(run(env, "login", "--token", alice))
    assert "logged in to" in login.stderr and "as alice" in login.stderr and login.stdout == ""
    creds = tmp_path / "hub-config" / "credentials.json"
    assert creds.stat().st_mode & 0o777 == 0o600
    assert ok(run(env, "whoami")).stdout.splitlines()[0] == "alice"
    ok(run(env, "logout"))
    failed(run(env, "whoami"), "not logged in")
    ok(run(env, "login", input=alice + "\n"))  # the token on stdin
    assert ok(run(env, "whoami")).stdout.startswith("alice")
    failed(run(env, "login", "--token", "nope"), "rejected your token")

    # huggingface_hub's variables work when the hub's own are unset
    hf_env = client_env(hub, None, tmp_path / "other", HF_ENDPOINT=hub.url, HF_TOKEN=alice)
    del hf_env["HUB_ENDPOINT"]
    assert ok(run(hf_env, "whoami")).stdout.startswith("alice")


def test_every_command_has_help():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HUB_", "HF_"))}
    top = ok(run(env, "--help")).stdout
    commands = ["login", "logout", "whoami", "quota", "pull", "push", "ls", "cp"]
    for name in commands:
        assert name in top
        assert ok(run(env, name, "--help")).stdout.startswith(f"usage: hub {name}")


# --- copies within the hub -------------------------------------------------------------------------

def run_here(monkeypatch, capsys, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """As run(), but in this process, so that the requests the client sends can be watched."""
    from storage import cli

    for var in [v for v in os.environ if v.startswith(("HF_", "HUB_"))]:
        monkeypatch.delenv(var)
    for var, value in env.items():
        if var.startswith(("HF_", "HUB_")):
            monkeypatch.setenv(var, value)
    capsys.readouterr()
    code = cli.main(list(args))
    out = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, out.out, out.err)


def test_it_copies_repo_files_into_the_volume_by_hash(hub, alice, unique, tmp_path, monkeypatch, capsys):
    v1 = {"data/big.bin": os.urandom(20 * MiB), "data/a.csv": b"a,b\n1,2\n", "data/sub/empty.txt": b"",
          "README.md": b"# corpus\n"}
    src = tmp_path / "src"
    make_tree(src, v1)
    repo = f"datasets/alice/corpus-{unique}"
    env = client_env(hub, alice, tmp_path)
    ok(run(env, "push", str(src), repo))
    hub.api(alice).create_tag(f"alice/corpus-{unique}", tag="v1", repo_type="dataset")
    (src / "data" / "a.csv").write_bytes(b"changed on main\n")
    ok(run(env, "push", str(src), repo))
    data = {k[len("data/"):]: v for k, v in v1.items() if k.startswith("data/")}

    # Only (path, size, sha256) go to the hub: no request carries a file's bytes either way.
    seen = watch_requests(monkeypatch)
    cp = ok(run_here(monkeypatch, capsys, env, "cp", "-r", f"{repo}@v1/data", f"volume/corpus-{unique}"))
    assert "copied 3 files (21 MB)" in cp.stderr and "3 by hash" in cp.stderr  # decimal, as `hub quota`
    assert fetched(cp) == 0 and uploaded(cp) == 0
    assert seen and sum(n for _, _, n in seen) < 64 * 1024
    assert all(url.startswith(f"{hub.url}/api/") for _, url, _ in seen), seen
    monkeypatch.undo()

    # What the volume then serves is the tagged revision, byte for byte.
    ok(run(env, "cp", "-r", f"volume/corpus-{unique}", str(tmp_path / "back")))
    assert read_tree(tmp_path / "back") == data
    listing = ok(run(env, "ls", "-R", f"volume/corpus-{unique}")).stdout.split()
    assert f"corpus-{unique}/sub/empty.txt" in listing

    # One file, spelled NS/NAME/PATH as huggingface_hub users do (a model, by default), to a new path
    # and into an existing directory; the same spelling copies to a local path.
    model = f"alice/model-{unique}"
    make_tree(tmp_path / "model", {"config.json": b'{"hidden_size": 8}\n'})
    ok(run(env, "push", str(tmp_path / "model"), model))
    one = ok(run(env, "cp", f"{model}/config.json", f"volume/x-{unique}/config.json"))
    assert "copied 1 file (19 B)" in one.stderr and "1 by hash" in one.stderr and uploaded(one) == 0
    ok(run(env, "cp", "--type", "dataset", f"alice/corpus-{unique}@v1/data/a.csv", f"volume/corpus-{unique}/sub/"))
    ok(run(env, "cp", f"hub://volume/x-{unique}/config.json", str(tmp_path / "config.json")))
    assert (tmp_path / "config.json").read_bytes() == b'{"hidden_size": 8}\n'
    ok(run(env, "cp", f"volume/corpus-{unique}/sub/a.csv", str(tmp_path / "a.csv")))
    assert (tmp_path / "a.csv").read_bytes() == v1["data/a.csv"]
    (tmp_path / "local").mkdir()
    ok(run(env, "cp", f"{model}/config.json", str(tmp_path / "local")))
    assert (tmp_path / "local" / "config.json").read_bytes() == b'{"hidden_size": 8}\n'
    ok(run(env, "rm", "-r", f"volume/corpus-{unique}", f"volume/x-{unique}"))


def test_it_copies_within_the_volume_and_moves_bytes_only_when_it_must(hub, alice, bob, unique, tmp_path):
    env = client_env(hub, alice, tmp_path)
    base = f"volume/vv-{unique}"
    files = make_tree(tmp_path / "src", {"big.bin": os.urandom(20 * MiB + 5), "a.txt": b"alpha\n",
                                         "d/e/b.json": b"{}", "empty": b""})
    ok(run(env, "cp", "-r", str(tmp_path / "src"), f"{base}/orig"))
    ok(run(env, "mkdir", "-p", f"{base}/orig/hollow/inner"))  # empty directories are copied too

    one = ok(run(env, "cp", f"{base}/orig/big.bin", f"{base}/one.bin"))
    assert "1 by hash" in one.stderr and fetched(one) == 0 and uploaded(one) == 0
    tree = ok(run(env, "cp", "-r", f"{base}/orig", f"{base}/copy"))
    assert "4 by hash" in tree.stderr and fetched(tree) == 0 and uploaded(tree) == 0
    ok(run(env, "cp", f"{base}/orig/a.txt", f"{base}/copy/d/"))
    ok(run(env, "cp", "-r", f"{base}/copy", str(tmp_path / "back")))
    assert read_tree(tmp_path / "back") == files | {"d/a.txt": files["a.txt"]}
    assert ok(run(env, "ls", f"{base}/copy/hollow")).stdout.split() == ["-", f"vv-{unique}/copy/hollow/inner/"]
    ok(run(env, "cp", f"{base}/one.bin", str(tmp_path / "one.bin")))
    assert (tmp_path / "one.bin").read_bytes() == files["big.bin"]

    # Files in her own volume stay hers to copy by hash, even once their source (bob's repo) went
    # private after she copied from it.
    theirs = {"small.txt": os.urandom(1000), "large.bin": os.urandom(17 * MiB)}  # one PUT; a session
    make_tree(tmp_path / "bob" / "w", theirs)
    ok(run(client_env(hub, bob, tmp_path), "push", str(tmp_path / "bob"), f"bob/shared-{unique}"))
    ok(run(env, "cp", "-r", f"bob/shared-{unique}/w", f"{base}/from-bob"))
    hub.api(bob).update_repo_settings(f"bob/shared-{unique}", private=True)
    again = ok(run(env, "cp", "-r", f"{base}/from-bob", f"{base}/kept"))
    assert "2 by hash" in again.stderr
    assert fetched(again) == 0 and uploaded(again) == 0
    ok(run(env, "cp", "-r", f"{base}/kept", str(tmp_path / "kept")))
    assert read_tree(tmp_path / "kept") == theirs
    ok(run(env, "rm", "-r", base))


def test_it_refuses_to_copy_into_a_repo_and_names_a_missing_source(hub, alice, unique, tmp_path):
    env = client_env(hub, alice, tmp_path)
    model = f"alice/refuse-{unique}"
    make_tree(tmp_path / "model", {"config.json": b"{}"})
    ok(run(env, "push", str(tmp_path / "model"), model))
    ok(run(env, "cp", f"{model}/config.json", f"volume/refuse-{unique}/config.json"))

    failed(run(env, "cp", f"{model}/config.json", f"hub://models/{model}/copy.json"), "use `hub push")
    failed(run(env, "cp", f"volume/refuse-{unique}/config.json", f"datasets/{model}/c.json"), "use `hub push")
    failed(run(env, "cp", f"models/{model}/nope.json", f"volume/refuse-{unique}/x"), "'nope.json' not found")
    failed(run(env, "cp", f"alice/missing-{unique}/config.json", f"volume/refuse-{unique}/x"),
           f"alice/missing-{unique} not found", "no local file or directory")
    failed(run(env, "cp", f"volume/nope-{unique}", f"volume/refuse-{unique}/x"), "does not exist in your volume")
    failed(run(env, "cp", f"models/{model}", f"volume/refuse-{unique}/x"), "is a directory: use -r")
    failed(run(env, "cp", "-r", f"volume/refuse-{unique}", f"volume/refuse-{unique}/in"), "into itself")
    failed(run(env, "cp", f"volume/refuse-{unique}/config.json", f"volume/refuse-{unique}/"), "the same file")
    assert ok(run(env, "ls", f"volume/refuse-{unique}")).stdout.split() == ["2", f"refuse-{unique}/config.json"]
    ok(run(env, "rm", "-r", f"volume/refuse-{unique}"))


# --- errors -----------------------------------------------------------------------------------------

def test_it_explains_what_went_wrong_in_one_line(hub, alice, bob, unique, tmp_path):
    src = tmp_path / "src"
    make_tree(src, {"a.txt": b"a\n"})
    env = client_env(hub, alice, tmp_path)
    ok(run(env, "push", str(src), f"alice/private-{unique}", "--private"))

    failed(run(env, "pull", f"alice/missing-{unique}"), f"model alice/missing-{unique} not found")
    failed(run(env, "pull", f"alice/private-{unique}", "--revision", "nope"), "revision 'nope' not found")
    anonymous = client_env(hub, None, tmp_path)
    failed(run(anonymous, "pull", f"alice/private-{unique}"), "not found", "no token was sent")
    failed(run(client_env(hub, bob, tmp_path), "pull", f"alice/private-{unique}"), "not found")
    failed(run(client_env(hub, "hub_wrong", tmp_path), "pull", f"alice/private-{unique}"), "rejected your token")
    failed(run(client_env(hub, bob, tmp_path), "push", str(src), f"alice/private-{unique}"), "cannot write")
    failed(run(env, "pull", "not-a-repo-id"), "not a repo id")
    no_endpoint = client_env(hub, alice, tmp_path)
    del no_endpoint["HUB_ENDPOINT"]
    assert failed(run(no_endpoint, "whoami"), "no hub endpoint")
    failed(run(env, "push", str(tmp_path / "nowhere"), f"alice/x-{unique}"), "is not a directory")


def repo_exists(hub, token: str, repo_id: str, repo_type: str = "model") -> bool:
    return hub.api(token).repo_exists(repo_id, repo_type=repo_type)


def test_a_push_over_quota_leaves_no_repo_behind(hub, unique, tmp_path):
    name = f"dora{unique}"
    token = hub.manage("hub_token", name, "--quota", "5MB").stdout.strip().splitlines()[-1]
    env = client_env(hub, token, tmp_path)

    # More than the whole quota: refused with the figures before the repo is created.
    make_tree(tmp_path / "big", {"big.bin": os.urandom(11 * 10**6)})
    line = failed(run(env, "push", str(tmp_path / "big"), f"datasets/{name}/big"), f"quota exceeded for {name}",
                  "0 B of 5 MB used", "this upload needs at least 11 MB")
    assert "deleted" not in line
    assert not repo_exists(hub, token, f"{name}/big", "dataset")

    # Within the limit, but not once the hub counts it (inline files, 6 MB in all): the hub refuses
    # the commit, and the push deletes the repo it had just created.
    small = tmp_path / "small"
    make_tree(small, {f"f{i}.bin": os.urandom(2 * 10**6) for i in range(3)})
    failed(run(env, "push", str(small), f"{name}/m"), "quota exceeded", f"deleted the empty model {name}/m this push "
           "had created")
    assert not repo_exists(hub, token, f"{name}/m")

    # A repo that was there before the push stays, with what it held.
    make_tree(tmp_path / "first", {"a.txt": b"a\n"})
    ok(run(env, "push", str(tmp_path / "first"), f"{name}/kept"))
    line = failed(run(env, "push", str(small), f"{name}/kept"), "quota exceeded")
    assert "deleted" not in line
    files = hub.api(token).list_repo_files(f"{name}/kept")
    assert sorted(files) == [".gitattributes", "a.txt"]

    # A branch the push made for itself on that repo goes again; one it did not make stays.
    failed(run(env, "push", str(small), f"{name}/kept", "--revision", "wip"), "quota exceeded",
           "deleted the branch wip this push had created")
    assert [b.name for b in hub.api(token).list_repo_refs(f"{name}/kept").branches] == ["main"]
    hub.api(token).create_branch(f"{name}/kept", branch="mine")
    line = failed(run(env, "push", str(small), f"{name}/kept", "--revision", "mine"), "quota exceeded")
    assert "deleted" not in line
    assert sorted(b.name for b in hub.api(token).list_repo_refs(f"{name}/kept").branches) == ["main", "mine"]


def test_a_push_refuses_a_path_the_hub_would_refuse_before_creating_the_repo(hub, alice, unique, tmp_path):
    one_backend(hub)
    env = client_env(hub, alice, tmp_path)
    make_tree(tmp_path / "src", {"ok.txt": b"ok\n", "back\\slash.txt": b"no\n"})
    failed(run(env, "push", str(tmp_path / "src"), f"alice/bad-{unique}"), "contains a backslash")
    assert not repo_exists(hub, alice, f"alice/bad-{unique}")


def test_a_push_skips_symlinks_leading_out_of_the_folder(hub, alice, unique, tmp_path):
    one_backend(hub)
    secret = tmp_path / "outside" / "secret.txt"
    make_tree(secret.parent, {"secret.txt": b"not for the hub\n"})
    src = tmp_path / "src"
    files = make_tree(src, {"a.txt": b"alpha\n", "d/b.txt": b"beta\n"})
    (src / "link.txt").symlink_to(secret)
    (src / "d" / "up.txt").symlink_to("../../outside/secret.txt")
    (src / "inside.txt").symlink_to("d/b.txt")  # stays inside: followed
    (src / "data").symlink_to(secret.parent, target_is_directory=True)  # a directory: not followed, named
    env = client_env(hub, alice, tmp_path)

    push = ok(run(env, "push", str(src), f"alice/links-{unique}"))
    assert f"warning: skipped 2 symlinks leading outside {src}: link.txt -> {secret}, " \
           "d/up.txt -> ../../outside/secret.txt" in push.stderr
    assert "warning: skipped 1 link to a directory (push does not follow them; push the directory itself, " \
           f"or copy it in): data -> {secret.parent}" in push.stderr
    ok(run(env, "pull", f"alice/links-{unique}", "--local-dir", str(tmp_path / "back")))
    got = read_tree(tmp_path / "back")
    assert got.pop(".gitattributes")
    assert got == files | {"inside.txt": b"beta\n"}


def test_cp_r_into_the_volume_names_the_links_to_directories_it_skips(hub, alice, unique, tmp_path):
    one_backend(hub)
    elsewhere = tmp_path / "disk" / "data"
    make_tree(elsewhere, {"shard-0.bin": b"far away\n"})
    src = tmp_path / "ckpt"
    files = make_tree(src, {"model.pt": b"weights\n", "sub/opt.pt": b"state\n"})
    (src / "sub" / "again.pt").symlink_to("../model.pt")  # a link to a file: copied, as cp -rL would
    (src / "data").symlink_to(elsewhere, target_is_directory=True)  # a directory: not followed, named
    env = client_env(hub, alice, tmp_path)

    cp = ok(run(env, "cp", "-r", str(src), f"volume/links-{unique}"))
    assert "warning: skipped 1 link to a directory (cp -r does not follow them; copy the directory " \
           f"itself): data -> {elsewhere}" in cp.stderr
    assert "copied 3 files" in cp.stderr
    ok(run(env, "cp", "-r", f"volume/links-{unique}", str(tmp_path / "back")))
    assert read_tree(tmp_path / "back") == files | {"sub/again.pt": b"weights\n"}
    ok(run(env, "rm", "-r", f"volume/links-{unique}"))


def test_a_missing_repo_names_the_other_type_the_caller_can_see(hub, alice, bob, unique, tmp_path):
    from huggingface_hub.errors import RepositoryNotFoundError

    make_tree(tmp_path / "src", {"wine.csv": b"a,b\n1,2\n"})
    env = client_env(hub, alice, tmp_path)
    ok(run(env, "push", str(tmp_path / "src"), f"datasets/alice/wine-{unique}"))
    hint = f"no model alice/wine-{unique}; there is a dataset of that name: use datasets/alice/wine-{unique}"
    for who in (alice, bob, None):
        failed(run(client_env(hub, who, tmp_path), "pull", f"alice/wine-{unique}"), hint)
    with pytest.raises(RepositoryNotFoundError) as exc:  # huggingface_hub shows the hub's sentence
        hub.api(bob).model_info(f"alice/wine-{unique}")
    assert hint in str(exc.value)
    ok(run(env, "push", str(tmp_path / "src"), f"alice/wine-{unique}"))  # and the other way round
    hub.api(alice).delete_repo(f"alice/wine-{unique}", repo_type="dataset")
    failed(run(env, "pull", f"datasets/alice/wine-{unique}"),
           f"no dataset alice/wine-{unique}; there is a model of that name: use models/alice/wine-{unique}")

    # A private repo of the other type is named to those who may see it, and to no one else.
    ok(run(env, "push", str(tmp_path / "src"), f"datasets/alice/hidden-{unique}", "--private"))
    failed(run(env, "pull", f"alice/hidden-{unique}"), "there is a dataset of that name")
    for who in (bob, None):
        line = failed(run(client_env(hub, who, tmp_path), "pull", f"alice/hidden-{unique}"),
                      f"model alice/hidden-{unique} not found")
        assert "dataset" not in line
        with pytest.raises(RepositoryNotFoundError) as exc:
            hub.api(who).model_info(f"alice/hidden-{unique}")
        assert "dataset" not in str(exc.value)


def test_token_errors_say_where_the_token_came_from_and_what_to_do(hub, tmp_path):
    one_backend(hub)
    env = client_env(hub, None, tmp_path)
    tokens = f"{hub.url}/settings/tokens"
    line = failed(run(env, "login", input="garbage\n"), "rejected your token (from stdin)", "check the token",
                  f"create one at {tokens}")
    assert "run `hub login`" not in line
    line = failed(run(env, "login", "--token", "garbage"), "(from --token)", "check the token")
    assert "run `hub login`" not in line
    failed(run(client_env(hub, "garbage", tmp_path), "whoami"), "(from HUB_TOKEN)", "set HUB_TOKEN to a valid token")

    # Without a token, every command says the same thing, whatever the endpoint's own wording.
    for args in (["ls", "volume"], ["whoami"], ["quota"], ["cp", "volume/x", str(tmp_path / "x")]):
        failed(run(env, *args), "not logged in: set HUB_TOKEN or run `hub login`")
    line = failed(run(env, "ls", "volume"))
    assert "Bearer" not in line


def test_cp_reads_stdin_and_writes_stdout_for_a_dash(hub, alice, unique, tmp_path):
    one_backend(hub)
    env = client_env(hub, alice, tmp_path)
    make_tree(tmp_path / "src", {"d/wine.csv": b"a,b\n1,2\n"})
    ok(run(env, "push", str(tmp_path / "src"), f"datasets/alice/dash-{unique}"))

    out = ok(run(env, "cp", f"datasets/alice/dash-{unique}/d/wine.csv", "-"))
    assert out.stdout == "a,b\n1,2\n" and "copied 1 file (8 B)" in out.stderr
    assert not (ROOT / "-").exists()
    failed(run(env, "cp", "-r", f"datasets/alice/dash-{unique}/d", "-"), "only a file can be copied to stdout")

    data = "x" * 5000 + "\n"
    into = ok(run(env, "cp", "-", f"volume/dash-{unique}/piped.txt", input=data))
    assert "copied stdin (5 kB)" in into.stderr
    assert ok(run(env, "cp", f"volume/dash-{unique}/piped.txt", "-")).stdout == data
    failed(run(env, "cp", "-", f"volume/dash-{unique}/", input=data), "stdin has no file name")
    ok(run(env, "rm", "-r", f"volume/dash-{unique}"))


# --- the native endpoints ---------------------------------------------------------------------------

def test_the_manifest_lists_files_with_sha256_and_working_urls(hub, alice, bob, unique, tmp_path):
    from storage.client import HubClient
    from storage.transfer.push import push

    files = make_tree(tmp_path / "src", {f"d/f{i:02d}.txt": f"file {i}\n".encode() for i in range(5)}
                      | {"big.bin": os.urandom(11 * 10**6), "top.json": b"{}"})
    repo = f"alice/manifest-{unique}"
    push(HubClient(hub.url, alice), tmp_path / "src", "model", repo, private=True, progress=False)
    url = f"{hub.url}/api/v1/repos/model/{repo}/manifest"

    pages, params = [], {"limit": 3}
    while True:
        resp = requests.get(url, params=params, headers=auth(alice), timeout=30)
        assert resp.status_code == 200, resp.text
        pages.append(resp.json())
        if not pages[-1]["next"]:
            break
        params = {"limit": 3, "cursor": pages[-1]["next"], "revision": pages[-1]["commit"]}
    assert [len(p["files"]) for p in pages] == [3, 3, 2, 0] or [len(p["files"]) for p in pages] == [3, 3, 2]
    listed = {f["path"]: f for p in pages for f in p["files"]}
    assert sorted(listed) == [".gitattributes", "big.bin", *[f"d/f{i:02d}.txt" for i in range(5)], "top.json"]
    for path, data in files.items():
        item = listed[path]
        assert (item["size"], item["sha256"], item["lfs"]) == (len(data), hashlib.sha256(data).hexdigest(),
                                                               len(data) >= 10**7)
        # a ready URL: presigned on S3 (no token needed), the hub's resolve URL otherwise
        headers = {} if "X-Amz-Signature" in item["url"] else auth(alice)
        assert requests.get(item["url"], headers=headers, timeout=30).content == data
    if hub.name == "pg_rgw":
        assert all("X-Amz-Signature" in f["url"] for f in listed.values())

    one = requests.get(url, params={"include": ["d/*"], "exclude": ["*3.txt"], "path": "d"},
                       headers=auth(alice), timeout=30).json()
    assert [f["path"] for f in one["files"]] == ["d/f00.txt", "d/f01.txt", "d/f02.txt", "d/f04.txt"]
    single = requests.get(url, params={"path": "top.json"}, headers=auth(alice), timeout=30).json()
    assert [f["path"] for f in single["files"]] == ["top.json"]

    for who in (bob, None):
        resp = requests.get(url, headers=auth(who) if who else {}, timeout=30)
        assert resp.status_code == 404 and resp.headers["X-Error-Code"] == "RepoNotFound"
        assert resp.json() == {"error": f"model {repo} not found (or you do not have access to it)",
                               "code": "RepoNotFound"}
    resp = requests.get(url, params={"revision": "nope"}, headers=auth(alice), timeout=30)
    assert (resp.status_code, resp.headers["X-Error-Code"]) == (404, "RevisionNotFound")
    resp = requests.get(url, params={"path": "nope"}, headers=auth(alice), timeout=30)
    assert (resp.status_code, resp.headers["X-Error-Code"]) == (404, "EntryNotFound")
    schema = requests.get(f"{hub.url}/api/schema", headers={"Accept": "application/json"}, timeout=30).text
    assert "/api/v1/repos/{repo_type}/{ns}/{name}/manifest" in schema and "/api/v1/uploads/{upload_id}" in schema


def test_downloads_are_checked_against_the_blake3_the_hub_recorded(hub, alice, unique, tmp_path):
    """Once the hub has hashed a blob's stored bytes to its sha256 it records their blake3 too (a
    fifth of the CPU per byte), the manifest lists it, and `hub pull` checks what it receives
    against it — in ranges, in one stream, and in memory. A wrong recorded blake3 fails the pull
    although the bytes hash to their sha256 (so the check really is against the blake3); a scrub
    records the right one again."""
    import blake3

    files = make_tree(tmp_path / "src", {"big.bin": os.urandom(20 * MiB), "mid.bin": os.urandom(9 * MiB),
                                         "small.json": b'{"a": 1}\n'})
    repo = f"alice/blake3-{unique}"
    ok(run(client_env(hub, alice, tmp_path), "push", str(tmp_path / "src"), repo, "--private"))
    listed = manifest_with_blake3(hub, alice, repo)
    for path, data in files.items():
        assert listed[path]["blake3"] == blake3.blake3(data).hexdigest(), path

    wrong = "0" * 64
    for path, segment in (("big.bin", "4MiB"), ("mid.bin", "64MiB"), ("small.json", "64MiB")):
        set_blake3(hub, listed[path]["sha256"], wrong)
        out = tmp_path / f"out-{path}"
        env = client_env(hub, alice, tmp_path, HUB_SEGMENT_SIZE=segment)
        err = failed(run(env, "pull", repo, "--include", path, "--local-dir", str(out)), path, "blake3",
                     f"not the {wrong} the hub recorded for sha256 {listed[path]['sha256']}")
        assert "run the command again" in err
        assert not (out / path).exists()
        report = json.loads(hub.manage("hub_scrub", "--sha256", listed[path]["sha256"]).stdout.strip().splitlines()[-1])
        assert report == {listed[path]["sha256"]: True}
        ok(run(env, "pull", repo, "--include", path, "--local-dir", str(out)))
        assert (out / path).read_bytes() == files[path]
    again = manifest_with_blake3(hub, alice, repo)
    assert {p: again[p]["blake3"] for p in files} == {p: listed[p]["blake3"] for p in files}


def test_an_upload_session_is_visible_to_its_owner_only(hub, alice, bob, unique):
    repo = f"alice/sessions-{unique}"
    hub.api(alice).create_repo(repo)
    data = os.urandom(17 * MiB)
    oid = hashlib.sha256(data).hexdigest()
    (obj,) = lfs_batch(hub, alice, repo, [(oid, len(data))])["objects"]
    header = obj["actions"]["upload"]["header"]
    upload_id = header["upload_id"]
    url = f"{hub.url}/api/v1/uploads/{upload_id}"
    requests.put(header["1"], data=data[: 8 * MiB], timeout=60).raise_for_status()

    mine = requests.get(url, headers=auth(alice), timeout=30).json()
    assert (mine["sha256"], mine["size"], mine["part_count"], mine["state"]) == (oid, len(data), 3, "open")
    assert [(p["part_number"], p["size"]) for p in mine["parts"]] == [(1, 8 * MiB)]
    assert sorted(mine["part_urls"]) == ["2", "3"] and mine["complete_url"]
    # the same session comes back for the same user and bytes
    (again,) = lfs_batch(hub, alice, repo, [(oid, len(data))])["objects"]
    assert again["actions"]["upload"]["header"]["upload_id"] == upload_id

    resp = requests.get(url, headers=auth(bob), timeout=30)
    assert (resp.status_code, resp.headers["X-Error-Code"]) == (404, "NotFound")
    resp = requests.get(url, timeout=30)
    assert (resp.status_code, resp.headers["X-Error-Code"]) == (401, "Unauthorized")
    resp = requests.get(f"{hub.url}/api/v1/uploads/00000000-0000-0000-0000-000000000000", headers=auth(alice),
                        timeout=30)
    assert resp.status_code == 404


def test_the_client_imports_no_django():
    assert django_modules_after(
        "import fsspec\n"
        "import storage.cli, storage.fs.hubfs, storage.transfer.pull, storage.transfer.push, storage.transfer.engine, storage.client, storage.fs.volume\n"
        "assert fsspec.get_filesystem_class('hub') is storage.fs.hubfs.HubFileSystem\n"
        "storage.cli.build_parser()") == ""
