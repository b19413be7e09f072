"""The `hub://` fsspec filesystem against live hubs: what pandas, pyarrow and plain fsspec code see.

Data is published with the client library (storage.transfer.push), then read through fsspec only — found
through the `fsspec.specs` entry point, configured by HUB_ENDPOINT / HUB_TOKEN like the CLI.
"""
from __future__ import annotations

import hashlib
import io
import os

import fsspec
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from storage.client import HubClient
from storage.transfer.push import push
from tests.support.files import make_tree, read_tree

MiB = 2**20


@pytest.fixture
def hub_env(hub, alice, monkeypatch, tmp_path):
    for var in ("HF_ENDPOINT", "HF_TOKEN", "HUB_ENDPOINT", "HUB_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HUB_ENDPOINT", hub.url)
    monkeypatch.setenv("HUB_TOKEN", alice)
    monkeypatch.setenv("HUB_CONFIG_DIR", str(tmp_path / "hub-config"))
    return hub


def publish(hub, token: str, repo_type: str, repo_id: str, files: dict[str, bytes], tmp_path, **kw) -> str:
    src = tmp_path / f"src-{hashlib.sha1(repo_id.encode()).hexdigest()[:6]}"
    if src.exists():
        import shutil

        shutil.rmtree(src)
    make_tree(src, files)
    return push(HubClient(hub.url, token), src, repo_type, repo_id, progress=False, **kw).commit


@pytest.fixture
def dataset(hub_env, alice, unique, tmp_path):
    """A private dataset with a CSV, a parquet file, a large binary and nested folders."""
    df = pd.DataFrame({"id": range(5000), "label": [f"item {i}" for i in range(5000)],
                       "score": [i / 7 for i in range(5000)]})
    csv = df.to_csv(index=False).encode()
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(df), buf, row_group_size=1000)
    files = {"data/train.csv": csv, "data/train.parquet": buf.getvalue(), "blob/big.bin": os.urandom(12 * MiB),
             "blob/deep/x.txt": b"x\n", "README.md": b"# iris\n"}
    repo_id = f"alice/fsds-{unique}"
    commit = publish(hub_env, alice, "dataset", repo_id, files, tmp_path, private=True)
    return repo_id, commit, files, df


def test_pandas_and_pyarrow_read_through_the_hub_protocol(dataset):
    repo_id, _commit, files, df = dataset
    got = pd.read_csv(f"hub://datasets/{repo_id}/data/train.csv")
    pd.testing.assert_frame_equal(got, df)
    fs = fsspec.filesystem("hub")
    table = pq.read_table(f"datasets/{repo_id}/data/train.parquet", filesystem=fs)
    assert table.num_rows == 5000 and table.column("label")[4999].as_py() == "item 4999"
    with fsspec.open(f"hub://datasets/{repo_id}/data/train.parquet") as fh:
        assert pq.read_table(fh, columns=["score"]).column("score").to_pylist() == df["score"].tolist()
    pd.testing.assert_frame_equal(pd.read_parquet(f"hub://datasets/{repo_id}/data/train.parquet"), df)


def test_it_lists_finds_and_reads_ranges(dataset, tmp_path):
    repo_id, commit, files, _ = dataset
    fs = fsspec.filesystem("hub")
    root = f"datasets/{repo_id}"
    assert fs.ls(f"hub://{root}", detail=False) == [f"{root}/.gitattributes", f"{root}/README.md", f"{root}/blob",
                                                      f"{root}/data"]
    info = fs.info(f"{root}/blob/big.bin")
    assert (info["type"], info["size"]) == ("file", 12 * MiB)
    assert fs.info(f"{root}/blob")["type"] == "directory"
    assert fs.isdir(root) and fs.isfile(f"{root}/README.md") and not fs.exists(f"{root}/nope")
    assert fs.find(f"{root}/blob") == [f"{root}/blob/big.bin", f"{root}/blob/deep/x.txt"]
    assert fs.find(f"{root}/blob", withdirs=True) == [f"{root}/blob", f"{root}/blob/big.bin", f"{root}/blob/deep",
                                                        f"{root}/blob/deep/x.txt"]
    assert fs.glob(f"hub://{root}/**/*.csv") == [f"{root}/data/train.csv"]
    assert fs.glob(f"{root}@{commit}/data/*") == [f"{root}@{commit}/data/train.csv",
                                                   f"{root}@{commit}/data/train.parquet"]

    big = files["blob/big.bin"]
    assert fs.cat_file(f"{root}/blob/big.bin", 5 * MiB, 5 * MiB + 10) == big[5 * MiB:5 * MiB + 10]
    assert fs.cat_file(f"{root}/blob/big.bin", -7) == big[-7:]
    assert fs.cat(f"{root}/README.md") == b"# iris\n"

    # Reads inside one block cost one request; a jump to another block, one more.
    requests = []
    real = fs.client.request

    def counting(method, url, **kw):
        requests.append(kw.get("headers", {}).get("Range"))
        return real(method, url, **kw)

    fs.client.request = counting
    try:
        with fs.open(f"{root}/blob/big.bin", block_size=MiB) as fh:
            for offset in range(0, 4000, 100):
                fh.seek(offset)
                assert fh.read(50) == big[offset:offset + 50]
            fh.seek(9 * MiB + 3)
            assert fh.read(1000) == big[9 * MiB + 3:9 * MiB + 1003]
    finally:
        fs.client.request = real
    assert requests == [f"bytes=0-{MiB - 1}", f"bytes={9 * MiB}-{10 * MiB - 1}"]

    fs.get(f"hub://{root}", str(tmp_path / "copy"), recursive=True)
    got = read_tree(tmp_path / "copy")
    got.pop(".gitattributes")
    assert got == files
    fs.get_file(f"{root}/data/train.csv", str(tmp_path / "one.csv"))
    assert (tmp_path / "one.csv").read_bytes() == files["data/train.csv"]


