"""The mount agent on real FUSE against live hubs: `hub mount` run as a user runs it (a detached
process per mount, with an endpoint, a token and a cache directory), checked through the mount
point with ordinary file calls, bytes compared with what was pushed.

Personas: alice owns the repos and the volume; bob is someone else. Every mount is unmounted when the
test ends, passed or failed (fusermount3 -u -z, then the mount process is stopped)."""
from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests
from huggingface_hub import CommitOperationAdd, HfApi

from tests.conftest import django_modules_after, one_backend
from tests.support.files import small_disk
from tests.support.hub_cli import manifest_with_blake3, set_blake3
from tests.support.mount import Mounts, _alive, _fuse_missing, _stop, client_env, hub_mount, ok
from tests.support.servers import ROOT

MiB = 2**20


pytestmark = pytest.mark.skipif(_fuse_missing() is not None, reason=str(_fuse_missing()))


def failed(proc: subprocess.CompletedProcess, words: str) -> None:
    assert proc.returncode == 1, f"exit {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], proc.stderr


@pytest.fixture
def mounts(tmp_path):
    m = Mounts(tmp_path / "mnt")
    m.base.mkdir()
    try:
        yield m
    finally:
        m.cleanup()


def stats(mountpoint: Path) -> dict:
    """What the mount process fetched so far (its own counters, read through the mount)."""
    return json.loads(os.getxattr(mountpoint, "user.hub.stats"))


def push_files(hub, token: str, repo: str, files: dict[str, bytes], tmp: Path, *, repo_type: str = "model",
               message: str = "files") -> str:
    """Commits `files` to `repo` (created if needed) with the hub client; returns the commit id."""
    from storage.client import HubClient
    from storage.transfer.push import push

    src = tmp / f"src-{hashlib.sha1(repr(sorted(files)).encode() + os.urandom(4)).hexdigest()[:8]}"
    for name, data in files.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_bytes(data)
    result = push(HubClient(hub.url, token), src, repo_type, repo, message=message, progress=False)
    return result.commit


def blobs_in(cache: Path) -> dict[str, tuple[int, int]]:
    """name -> (inode, size) of every cached blob, and anything left in tmp/."""
    out = {p.name: (p.stat().st_ino, p.stat().st_size) for p in (cache / "blobs").glob("*/*")}
    out |= {f"tmp/{p.name}": (0, 0) for p in (cache / "tmp").glob("*")}
    return out


def wait_cached(cache: Path, shas: list[str], timeout: float = 10) -> None:
    """Until the cache holds these blobs (a large file enters it a moment after its last byte is
    read: once written out and verified)."""
    deadline = time.time() + timeout
    while time.time() < deadline and not all((cache / "blobs" / s[:2] / s).exists() for s in shas):
        time.sleep(0.05)
    assert all((cache / "blobs" / s[:2] / s).exists() for s in shas)


def sample_repo() -> dict[str, bytes]:
    return {"config.json": b'{"hidden_size": 8}\n', "sub/deep/notes.txt": b"read me\n",
            "weights.bin": os.urandom(20 * MiB + 4321),  # above the whole-file limit: read in blocks
            "small.bin": os.urandom(100_000)}


def test_the_mount_agent_imports_no_django():
    assert django_modules_after(
        "import storage.mount.commands, storage.mount.agent, storage.mount.repofs, storage.mount.volumefs\n"
        "import storage.mount.fetch, storage.mount.blocks, storage.mount.system, storage.mount.process, storage.transfer.blobcache\n"
        "storage.mount.commands.build_parser()") == ""


# --- repos: read-only, pinned, cached -----------------------------------------------------------------

def test_a_repo_mounts_read_only_and_reads_byte_for_byte(hub, alice, unique, tmp_path, mounts):
    repo = f"alice/ro-{unique}"
    files = sample_repo()
    push_files(hub, alice, repo, files, tmp_path)
    m = mounts.mount(client_env(hub, alice, tmp_path / "cache"), repo, "ro")

    assert sorted(os.listdir(m)) == [".gitattributes", "config.json", "small.bin", "sub", "weights.bin"]
    for name, data in files.items():
        assert (m / name).read_bytes() == data, name
        assert (m / name).stat().st_size == len(data)
    with open(m / "weights.bin", "rb") as fh:  # random access inside the large file
        fh.seek(9 * MiB + 17)
        assert fh.read(3 * MiB) == files["weights.bin"][9 * MiB + 17:12 * MiB + 17]
    assert os.getxattr(m / "config.json", "user.hub.sha256").decode() == hashlib.sha256(files["config.json"]).hexdigest()

    def refused(fn, *args) -> None:
        with pytest.raises(PermissionError) as exc:
            fn(*args)
        assert exc.value.errno == errno.EACCES, fn

    refused(open, m / "config.json", "r+b")
    refused(open, m / "config.json", "ab")
    refused(open, m / "new.txt", "wb")
    refused(os.mkdir, m / "newdir")
    refused(os.unlink, m / "config.json")
    refused(os.rmdir, m / "sub" / "deep")
    refused(os.rename, m / "config.json", m / "other.json")
    refused(os.truncate, m / "config.json", 0)
    refused(os.chmod, m / "config.json", 0o600)
    assert not os.access(m / "config.json", os.W_OK) and os.access(m / "config.json", os.R_OK)
    with pytest.raises(FileNotFoundError):
        (m / "missing.txt").read_bytes()
    assert (m / "config.json").read_bytes() == files["config.json"]  # and nothing changed

    ok(hub_mount(client_env(hub, alice, tmp_path / "cache"), "umount", str(m)))
    assert not os.path.ismount(m)


