"""The volume side of the client against live hubs: `hub ls/cp/rm/mv/mkdir volume/...` as a user runs
them (a separate process with an endpoint and a token), and `hub://volume/...` through fsspec, torch
included. Every round trip compares bytes. Each test works below its own directory of alice's volume.
"""
from __future__ import annotations

import os

import fsspec
import pytest

from tests.support.files import make_tree, read_tree
from tests.support.hub_cli import client_env, failed, fetched, ok, run, uploaded

MiB = 2**20


@pytest.fixture
def hub_env(hub, alice, monkeypatch, tmp_path):
    for var in ("HF_ENDPOINT", "HF_TOKEN", "HUB_ENDPOINT", "HUB_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HUB_ENDPOINT", hub.url)
    monkeypatch.setenv("HUB_TOKEN", alice)
    monkeypatch.setenv("HUB_CONFIG_DIR", str(tmp_path / "hub-config"))
    return hub


def test_it_copies_to_the_volume_and_back_byte_for_byte(hub, alice, unique, tmp_path):
    env = client_env(hub, alice, tmp_path)
    big = os.urandom(20 * MiB + 12345)  # an upload session of 3 parts of 8 MiB on the test hubs
    src = tmp_path / "src"
    files = make_tree(src, {"big.bin": big, "a.txt": b"alpha\n", "empty": b"", "sub/deep/b.json": b"{}"})
    base = f"volume/cli-{unique}"

    up = ok(run(env, "cp", "-r", str(src), f"hub://{base}/tree"))
    assert uploaded(up) == sum(len(v) for v in files.values())
    one = ok(run(env, "cp", str(src / "big.bin"), f"{base}/"))  # into a directory: keeps its name
    assert uploaded(one) == len(big)

    listing = ok(run(env, "ls", f"{base}/tree")).stdout.splitlines()
    assert [line.split() for line in listing] == [
        ["6", f"cli-{unique}/tree/a.txt"], [str(len(big)), f"cli-{unique}/tree/big.bin"],
        ["0", f"cli-{unique}/tree/empty"], ["-", f"cli-{unique}/tree/sub/"]]
    recursive = ok(run(env, "ls", "-R", base)).stdout
    assert f"cli-{unique}/tree/sub/deep/b.json" in recursive and f"cli-{unique}/big.bin" in recursive

    down = ok(run(env, "cp", "-r", f"{base}/tree", str(tmp_path / "back")))
    assert read_tree(tmp_path / "back") == files
    assert fetched(down) == sum(len(v) for v in files.values())
    ok(run(env, "cp", f"hub://{base}/big.bin", str(tmp_path / "one.bin")))
    assert (tmp_path / "one.bin").read_bytes() == big

    ok(run(env, "mv", f"{base}/tree/a.txt", f"{base}/moved/a.txt"))
    ok(run(env, "cp", f"{base}/moved/a.txt", str(tmp_path / "a.txt")))
    assert (tmp_path / "a.txt").read_bytes() == b"alpha\n"
    failed(run(env, "cp", f"{base}/tree/a.txt", str(tmp_path / "gone.txt")), "does not exist in your volume")

    ok(run(env, "mkdir", "-p", f"{base}/made/here"))
    failed(run(env, "rm", f"{base}/tree"), "is a directory", "-r")
    ok(run(env, "rm", "-r", f"{base}/tree", f"{base}/made"))
    ok(run(env, "rm", f"{base}/big.bin"))
    assert ok(run(env, "ls", base)).stdout.split() == ["-", f"cli-{unique}/moved/"]
    ok(run(env, "rm", "-r", base))
    failed(run(env, "ls", base), "does not exist in your volume")


def test_it_refuses_a_copy_over_quota_in_one_line(hub, unique, tmp_path):
    name = f"vera{unique}"
    token = hub.manage("hub_token", name, "--quota", "5MB").stdout.strip().splitlines()[-1]
    env = client_env(hub, token, tmp_path)
    make_tree(tmp_path, {"big.bin": os.urandom(20 * MiB), "mid.bin": os.urandom(6 * MiB)})
    failed(run(env, "cp", str(tmp_path / "big.bin"), "volume/big.bin"), f"quota exceeded for {name}", "5 MB")
    failed(run(env, "cp", str(tmp_path / "mid.bin"), "volume/mid.bin"), "quota exceeded")  # one PUT
    failed(run(env, "ls", "volume/big.bin"), "does not exist")


