"""Xet: the stock client (huggingface_hub 2.4.0 + hf_xet 1.8.0, default settings) against the same hub
through LFS (HF_HUB_DISABLE_XET=1) and against raw boto3 on the same Ceph RGW, in one run:

* upload of a 1 GiB file of new bytes: hf_xet / LFS / boto3 multipart (upload_file's defaults);
* download of it into an empty cache: hf_xet / plain /resolve/ (Xet disabled) / boto3 download_file;
* re-upload from the same machine of a file that differs from the first in 1 % of its bytes (ten
  runs of ~100 KiB rewritten across the file): the bytes the hub received (xorbs stored) and the
  time, against the first upload.

Each client runs in a process of its own configured by the environment only, as users run it; the
clock runs around the call in that process (not Python's start-up). Every upload is checked: the
file the hub serves afterwards has the sha256 of the one sent.

    .venv/bin/python bench/xet.py [--size-mib 1024] [--rounds 1]

It starts Ceph RGW (tests/s3/rgw.sh), creates a PostgreSQL database and a bucket of its own, runs a
hub server (gunicorn) against them, and removes all of it at the end.
"""
from __future__ import annotations

import argparse
import hashlib
import json
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

from bench.mount import STORE_DAEMONS  # noqa: E402
from bench.result import report  # noqa: E402
from tests.support.hf_client import client_env  # noqa: E402
from tests.support.servers import Hub, base_env, fresh_database, launch_hub, scratch_bucket  # noqa: E402

MiB = 2**20

UPLOAD = """
import os, time
from huggingface_hub import HfApi
api = HfApi()
api.create_repo(os.environ["T_REPO"], exist_ok=True)
t0 = time.perf_counter()
api.upload_file(path_or_fileobj=os.environ["T_PATH"], path_in_repo="weights.safetensors", repo_id=os.environ["T_REPO"])
print("SECONDS", time.perf_counter() - t0)
"""

DOWNLOAD = """
import hashlib, os, time
from huggingface_hub import hf_hub_download
t0 = time.perf_counter()
path = hf_hub_download(os.environ["T_REPO"], "weights.safetensors")
print("SECONDS", time.perf_counter() - t0)
h = hashlib.sha256()
with open(path, "rb") as fh:
    while block := fh.read(8 << 20):
        h.update(block)
print("SHA256", h.hexdigest())
"""


def new_file(path: Path, size: int) -> str:
    h = hashlib.sha256()
    with open(path, "wb") as fh:
        for _ in range(size // MiB):
            block = os.urandom(MiB)
            h.update(block)
            fh.write(block)
    return h.hexdigest()


def change_one_percent(src: Path, dst: Path) -> str:
    data = bytearray(src.read_bytes())
    run = len(data) // 100 // 10
    for i in range(10):
        at = (2 * i + 1) * len(data) // 20
        data[at:at + run] = os.urandom(run)
    dst.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def client(script: str, env: dict) -> dict:
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"client failed:\n{proc.stdout}\n{proc.stderr[-3000:]}")
    out = {}
    for line in proc.stdout.splitlines():
        key, _, value = line.partition(" ")
        if key in ("SECONDS", "SHA256"):
            out[key] = float(value) if key == "SECONDS" else value
    return out


def server_env() -> dict[str, str]:
    """The test servers' environment with the hub's own default write-behind delay (the tests shorten
    it to watch it work)."""
    return {k: v for k, v in base_env().items() if k != "HUB_XET_WRITE_BEHIND"}


def wait_written(hub: Hub, limit: float = 600) -> None:
    """Waits until the hub has written every xorb to the store (write-behind: HUB_XET_WRITE_BEHIND
    seconds after they arrived), polling its database (a cheap query: not a process per poll)."""
    import psycopg

    deadline = time.monotonic() + limit
    with psycopg.connect(hub.env["DATABASE_URL"], autocommit=True) as db:
        while db.execute("SELECT count(*) FROM xet_xorb WHERE NOT in_store").fetchone()[0]:
            if time.monotonic() > deadline:
                raise RuntimeError("the hub did not write its staged xorbs to the store")
            time.sleep(0.2)