def test_the_mount_checks_what_it_fetches_against_the_recorded_blake3(hub, alice, unique, tmp_path, mounts):
    """A large file (read in blocks) and a small one (fetched whole) are checked against the blake3
    the manifest lists: with a wrong one recorded their reads fail with EIO although the bytes match
    their sha256, and nothing enters the cache; once a scrub has recorded the right one, a fresh
    mount reads them byte for byte."""
    import blake3

    repo = f"alice/b3mount-{unique}"
    # (a small LFS file goes to S3 in one checked PUT, which the hub never reads: no blake3 until a scrub)
    files = {"weights.bin": os.urandom(20 * MiB + 4321), "small.txt": f"{unique} small\n".encode() * 10_000}
    push_files(hub, alice, repo, files, tmp_path)
    listed = manifest_with_blake3(hub, alice, repo)
    assert {p: listed[p]["blake3"] for p in files} == {p: blake3.blake3(d).hexdigest() for p, d in files.items()}
    for path in files:
        set_blake3(hub, listed[path]["sha256"], "1" * 64)

    m = mounts.mount(client_env(hub, alice, tmp_path / "cache"), repo, "bad")
    for name in files:
        with pytest.raises(OSError) as exc:
            for _ in range(100):  # a large file's blocks are served as they arrive: its check ends the reads
                (m / name).read_bytes()
                time.sleep(0.05)
        assert exc.value.errno == errno.EIO, name
    assert f"not the {'1' * 64} the hub recorded" in mounts.log("bad")
    # Nothing entered the cache; the part file goes once the kernel has released the last handle
    # (FUSE sends that after close() returns) and the writes queued for it are done.
    deadline = time.time() + 10
    while blobs_in(tmp_path / "cache") and time.time() < deadline:
        time.sleep(0.05)
    assert blobs_in(tmp_path / "cache") == {}

    for path in files:
        hub.manage("hub_scrub", "--sha256", listed[path]["sha256"])
    m = mounts.mount(client_env(hub, alice, tmp_path / "cache-2"), repo, "good")
    for name, data in files.items():
        assert (m / name).read_bytes() == data, name
    wait_cached(tmp_path / "cache-2", [listed[p]["sha256"] for p in files])


@pytest.mark.skipif(os.geteuid() != 0, reason="raising a mount's read-ahead needs root")
def test_a_repo_mount_reads_ahead_4_mib_from_the_moment_it_is_ready(hub, alice, unique, tmp_path, mounts):
    """The read-ahead is raised before `hub mount` returns: a file opened at once reads in 1 MiB
    requests (a file opened before the raise kept the kernel's 128 KiB: 8x the requests)."""
    from storage.mount import system

    repo = f"alice/ra-{unique}"
    push_files(hub, alice, repo, {"a.txt": b"a\n"}, tmp_path)
    m = mounts.mount(client_env(hub, alice, tmp_path / "cache"), repo, "ra")
    dev = system.device_of(m)
    assert dev and Path(f"/sys/class/bdi/{dev}/read_ahead_kb").read_text().strip() == "4096"


def test_a_mount_stays_on_the_commit_it_resolved(hub, alice, unique, tmp_path, mounts):
    repo = f"alice/pin-{unique}"
    first = push_files(hub, alice, repo, {"config.json": b'{"v": 1}\n', "data/a.txt": b"one\n"}, tmp_path)
    env = client_env(hub, alice, tmp_path / "cache")
    old = mounts.mount(env, repo, "old")
    assert (old / "config.json").read_bytes() == b'{"v": 1}\n'

    second = push_files(hub, alice, repo, {"config.json": b'{"v": 2, "longer": true}\n', "data/a.txt": b"one\n",
                                           "data/b.txt": b"two\n"}, tmp_path, message="v2")
    assert second != first
    assert (old / "config.json").read_bytes() == b'{"v": 1}\n'
    assert sorted(os.listdir(old / "data")) == ["a.txt"]
    assert os.getxattr(old, "user.hub.commit").decode() == first

    new = mounts.mount(env, repo, "new")
    assert (new / "config.json").read_bytes() == b'{"v": 2, "longer": true}\n'
    assert sorted(os.listdir(new / "data")) == ["a.txt", "b.txt"]
    assert os.getxattr(new, "user.hub.commit").decode() == second
    by_id = mounts.mount(env, f"{repo}@{first}", "by-id")  # a commit id pins as well
    assert (by_id / "config.json").read_bytes() == b'{"v": 1}\n'