def test_fsspec_writes_reads_lists_moves_and_removes(hub_env, unique, tmp_path):
    fs = fsspec.filesystem("hub")
    base = f"volume/fs-{unique}"
    data = os.urandom(3 * MiB + 7)
    with fsspec.open(f"hub://{base}/w.bin", "wb") as fh:
        fh.write(data[:MiB])
        fh.write(data[MiB:])
    assert fs.cat(f"{base}/w.bin") == data
    info = fs.info(f"hub://{base}/w.bin")
    assert (info["name"], info["type"], info["size"]) == (f"{base}/w.bin", "file", len(data))
    with fs.open(f"{base}/w.bin", block_size=MiB) as fh:
        fh.seek(2 * MiB + 5)
        assert fh.read(100) == data[2 * MiB + 5:2 * MiB + 105]
    assert fs.cat_file(f"{base}/w.bin", 10, 20) == data[10:20]

    with pytest.raises(RuntimeError), fs.open(f"{base}/aborted.bin", "wb") as fh:
        fh.write(b"half")
        raise RuntimeError("the writer failed")
    assert not fs.exists(f"{base}/aborted.bin")

    assert fs.ls(base, detail=False) == [f"{base}/w.bin"]  # now in the dircache
    fs.mkdir(f"{base}/d/e")
    fs.pipe(f"{base}/d/e/x.txt", b"x\n")
    assert fs.ls(base, detail=False) == [f"{base}/d", f"{base}/w.bin"]  # the write invalidated it
    make_tree(tmp_path / "up", {"p.txt": b"put\n", "q/r.txt": b"r\n"})
    fs.put(str(tmp_path / "up"), f"{base}/up", recursive=True)
    assert fs.find(base) == [f"{base}/d/e/x.txt", f"{base}/up/p.txt", f"{base}/up/q/r.txt", f"{base}/w.bin"]

    fs.mv(f"{base}/w.bin", f"{base}/d/w.bin")
    assert not fs.exists(f"{base}/w.bin") and fs.info(f"{base}/d/w.bin")["size"] == len(data)
    fs.get(f"{base}/d", str(tmp_path / "got"), recursive=True)
    assert read_tree(tmp_path / "got") == {"w.bin": data, "e/x.txt": b"x\n"}

    fs.rm(f"{base}/d", recursive=True)
    assert fs.ls(base, detail=False) == [f"{base}/up"]
    with pytest.raises(FileNotFoundError):
        fs.cat(f"{base}/d/w.bin")
    with pytest.raises(FileNotFoundError):
        fs.ls(f"{base}/nope")
    fs.rm(base, recursive=True)
    assert not fs.exists(base)


