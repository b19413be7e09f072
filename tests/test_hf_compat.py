"""The stock huggingface_hub client as users run it: configured only through environment variables,
in its own process, in today's version (2.4.0, hf_xet installed) and in an older one (0.36.2).

alice uploads and downloads, bob is another logged-in user. Every test runs on both backends and
compares the bytes that come back with those that went up.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlparse

import psutil
import pytest
import requests
from huggingface_hub.errors import RepositoryNotFoundError

from tests.support.hf_client import check_ok, client_env, result, run_client
from tests.support.servers import fresh_database, launch_hub, scratch_bucket

ROOT = Path(__file__).resolve().parent.parent
OLD_VENV = ROOT / ".venv-hf036"
OLD_VERSION = "0.36.2"
MiB = 2**20
GiB = 2**30

UPLOAD_FOLDER = """
import os
from huggingface_hub import HfApi

api = HfApi()  # HF_ENDPOINT and HF_TOKEN only
repo, kind = os.environ["T_REPO"], os.environ["T_TYPE"]
print("URL", api.create_repo(repo, repo_type=kind, private=os.environ.get("T_PRIVATE") == "1", exist_ok=True))
info = api.upload_folder(folder_path=os.environ["T_FOLDER"], repo_id=repo, repo_type=kind,
                         commit_message="upload from the environment")
print("COMMIT", info.oid)
"""

DOWNLOAD = """
import hashlib, json, os
from pathlib import Path
from huggingface_hub import hf_hub_download, snapshot_download

def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()

repo, kind = os.environ["T_REPO"], os.environ["T_TYPE"]
one = hf_hub_download(repo, os.environ["T_FILE"], repo_type=kind)
root = Path(snapshot_download(repo, repo_type=kind))
files = {p.relative_to(root).as_posix(): digest(p) for p in root.rglob("*") if p.is_file()}
print("RESULT " + json.dumps({"one": digest(one), "files": files}))
"""

UPLOAD_FILE = """
import os
from huggingface_hub import HfApi

HfApi().upload_file(path_or_fileobj=os.environ["T_PATH"], path_in_repo=os.path.basename(os.environ["T_PATH"]),
                    repo_id=os.environ["T_REPO"], commit_message="a huge file")