def test_a_file_read_through_two_mounts_is_fetched_once(hub, alice, unique, tmp_path, mounts):
    repo = f"datasets/alice/cache-{unique}"
    files = sample_repo()
    push_files(hub, alice, repo.removeprefix("datasets/"), files, tmp_path, repo_type="dataset")
    cache = tmp_path / "cache"
    env = client_env(hub, alice, cache)
    a = mounts.mount(env, repo, "a", "--no-prefetch")
    b = mounts.mount(env, repo, "b", "--no-prefetch")

    files[".gitattributes"] = (a / ".gitattributes").read_bytes()  # every file, so that a pull finds all
    for name, data in files.items():
        assert (a / name).read_bytes() == data
    fetched_a = stats(a)
    assert fetched_a["bytes_fetched"] >= sum(len(v) for v in files.values())
    wait_cached(cache, [hashlib.sha256(v).hexdigest() for v in files.values()])
    deadline = time.time() + 10  # read-ahead of the last file may still be landing
    while [k for k in blobs_in(cache) if k.startswith("tmp/")] and time.time() < deadline:
        time.sleep(0.2)
    before = blobs_in(cache)
    assert not [k for k in before if k.startswith("tmp/")]

    for name, data in files.items():
        assert (b / name).read_bytes() == data
    assert stats(b) | {"lookups": 0} == {"files_fetched": 0, "bytes_fetched": 0, "cache_hits": len(files),
                                         "prefetched": 0, "unbuffered_blocks": 0, "lookups": 0}
    assert blobs_in(cache) == before  # no blob written again, nothing left half-written

    # `hub pull` takes what the mounts cached instead of downloading it...
    pull = subprocess.run([sys.executable, "-m", "storage.cli", "pull", repo], capture_output=True, text=True,
                          env=env | {"HF_HUB_CACHE": str(tmp_path / "hf")}, cwd=ROOT, timeout=120)
    assert pull.returncode == 0, pull.stderr
    assert "fetched 0 bytes" in pull.stderr
    snapshot = Path(pull.stdout.strip())
    assert (snapshot / "weights.bin").read_bytes() == files["weights.bin"]
    # ...and what it downloads, a mount with that cache does not fetch again.
    other_cache = tmp_path / "cache2"
    env2 = client_env(hub, alice, other_cache)
    other_cache.joinpath("blobs").mkdir(parents=True)  # a machine whose mounts made a cache
    pull = subprocess.run([sys.executable, "-m", "storage.cli", "pull", repo, "--local-dir", str(tmp_path / "ld")],
                          capture_output=True, text=True, env=env2, cwd=ROOT, timeout=120)
    assert pull.returncode == 0, pull.stderr
    c = mounts.mount(env2, repo, "c", "--no-prefetch")
    assert (c / "weights.bin").read_bytes() == files["weights.bin"]
    assert stats(c)["bytes_fetched"] == 0


def many_small(hub, token: str, repo: str, n: int = 300) -> dict[str, bytes]:
    """A repo of `n` small text files in shards/, in one commit carrying them inline, as
    huggingface_hub sends small text files (`hub push` and the LFS/Xet path spend a request or more
    per file: ~30 s for 300 on RGW, a cost of its own that the benchmarks track)."""
    files = {f"shards/{i:04d}.txt": os.urandom(2048).hex().encode() for i in range(n)}
    api = HfApi(endpoint=hub.url, token=token)
    api.create_repo(repo)
    api.create_commit(repo, [CommitOperationAdd(path, data) for path, data in files.items()], commit_message="files")
    return files


def test_ls_l_asks_the_mount_nothing_per_file(hub, alice, unique, tmp_path, mounts):
    """A listing carries every entry's attributes to the kernel (READDIRPLUS with offsets: libfuse
    drops them otherwise), so `ls -l` of a fresh mount costs no LOOKUP round trip per file. With the
    attributes dropped, this listing made 302 getattr calls."""
    repo = f"alice/ls-{unique}"
    files = many_small(hub, alice, repo)
    m = mounts.mount(client_env(hub, alice, tmp_path / "cache"), repo, "ls", "--no-prefetch")
    out = subprocess.run(["ls", "-ln", "--time-style=+%s", str(m / "shards")], capture_output=True, text=True,
                         timeout=60, check=True).stdout.splitlines()
    assert out[0] == f"total {300 * 4}"  # st_blocks of 4 KiB files, in KiB
    rows = [line.split() for line in out[1:]]
    assert [r[-1] for r in rows] == sorted(p.removeprefix("shards/") for p in files)
    assert {(r[0], r[2], r[4]) for r in rows} == {("-r--r--r--", str(os.getuid()), "4096")}
    assert stats(m)["lookups"] <= 3  # the mount point and shards/, not the files in it
    for name, data in list(files.items())[:3]:
        assert (m / name).read_bytes() == data