def test_pandas_writes_and_reads_parquet_on_the_volume(hub_env, unique):
    """pyarrow's fsspec handler takes info()'s mtime as a number or a datetime: the API's ISO text
    made pd.read_parquet of a volume file fail ("must be real number, not str")."""
    import time

    import pandas as pd

    df = pd.DataFrame({"step": list(range(100)), "loss": [1 / (i + 1) for i in range(100)]})
    before = time.time()
    df.to_parquet(f"hub://volume/pd-{unique}/df.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(f"hub://volume/pd-{unique}/df.parquet"), df)
    fs = fsspec.filesystem("hub")
    assert before - 5 <= fs.info(f"volume/pd-{unique}/df.parquet")["mtime"] <= time.time() + 5
    assert abs(fs.modified(f"volume/pd-{unique}/df.parquet").timestamp() - before) < 60
    fs.rm(f"volume/pd-{unique}", recursive=True)


def test_torch_saves_to_and_loads_from_the_volume(hub_env, unique):
    torch = pytest.importorskip("torch", reason="torch is in the test extras (pip install torch==2.13.0)")
    fs = fsspec.filesystem("hub")
    state = {"w": torch.arange(5 * 2**20, dtype=torch.float32).reshape(1024, -1), "b": torch.ones(7)}
    path = f"hub://volume/torch-{unique}/ckpt.pt"
    with fsspec.open(path, "wb") as fh:
        torch.save(state, fh)
    with fsspec.open(path, "rb") as fh:
        loaded = torch.load(fh)
    assert loaded.keys() == state.keys() and all(torch.equal(loaded[k], state[k]) for k in state)
    assert fs.info(path)["size"] > 20 * MiB  # 20 MiB of weights: an upload session of 8 MiB parts
    fs.rm(f"volume/torch-{unique}", recursive=True)


def test_an_interrupted_upload_sends_only_the_missing_parts_when_run_again(hub_env, alice, unique, tmp_path,
                                                                           monkeypatch):
    from storage.client import HubClient, TransportError
    from storage.fs import volume
    from storage.transfer.engine import Stats

    client = HubClient(hub_env.url, alice)
    data = os.urandom(20 * MiB)  # 3 parts of 8 MiB
    (tmp_path / "big.bin").write_bytes(data)
    real_put = volume._put

    def put_then_fail(ctx, url, path, start, length, *headers):  # (checked parts send their sha256 header)
        if start > 0:
            raise TransportError("the network went away", code="ConnectionError")
        return real_put(ctx, url, path, start, length, *headers)

    monkeypatch.setattr(volume, "_put", put_then_fail)
    with pytest.raises(TransportError):
        volume.upload(client, tmp_path / "big.bin", f"resume-{unique}/big.bin", workers=1)
    monkeypatch.setattr(volume, "_put", real_put)
    stats = Stats()
    entry = volume.upload(client, tmp_path / "big.bin", f"resume-{unique}/big.bin", stats=stats)
    assert stats.bytes_up == len(data) - 8 * MiB
    assert entry["size"] == len(data)
    fs = fsspec.filesystem("hub")
    assert fs.cat(f"volume/resume-{unique}/big.bin") == data
    fs.rm(f"volume/resume-{unique}", recursive=True)


def test_fsspec_copies_by_hash_and_keeps_the_rules_of_a_local_disk(hub_env, alice, unique, tmp_path):
    from storage.client import HubClient
    from storage.transfer.push import push
    from tests.support.hub_cli import watch_requests

    files = make_tree(tmp_path / "src", {"w/big.bin": os.urandom(17 * MiB), "w/a.txt": b"a\n", "w/b.txt": b"b\n"})
    push(HubClient(hub_env.url, alice), tmp_path / "src", "model", f"alice/fsrules-{unique}", progress=False)
    fs = fsspec.filesystem("hub", skip_instance_cache=True)
    base = f"volume/fsrules-{unique}"

    # Repo to volume and volume to volume: only (path, size, sha256) go to the hub.
    with pytest.MonkeyPatch.context() as mp:
        seen = watch_requests(mp)
        fs.copy(f"hub://models/alice/fsrules-{unique}/w", f"{base}/m", recursive=True)
        fs.cp_file(f"{base}/m/big.bin", f"{base}/c/big.bin")
    assert sum(n for _, _, n in seen) < 64 * 1024
    assert fs.cat(f"{base}/c/big.bin") == files["w/big.bin"] and fs.cat(f"{base}/m/a.txt") == b"a\n"

    with pytest.raises(FileExistsError):
        fs.mkdir(f"{base}/m")
    fs.makedirs(f"{base}/m", exist_ok=True)
    with pytest.raises(NotADirectoryError):
        fs.rmdir(f"{base}/c/big.bin")
    with pytest.raises(FileExistsError):
        fs.open(f"{base}/c/big.bin", "xb")
    with pytest.raises(FileExistsError):  # refused by the hub itself (If-None-Match), not by a check before
        fs.put_file(str(tmp_path / "src" / "w" / "a.txt"), f"{base}/c/big.bin", mode="create")
    assert fs.info(f"{base}/c/big.bin")["size"] == 17 * MiB

    fs.mv(f"{base}/c/big.bin", f"{base}/m")  # into an existing directory, as mv does
    fs.mv([f"{base}/m/a.txt", f"{base}/m/b.txt"], f"{base}/txt/")
    assert fs.find(base) == [f"{base}/m/big.bin", f"{base}/txt/a.txt", f"{base}/txt/b.txt"]
    fs.get([f"{base}/txt/a.txt", f"{base}/txt/a.txt"], [str(tmp_path / "x"), str(tmp_path / "y")])
    assert (tmp_path / "x").read_bytes() == (tmp_path / "y").read_bytes() == b"a\n"
    fs.rm(f"{base}/txt/*.txt")
    assert fs.ls(f"{base}/txt") == [] and fs.isdir(f"{base}/c")
    fs.rm(base, recursive=True)
