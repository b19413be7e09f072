"""The dataset viewer's first page of rows for a ~1 GB Parquet dataset, after its task ran: server time
of /api/datasets-server/rows (its Server-Timing header: the view's own time) and the client's wall
time, p50/p95 over --requests sequential requests on one keep-alive connection. Target: ≤ 50 ms.

The hub runs on PostgreSQL and Ceph RGW with a real Celery worker (Redis): the dataset is pushed with
the stock huggingface_hub client (LFS), the push queues the viewer's task, the worker reads the file
once and writes its copy in small row groups; then the pages are timed. The Parquet file is written
as big tools write them (row groups of ~128 MB), so the copy is what a page reads. Also timed: a page
deep in the split (its row group elsewhere in the copy), and the task itself.

    .venv/bin/python bench/viewer.py [--size-mib 1024] [--requests 200]
"""
from __future__ import annotations

import argparse
import base64
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.result import report  # noqa: E402
from tests.support.servers import base_env, flushed_redis, fresh_database, launch_hub, scratch_bucket  # noqa: E402

MiB = 2**20
TEXT = 900  # characters of a row's text (random: Parquet cannot squeeze it below its size)
BATCH = 65_536


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def make_parquet(path: Path, size: int) -> int:
    """A Parquet file of about `size` bytes (id, text, label, score), written a batch at a time."""
    rows, written = 0, 0
    schema = pa.schema([("id", pa.int64()), ("text", pa.string()), ("label", pa.int32()), ("score", pa.float64())])
    with pq.ParquetWriter(path, schema, compression="snappy") as w:
        while written < size:
            data = base64.b64encode(os.urandom(BATCH * TEXT * 3 // 4))[:BATCH * TEXT]
            offsets = pa.array(range(0, (BATCH + 1) * TEXT, TEXT), pa.int32()).buffers()[1]
            text = pa.StringArray.from_buffers(BATCH, offsets, pa.py_buffer(data))
            ids = pa.array(range(rows, rows + BATCH), pa.int64())
            w.write_table(pa.table({"id": ids, "text": text, "label": pa.array([i % 10 for i in range(BATCH)], pa.int32()),
                                    "score": pa.array([i / BATCH for i in range(BATCH)], pa.float64())}, schema=schema),
                          row_group_size=2 * BATCH)
            rows += BATCH
            written = rows * (TEXT + 20)
    return rows


def timed(session: requests.Session, url: str, params: dict, n: int) -> tuple[list[float], list[float]]:
    server, wall = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        r = session.get(url, params=params, timeout=60)
        wall.append((time.perf_counter() - t0) * 1000)
        r.raise_for_status()
        server.append(float(r.headers["Server-Timing"].split("dur=")[1]))
    return server, wall


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    from huggingface_hub import HfApi, constants

    constants.HF_HUB_DISABLE_XET = True
    subprocess.run(["bash", str(ROOT / "tests/s3/rgw.sh"), "start"], check=True, stdout=subprocess.DEVNULL)
    env_lines = subprocess.run(["bash", str(ROOT / "tests/s3/rgw.sh"), "env"], check=True, capture_output=True,
                               text=True).stdout.split()
    rgw = dict(line.split("=", 1) for line in env_lines if "=" in line)
    suffix = uuid.uuid4().hex[:8]
    tmp = Path(tempfile.mkdtemp(prefix="bench-viewer-"))
    try:
        path = tmp / "train-00000-of-00001.parquet"
        log(f"writing a {args.size_mib} MiB Parquet file")
        rows = make_parquet(path, args.size_mib * MiB)
        size = path.stat().st_size
        log(f"{rows} rows, {size / MiB:.0f} MiB, {pq.ParquetFile(path).num_row_groups} row groups")
        with fresh_database(f"bench_viewer_{suffix}") as db, scratch_bucket(rgw, f"bench-viewer-{suffix}") as bucket, \
                flushed_redis("redis://127.0.0.1:6379/14") as broker:
            env = base_env() | rgw | {"HUB_DATA_DIR": str(tmp / "hub"), "DATABASE_URL": db, "CELERY_BROKER_URL": broker,
                                      "HUB_STORAGE_URL": f"s3://{bucket}", "HUB_VIEWER_MAX_BYTES": "5GB"}
            (tmp / "hub").mkdir()
            with launch_hub("bench", env, tmp / "hub", celery_worker=True) as hub:
                token = hub.token("bench")
                hub.manage("hub_token", "bench", "--quota", "1PB")
                api = HfApi(endpoint=hub.url, token=token)
                repo = "bench/viewer-1g"
                api.create_repo(repo, repo_type="dataset")
                t0 = time.time()
                api.upload_file(path_or_fileobj=str(path), path_in_repo=f"data/{path.name}", repo_id=repo,
                                repo_type="dataset")
                log(f"pushed in {time.time() - t0:.1f} s; waiting for the viewer's task")
                s = requests.Session()
                s.headers["Authorization"] = f"Bearer {token}"
                url = f"{hub.url}/api/datasets-server/rows"
                params = {"dataset": repo, "config": "default", "split": "train", "offset": 0, "length": 100}
                t1 = time.time()
                while True:
                    r = s.get(url, params=params, timeout=60)
                    if r.status_code == 200:
                        # (the first page a web process serves reads the copy's footer first)
                        cold = float(r.headers["Server-Timing"].split("dur=")[1])
                        break
                    if r.headers.get("X-Error-Code") != "ResponseNotReady" or time.time() - t1 > 1800:
                        raise SystemExit(f"the viewer failed: {r.status_code} {r.text[:500]}")
                    time.sleep(1)
                task = hub.manage("shell", "-c", (
                    "from hub.viewer.models import ViewerRun; r = ViewerRun.objects.get(); "
                    "print((r.finished - r.started).total_seconds(), r.attempts)")).stdout.strip().splitlines()[-1].split()
                body = r.json()
                assert body["num_rows_total"] == rows and len(body["rows"]) == 100 and body["partial"] is False
                assert body["rows"][0]["row"]["id"] == 0
                log(f"task ran {task[1]}× in {float(task[0]):.1f} s; timing {args.requests} requests per case")
                first_server, first_wall = timed(s, url, params, args.requests)
                deep = params | {"offset": rows // 2 + 37}
                deep_server, deep_wall = timed(s, url, deep, max(20, args.requests // 4))
                assert s.get(url, params=deep, timeout=60).json()["rows"][0]["row"]["id"] == rows // 2 + 37
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    med = statistics.median
    detail = (f"server p50 {med(first_server):.1f} ms, p95 {pct(first_server, 0.95):.1f} ms; client p50 "
              f"{med(first_wall):.1f} ms; the first request of a process (footer not read yet) {cold:.1f} ms; a page deep in the split: server p50 {med(deep_server):.1f} ms; "
              f"{size / MiB:.0f} MiB, {rows:,} rows; the task took {float(task[0]):.0f} s (ran {task[1]}×)")
    print(detail)
    report("viewer", f"first page of rows (100), {size / MiB:.0f} MiB Parquet, PG+RGW: 50 ms budget / server p50",
           ratio=50 / med(first_server), target=1.0, detail=detail)


if __name__ == "__main__":
    main()