def test_a_cache_disk_that_fills_up_does_not_fail_the_read(hub, alice, unique, tmp_path, mounts):
    """The mount's cache is on a disk too small for the large file being read: each block's write to
    the cache runs behind the request that fetched it, and one that fails switches the file to
    memory: its blocks stay in buffers while the reads want them and are fetched again if wanted
    later, and the file stays out of the cache. A file longer than the mount's 24 block buffers
    reads to the end, and backwards. (When the write ran in line, the read failed with ENOSPC; when
    the blocks stayed in their buffers, at 192 MiB.)"""
    one_backend(hub)  # (the mount's side alone)
    repo = f"alice/fullcache-{unique}"
    data = os.urandom(26 * 8 * MiB + 4321)  # 27 blocks of 8 MiB; the disk takes 1
    push_files(hub, alice, repo, {"big.bin": data}, tmp_path)
    with small_disk(tmp_path / "cache", "12m") as cache:
        m = mounts.mount(client_env(hub, alice, cache), repo, "full", "--no-prefetch")
        with open(m / "big.bin", "rb") as fh:
            got = fh.read()
        assert len(got) == len(data) and got == data
        assert stats(m)["bytes_fetched"] == len(data)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")  # (the kernel's copy of the mounted file too)
        with open(m / "big.bin", "rb") as fh:
            for offset in range(len(data) - MiB, -1, -5 * MiB):  # one MiB every 5, from the end
                fh.seek(offset)
                assert fh.read(MiB) == data[offset:offset + MiB], offset
        assert stats(m)["bytes_fetched"] > len(data)  # what was let go came again
        assert not [p for p in (cache / "blobs").rglob("*") if p.is_file()]  # never a file that is not all there
        mounts.cleanup()  # (before the disk goes)
    assert "could not write big.bin to the cache" in mounts.log("full")


def test_small_files_make_room_in_a_full_cache_or_are_read_from_memory(hub, alice, unique, tmp_path, mounts):
    """The disk under the mount's cache fills up (with other files): a small file (fetched whole)
    that does not fit makes room by evicting the least recently used blobs; one that still does not
    fit is served from memory, with a warning, and not kept; once the disk has room, it is kept
    again. (Before, opening it failed with ENOSPC.)"""
    one_backend(hub)  # (the mount's side alone)
    repo = f"alice/fullsmall-{unique}"
    files = {"a.txt": os.urandom(256 * 1024), "b.txt": os.urandom(256 * 1024), "big.txt": os.urandom(2 * MiB)}
    push_files(hub, alice, repo, files, tmp_path)
    sha = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    with small_disk(tmp_path / "cache", "4m") as cache:
        m = mounts.mount(client_env(hub, alice, cache, HUB_CACHE_SIZE="4MiB"), repo, "fullsmall", "--no-prefetch")
        assert (m / "a.txt").read_bytes() == files["a.txt"]
        assert set(blobs_in(cache)) == {sha["a.txt"]}
        fd = os.open(cache / "filler.bin", os.O_WRONLY | os.O_CREAT, 0o644)  # the user's own files fill the disk
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 4096)
        os.close(fd)
        assert (m / "b.txt").read_bytes() == files["b.txt"]
        assert set(blobs_in(cache)) == {sha["b.txt"]}  # a.txt made room
        assert (m / "big.txt").read_bytes() == files["big.txt"]
        assert sha["big.txt"] not in blobs_in(cache)  # served from memory
        log = mounts.log("fullsmall")
        assert "could not write big.txt to the cache" in log and "free some space on its disk" in log
        (cache / "filler.bin").unlink()
        assert (m / "big.txt").read_bytes() == files["big.txt"]
        assert sha["big.txt"] in blobs_in(cache)
        mounts.cleanup()  # (before the disk goes)


def test_listing_a_directory_prefetches_its_small_files(hub, alice, unique, tmp_path, mounts):
    repo = f"alice/many-{unique}"
    files = many_small(hub, alice, repo)
    m = mounts.mount(client_env(hub, alice, tmp_path / "cache"), repo, "many")
    assert len(os.listdir(m / "shards")) == 300
    deadline = time.time() + 30
    while time.time() < deadline and stats(m)["prefetched"] < 300:
        time.sleep(0.05)
    assert stats(m)["prefetched"] == 300
    fetched = stats(m)["bytes_fetched"]
    for name, data in files.items():
        assert (m / name).read_bytes() == data
    assert stats(m)["bytes_fetched"] == fetched  # every read came from the cache


def test_the_prefetch_lets_a_burst_of_metadata_requests_go_first(hub, alice, unique, tmp_path, mounts):
    """While requests about names and attributes come back to back (`ls -lR`, `find`, `du`), the
    prefetch starts no new file — on two cores shared with the store it made `ls -lR` of 5,000
    files 14× slower — and it carries on when they stop. Unpaused, it fetches these 300 files well
    within the burst. Requests that never stop do not stop it for good: past 2 s of waiting for a
    gap, each of its threads starts a file anyway."""
    repo = f"alice/burst-{unique}"
    files = many_small(hub, alice, repo)
    m = mounts.mount(client_env(hub, alice, tmp_path / "cache"), repo, "burst")
    names = os.listdir(m / "shards")  # starts the prefetch

    def burst(seconds: float) -> None:
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            for name in names[:20]:
                os.listxattr(m / "shards" / name)  # (never cached by the kernel: each one reaches the mount)

    burst(1.5)
    during = stats(m)["prefetched"]
    assert during < 100, f"{during} files prefetched during the burst"
    burst(3.5)  # the same requests, going on
    assert stats(m)["prefetched"] > during, "the prefetch stood still for 5 s of metadata requests"
    deadline = time.time() + 30
    while time.time() < deadline and stats(m)["prefetched"] < 300:
        time.sleep(0.05)
    assert stats(m)["prefetched"] == 300
    fetched = stats(m)["bytes_fetched"]
    assert all((m / name).read_bytes() == data for name, data in files.items())
    assert stats(m)["bytes_fetched"] == fetched