def cpu_seconds(hub: Hub) -> dict[str, float]:
    """CPU seconds (user + system) used so far by the clients (this process, boto3's threads included,
    and the client processes it ran), the hub's server processes and the store's daemons."""
    import resource

    import psutil

    def used(procs) -> float:
        total = 0.0
        for p in procs:
            try:
                t = p.cpu_times()
            except psutil.Error:
                continue
            total += t.user + t.system + t.children_user + t.children_system
        return total

    me = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    server = psutil.Process(hub.proc.pid)
    return {"client": sum(r.ru_utime + r.ru_stime for r in me),
            "hub": used([server, *server.children(recursive=True)]),
            "store": used(p for p in psutil.process_iter(["name"]) if p.info["name"] in STORE_DAEMONS)}


def cpu_since(hub: Hub, before: dict[str, float]) -> dict[str, float]:
    now = cpu_seconds(hub)
    return {k: now[k] - before[k] for k in now}


def xorb_bytes(hub: Hub) -> int:
    out = hub.manage("shell", "-c", "from django.db.models import Sum; from hub.xet.models import Xorb; "
                     "print(Xorb.objects.aggregate(s=Sum('size'))['s'] or 0)").stdout
    return int(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()

    subprocess.run(["bash", str(ROOT / "tests/s3/rgw.sh"), "start"], check=True, stdout=subprocess.DEVNULL)
    env_lines = subprocess.run(["bash", str(ROOT / "tests/s3/rgw.sh"), "env"], check=True, capture_output=True,
                               text=True).stdout.split()
    rgw = dict(line.split("=", 1) for line in env_lines if "=" in line)
    import boto3

    suffix = uuid.uuid4().hex[:8]
    tmp = Path(tempfile.mkdtemp(prefix="bench-xet-"))
    (tmp / "hub").mkdir()
    log = tmp / "hub" / "server.log"
    s3 = boto3.client("s3", endpoint_url=rgw["AWS_ENDPOINT_URL"], aws_access_key_id=rgw["AWS_ACCESS_KEY_ID"],
                      aws_secret_access_key=rgw["AWS_SECRET_ACCESS_KEY"], region_name="us-east-1")
    try:
        with fresh_database(f"bench_xet_{suffix}") as db, scratch_bucket(rgw, f"bench-xet-{suffix}") as bucket, \
                launch_hub("bench", server_env() | rgw | {"HUB_DATA_DIR": str(tmp / "hub"), "DATABASE_URL": db,
                                                        "HUB_STORAGE_URL": f"s3://{bucket}"}, tmp / "hub") as hub:
            measure(hub, s3, bucket, tmp, args, suffix)
            for line in log.read_text(errors="replace").splitlines():
                if "xet shard" in line or "xet xorb" in line:  # (how long the hub took for each step)
                    print(line, file=sys.stderr)
    except BaseException:
        if log.exists():
            print(log.read_text(errors="replace")[-6000:], file=sys.stderr)
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def measure(hub: Hub, s3, bucket: str, tmp: Path, args, suffix: str) -> None:
    """The workloads and their baselines, against a running hub; prints and reports the results."""
    size = args.size_mib * MiB
    token = hub.token("bench")
    hub.manage("hub_token", "bench", "--quota", "1PB")
    ups: dict[str, list[float]] = {"xet": [], "lfs": [], "boto3": []}
    cpu: dict[str, list[dict[str, float]]] = {"xet": [], "lfs": [], "boto3": []}  # per upload
    downs: dict[str, list[float]] = {"xet": [], "http": [], "boto3": []}
    sent_ratio, time_ratio, fresh_ratio = [], [], []
    behind: list[float] = []  # seconds from the end of a Xet upload to its xorbs being in the store
    total_cpu: list[dict[str, float]] = []  # a Xet upload's CPU, its xorbs' write-behind included
    for r in range(args.rounds):
        for how in ("boto3", "xet", "lfs"):
            path = tmp / f"{how}.bin"
            digest = new_file(path, size)  # new bytes each time: nothing to dedup against
            repo = f"bench/{how}-{r}-{suffix}"
            before_cpu = cpu_seconds(hub)
            if how == "boto3":
                t0 = time.perf_counter()
                s3.upload_file(str(path), bucket, f"baseline/{r}")
                ups[how].append(time.perf_counter() - t0)
                cpu[how].append(cpu_since(hub, before_cpu))
                t0 = time.perf_counter()
                s3.download_file(bucket, f"baseline/{r}", str(tmp / "boto3.down"))
                downs["boto3"].append(time.perf_counter() - t0)
                (tmp / "boto3.down").unlink()
                path.unlink()
                continue
            extra = {"HF_HUB_DISABLE_XET": "1"} if how == "lfs" else {}
            home = tmp / f"home-{how}-{r}"
            got = client(UPLOAD, client_env(hub, token, home, T_REPO=repo, T_PATH=str(path), **extra))
            ups[how].append(got["SECONDS"])
            print(f"round {r + 1}: upload {how}: {got['SECONDS']:.2f} s", file=sys.stderr)
            cpu[how].append(cpu_since(hub, before_cpu))  # (the client's count includes its Python start-up)
            if how == "xet":  # then the xorbs' write to the store, after the upload returned
                t0 = time.perf_counter()
                wait_written(hub)
                behind.append(time.perf_counter() - t0)
                total_cpu.append(cpu_since(hub, before_cpu))
                print(f"round {r + 1}: xorbs in the store {behind[-1]:.1f} s after the upload returned",
                      file=sys.stderr)
            if how == "xet":  # the download benchmarks read what went up through Xet
                for kind, more in (("xet", {}), ("http", {"HF_HUB_DISABLE_XET": "1"})):
                    down = client(DOWNLOAD, client_env(hub, token, tmp / f"down-{kind}-{r}", T_REPO=repo, **more))
                    assert down["SHA256"] == digest, (kind, down)
                    downs[kind].append(down["SECONDS"])
                    subprocess.run(["rm", "-rf", str(tmp / f"down-{kind}-{r}")], check=False)
                # 1 % changed, from the machine that sent the first (its shard cache knows those chunks)
                before = xorb_bytes(hub)
                changed = tmp / "changed.bin"
                change_one_percent(path, changed)
                again = client(UPLOAD, client_env(hub, token, home, T_REPO=repo, T_PATH=str(changed)))
                sent = xorb_bytes(hub) - before
                sent_ratio.append(sent / size)
                time_ratio.append(again["SECONDS"] / got["SECONDS"])
                print(f"round {r + 1}: 1% changed: {sent / MiB:.1f} MiB sent ({100 * sent / size:.2f} %), "
                      f"{again['SECONDS']:.2f} s vs {got['SECONDS']:.2f} s", file=sys.stderr)
                # 1 % changed elsewhere, from a new instance (an empty shard cache: the hub's global
                # dedup tells it which chunks are stored)
                before = xorb_bytes(hub)
                change_one_percent(path, changed)
                client(UPLOAD, client_env(hub, token, tmp / f"home-fresh-{r}", T_REPO=repo, T_PATH=str(changed)))
                fresh = xorb_bytes(hub) - before
                fresh_ratio.append(fresh / size)
                print(f"round {r + 1}: 1% changed, another machine: {fresh / MiB:.1f} MiB sent "
                      f"({100 * fresh / size:.2f} %)", file=sys.stderr)
                changed.unlink()
            path.unlink()
        print(f"round {r + 1}: upload xet {ups['xet'][-1]:.2f} s, lfs {ups['lfs'][-1]:.2f} s, "
              f"boto3 {ups['boto3'][-1]:.2f} s; download xet {downs['xet'][-1]:.2f} s, "
              f"http {downs['http'][-1]:.2f} s, boto3 {downs['boto3'][-1]:.2f} s", file=sys.stderr)
    up = {k: statistics.median(v) for k, v in ups.items()}
    down = {k: statistics.median(v) for k, v in downs.items()}
    mb = size / 1e6
    print(f"{'workload':<44} {'median s':>9} {'MB/s':>8}")
    for k, v in up.items():
        used = {part: statistics.median(c[part] for c in cpu[k]) for part in ("client", "hub", "store")}
        print(f"{'upload ' + k:<44} {v:>9.2f} {mb / v:>8.0f}   CPU s: client {used['client']:.1f}, "
              f"hub {used['hub']:.1f}, store {used['store']:.1f}")
    for k, v in down.items():
        print(f"{'download ' + k:<44} {v:>9.2f} {mb / v:>8.0f}")
    print(f"1% changed re-upload: {100 * statistics.median(sent_ratio):.2f} % of the bytes sent, "
          f"{statistics.median(time_ratio):.2f}x the first upload's time; from another machine "
          f"{100 * statistics.median(fresh_ratio):.2f} %")
    spent = {k: "/".join(f"{statistics.median(c[part] for c in cpu[k]):.1f}" for part in ("client", "hub", "store"))
             for k in cpu}
    with_behind = "/".join(f"{statistics.median(c[part] for c in total_cpu):.1f}" for part in ("client", "hub", "store"))
    detail = (f"xet {up['xet']:.2f} s, lfs {up['lfs']:.2f} s, boto3 {up['boto3']:.2f} s ({args.size_mib} MiB); "
              f"CPU s client/hub/store: xet {spent['xet']} ({with_behind} with the xorbs' write-behind, in the "
              f"store {statistics.median(behind):.0f} s after the upload returned), lfs {spent['lfs']}, "
              f"boto3 {spent['boto3']}")
    report("xet", f"{args.size_mib} MiB upload: hf_xet / boto3", ratio=up["boto3"] / up["xet"], target=0.8,
           detail=detail)
    report("xet", f"{args.size_mib} MiB upload: hf_xet / LFS path", ratio=up["lfs"] / up["xet"], detail=detail)
    detail = (f"xet {down['xet']:.2f} s, /resolve/ {down['http']:.2f} s, boto3 {down['boto3']:.2f} s "
              f"({args.size_mib} MiB)")
    report("xet", f"{args.size_mib} MiB download: hf_xet / boto3", ratio=down["boto3"] / down["xet"],
           detail=detail)
    report("xet", f"{args.size_mib} MiB download: hf_xet / plain /resolve/", ratio=down["http"] / down["xet"],
           detail=detail)
    share = statistics.median(sent_ratio)
    report("xet", f"{args.size_mib} MiB re-upload, 1 % changed: share of bytes sent (lower is better)",
           ratio=None, target=None,
           detail=f"{100 * share:.2f} % sent (target < 5 %: {'met' if share < 0.05 else 'NOT met'}), "
                  f"{statistics.median(time_ratio):.2f}x the first upload's time")
    share = statistics.median(fresh_ratio)
    report("xet", f"{args.size_mib} MiB re-upload from another machine, 1 % changed: share of bytes sent "
           "(lower is better)", ratio=None, target=None,
           detail=f"{100 * share:.2f} % sent (target < 5 %: {'met' if share < 0.05 else 'NOT met'})")
    print(json.dumps({"upload": up, "upload_cpu": cpu, "upload_cpu_with_write_behind": total_cpu,
                      "written_after": behind, "download": down, "sent": sent_ratio, "time": time_ratio,
                      "sent_fresh": fresh_ratio}), file=sys.stderr)


if __name__ == "__main__":
    main()
