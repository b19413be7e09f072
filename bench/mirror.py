"""Mirror throughput (MB/s, files/s) against `hub pull` of the same repo from the same hub.

Starts an upstream hub on PostgreSQL + Ceph RGW (tests/s3/rgw.sh) and publishes one dataset with
`hub push`: --files files (default 2,000) totalling --size (default 1 GiB): all but ten are small
(regular, hashed by the mirror after download), ten share half the bytes (LFS, sha256 listed).
Then, alternating, medians of --runs:
  * hub pull: the CLI in a fresh process into a fresh cache dir (manifest, parallel GETs on presigned
    URLs, sha256 of every file);
  * mirror: `manage.py mirror` in a fresh process into a fresh target hub (its own database and
    bucket, no broker: the task runs in-process) — listing over the HF protocol, parallel downloads
    to partial files, verification, upload into the target's store, one commit;
  * re-mirror: the same command again on that target: everything is found stored, nothing moves;
  * boto3 copy (context: the store's own limit): the same blobs read from the upstream's bucket and
    written into a fresh bucket of the same RGW with get_object + upload_fileobj from 8 threads,
    nothing hashed or recorded. A mirror, unlike a pull, writes every byte into the store.

    .venv/bin/python bench/mirror.py [--files 2000] [--size 1GiB] [--runs 2] [--quick]
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import keys_of, start_hub  # noqa: E402
from bench.pull_vs_boto3 import hub_pull  # noqa: E402
from bench.result import report  # noqa: E402
from storage.client import HubClient  # noqa: E402
from storage.sizes import parse_size  # noqa: E402
from storage.transfer.push import push  # noqa: E402

BIG = 10


def make_repo(src: Path, files: int, size: int) -> int:
    """files-BIG small files of 256 KiB (fewer bytes if size is small) and BIG files sharing the rest."""
    small = min(256 * 1024, size // 2 // max(1, files - BIG))
    big = (size - small * (files - BIG)) // BIG
    for i in range(files - BIG):
        d = src / f"shard-{i // 500:02d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{i:05d}.bin").write_bytes(os.urandom(small))
    for i in range(BIG):
        with open(src / f"weights-{i:02d}.safetensors", "wb") as fh:
            left = big
            while left:
                n = min(left, 16 << 20)
                fh.write(os.urandom(n))
                left -= n
    return small * (files - BIG) + big * BIG


def mirror(target, upstream, token: str, repo_id: str) -> tuple[float, str]:
    t = time.perf_counter()
    out = target.manage("mirror", "bench/mirror-dst", "--type", "dataset", "--source", upstream.url,
                        "--source-repo", repo_id, "--token", token).stdout
    return time.perf_counter() - t, out.strip().splitlines()[-1]


def boto3_copy(rgw: dict, src_bucket: str, keys: list[tuple[str, int]]) -> float:
    import uuid
    from concurrent.futures import ThreadPoolExecutor

    import boto3
    from botocore.config import Config

    from tests.support.servers import drop_bucket

    s3 = boto3.client("s3", endpoint_url=rgw["AWS_ENDPOINT_URL"], aws_access_key_id=rgw["AWS_ACCESS_KEY_ID"],
                      aws_secret_access_key=rgw["AWS_SECRET_ACCESS_KEY"], region_name="us-east-1",
                      config=Config(max_pool_connections=32, s3={"addressing_style": "path"}))
    dst = f"mirror-bench-copy-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=dst)

    def one(key: str) -> None:
        body = s3.get_object(Bucket=src_bucket, Key=key)["Body"]
        s3.upload_fileobj(body, dst, key)

    try:
        t = time.perf_counter()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(one, [k for k, _ in keys]))
        return time.perf_counter() - t
    finally:
        drop_bucket(rgw, dst)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--size", default="1GiB")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="200 files, 128 MiB, one run")
    args = ap.parse_args()
    if args.quick:
        args.files, args.size, args.runs = 200, "128MiB", 1
    tmp = Path(tempfile.mkdtemp(prefix="mirror-bench-"))
    (tmp / "up").mkdir()
    upstream, rgw, bucket, stop = start_hub(tmp / "up")
    stops = [stop]
    try:
        token = upstream.token("bench")
        src = tmp / "src"
        total = make_repo(src, args.files, parse_size(args.size))
        t = time.perf_counter()
        push(HubClient(upstream.url, token), src, "dataset", "bench/mirror-src", progress=False)
        print(f"published {args.files} files, {total / 2**20:.0f} MiB in {time.perf_counter() - t:.1f} s", flush=True)
        shutil.rmtree(src)
        keys = keys_of(HubClient(upstream.url, token), "bench/mirror-src")
        times: dict[str, list[float]] = {"hub pull": [], "mirror": [], "re-mirror": [], "boto3 copy": []}
        for run in range(args.runs):
            dest = tmp / f"pull-{run}"
            t = time.perf_counter()
            hub_pull(upstream, token, "bench/mirror-src", dest)
            times["hub pull"].append(time.perf_counter() - t)
            shutil.rmtree(dest)

            (tmp / f"target-{run}").mkdir()
            target, _, _, stop_target = start_hub(tmp / f"target-{run}")
            stops.append(stop_target)
            elapsed, line = mirror(target, upstream, token, "bench/mirror-src")
            times["mirror"].append(elapsed)
            print(f"run {run + 1}: hub pull {times['hub pull'][-1]:.1f} s, mirror {elapsed:.1f} s ({line})", flush=True)
            elapsed, line = mirror(target, upstream, token, "bench/mirror-src")
            assert re.search(r"\(\d+ already stored\).* 0 B fetched", line), line
            times["re-mirror"].append(elapsed)
            print(f"run {run + 1}: re-mirror {elapsed:.1f} s ({line})", flush=True)
            stops.remove(stop_target)
            stop_target()
            times["boto3 copy"].append(boto3_copy(rgw, bucket, keys))
            print(f"run {run + 1}: boto3 copy {times['boto3 copy'][-1]:.1f} s", flush=True)
        files = args.files + 1  # and the repo's .gitattributes
        med = {k: statistics.median(v) for k, v in times.items()}
        for k, v in med.items():
            print(f"{k}: {v:.2f} s = {total / 1e6 / v:.0f} MB/s, {files / v:.0f} files/s", flush=True)
        detail = (f"{args.files} files, {total / 2**30:.2f} GiB: mirror {med['mirror']:.1f} s "
                  f"({total / 1e6 / med['mirror']:.0f} MB/s, {files / med['mirror']:.0f} files/s), hub pull "
                  f"{med['hub pull']:.1f} s ({total / 1e6 / med['hub pull']:.0f} MB/s, "
                  f"{files / med['hub pull']:.0f} files/s), re-mirror {med['re-mirror']:.1f} s, boto3 copy "
                  f"{med['boto3 copy']:.1f} s")
        report("mirror", f"{args.files:,} files / {args.size}: mirror / hub pull", ratio=med["hub pull"] / med["mirror"],
               target=None, detail=detail)
        report("mirror", f"{args.files:,} files / {args.size}: mirror / boto3 copy", ratio=med["boto3 copy"] / med["mirror"],
               target=None, detail=detail)
    finally:
        for s in stops:
            s()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
