"""Volume upload: 1 GiB into a user's volume through the hub's multipart API, against the same bytes
uploaded with raw boto3 multipart (its default TransferManager) to the same Ceph RGW, in one run.

The hub side does everything a client must: hash the file (sha256), start a session (quota is
reserved), PUT the parts in parallel straight to the presigned RGW URLs, and complete (the hub
verifies size and sha256, then installs the file atomically). The baseline only moves bytes.

    .venv/bin/python bench/volume_upload.py [--size-mib 1024] [--rounds 3] [--threads 8]

It starts Ceph RGW (tests/s3/rgw.sh), creates a PostgreSQL database and a bucket of its own, runs a
hub server (gunicorn) against them, and removes the database and the objects at the end.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.result import report  # noqa: E402
from tests.support.servers import PG_ADMIN_URL, Hub, base_env  # noqa: E402


def make_file(path: Path, size: int) -> None:
    block = os.urandom(2**20)
    with open(path, "wb") as fh:
        for i in range(size // 2**20):
            fh.write(i.to_bytes(8, "little") + block[8:])


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(8 * 2**20):
            h.update(chunk)
    return h.hexdigest()


def stamp(path: Path, n: int) -> None:
    """Make the file's bytes new (so neither side can skip them as already stored)."""
    with open(path, "r+b") as fh:
        fh.write(uuid.uuid4().bytes + n.to_bytes(8, "little"))


def hub_upload(hub: Hub, token: str, path: Path, dest: str, threads: int, client_hash: bool = True) -> float:
    """The client a user would write: start the session, PUT the parts in parallel, complete. With
    `client_hash` it also hashes the file in one thread while the parts upload and sends the sha256,
    which the hub checks against the one it computes from the stored bytes (end to end); without,
    the hub's own sha256 of the stored bytes is the file's."""
    t0 = time.perf_counter()
    size = path.stat().st_size
    s = requests.Session()
    s.headers["Authorization"] = f"Bearer {token}"
    r = s.post(f"{hub.url}/api/volume/uploads", json={"path": dest, "size": size}, timeout=60)
    r.raise_for_status()
    session = r.json()
    part_size = session["part_size"]

    def put(item: tuple[str, str]) -> None:
        n, url = int(item[0]), item[1]
        with open(path, "rb") as fh:
            fh.seek((n - 1) * part_size)
            data = fh.read(part_size)
        resp = requests.put(url, data=data, timeout=300)
        resp.raise_for_status()

    with ThreadPoolExecutor(threads + 1) as pool:
        digest = pool.submit(sha256_file, path) if client_hash else None
        list(pool.map(put, session["parts"].items()))
        sha = digest.result() if digest else None
    t_parts = time.perf_counter()
    r = s.post(f"{hub.url}/api/volume/uploads/{session['id']}/complete", json={"sha256": sha}, timeout=600)
    r.raise_for_status()
    end = time.perf_counter()
    if sha is None:
        sha = sha256_file(path)  # after the clock stops: check the hub's sha256 is the file's
    assert r.json()["entry"]["etag"] == sha, (r.json(), sha)
    what = "with sha256 alongside" if client_hash else "(hub hashes)"
    print(f"  hub {what}: start + parts {t_parts - t0:.2f} s, complete {end - t_parts:.2f} s", file=sys.stderr)
    return end - t0