print("UPLOADED")
"""


# --- helpers ----------------------------------------------------------------------------------------


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(8 * MiB), b""):
            h.update(block)
    return h.hexdigest()


def make_folder(root: Path, big_size: int = 12_000_000) -> dict[str, str]:
    """A folder with one file above the LFS threshold and a few small nested ones: {path: sha256}."""
    files = {
        "weights/model.bin": os.urandom(big_size),
        "config.json": b'{"layers": 2}\n',
        "docs/deep/er/notes.txt": b"notes\n" * 100,
        "tokenizer.txt": os.urandom(3000),
    }
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return {rel: hashlib.sha256(data).hexdigest() for rel, data in files.items()}


def assert_same_files(downloaded: dict[str, str], expected: dict[str, str]) -> None:
    assert set(downloaded) == set(expected) | {".gitattributes"}
    for rel, digest in expected.items():
        assert downloaded[rel] == digest, rel


@pytest.fixture(scope="session")
def old_client() -> str:
    """The python of a virtualenv with huggingface_hub 0.36.2, created once and reused."""
    python = OLD_VENV / "bin" / "python"
    probe = [str(python), "-c", "import huggingface_hub; print(huggingface_hub.__version__)"]
    if (
        python.exists()
        and subprocess.run(probe, capture_output=True, text=True).stdout.strip() == OLD_VERSION
    ):
        return str(python)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(OLD_VENV)], check=True, timeout=300)
    pip = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", f"huggingface_hub=={OLD_VERSION}"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert pip.returncode == 0, pip.stderr
    assert subprocess.run(probe, capture_output=True, text=True).stdout.strip() == OLD_VERSION
    return str(python)


# --- configured by the environment --------------------------------------------------------------------


def test_it_uploads_a_folder_with_xet_disabled_and_downloads_with_defaults(hub, alice, unique, tmp_path):
    repo_id = f"alice/env-{unique}"
    expected = make_folder(tmp_path / "folder")
    up = run_client(
        UPLOAD_FOLDER,
        client_env(
            hub,
            alice,
            tmp_path / "home-up",
            HF_HUB_DISABLE_XET="1",
            T_REPO=repo_id,
            T_TYPE="model",
            T_FOLDER=str(tmp_path / "folder"),
        ),
    )
    out = check_ok(up)
    assert f"URL {hub.url}/{repo_id}" in out
    # The 12 MB file went through LFS, under its real sha256.
    siblings = {s.rfilename: s for s in hub.api(alice).model_info(repo_id, files_metadata=True).siblings}
    assert siblings["weights/model.bin"].lfs.sha256 == expected["weights/model.bin"]
    assert siblings["config.json"].lfs is None

    # Downloads with default settings (hf_xet installed, nothing disabled) in a fresh cache.
    down = run_client(
        DOWNLOAD,
        client_env(
            hub, alice, tmp_path / "home-down", T_REPO=repo_id, T_TYPE="model", T_FILE="weights/model.bin"
        ),
    )
    got = result(check_ok(down))
    assert got["one"] == expected["weights/model.bin"]
    assert_same_files(got["files"], expected)


# --- an older client ----------------------------------------------------------------------------------


def test_it_serves_huggingface_hub_0_36(hub, alice, unique, tmp_path, old_client):
    repo_id = f"alice/old-{unique}"
    expected = make_folder(tmp_path / "folder")
    version = run_client("import huggingface_hub; print(huggingface_hub.__version__)", {}, python=old_client)
    assert check_ok(version).strip() == OLD_VERSION
    # no HF_HUB_DISABLE_XET: 0.36 offers xet in the LFS batch and the hub answers `basic`
    env = client_env(
        hub,
        alice,
        tmp_path / "home",
        T_REPO=repo_id,
        T_TYPE="dataset",
        T_PRIVATE="1",
        T_FOLDER=str(tmp_path / "folder"),
        T_FILE="weights/model.bin",
    )
    out = check_ok(run_client(UPLOAD_FOLDER, env, python=old_client))
    assert f"URL {hub.url}/datasets/{repo_id}" in out

    info = hub.api(alice).dataset_info(repo_id, files_metadata=True)
    assert info.private is True  # 0.36 sends "private": true, not "visibility"
    siblings = {s.rfilename: s for s in info.siblings}
    assert siblings["weights/model.bin"].lfs.sha256 == expected["weights/model.bin"]
    with pytest.raises(RepositoryNotFoundError):
        hub.api(hub.cached_token("bob")).dataset_info(repo_id)

    got = result(check_ok(run_client(DOWNLOAD, env, python=old_client)))
    assert got["one"] == expected["weights/model.bin"]
    assert_same_files(got["files"], expected)

    # files today's client sent through Xet (default settings): 0.36 reads them as well
    xet_repo = f"alice/old-reads-xet-{unique}"
    check_ok(run_client(UPLOAD_FOLDER, client_env(hub, alice, tmp_path / "home-new", T_REPO=xet_repo, T_TYPE="model",
                                                  T_FOLDER=str(tmp_path / "folder"))))
    tree = requests.get(f"{hub.url}/api/models/{xet_repo}/tree/main/weights", timeout=30,
                        headers={"Authorization": f"Bearer {alice}"}).json()
    assert "xetHash" in tree[0]
    got = result(check_ok(run_client(DOWNLOAD, client_env(hub, alice, tmp_path / "home-old2", T_REPO=xet_repo,
                                                          T_TYPE="model", T_FILE="weights/model.bin"),
                                     python=old_client)))
    assert got["one"] == expected["weights/model.bin"]
    assert_same_files(got["files"], expected)


# --- memory -------------------------------------------------------------------------------------------


class RssSampler(threading.Thread):
    """Samples the summed RSS of the hub's processes every 50 ms."""

    def __init__(self, hub) -> None:
        super().__init__(daemon=True)
        self.hub = hub
        self.stopping = threading.Event()
        self.samples: list[int] = []

    def total_rss(self) -> int:
        total = 0
        for pid in self.hub.worker_pids():
            try:
                total += psutil.Process(pid).memory_info().rss
            except psutil.NoSuchProcess:
                pass
        return total

    def run(self) -> None:
        while not self.stopping.is_set():
            self.samples.append(self.total_rss())
            time.sleep(0.05)

    def stop(self) -> int:
        """Stops sampling; returns the peak."""
        self.stopping.set()
        self.join()
        return max(self.samples)