def test_a_repo_too_large_for_one_manifest_page_is_learnt_a_directory_at_a_time(hub, alice, unique, tmp_path,
                                                                                monkeypatch):
    from storage.client import HubClient
    from storage.mount import repofs

    repo = f"alice/lazy-{unique}"
    files = {"top.txt": b"top\n", "a/one.txt": b"1\n", "a/two.txt": b"2\n", "a/b/deep.txt": b"deep\n",
             "c/big.bin": os.urandom(11 * 10**6),  # above the LFS threshold: its sha256 comes with the listing
             "d/x.txt": b"x\n", "d/y.txt": b"y\n"}
    commit = push_files(hub, alice, repo, files, tmp_path)
    monkeypatch.setattr(repofs, "MANIFEST_PAGE", 2)
    monkeypatch.setattr(repofs, "MANIFEST_PAGES", 1)
    client = HubClient(hub.url, alice)
    tree = repofs.RepoTree(client, "model", repo, commit)
    tree.load()
    assert not tree.complete
    assert sorted(tree.children("", tree.root)) == [".gitattributes", "a", "c", "d", "top.txt"]
    assert tree.lookup("/a/b/deep.txt").size == 5 and tree.lookup("/a/missing") is None
    assert tree.lookup("/top.txt/x") is None
    for path, data in files.items():
        node = tree.lookup("/" + path)
        src = tree.source("/" + path, node)
        assert (src.sha256, src.size) == (hashlib.sha256(data).hexdigest(), len(data)), path
        assert client.request("GET", src.url).data == data, path  # (the token goes to the hub only)
    assert tree.lookup("/d").manifest_loaded  # a directory without subdirectories: one call for all its files


def test_mount_errors_are_one_line(hub, alice, bob, unique, tmp_path, mounts):
    repo = f"alice/private-{unique}"
    from storage.client import HubClient

    HubClient(hub.url, alice).create_repo("model", repo, private=True)
    push_files(hub, alice, repo, {"a.txt": b"a"}, tmp_path)
    env = client_env(hub, bob, tmp_path / "cache")
    failed(hub_mount(env, "mount", repo, str(tmp_path / "x")), "not found")
    failed(hub_mount(env, "mount", f"alice/none-{unique}", str(tmp_path / "x")), "not found")
    failed(hub_mount(client_env(hub, alice, tmp_path / "cache"), "mount", f"{repo}@nobranch", str(tmp_path / "x")),
           "nobranch")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "file").write_text("x")
    failed(hub_mount(client_env(hub, alice, tmp_path / "cache"), "mount", repo, str(busy)), "not empty")
    failed(hub_mount(env, "umount", str(tmp_path / "x")), "not mounted")
    bad = hub_mount(env, "mount", "alice/x/y/z", str(tmp_path / "x"))
    assert bad.returncode == 2 and bad.stderr.startswith("error: ")


# --- the volume ---------------------------------------------------------------------------------------

# --- large files: streamed in blocks, hashed, then cached ------------------------------------------------


class _OutOfOrderStore:
    """A Fetcher's store for one file held in memory: every other request is slow, so parallel
    read-ahead requests finish out of order, as they do from a real store."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def read_range(self, src, start: int, end: int, sink, dest=None) -> None:
        from storage.mount.blocks import BLOCK, RUN

        if (start // BLOCK // RUN) % 2 == 0:
            time.sleep(0.05)
        pos = start
        while pos < end:  # as the Fetcher's: into the memory `dest` names, if it names any
            into = dest(pos, min(MiB, end - pos)) if dest is not None else None
            if into is None:
                into = memoryview(self.data)[pos:min(end, pos + MiB)]
            else:
                into[:] = self.data[pos:pos + len(into)]
            sink(pos, into)
            pos += len(into)


def _streamed(tmp_path: Path, data: bytes, sha256: str):
    from storage.mount.fetch import Fetcher, Source
    from storage.transfer.blobcache import BlobCache

    fetcher = Fetcher(None, BlobCache(tmp_path / "cache", 1 << 30))
    fetcher.read_range = _OutOfOrderStore(data).read_range
    return fetcher, fetcher.stream(Source(sha256, len(data), "big.bin", "http://unused"))


def _read_through(blob, size: int) -> bytes:
    out = bytearray()
    while len(out) < size:
        out += blob.read(len(out), MiB)
    return bytes(out)


def test_a_large_file_is_hashed_from_memory_and_cached_when_its_sha256_matches(tmp_path, monkeypatch):
    """Out-of-order read-ahead must not make the hash read blocks back from the part file (O_DIRECT
    kept them out of the page cache: that is a second read of the file from the disk)."""
    from storage.mount.blocks import StreamingBlob

    data = os.urandom(160 * MiB + 12345)
    sha = hashlib.sha256(data).hexdigest()
    write = StreamingBlob._write
    monkeypatch.setattr(StreamingBlob, "_write", lambda *a: time.sleep(0.1) or write(*a))  # a busy disk
    fetcher, blob = _streamed(tmp_path, data, sha)
    read_back = []
    real_pread = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, n, at: read_back.append(n) or real_pread(fd, n, at))
    try:
        assert _read_through(blob, len(data)) == data
        # The blob is marked committed before its file is linked into the cache: wait for the file.
        deadline = time.monotonic() + 20
        while fetcher.cache.get(sha, len(data)) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert blob.committed and fetcher.cache.get(sha, len(data)) is not None
        assert fetcher.cache.get(sha, len(data)).read_bytes() == data
        assert read_back == []
    finally:
        fetcher.release(blob)
        fetcher.close()


def test_a_large_file_that_does_not_match_its_sha256_fails_its_readers_and_stays_out_of_the_cache(tmp_path):
    from storage.client import IntegrityError

    data = os.urandom(40 * MiB)
    sha = hashlib.sha256(data).hexdigest()
    corrupt = bytearray(data)
    corrupt[30 * MiB] ^= 1
    fetcher, blob = _streamed(tmp_path, bytes(corrupt), sha)
    try:
        with pytest.raises(IntegrityError):
            for _ in range(200):  # reads are served as bytes arrive; the mismatch shows once all are in
                _read_through(blob, len(data))
                time.sleep(0.05)
        assert fetcher.cache.get(sha, len(data)) is None
        assert not list((tmp_path / "cache" / "blobs").rglob("*"))
    finally:
        fetcher.release(blob)
        fetcher.close()


@pytest.fixture
def two_volume_mounts(hub, alice, unique, tmp_path, mounts) -> tuple[Path, Path]:
    """alice's volume mounted twice, as on two instances (each its own cache), at a fresh directory."""
    a = mounts.mount(client_env(hub, alice, tmp_path / "cache-a"), "volume", "vol-a")
    b = mounts.mount(client_env(hub, alice, tmp_path / "cache-b"), "volume", "vol-b")
    (a / f"t-{unique}").mkdir()
    return a / f"t-{unique}", b / f"t-{unique}"