def test_a_revision_is_pinned_for_the_life_of_the_filesystem(hub_env, alice, unique, tmp_path):
    repo_id = f"alice/pin-{unique}"
    first = publish(hub_env, alice, "model", repo_id, {"v.txt": b"one\n"}, tmp_path)
    fs = fsspec.filesystem("hub", skip_instance_cache=True)
    assert fs.cat(f"models/{repo_id}/v.txt") == b"one\n"
    assert fs.resolve_path(f"models/{repo_id}/v.txt").commit == first

    publish(hub_env, alice, "model", repo_id, {"v.txt": b"two\n", "new.txt": b"new\n"}, tmp_path)
    # The branch moved; this filesystem still reads the commit it saw first.
    assert fs.cat(f"models/{repo_id}/v.txt") == b"one\n"
    assert not fs.exists(f"models/{repo_id}/new.txt")
    with fs.open(f"hub://models/{repo_id}/v.txt") as fh:
        assert fh.read() == b"one\n"
    fresh = fsspec.filesystem("hub", skip_instance_cache=True)
    assert fresh.cat(f"models/{repo_id}/v.txt") == b"two\n"
    fs.invalidate_cache()
    assert fs.cat(f"models/{repo_id}/v.txt") == b"two\n"
    assert fs.cat(f"models/{repo_id}@{first}/v.txt") == b"one\n"


def test_it_maps_failures_to_python_errors(dataset, hub_env, unique):
    repo_id, _, _, _ = dataset
    fs = fsspec.filesystem("hub")
    with pytest.raises(FileNotFoundError):
        fs.cat(f"datasets/{repo_id}/nope.txt")
    with pytest.raises(FileNotFoundError):
        fs.ls(f"datasets/alice/missing-{unique}")
    with pytest.raises(FileNotFoundError):
        fs.cat(f"datasets/{repo_id}@no-such-branch/README.md")
    with pytest.raises(NotImplementedError, match="read-only"):
        fs.open(f"datasets/{repo_id}/new.txt", "wb")
    with pytest.raises(FileNotFoundError):
        fs.ls(f"volume/missing-{unique}")
    anonymous = fsspec.filesystem("hub", endpoint=hub_env.url, token=False)
    with pytest.raises(FileNotFoundError):  # private: indistinguishable from missing
        anonymous.cat(f"datasets/{repo_id}/README.md")


def test_a_volume_file_read_in_blocks_never_mixes_two_versions(hub_env, unique):
    """Each block is fetched with If-Match on the version opened: when the file is replaced between
    two blocks, the reader gets ESTALE, not the first half of one file and the rest of another."""
    import errno

    fs = fsspec.filesystem("hub", skip_instance_cache=True)
    path = f"hub://volume/stale-{unique}/f.bin"
    old, new = os.urandom(3 * MiB), os.urandom(3 * MiB)
    fs.pipe_file(path, old)
    with fs.open(path, "rb", block_size=MiB, cache_type="none") as f:
        assert f.read(MiB) == old[:MiB]
        fsspec.filesystem("hub", skip_instance_cache=True).pipe_file(path, new)
        with pytest.raises(OSError) as err:
            f.read(MiB)
        assert err.value.errno == errno.ESTALE and "open it again" in str(err.value)
    with fs.open(path, "rb", block_size=MiB) as f:  # a new open reads the new version
        assert f.read() == new