def write_incompressible(path: Path, size: int) -> str:
    """`size` bytes of a random 1 MiB block, each copy stamped with its index; returns the sha256."""
    block = bytearray(os.urandom(MiB))
    h = hashlib.sha256()
    with open(path, "wb") as fh:
        for i in range(size // MiB):
            block[:8] = i.to_bytes(8, "big")
            fh.write(block)
            h.update(block)
    return h.hexdigest()


def delete_blob(hub, oid: str) -> None:
    """Gives the space of a huge test object back (the OSD of the test RGW is small)."""
    key = f"blobs/{oid[:2]}/{oid[2:4]}/{oid}"
    url = hub.env.get("HUB_STORAGE_URL")
    if not url:
        (hub.data_dir / "objects" / key).unlink(missing_ok=True)
        return
    import boto3

    s3 = boto3.client(
        "s3",
        endpoint_url=hub.env["AWS_ENDPOINT_URL"],
        region_name="us-east-1",
        aws_access_key_id=hub.env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=hub.env["AWS_SECRET_ACCESS_KEY"],
    )
    bucket, prefix = urlparse(url).netloc, urlparse(url).path.strip("/")
    full = f"{prefix}/{key}" if prefix else key
    s3.delete_object(Bucket=bucket, Key=full)
    for upload in s3.list_multipart_uploads(Bucket=bucket, Prefix=full).get("Uploads", []):
        s3.abort_multipart_upload(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])


@pytest.fixture
def own_hub(hub, tmp_path_factory, request):
    """A hub of the test's own on the same backend: fresh server processes, so that what the
    measurement sees is this transfer, not an earlier test's background work or heap."""
    data = tmp_path_factory.mktemp(f"own-{hub.name}")
    env = dict(hub.env) | {"HUB_DATA_DIR": str(data)}
    with contextlib.ExitStack() as stack:
        if hub.name != "embedded":
            suffix = uuid.uuid4().hex[:10]
            bucket = stack.enter_context(scratch_bucket(request.getfixturevalue("rgw_env"), f"hub-mem-{suffix}"))
            env |= {"DATABASE_URL": stack.enter_context(fresh_database(f"hub_mem_{suffix}")),
                    "HUB_STORAGE_URL": f"s3://{bucket}"}
        yield stack.enter_context(launch_hub(hub.name, env, data))


@pytest.mark.slow
def test_it_moves_2_gib_with_bounded_server_memory(own_hub, unique, tmp_path):
    import io

    from huggingface_hub import CommitOperationAdd

    hub = own_hub
    alice = hub.token("alice")
    api = hub.api(alice)
    repo_id = f"alice/huge-{unique}"
    api.create_repo(repo_id)
    source = tmp_path / "huge.bin"
    # 2 GiB (sizes past 2**31 - 1) where the bytes flow through the hub; on S3 they flow presigned
    # and the hub only reads them back to verify: 1 GiB shows the same bound there in half the time
    size = 2 * GiB if hub.name == "embedded" else GiB
    expected = write_incompressible(source, size)
    cache = tmp_path / "cache"
    try:
        # Warm both workers up on the same paths (imports, connection pools) before measuring.
        for i in range(4):
            data = os.urandom(17 * MiB)
            api.create_commit(
                repo_id,
                commit_message=f"warm-up {i}",
                operations=[CommitOperationAdd(f"warm-{i}.bin", io.BytesIO(data))],
            )
            assert (
                Path(api.hf_hub_download(repo_id, f"warm-{i}.bin", cache_dir=str(cache))).read_bytes() == data
            )

        sampler = RssSampler(hub)
        baseline = sampler.total_rss()
        sampler.start()
        started = time.monotonic()
        up = run_client(
            UPLOAD_FILE,
            client_env(
                hub, alice, tmp_path / "home", HF_HUB_DISABLE_XET="1", T_REPO=repo_id, T_PATH=str(source)
            ),
            timeout=600,
        )
        check_ok(up)
        uploaded = time.monotonic()
        path = api.hf_hub_download(repo_id, "huge.bin", cache_dir=str(cache))
        downloaded = time.monotonic()
        peak = sampler.stop()
        assert os.path.getsize(path) == size
        assert sha256_file(Path(path)) == expected
        tree = {e.path: e for e in api.list_repo_tree(repo_id)}
        assert tree["huge.bin"].lfs.sha256 == expected

        growth = peak - baseline
        print(
            f"{hub.name}: upload {uploaded - started:.1f}s, download {downloaded - uploaded:.1f}s, "
            f"server RSS {baseline / MiB:.0f} MiB -> peak {peak / MiB:.0f} MiB (+{growth / MiB:.0f} MiB)"
        )
        assert growth < 150 * MiB, f"server RSS grew by {growth / MiB:.0f} MiB moving a {size / GiB:.0f} GiB file"
    finally:
        source.unlink(missing_ok=True)
        shutil.rmtree(cache, ignore_errors=True)
        api.delete_repo(repo_id, missing_ok=True)
        delete_blob(hub, expected)