def test_volume_writes_are_seen_from_another_mount_after_close(two_volume_mounts):
    a, b = two_volume_mounts
    assert time.time() - a.stat().st_mtime < 3600, "the volume root's time says 1970"
    big = os.urandom(24 * MiB + 5)  # an upload session on the test hubs (parts of 8 MiB)
    with open(a / "ckpt.pt", "wb") as fh:
        fh.write(big[:MiB])
        fh.flush()
        assert (a / "ckpt.pt").stat().st_size == MiB  # this mount sees its own writes at once
        time.sleep(1.5)
        assert not (b / "ckpt.pt").exists()  # the other sees nothing before close
        fh.write(big[MiB:])
    assert (b / "ckpt.pt").read_bytes() == big
    assert os.getxattr(b / "ckpt.pt", "user.hub.sha256").decode() == hashlib.sha256(big).hexdigest()

    (b / "notes.txt").write_bytes(b"version one\n")
    assert (a / "notes.txt").read_bytes() == b"version one\n"
    (b / "notes.txt").write_bytes(b"version two, which is longer\n")
    assert (a / "notes.txt").read_bytes() == b"version two, which is longer\n"  # reopened: the new version
    (b / "notes.txt").write_bytes(b"v3\n")
    assert (a / "notes.txt").read_bytes() == b"v3\n"

    with open(a / "notes.txt", "r+b") as fh:  # in place: read, change a byte, append
        assert fh.read() == b"v3\n"
        fh.seek(1)
        fh.write(b"4")
        fh.seek(0, os.SEEK_END)
        fh.write(b"more\n")
    assert (b / "notes.txt").read_bytes() == b"v4\nmore\n"
    os.truncate(a / "notes.txt", 2)
    assert (b / "notes.txt").read_bytes() == b"v4"
    with open(a / "empty", "wb"):
        pass
    assert (b / "empty").read_bytes() == b""

    (a / "d1" / "d2").mkdir(parents=True)
    (a / "d1" / "d2" / "x.bin").write_bytes(b"x" * 10)
    assert sorted(os.listdir(b)) == ["ckpt.pt", "d1", "empty", "notes.txt"]
    with pytest.raises(OSError) as exc:
        os.rmdir(b / "d1")
    assert exc.value.errno == errno.ENOTEMPTY
    os.unlink(b / "d1" / "d2" / "x.bin")
    os.rmdir(b / "d1" / "d2")
    os.rmdir(b / "d1")
    time.sleep(1.1)  # a name another mount removed is gone here once the entry timeout (1 s) has passed
    assert not (a / "d1").exists()
    with pytest.raises(FileNotFoundError):
        os.unlink(a / "d1")


