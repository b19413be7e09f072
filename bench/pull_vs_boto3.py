"""`hub pull` against raw boto3 reading the same objects from the same S3 store (Ceph RGW here).

Starts a hub on PostgreSQL + Ceph RGW (tests/s3/rgw.sh), publishes two repos with `hub push`:
  * many-small: N files of 64 KiB (default 2,000),
  * one-big: one file of --big (default 1 GiB),
then times, alternating, medians of --runs:
  * boto3: the blobs' keys fetched with get_object from 8 threads (small) or download_file (big,
    s3transfer's parallel ranges), written to fresh files, no verification;
  * hub pull: the CLI in a fresh process into a fresh cache dir (manifest, parallel GETs on
    presigned URLs, sha256 of every file, the huggingface_hub cache layout).

    .venv/bin/python bench/pull_vs_boto3.py --files 2000 --big 1GiB --runs 3
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import drop_page_cache, keys_of, start_hub  # noqa: E402
from bench.result import report  # noqa: E402
from storage.client import HubClient  # noqa: E402
from storage.sizes import parse_size  # noqa: E402
from storage.transfer.push import push  # noqa: E402


def boto3_small(s3, bucket: str, keys: list[tuple[str, int]], dest: Path) -> None:
    dest.mkdir()

    def one(i_key):
        i, (key, _size) = i_key
        body = s3.get_object(Bucket=bucket, Key=key)["Body"]
        with open(dest / f"{i}", "wb") as fh:
            shutil.copyfileobj(body, fh, 1 << 20)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, enumerate(keys)))


def boto3_big(s3, bucket: str, keys: list[tuple[str, int]], dest: Path) -> None:
    dest.mkdir()
    for i, (key, _size) in enumerate(keys):
        s3.download_file(bucket, key, str(dest / f"{i}"))


def hub_pull(hub, token: str, repo_id: str, dest: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUB_", "DJANGO_", "AWS_"))}
    env |= {"HUB_ENDPOINT": hub.url, "HUB_TOKEN": token, "HF_HUB_CACHE": str(dest), "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "storage.cli", "pull", f"datasets/{repo_id}", "-q"], env=env, check=True,
                   stdout=subprocess.DEVNULL)


def hf_snapshot(hub, token: str, repo_id: str, dest: Path) -> None:
    """The stock huggingface_hub client against the hub, in a fresh process like `hub pull`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUB_", "DJANGO_", "AWS_"))}
    env |= {"HF_ENDPOINT": hub.url, "HF_TOKEN": token, "HF_HUB_CACHE": str(dest), "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    code = f"from huggingface_hub import snapshot_download; snapshot_download({repo_id!r}, repo_type='dataset')"
    subprocess.run([sys.executable, "-c", code], env=env, check=True, stdout=subprocess.DEVNULL)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--big", default="1GiB")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="pull-bench-"))
    hub, rgw, bucket, stop = start_hub(tmp)
    try:
        import boto3
        from botocore.config import Config

        token = hub.token("bench")
        client = HubClient(hub.url, token)
        small_src, big_src = tmp / "small", tmp / "big"
        small_src.mkdir()
        for i in range(args.files):
            (small_src / f"{i:05d}.bin").write_bytes(os.urandom(64 * 1024))
        big_src.mkdir()
        size = parse_size(args.big)
        with open(big_src / "big.bin", "wb") as fh:
            for _ in range(size // (64 << 20)):
                fh.write(os.urandom(64 << 20))
        t = time.perf_counter()
        push(client, small_src, "dataset", "bench/many-small", progress=False)
        push(client, big_src, "dataset", "bench/one-big", progress=False)
        print(f"published in {time.perf_counter() - t:.1f} s", flush=True)
        s3 = boto3.client("s3", endpoint_url=rgw["AWS_ENDPOINT_URL"], aws_access_key_id=rgw["AWS_ACCESS_KEY_ID"],
                          aws_secret_access_key=rgw["AWS_SECRET_ACCESS_KEY"], region_name="us-east-1",
                          config=Config(max_pool_connections=16, s3={"addressing_style": "path"}))
        cases = {
            "many-small": (keys_of(client, "bench/many-small"), boto3_small),
            "one-big": (keys_of(client, "bench/one-big"), boto3_big),
        }
        for name, (keys, baseline) in cases.items():
            total = sum(s for _, s in keys)
            times: dict[str, list[float]] = {"boto3": [], "hub pull": [], "snapshot_download": []}
            for run in range(args.runs):
                for label in times:
                    dest = tmp / f"out-{name}-{label.replace(' ', '')}-{run}"
                    drop_page_cache()
                    t = time.perf_counter()
                    if label == "boto3":
                        baseline(s3, bucket, keys, dest)
                    elif label == "hub pull":
                        hub_pull(hub, token, f"bench/{name}", dest)
                    else:
                        hf_snapshot(hub, token, f"bench/{name}", dest)
                    times[label].append(time.perf_counter() - t)
                    shutil.rmtree(dest)
            b, h = statistics.median(times["boto3"]), statistics.median(times["hub pull"])
            sd = statistics.median(times["snapshot_download"])
            print(f"{name}: {len(keys)} files, {total / 2**20:.0f} MiB | boto3 {b:.2f} s ({total / 2**20 / b:.0f} "
                  f"MiB/s) | hub pull {h:.2f} s ({total / 2**20 / h:.0f} MiB/s) | snapshot_download {sd:.2f} s "
                  f"({total / 2**20 / sd:.0f} MiB/s) | hub/boto3 {b / h:.2f}x | hub/snapshot_download {sd / h:.2f}x",
                  flush=True)
            # (the sizes this run used: --files and --big change them)
            label = f"{args.files:,} × 64 KiB" if name == "many-small" else f"one {args.big} file"
            detail = f"boto3 {b:.2f} s, hub pull {h:.2f} s, snapshot_download {sd:.2f} s"
            report("pull_vs_boto3", f"{label}: hub pull / boto3", ratio=b / h, target=0.9, detail=detail)
            if name == "one-big":
                report("pull_vs_boto3", f"{label}: hub pull / snapshot_download", ratio=sd / h, target=1.5,
                       detail=detail)
    finally:
        stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