def boto3_upload(env: dict, bucket: str, path: Path, key: str) -> float:
    import boto3

    client = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                          aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"], region_name="us-east-1")
    t0 = time.perf_counter()
    client.upload_file(str(path), bucket, key)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()

    subprocess.run(["bash", str(ROOT / "tests/s3/rgw.sh"), "start"], check=True, stdout=subprocess.DEVNULL)
    env_lines = subprocess.run(["bash", str(ROOT / "tests/s3/rgw.sh"), "env"], check=True, capture_output=True,
                               text=True).stdout.split()
    rgw = dict(line.split("=", 1) for line in env_lines if "=" in line)
    import boto3
    import psycopg

    suffix = uuid.uuid4().hex[:8]
    db, bucket = f"bench_volume_{suffix}", f"bench-volume-{suffix}"
    with psycopg.connect(f"{PG_ADMIN_URL}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{db}"')
    tmp = Path(tempfile.mkdtemp(prefix="bench-volume-"))
    env = base_env() | rgw | {"HUB_DATA_DIR": str(tmp / "hub"), "DATABASE_URL": f"{PG_ADMIN_URL}/{db}",
                              "HUB_STORAGE_URL": f"s3://{bucket}", "HUB_MULTIPART_CHUNK": "64MiB"}
    (tmp / "hub").mkdir()
    hub = Hub("bench", env, tmp / "hub")
    try:
        hub.start(tmp / "server.log")
        token = hub.token("bench", read_only=False)
        hub.manage("hub_token", "bench", "--quota", "1PB")
        data = tmp / "one.bin"
        make_file(data, args.size_mib * 2**20)
        size_mb = args.size_mib * 2**20 / 1e6
        print(f"file: {args.size_mib} MiB; hub: {args.threads} parallel part PUTs of 64 MiB; "
              "boto3: upload_file with its default TransferConfig", file=sys.stderr)
        ours, both, theirs = [], [], []
        for i in range(args.rounds):
            stamp(data, 3 * i)
            theirs.append(boto3_upload(rgw, bucket, data, f"baseline/{i}"))
            stamp(data, 3 * i + 1)
            ours.append(hub_upload(hub, token, data, f"bench/{i}.bin", args.threads, client_hash=False))
            stamp(data, 3 * i + 2)
            both.append(hub_upload(hub, token, data, f"bench/{i}-checked.bin", args.threads, client_hash=True))
            print(f"round {i + 1}: hub {ours[-1]:.2f} s, hub + client sha256 {both[-1]:.2f} s, "
                  f"boto3 {theirs[-1]:.2f} s", file=sys.stderr)
        o, b, t = statistics.median(ours), statistics.median(both), statistics.median(theirs)
        print(f"{'workload':<52} {'median s':>9} {'MB/s':>8}")
        print(f"{'hub volume multipart (hub computes sha256)':<52} {o:>9.2f} {size_mb / o:>8.0f}")
        print(f"{'hub volume multipart (+ client sha256, checked)':<52} {b:>9.2f} {size_mb / b:>8.0f}")
        print(f"{'raw boto3 upload_file (multipart)':<52} {t:>9.2f} {size_mb / t:>8.0f}")
        print(f"ratio hub/boto3 throughput: {t / o:.2f}x (hub computes sha256), "
              f"{t / b:.2f}x (+ client sha256 checked end to end)")
        detail = f"boto3 {t:.2f} s, hub {o:.2f} s, hub + client sha256 {b:.2f} s ({args.size_mib} MiB)"
        report("volume_upload", f"{args.size_mib} MiB volume upload (hub hashes) / boto3", ratio=t / o, target=0.8, detail=detail)
        report("volume_upload", f"{args.size_mib} MiB volume upload (+ client sha256) / boto3", ratio=t / b, target=0.8,
               detail=detail)
    finally:
        hub.stop()
        with psycopg.connect(f"{PG_ADMIN_URL}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        s3 = boto3.client("s3", endpoint_url=rgw["AWS_ENDPOINT_URL"], aws_access_key_id=rgw["AWS_ACCESS_KEY_ID"],
                          aws_secret_access_key=rgw["AWS_SECRET_ACCESS_KEY"], region_name="us-east-1")
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for obj in page.get("Contents", []):
                s3.delete_object(Bucket=bucket, Key=obj["Key"])
        s3.delete_bucket(Bucket=bucket)
        subprocess.run(["rm", "-rf", str(tmp)], check=False)


if __name__ == "__main__":
    main()