def test_rename_on_the_volume_is_atomic(two_volume_mounts):
    a, b = two_volume_mounts
    old, new = os.urandom(3 * MiB), os.urandom(3 * MiB)
    (a / "model.pt").write_bytes(old)
    seen: list[bytes | str] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            try:
                seen.append((b / "model.pt").read_bytes())
            except OSError as err:
                seen.append(f"{type(err).__name__}: {err}")

    t = threading.Thread(target=reader)
    t.start()
    try:
        for i in range(4):
            tmp = a / f".model.pt.tmp{i}"
            tmp.write_bytes(new if i % 2 == 0 else old)
            os.rename(tmp, a / "model.pt")  # write, then rename: readers see one version or the other
            time.sleep(0.3)
    finally:
        stop.set()
        t.join()
    assert seen and all(s in (old, new) for s in seen), {s if isinstance(s, str) else len(s) for s in seen}
    assert (b / "model.pt").read_bytes() == old
    assert sorted(os.listdir(b)) == ["model.pt"]

    # a directory with what is inside it, in one metadata call
    (a / "run1").mkdir()
    for i in range(20):
        (a / "run1" / f"f{i}").write_bytes(b"%d" % i)
    t0 = time.monotonic()
    os.rename(a / "run1", a / "run2")
    assert time.monotonic() - t0 < 2.0
    assert sorted(os.listdir(a / "run2")) == sorted(f"f{i}" for i in range(20))
    time.sleep(1.1)  # b listed this directory a moment ago: new names show there within a second
    assert sorted(os.listdir(b / "run2")) == sorted(f"f{i}" for i in range(20))
    assert (b / "run2" / "f7").read_bytes() == b"7" and not (b / "run1").exists()


