"""Catalog entries fetched on first use: the stock client (hf_hub_download) reading a file of a
catalog entry that was never mirrored, against the same client reading it straight from the upstream,
and — once it is stored — against a file uploaded to the hub the usual way, in one run:

* first read through the hub (it fetches from the upstream and streams while it stores) / direct
  download from the upstream (target ≥ 0.8: the hub costs at most a fifth more);
* second read through the hub (now a stored blob: a presigned redirect to the store) / read of a
  blob uploaded to the hub (target ≈ 1).

The upstream is a second hub (embedded: its files on local disk, as a CDN would serve them); the hub
under test runs on PostgreSQL and Ceph RGW. Each round publishes a new file of random bytes
upstream, so every first read is a real first read; the order of the two first reads alternates
between rounds. Each download runs in a process of its own configured by the environment only, the
clock around the call, its cache in memory (/dev/shm: on this one machine every party shares one disk,
and the client's writes would compete with the hub's own write of the file, which a deployment does on
another machine), after a `sync`; every file read is checked against the sha256 published.

    .venv/bin/python bench/ondemand.py [--size-mib 1024] [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.result import report  # noqa: E402
from bench.xet import client, new_file  # noqa: E402
from tests.support.servers import base_env, fresh_database, launch_hub, scratch_bucket  # noqa: E402

MiB = 2**20
MODEL = "Qwen/Qwen2-0.5B-Instruct"
RECHECK = 1

DOWNLOAD = """
import hashlib, os, time
from huggingface_hub import hf_hub_download
t0 = time.perf_counter()
path = hf_hub_download(os.environ["T_REPO"], os.environ["T_FILE"])
print("SECONDS", time.perf_counter() - t0)
h = hashlib.sha256()
with open(path, "rb") as fh:
    while block := fh.read(8 << 20):
        h.update(block)
print("SHA256", h.hexdigest())
"""


def download(endpoint: str, repo: str, name: str, cache: Path, want: str) -> float:
    os.sync()  # every download starts with no dirty pages left by the step before (one disk serves all here)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUB_", "DJANGO_"))}
    env |= {"HF_ENDPOINT": endpoint, "HF_HUB_CACHE": str(cache), "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HUB_DISABLE_PROGRESS_BARS": "1", "T_REPO": repo, "T_FILE": name}
    out = client(DOWNLOAD, env)
    if out["SHA256"] != want:
        raise RuntimeError(f"{endpoint}: {name} came back with sha256 {out['SHA256']}, not {want}")
    shutil.rmtree(cache, ignore_errors=True)
    return out["SECONDS"]


def wait_stored(db_url: str, sha256: str, limit: float = 600) -> None:
    import psycopg

    deadline = time.monotonic() + limit
    with psycopg.connect(db_url, autocommit=True) as db:
        while (db.execute("SELECT remote FROM repos_blob WHERE sha256 = %s", [sha256]).fetchone() or [True])[0]:
            if time.monotonic() > deadline:
                raise RuntimeError("the hub did not store the fetched file")
            time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from huggingface_hub import HfApi, constants

    constants.HF_HUB_DISABLE_XET = True  # uploads here go through LFS: downloads are plain HTTP everywhere
    subprocess.run(["bash", str(ROOT / "tests/s3/rgw.sh"), "start"], check=True, stdout=subprocess.DEVNULL)
    env_lines = subprocess.run(["bash", str(ROOT / "tests/s3/rgw.sh"), "env"], check=True, capture_output=True,
                               text=True).stdout.split()
    rgw = dict(line.split("=", 1) for line in env_lines if "=" in line)
    suffix = uuid.uuid4().hex[:8]
    tmp = Path(tempfile.mkdtemp(prefix="bench-ondemand-"))
    size = args.size_mib * MiB
    try:
        (tmp / "up").mkdir()
        with launch_hub("upstream", base_env() | {"HUB_DATA_DIR": str(tmp / "up")}, tmp / "up") as up, \
                fresh_database(f"bench_od_{suffix}") as db, scratch_bucket(rgw, f"bench-od-{suffix}") as bucket:
            up.manage("hub_init", "--admin", "ops")
            up.manage("seed_catalog", "--no-samples")
            ops = up.token("ops")
            (tmp / "down").mkdir()
            env = base_env() | rgw | {"HUB_DATA_DIR": str(tmp / "down"), "DATABASE_URL": db,
                                      "HUB_STORAGE_URL": f"s3://{bucket}", "HUB_ONDEMAND": "1",
                                      "HUB_MIRROR_UPSTREAM": up.url, "HUB_ONDEMAND_RECHECK": str(RECHECK)}
            with launch_hub("bench", env, tmp / "down") as hub:
                hub.manage("seed_catalog", "--no-samples")
                token = hub.token("bench")
                hub.manage("hub_token", "bench", "--quota", "1PB")
                mine = HfApi(endpoint=hub.url, token=token)
                mine.create_repo("bench/stored", exist_ok=True)
                theirs = HfApi(endpoint=up.url, token=ops)
                first_hub, first_direct, second_hub, stored = [], [], [], []
                # The clients write to memory: on this one machine the upstream, the hub, its store and
                # the client share a disk, and the client's 1 GiB would compete with the hub's own write
                # of the file (which a real deployment does on another machine than the client's).
                cache = Path(tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)) / "c"
                for r in range(args.rounds):
                    path = tmp / "file.bin"
                    want = new_file(path, size)
                    name = f"shards/part-{r}-{uuid.uuid4().hex[:6]}.bin"
                    theirs.upload_file(path_or_fileobj=str(path), path_in_repo=name, repo_id=MODEL)
                    path.unlink()
                    time.sleep(RECHECK + 0.5)
                    order = [("direct", up.url), ("hub", hub.url)]
                    for how, endpoint in (order if r % 2 == 0 else order[::-1]):
                        t = download(endpoint, MODEL, name, cache, want)
                        (first_direct if how == "direct" else first_hub).append(t)
                    wait_stored(db, want)
                    # The fetched file against a file of the same size a user uploaded to the hub.
                    other = tmp / "other.bin"
                    other_sha = new_file(other, size)
                    mine.upload_file(path_or_fileobj=str(other), path_in_repo=f"{r}-other.bin", repo_id="bench/stored")
                    other.unlink()
                    for how in (("stored", "fetched") if r % 2 == 0 else ("fetched", "stored")):
                        if how == "stored":
                            stored.append(download(hub.url, "bench/stored", f"{r}-other.bin", cache, other_sha))
                        else:
                            second_hub.append(download(hub.url, MODEL, name, cache, want))
                    print(f"round {r + 1}: first read hub {first_hub[-1]:.2f} s, direct {first_direct[-1]:.2f} s; "
                          f"second read {second_hub[-1]:.2f} s, stored blob {stored[-1]:.2f} s", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    med = statistics.median
    report("ondemand", f"{args.size_mib} MiB first read: through the hub (fetched on first use) / direct from upstream",
           ratio=med(first_direct) / med(first_hub), target=0.8,
           detail=f"hub {med(first_hub):.2f} s, direct {med(first_direct):.2f} s (median of {args.rounds})")
    report("ondemand", f"{args.size_mib} MiB second read: the fetched file / a blob uploaded to the hub",
           ratio=med(stored) / med(second_hub), target=0.9,
           detail=f"fetched {med(second_hub):.2f} s, uploaded {med(stored):.2f} s (median of {args.rounds})")


if __name__ == "__main__":
    main()