def test_an_over_quota_write_fails_at_close_and_keeps_the_old_file(hub, unique, tmp_path, mounts):
    user = f"q{unique}"
    token = hub.manage("hub_token", user, "--quota", "2MB").stdout.strip().splitlines()[-1]
    m = mounts.mount(client_env(hub, token, tmp_path / "cache"), "volume", "vol-q")
    (m / "keep.bin").write_bytes(b"old bytes\n")
    fd = os.open(m / "keep.bin", os.O_WRONLY | os.O_TRUNC)
    held = os.dup(fd)  # a second descriptor keeps the handle open: no release yet, as when it comes late
    os.write(fd, os.urandom(3 * 10**6))
    with pytest.raises(OSError) as exc:
        os.close(fd)
    assert exc.value.errno in (errno.EDQUOT, errno.ENOSPC)
    assert (m / "keep.bin").read_bytes() == b"old bytes\n"  # and reading it back fails nothing
    assert os.stat(m / "keep.bin").st_size == len(b"old bytes\n")
    with pytest.raises(OSError) as exc:  # the other descriptor's close is refused too, then the bytes go aside
        os.close(held)
    assert exc.value.errno in (errno.EDQUOT, errno.ENOSPC)
    r = requests.get(f"{hub.url}/api/volume/files/keep.bin", headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert r.content == b"old bytes\n"
    assert "keep.bin" in mounts.log("vol-q") and "EDQUOT" in mounts.log("vol-q")
    with pytest.raises(OSError) as exc:  # a new file too
        with open(m / "new.bin", "wb") as fh:
            fh.write(os.urandom(3 * 10**6))
    assert exc.value.errno in (errno.EDQUOT, errno.ENOSPC)
    assert not (m / "new.bin").exists()


def test_ls_l_of_ten_thousand_entries_costs_a_few_requests(hub, alice, unique, tmp_path, mounts):
    where = f"wide-{unique}"
    # The directory through the domain function; its 10,000 empty subdirectories as rows in one
    # statement (they hold no bytes and count against no quota; one call each takes ~40 s on PG).
    hub.manage("shell", "-c", (
        "from django.contrib.auth import get_user_model; from django.utils import timezone; "
        "from hub.volumes import services; from hub.volumes.models import VolumeEntry; "
        "v = services.volume_of(get_user_model().objects.get(username='alice')); "
        f"d, _ = services.do_mkdir(v, '{where}', parents=True); now = timezone.now(); "
        "VolumeEntry.objects.bulk_create([VolumeEntry(volume=v, parent=d, name='e%05d' % i, is_dir=True, "
        "mtime=now) for i in range(10000)], batch_size=2000)"))
    m = mounts.mount(client_env(hub, alice, tmp_path / "cache"), "volume", "vol-wide")
    t0 = time.monotonic()
    names = os.listdir(m / where)
    took = time.monotonic() - t0
    assert len(names) == 10_000 and sorted(names)[0] == "e00000"
    assert took < 5.0, f"listing 10,000 entries took {took:.2f} s"  # one request per entry would take ~50 s
    before = stats(m)
    assert before["listing_pages"] <= 12 and before["stat_requests"] <= 2  # the mount root, the directory
    # What `ls -l` does next: a lookup of every name. Those within the listing's 1 s TTL are answered
    # from it; a walk that outlasts the TTL has its listing fetched again, not one request per entry.
    for n in names:
        assert stat.S_ISDIR(os.stat(m / where / n).st_mode)
    asked = stats(m)
    per_entry = asked["stat_requests"] - before["stat_requests"]
    relisted = asked["listing_pages"] - before["listing_pages"]
    assert per_entry <= 10_000 // 10, f"{per_entry} stat requests for 10,000 lookups"
    assert relisted <= 11 * (1 + per_entry // 8), f"{relisted} listing pages fetched again"


# --- a hub restart, a revoked token, the instance agent ------------------------------------------------

def restart(hub, down: float) -> None:
    """Stops the hub's server and starts it again on the same port after `down` seconds."""
    hub.proc.terminate()
    hub.proc.wait(30)
    time.sleep(down)
    # (The arguments this restart has always had: SERVER_ARGS but for --keep-alive, left at gunicorn's 2 s.)
    hub.start(hub.log_path, port=hub.port, init=False, gunicorn_args=(
        "-k", "gthread", "--threads", "8", "-w", "2", "--timeout", "300", "--graceful-timeout", "5"))


def test_reads_survive_a_hub_restart(hub, alice, unique, tmp_path, mounts):
    if hub.name != "embedded":
        pytest.skip("one backend is enough to restart")
    repo = f"alice/restart-{unique}"
    files = {f"f{i:03d}.bin": os.urandom(50_000 + i) for i in range(60)}
    push_files(hub, alice, repo, files, tmp_path)
    env = client_env(hub, alice, tmp_path / "cache")
    m = mounts.mount(env, repo, "restart", "--no-prefetch")
    vol = mounts.mount(env, "volume", "restart-vol")
    (vol / f"r-{unique}.txt").write_bytes(b"survives\n")
    results: dict[str, bytes | str] = {}

    def read_all() -> None:
        for name in files:
            try:
                results[name] = (m / name).read_bytes()
            except OSError as err:
                results[name] = f"{err}"
            time.sleep(0.05)

    t = threading.Thread(target=read_all)
    t.start()
    time.sleep(0.5)
    restart(hub, down=3.0)
    t.join(120)
    assert results == files
    assert (vol / f"r-{unique}.txt").read_bytes() == b"survives\n"


def test_an_unreachable_hub_is_eio_in_bounded_time_and_a_revoked_token_eacces(hub, alice, unique, tmp_path, mounts):
    if hub.name != "embedded":
        pytest.skip("one backend is enough")
    repo = f"alice/down-{unique}"
    push_files(hub, alice, repo, {"a.bin": b"a" * 1000, "b.bin": b"b" * 1000}, tmp_path)
    token = hub.token("alice")  # its own, to revoke
    env = client_env(hub, token, tmp_path / "cache", HUB_MOUNT_RETRY_SECONDS="2")
    m = mounts.mount(env, repo, "down", "--no-prefetch")
    hub.manage("shell", "-c", "from hub.accounts.models import ApiToken; "
               "ApiToken.objects.filter(user__username='alice').order_by('-id').first().delete()")
    with pytest.raises(PermissionError) as exc:
        (m / "a.bin").read_bytes()
    assert exc.value.errno == errno.EACCES
    assert "rejected the token" in mounts.log("down")

    m2 = mounts.mount(client_env(hub, alice, tmp_path / "cache2", HUB_MOUNT_RETRY_SECONDS="2"), repo, "down2",
                      "--no-prefetch")
    hub.proc.terminate()  # and then the hub is gone for good
    hub.proc.wait(30)
    try:
        t0 = time.monotonic()
        with pytest.raises(OSError) as exc:
            (m2 / "b.bin").read_bytes()
        assert exc.value.errno == errno.EIO
        assert time.monotonic() - t0 < 20
        assert "cannot reach" in mounts.log("down2") or "kept failing" in mounts.log("down2")
    finally:
        restart(hub, down=0)


def test_the_agent_mounts_the_instance_spec_and_beats(hub, alice, unique, tmp_path):
    repo = f"alice/agent-{unique}"
    push_files(hub, alice, repo, {"config.json": b'{"agent": true}\n'}, tmp_path, repo_type="dataset")
    r = requests.post(f"{hub.url}/api/instances", headers={"Authorization": f"Bearer {alice}"}, timeout=30,
                      json={"name": f"gpu-{unique}", "mounts": [{"repo": repo, "type": "dataset"}]})
    assert r.status_code == 201, r.text
    instance = r.json()
    root = tmp_path / "root"
    env = client_env(hub, "", tmp_path / "cache", HUB_INSTANCE_TOKEN=instance["token"], HUB_MOUNT_ROOT=str(root))
    del env["HUB_TOKEN"]
    try:
        ok(hub_mount(env, "mount", "--auto", "--log-file", str(tmp_path / "agent.log")))
        data = root / "datasets" / repo
        assert (data / "config.json").read_bytes() == b'{"agent": true}\n'
        (root / "volume" / f"agent-{unique}.txt").write_bytes(b"from the instance\n")
        got = requests.get(f"{hub.url}/api/volume/files/agent-{unique}.txt",
                           headers={"Authorization": f"Bearer {alice}"}, timeout=30)
        assert got.content == b"from the instance\n"
        listed = requests.get(f"{hub.url}/api/instances", headers={"Authorization": f"Bearer {alice}"},
                              timeout=30).json()
        mine = next(i for i in listed if i["id"] == instance["id"])
        assert mine["last_heartbeat"] and mine["agent"].startswith("hub-mount/")
        (agent_pid,) = [json.loads(p.read_text())["pid"] for p in (tmp_path / "cache" / "run").glob("auto-*.json")]
    finally:
        down = hub_mount(env, "umount", "--auto")
        subprocess.run(f"grep ' {root}' /proc/self/mountinfo | cut -d' ' -f5 | xargs -r -n1 fusermount3 -u -z",
                       shell=True)
        for p in (tmp_path / "cache" / "run").glob("*.json"):
            _stop(json.loads(p.read_text())["pid"])
    assert down.returncode == 0, down.stderr
    assert not os.path.ismount(root / "volume") and not os.path.ismount(root / "datasets" / repo)
    assert not _alive(agent_pid)
