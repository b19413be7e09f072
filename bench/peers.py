"""The hub against the tools users would pick instead, in one run, on the same Ceph RGW, with the same bytes.

Peers: rclone (`rclone mount` with --vfs-cache-mode off and full, `rclone copy`), s3fs-fuse, raw boto3
and the stock huggingface_hub CLI (`hf download` / `hf upload`, against the hub). The hub's side is its
own CLI in a fresh process: `hub mount`, `hub pull`, `hub cp` (to the user's volume), `hub push`.

Cases (each measured in interleaved rounds: in every round each tool does the case once, the order
rotated from round to round; the median of the rounds is reported; `sync` + drop_caches before every
timed side; a fresh mount and an empty cache directory for every cold side):

   1 cold     SIZE read sequentially through a fresh mount with `dd bs=4M` (peak RSS of the mount process)
   2 pyread   the same with a Python loop of 1 MiB reads
   3 warm     the second `dd` of the file on the mount of case 1
   4 small    N x 4 KiB through a fresh mount: `ls -lR`, then every file read (sorted, one reader)
   5 pull     SIZE to local disk: hub pull, rclone copy, boto3 download_file, hf download
   6 pullsmall N x 4 KiB to local disk: hub pull, rclone copy, boto3 get_object from 8 threads
   7 upload   SIZE uploaded: hub cp (volume), hub push (new repo), boto3 upload_file, rclone copy, hf upload
   8 pushsmall N x 4 KiB uploaded: hub push (new repo), rclone copy, hf upload
   9 cpu      client CPU seconds per GiB: hub pull vs rclone copy (case 5), mount processes (case 1)
  10 memory   the hub server's RSS (gunicorn master + workers, every 0.2 s) while it moves 2 x SIZE

    .venv/bin/python bench/peers.py [--rounds 3] [--size 1GiB] [--files 5000] [--only CASE ...]
    .venv/bin/python bench/peers.py --quick          # 128 MiB, 500 files, 1 round

The small-file cases (4, 6, 8) run --small-rounds times (default 1), and case 4 mounts with the hub,
rclone (vfs off) and s3fs only (--small-mounts): on this RGW every peer's read of a small file is one
GET of ~48 ms, so reading 5,000 of them takes each peer ~4 minutes, and `hf upload` of 5,000 files
~4 minutes; with three rounds of those the run would take over 40 minutes.

Ratio = peer seconds / hub seconds (> 1: the hub is faster); for CPU, rclone's CPU / the hub's.
The peers read what boto3 uploaded under plain keys (big/big.bin, small/dNN/NNNNN.bin) of a bucket of
their own: the hub's objects are content-addressed, not a tree. Every upload side sends bytes the
store has not seen (the file is stamped, the small files rewritten, before each side), so that the
hub's deduplication by sha256 cannot skip them. `hf upload` goes through Xet, whose xorbs reach the
store after the command returned (HUB_XET_WRITE_BEHIND): the run waits for them after the clock
stopped and reports that wait beside the time.

It starts Ceph RGW (tests/s3/rgw.sh), a PostgreSQL database, a hub server and two buckets of its own,
and removes them (and unmounts everything) at the end, whatever happened.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import drop_page_cache, start_hub  # noqa: E402
from bench.result import report  # noqa: E402
from storage.client import HubClient  # noqa: E402
from storage.sizes import parse_size  # noqa: E402
from storage.transfer.push import push  # noqa: E402

PY = sys.executable
HF = str(Path(sys.executable).parent / "hf")  # the hf CLI of this interpreter's environment
RCLONE = shutil.which("rclone") or "/usr/bin/rclone"
S3FS = shutil.which("s3fs") or "/usr/bin/s3fs"
BENCH = "peers"
MiB, GiB = 1 << 20, 1 << 30

CASES = {1: "cold", 2: "pyread", 3: "warm", 4: "small", 5: "pull", 6: "pullsmall", 7: "upload", 8: "pushsmall",
         9: "cpu", 10: "memory"}
MOUNTS = ["hub", "rclone-off", "rclone-full", "s3fs"]
NAMES = {"hub": "hub mount", "rclone-off": "rclone mount (vfs off)", "rclone-full": "rclone mount (vfs full)",
         "s3fs": "s3fs"}
RCLONE_MOUNT_FLAGS = {"rclone-off": ["--vfs-cache-mode", "off"], "rclone-full": ["--vfs-cache-mode", "full"]}
RCLONE_BIG_COPY = ["--multi-thread-streams", "4"]
RCLONE_SMALL_COPY = ["--transfers", "8"]  # the parallelism of hub pull/push (8 workers) and of boto3 (8 threads)


class Failed(Exception):
    pass


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def tail(path: Path, chars: int = 600) -> str:
    try:
        return path.read_text(errors="replace")[-chars:].strip()
    except OSError:
        return ""


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


@dataclass
class Ran:
    seconds: float
    cpu: float  # user + system of the process and the children it waited for


def run(cmd: list[str], log: Path, env: dict[str, str] | None = None, timeout: float = 3600) -> Ran:
    """Runs `cmd` to the end (output to `log`); its wall time and its CPU (wait4's rusage)."""
    with open(log, "ab") as fh:
        fh.write(f"\n$ {' '.join(cmd)}\n".encode())
        fh.flush()
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=fh, stderr=fh, stdin=subprocess.DEVNULL)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            _, status, ru = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        took = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise Failed(f"{Path(cmd[0]).name} {' '.join(cmd[1:3])} exited {proc.returncode}: {tail(log, 400)}")
    return Ran(took, ru.ru_utime + ru.ru_stime)


def bytes_under(path: Path) -> int:
    """Bytes of the regular files below `path` (links not followed: a cache's snapshot links count once)."""
    n = 0
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            p = os.path.join(dirpath, f)
            if not os.path.islink(p):
                n += os.path.getsize(p)
    return n


def proc_status(pid: int, key: str) -> int | None:
    """A /proc/PID/status field in kB (VmHWM, VmRSS)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system, every thread, and the children it waited for) of a live process."""
    import psutil

    t = psutil.Process(pid).cpu_times()
    return t.user + t.system + t.children_user + t.children_system


# --- the environment ------------------------------------------------------------------------------------


@dataclass
class Env:
    tmp: Path
    hub: object
    token: str
    rgw: dict[str, str]
    bucket: str  # the peers' bucket
    s3: object
    conf: Path  # rclone.conf
    passwd: Path  # s3fs's passwd file
    logs: Path
    n: int = 0
    mounts: list = field(default_factory=list)
    small_keys: list[str] = field(default_factory=list)  # the peers' keys of the small files

    def fresh(self, what: str) -> Path:
        self.n += 1
        return self.tmp / f"{what}-{self.n}"

    def hub_env(self, cache: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUB_", "DJANGO_", "AWS_"))}
        return env | {"HUB_ENDPOINT": self.hub.url, "HUB_TOKEN": self.token, "HUB_CACHE_DIR": str(cache / "hub"),
                      "HF_HUB_CACHE": str(cache / "hf"), "PYTHONPATH": str(ROOT), "HUB_DISABLE_PROGRESS_BARS": "1"}

    def hf_env(self, home: Path) -> dict[str, str]:
        from tests.support.hf_client import client_env

        # No daily update check against pypi.org (a fresh HF_HOME would make every call do it, ~0.3 s).
        return client_env(self.hub, self.token, home, HF_HUB_DISABLE_UPDATE_CHECK="1")

    def rclone(self, *args: str) -> list[str]:
        return [RCLONE, "--config", str(self.conf), *args]

    @staticmethod
    def peer_env() -> dict[str, str]:
        """rclone and s3fs get the store from their own configuration only: no AWS_* (rclone 1.60 fails on
        AWS_CA_BUNDLE with a plain-http endpoint: "unable to load custom CA bundle")."""
        return {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}

    def delete_prefix(self, prefix: str) -> None:
        """Deletes what a peer uploaded (the one-node store's space), and has the store collect it now:
        RGW's garbage collector would otherwise remove the data 30-60 s later, under whichever side
        is running then."""
        from tests.conftest import _rgw

        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if keys:
                self.s3.delete_objects(Bucket=self.bucket, Delete={"Objects": keys, "Quiet": True})
        _rgw("gc")


# --- mounts ---------------------------------------------------------------------------------------------


@dataclass
class Mount:
    tool: str
    point: Path
    pid: int
    cache: Path | None
    proc: subprocess.Popen | None = None  # rclone and s3fs run as our children (foreground)

    def cpu(self) -> float:
        return proc_cpu(self.pid)

    def hwm_mib(self) -> float | None:
        kb = proc_status(self.pid, "VmHWM")
        return None if kb is None else kb / 1024

    def unmount(self) -> None:
        if os.path.ismount(self.point):
            r = subprocess.run(["fusermount3", "-u", str(self.point)], capture_output=True)
            if r.returncode:
                subprocess.run(["fusermount3", "-uz", str(self.point)], capture_output=True)
        if self.proc is not None:
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        else:
            import psutil

            try:
                psutil.Process(self.pid).wait(15)
            except psutil.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
            except psutil.Error:
                pass
        if self.cache is not None:
            shutil.rmtree(self.cache, ignore_errors=True)


def wait_mounted(point: Path, proc: subprocess.Popen, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.ismount(point):
        if proc.poll() is not None:
            raise Failed(f"the mount exited ({proc.returncode}): {tail(log)}")
        if time.monotonic() > deadline:
            proc.kill()
            raise Failed(f"not mounted after {timeout:.0f} s: {tail(log)}")
        time.sleep(0.05)


def mount(e: Env, tool: str, what: str) -> Mount:
    """A fresh mount of `what` ("big" or "small") by `tool`, with an empty cache directory."""
    point = e.fresh(f"mnt-{tool}-{what}")
    point.mkdir()
    cache = e.fresh(f"cache-{tool}")
    cache.mkdir()
    log = e.logs / f"{point.name}.log"
    if tool == "hub":
        run([PY, "-m", "storage.cli", "mount", f"datasets/bench/{what}", str(point), "--log-file", str(log)], log,
            env=e.hub_env(cache), timeout=120)
        if not os.path.ismount(point):
            raise Failed(f"hub mount returned but {point} is not mounted: {tail(log)}")
        pidfiles = list((cache / "hub" / "run").glob("mount-*.json"))
        if len(pidfiles) != 1:
            subprocess.run(["fusermount3", "-uz", str(point)], capture_output=True)
            raise Failed(f"no pid file of the hub mount in {cache}")
        m = Mount(tool, point, json.loads(pidfiles[0].read_text())["pid"], cache)
    else:
        if tool == "s3fs":
            cmd = [S3FS, f"{e.bucket}:/{what}", str(point), "-f", "-o",
                   f"url={e.rgw['AWS_ENDPOINT_URL']},use_path_request_style,passwd_file={e.passwd}"]
        else:
            cmd = e.rclone("mount", f"rgw:{e.bucket}/{what}", str(point), *RCLONE_MOUNT_FLAGS[tool],
                           "--cache-dir", str(cache), "--log-file", str(log))
        with open(log, "ab") as fh:
            proc = subprocess.Popen(cmd, stdout=fh, stderr=fh, stdin=subprocess.DEVNULL, env=e.peer_env())
        m = Mount(tool, point, proc.pid, cache, proc)
        e.mounts.append(m)
        wait_mounted(point, proc, log)
        return m
    e.mounts.append(m)
    return m


def unmount_all(e: Env) -> None:
    for m in e.mounts:
        try:
            m.unmount()
        except Exception as err:  # noqa: BLE001 - the others must still go
            say(f"unmount {m.point}: {err}")
    e.mounts.clear()


def dd(path: Path, log: Path) -> float:
    return run(["dd", f"if={path}", "of=/dev/null", "bs=4M"], log).seconds


def py_read(path: Path, chunk: int = MiB) -> tuple[float, int]:
    n = 0
    t = time.perf_counter()
    with open(path, "rb", buffering=0) as fh:
        while data := fh.read(chunk):
            n += len(data)
    return time.perf_counter() - t, n


# --- rounds ---------------------------------------------------------------------------------------------


class Samples:
    """Per tool: the measurements of each round (a dict of named values), and the failures."""

    def __init__(self, tools: list[str]) -> None:
        self.tools = tools
        self.values: dict[str, list[dict[str, float]]] = {t: [] for t in tools}
        self.failed: dict[str, list[str]] = {t: [] for t in tools}
        self.load: list[str] = []

    def median(self, tool: str, key: str) -> float | None:
        xs = [v[key] for v in self.values[tool] if v.get(key) is not None]
        return statistics.median(xs) if xs else None

    def runs(self, tool: str, key: str) -> str:
        return ", ".join(f"{v[key]:.2f}" for v in self.values[tool] if v.get(key) is not None)

    def why(self, tool: str) -> str:
        return f"{tool} failed in {len(self.failed[tool])} round(s): {self.failed[tool][0][:300]}" \
            if self.failed[tool] else ""


def rounds(e: Env, tools: list[str], n: int, one: Callable[[str, int], dict[str, float]], title: str) -> Samples:
    """`n` rounds; in each, `one(tool, round)` for every tool, the order rotated by one each round."""
    s = Samples(tools)
    s.load.append(load())
    for r in range(n):
        order = tools[r % len(tools):] + tools[:r % len(tools)]
        for tool in order:
            say(f"[{title}] round {r + 1}/{n}: {tool} (load {load()})")
            try:
                got = one(tool, r)
                s.values[tool].append(got)
                say("    " + ", ".join(f"{k} {v:.2f}" for k, v in got.items() if v is not None))
            except Exception as err:  # noqa: BLE001 - a peer that fails is reported, the run goes on
                s.failed[tool].append(f"{type(err).__name__}: {err}")
                say(f"    FAILED: {type(err).__name__}: {err}")
            finally:
                unmount_all(e)
    s.load.append(load())
    return s


def ratio_rows(s: Samples, hub: str, key: str, case: str, peers: dict[str, str], targets: dict[str, float | None],
               extra: Callable[[str], str] | None = None, unit: str = "s") -> None:
    """One RESULT row per peer: ratio = peer's median / hub's median of `key`."""
    h = s.median(hub, key)
    for peer, name in peers.items():
        p = s.median(peer, key)
        parts = [f"{hub_name(hub)} {fmt(h, unit)} (runs {s.runs(hub, key)})",
                 f"{name} {fmt(p, unit)} (runs {s.runs(peer, key)})"]
        if extra and (more := extra(peer)):
            parts.append(more)
        parts += [w for w in (s.why(hub), s.why(peer)) if w]
        parts.append(f"load {s.load[0]} → {s.load[-1]}")
        ratio = p / h if h and p else None
        report(BENCH, f"{case}: {name} / {hub_name(hub)}", ratio=ratio, target=targets.get(peer),
               detail="; ".join(parts))
        print(f"  {case}: {name} / {hub_name(hub)} = {'—' if ratio is None else f'{ratio:.2f}x'}", flush=True)


def hub_name(tool: str) -> str:
    return NAMES.get(tool, tool)


def fmt(x: float | None, unit: str = "s") -> str:
    return "failed" if x is None else f"{x:.2f} {unit}"


# --- the cases ------------------------------------------------------------------------------------------


def case_cold_warm(e: Env, args, label: str, want: set[str]) -> Samples:
    """Cases 1, 3 (and the mounts' part of 9 and 10): a cold dd of the big file on a fresh mount, then a
    warm one on the same mount."""

    def one(tool: str, r: int) -> dict[str, float]:
        m = mount(e, tool, "big")
        log = e.logs / f"dd-{tool}-{r}.log"
        drop_page_cache()
        cpu0 = m.cpu()
        cold = dd(m.point / "big.bin", log)
        cpu = m.cpu() - cpu0
        hwm = m.hwm_mib()
        warm = dd(m.point / "big.bin", log)  # no drop: what the mount keeps (kernel page cache, its disk cache)
        return {"cold": cold, "warm": warm, "cpu": cpu, "hwm": hwm}

    s = rounds(e, MOUNTS, args.rounds, one, "cold+warm dd")

    def rss(peer: str) -> str:
        return (f"peak RSS of the mount process during the cold read: hub {fmt(s.median('hub', 'hwm'), 'MiB')}, "
                f"{NAMES[peer]} {fmt(s.median(peer, 'hwm'), 'MiB')}")

    peers = {t: NAMES[t] for t in MOUNTS[1:]}
    if want & {1, 10}:
        ratio_rows(s, "hub", "cold", f"{label} cold read through a fresh mount (dd bs=4M)", peers,
                   dict.fromkeys(peers, 1.0), rss)
    if 3 in want:
        ratio_rows(s, "hub", "warm", f"{label} warm re-read on the same mount (dd bs=4M)", peers,
                   dict.fromkeys(peers, 5.0))
    return s


def case_pyread(e: Env, args, label: str, size: int) -> None:
    def one(tool: str, r: int) -> dict[str, float]:
        m = mount(e, tool, "big")
        drop_page_cache()
        took, n = py_read(m.point / "big.bin")
        if n != size:
            raise Failed(f"read {n} bytes, expected {size}")
        return {"cold": took, "hwm": m.hwm_mib()}

    s = rounds(e, MOUNTS, args.rounds, one, "cold python read")
    peers = {t: NAMES[t] for t in MOUNTS[1:]}
    ratio_rows(s, "hub", "cold", f"{label} cold read through a fresh mount (Python, 1 MiB reads)", peers,
               dict.fromkeys(peers, 1.0))


def case_small_mount(e: Env, args, rels: list[str]) -> None:
    n = len(rels)

    def one(tool: str, r: int) -> dict[str, float]:
        m = mount(e, tool, "small")
        drop_page_cache()
        ls = run(["ls", "-lR", str(m.point)], e.logs / f"ls-{tool}-{r}.log").seconds
        got = 0
        t = time.perf_counter()
        for rel in rels:
            with open(m.point / rel, "rb", buffering=0) as fh:
                while data := fh.read(MiB):
                    got += len(data)
        took = time.perf_counter() - t
        if got != n * 4096:
            raise Failed(f"read {got} bytes, expected {n * 4096}")
        return {"ls": ls, "read": took}

    tools = ["hub", *args.small_mounts]
    s = rounds(e, tools, args.small_rounds, one, "small files through the mount")
    peers = {t: NAMES[t] for t in tools[1:]}
    ratio_rows(s, "hub", "ls", f"{n:,} × 4 KiB: ls -lR on a fresh mount", peers,
               {"rclone-off": 1.0, "rclone-full": 1.0, "s3fs": None})
    ratio_rows(s, "hub", "read", f"{n:,} × 4 KiB: read every file (after the ls -lR)", peers,
               dict.fromkeys(peers, 5.0))


def case_pull(e: Env, args, label: str, size: int) -> Samples:
    """Case 5 (and the downloads' part of 9): the big file to local disk."""
    import resource

    def one(tool: str, r: int) -> dict[str, float]:
        dest = e.fresh(f"dl-{tool}")
        dest.mkdir()
        log = e.logs / f"pull-{tool}-{r}.log"
        try:
            drop_page_cache()
            if tool == "hub pull":
                ran = run([PY, "-m", "storage.cli", "pull", "datasets/bench/big", "-q"], log, env=e.hub_env(dest))
            elif tool == "rclone copy":
                ran = run(e.rclone("copy", f"rgw:{e.bucket}/big", str(dest), *RCLONE_BIG_COPY), log, env=e.peer_env())
            elif tool == "hf download":
                ran = run([HF, "download", "bench/big", "--repo-type", "dataset"], log, env=e.hf_env(dest))
            else:
                r0 = resource.getrusage(resource.RUSAGE_SELF)
                t = time.perf_counter()
                e.s3.download_file(e.bucket, "big/big.bin", str(dest / "big.bin"))
                took = time.perf_counter() - t
                r1 = resource.getrusage(resource.RUSAGE_SELF)
                ran = Ran(took, r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
            got = bytes_under(dest)
            if got < size:
                raise Failed(f"{got} bytes on disk, expected {size}")
            return {"time": ran.seconds, "cpu": ran.cpu}
        finally:
            shutil.rmtree(dest, ignore_errors=True)

    tools = ["hub pull", "rclone copy", "boto3", "hf download"]
    s = rounds(e, tools, args.rounds, one, "download big")
    peers = {"rclone copy": f"rclone copy {' '.join(RCLONE_BIG_COPY)}", "boto3": "boto3 download_file",
             "hf download": "hf download"}
    ratio_rows(s, "hub pull", "time", f"{label} download to disk", peers, {"rclone copy": 1.0})
    return s


def case_pull_small(e: Env, args, n: int) -> None:
    def one(tool: str, r: int) -> dict[str, float]:
        dest = e.fresh(f"dls-{tool}")
        dest.mkdir()
        log = e.logs / f"pullsmall-{tool.replace(' ', '')}-{r}.log"
        try:
            drop_page_cache()
            if tool == "hub pull":
                took = run([PY, "-m", "storage.cli", "pull", "datasets/bench/small", "-q"], log,
                           env=e.hub_env(dest)).seconds
            elif tool == "rclone copy":
                took = run(e.rclone("copy", f"rgw:{e.bucket}/small", str(dest), *RCLONE_SMALL_COPY), log,
                           env=e.peer_env()).seconds
            else:
                t = time.perf_counter()

                def get(key: str) -> None:
                    body = e.s3.get_object(Bucket=e.bucket, Key=key)["Body"]
                    target = dest / key
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with open(target, "wb") as fh:
                        shutil.copyfileobj(body, fh, MiB)

                with ThreadPoolExecutor(8) as pool:
                    list(pool.map(get, e.small_keys))
                took = time.perf_counter() - t
            got = bytes_under(dest)
            if got < n * 4096:
                raise Failed(f"{got} bytes on disk, expected {n * 4096}")
            return {"time": took}
        finally:
            shutil.rmtree(dest, ignore_errors=True)

    s = rounds(e, ["hub pull", "rclone copy", "boto3"], args.small_rounds, one, "download small")
    ratio_rows(s, "hub pull", "time", f"{n:,} × 4 KiB download to disk",
               {"rclone copy": f"rclone copy {' '.join(RCLONE_SMALL_COPY)}",
                "boto3": "boto3 get_object × 8 threads (keys given)"}, {"rclone copy": 1.0})


def stamp(path: Path) -> None:
    """New bytes at the file's start, so that nothing the store holds already has its sha256."""
    with open(path, "r+b") as fh:
        fh.write(uuid.uuid4().bytes + os.urandom(16))


def xet_wait(e: Env) -> float:
    from bench.xet import wait_written

    t = time.perf_counter()
    wait_written(e.hub)
    return time.perf_counter() - t


def verify_wait(e: Env, limit: float = 600) -> float:
    """Seconds until the hub has checked every blob it recorded unverified (a large upload completes
    before the hub has hashed the whole object back from the store; claimed blobs are usable only by
    their uploader until then). Waited for outside the hub's time, so that this work does not land on
    the next side's time, and reported beside it."""
    import psycopg

    t = time.perf_counter()
    with psycopg.connect(e.hub.env["DATABASE_URL"], autocommit=True) as db:
        while db.execute("SELECT count(*) FROM repos_blob WHERE NOT verified AND corrupt_at IS NULL "
                         "AND NOT remote").fetchone()[0]:
            if time.perf_counter() - t > limit:
                raise RuntimeError("the hub did not verify the uploaded blobs")
            time.sleep(0.1)
    return time.perf_counter() - t


def behind_text(s: Samples, tool: str) -> str:
    """What a tool left running after it returned (waited for outside its time)."""
    b = s.median(tool, "behind")
    if b is None:
        return ""
    if tool == "hf upload":
        return f"hf upload's xorbs reached the store {b:.1f} s after it returned (not in its time)"
    return f"{tool}: the hub's background check of the whole file ended {b:.1f} s after it returned (not in its time)"


# boto3's upload as a user runs it: a script of its own (interpreter, `import boto3`, a client), as every
# other side is a process of its own. The in-process side ("boto3") keeps the bench's warm client and
# its target; this one shows what the hub CLI's start-up weighs against a script's.
BOTO3_UPLOAD = ("import os, sys, boto3; from botocore.config import Config; "
                "boto3.client('s3', endpoint_url=os.environ['AWS_ENDPOINT_URL'], region_name='us-east-1', "
                "config=Config(s3={'addressing_style': 'path'})).upload_file(*sys.argv[1:4])")


def case_upload(e: Env, args, label: str, src: Path) -> None:
    """Case 7: the big file (alone in its folder `src`) uploaded by each tool, fresh bytes each time."""
    big = src / "big.bin"

    def one(tool: str, r: int) -> dict[str, float]:
        stamp(big)
        k = e.fresh("up").name
        log = e.logs / f"upload-{tool.replace(' ', '')}-{r}.log"
        cache = e.fresh("upcache")
        drop_page_cache()
        behind = None
        try:
            if tool == "hub cp":
                took = run([PY, "-m", "storage.cli", "cp", str(big), f"hub://volume/peers/{k}/big.bin", "-q"], log,
                           env=e.hub_env(cache)).seconds
                behind = verify_wait(e)
            elif tool == "hub push":
                took = run([PY, "-m", "storage.cli", "push", str(src), f"datasets/bench/{k}", "-q"], log,
                           env=e.hub_env(cache)).seconds
                behind = verify_wait(e)
            elif tool == "rclone copy":
                took = run(e.rclone("copy", str(big), f"rgw:{e.bucket}/{k}"), log, env=e.peer_env()).seconds
            elif tool == "hf upload":
                took = run([HF, "upload", f"bench/{k}", str(big), "big.bin", "--repo-type", "dataset"], log,
                           env=e.hf_env(cache)).seconds
                behind = xet_wait(e)
            elif tool == "boto3 script":
                took = run([PY, "-c", BOTO3_UPLOAD, str(big), e.bucket, f"{k}/big.bin"], log,
                           env=e.peer_env() | e.rgw).seconds
            else:
                t = time.perf_counter()
                e.s3.upload_file(str(big), e.bucket, f"{k}/big.bin")
                took = time.perf_counter() - t
            return {"time": took, "behind": behind}
        finally:
            shutil.rmtree(cache, ignore_errors=True)
            if tool in ("rclone copy", "boto3", "boto3 script"):
                e.delete_prefix(f"{k}/")  # the one-node store's space

    tools = ["hub cp", "hub push", "boto3", "boto3 script", "rclone copy", "hf upload"]
    s = rounds(e, tools, args.rounds, one, "upload big")
    peers = {"boto3": "boto3 upload_file", "boto3 script": "boto3 upload_file (a script of its own)",
             "rclone copy": "rclone copy", "hf upload": "hf upload"}

    for hub in ("hub cp", "hub push"):
        ratio_rows(s, hub, "time", f"{label} upload ({'to the volume' if hub == 'hub cp' else 'new repo'})", peers,
                   {"boto3": 1.0}, lambda peer, hub=hub: "; ".join(x for x in (behind_text(s, hub),
                                                                                 behind_text(s, peer)) if x))


def case_push_small(e: Env, args, src: Path, rels: list[str]) -> None:
    n = len(rels)

    def one(tool: str, r: int) -> dict[str, float]:
        for rel in rels:  # bytes nobody has uploaded yet
            (src / rel).write_bytes(os.urandom(4096))
        k = e.fresh("push").name
        log = e.logs / f"pushsmall-{tool.replace(' ', '')}-{r}.log"
        cache = e.fresh("pushcache")
        drop_page_cache()
        behind = None
        try:
            if tool == "hub push":
                took = run([PY, "-m", "storage.cli", "push", str(src), f"datasets/bench/{k}", "-q"], log,
                           env=e.hub_env(cache)).seconds
                behind = verify_wait(e)
            elif tool == "rclone copy":
                took = run(e.rclone("copy", str(src), f"rgw:{e.bucket}/{k}", *RCLONE_SMALL_COPY), log,
                           env=e.peer_env()).seconds
            else:
                took = run([HF, "upload", f"bench/{k}", str(src), ".", "--repo-type", "dataset"], log,
                           env=e.hf_env(cache)).seconds
                behind = xet_wait(e)
            return {"time": took, "behind": behind}
        finally:
            shutil.rmtree(cache, ignore_errors=True)
            if tool == "rclone copy":
                e.delete_prefix(f"{k}/")

    tools = [t for t in ["hub push", "rclone copy", "hf upload"] if t not in args.skip]
    s = rounds(e, tools, args.small_rounds, one, "upload small")

    ratio_rows(s, "hub push", "time", f"{n:,} × 4 KiB upload (new repo)",
               {k: v for k, v in {"rclone copy": f"rclone copy {' '.join(RCLONE_SMALL_COPY)}",
                                  "hf upload": "hf upload"}.items() if k in tools},
               {"rclone copy": 1.0}, lambda peer: "; ".join(x for x in (behind_text(s, "hub push"),
                                                                        behind_text(s, peer)) if x))


def case_cpu(e: Env, label: str, size: int, pulls: Samples | None, reads: Samples | None) -> None:
    gib = size / GiB
    if pulls is not None:
        log = e.logs / "startup.log"
        start_hub_cli = statistics.median(run([PY, "-m", "storage.cli", "--version"], log).cpu for _ in range(3))
        start_rclone = statistics.median(run([RCLONE, "version"], log, env=e.peer_env()).cpu for _ in range(3))
        h, p = pulls.median("hub pull", "cpu"), pulls.median("rclone copy", "cpu")
        b = pulls.median("boto3", "cpu")
        hf = pulls.median("hf download", "cpu")
        ratio = p / h if h and p else None
        detail = (f"CPU s/GiB: hub pull {fmt(h and h / gib, 's')}, rclone copy {fmt(p and p / gib, 's')}, "
                  f"boto3 download_file {fmt(b and b / gib, 's')} (in-process), hf download {fmt(hf and hf / gib, 's')};"
                  f" the whole client process, start-up included (start-up alone: hub CLI {start_hub_cli:.2f} s, "
                  f"rclone {start_rclone:.2f} s); target: hub ≤ 1.5 × rclone")
        report(BENCH, f"client CPU for a {label} download: rclone copy / hub pull", ratio=ratio, target=0.67,
               detail=detail)
    if reads is not None:
        h = reads.median("hub", "cpu")
        for peer in MOUNTS[1:]:
            p = reads.median(peer, "cpu")
            ratio = p / h if h and p else None
            detail = (f"CPU s/GiB of the mount process during the cold dd: hub mount {fmt(h and h / gib, 's')}, "
                      f"{NAMES[peer]} {fmt(p and p / gib, 's')}; target: hub ≤ 1.5 × rclone")
            report(BENCH, f"mount process CPU for a {label} cold read: {NAMES[peer]} / hub mount", ratio=ratio,
                   target=0.67 if peer.startswith("rclone") else None, detail=detail)


def case_memory(e: Env, label: str, src: Path) -> None:
    """The hub server's RSS (gunicorn master + workers), sampled every 0.2 s while one client uploads
    the big file (hub cp to the volume) and then pulls it (hub pull): 2 × SIZE through the hub's hands
    (presigned: the bytes go between the client and the store, the server signs and commits)."""
    import psutil

    master = psutil.Process(e.hub.proc.pid)
    samples: list[tuple[float, int]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            total = 0
            for p in [master, *master.children(recursive=True)]:
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
            samples.append((time.monotonic(), total))
            stop.wait(0.2)

    big = src / "big.bin"
    stamp(big)
    drop_page_cache()
    k = e.fresh("mem").name
    cache = e.fresh("memcache")
    sampler = threading.Thread(target=sample, daemon=True)
    t = time.perf_counter()
    l0 = load()
    sampler.start()
    try:
        up = run([PY, "-m", "storage.cli", "cp", str(big), f"hub://volume/peers/{k}/big.bin", "-q"],
                 e.logs / "memory.log", env=e.hub_env(cache)).seconds
        down = run([PY, "-m", "storage.cli", "pull", "datasets/bench/big", "-q"], e.logs / "memory.log",
                   env=e.hub_env(cache)).seconds
    finally:
        stop.set()
        sampler.join()
        shutil.rmtree(cache, ignore_errors=True)
    rss = [x for _, x in samples]
    lo, hi = min(rss) / MiB, max(rss) / MiB
    detail = (f"server RSS (gunicorn master + {len(master.children())} workers), {len(rss)} samples every 0.2 s "
              f"over {time.perf_counter() - t:.1f} s (hub cp up {up:.2f} s, hub pull down {down:.2f} s): "
              f"min {lo:.0f} MiB, max {hi:.0f} MiB, max − min {hi - lo:.1f} MiB; load {l0} → {load()}")
    report(BENCH, f"hub server memory while moving 2 × {label} (flat memory)", ratio=None, detail=detail)
    print(f"  memory: {detail}", flush=True)


# --- setup ----------------------------------------------------------------------------------------------


def versions() -> list[str]:
    import boto3
    import huggingface_hub

    def first(cmd: list[str]) -> str:
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
            return (r.stdout or r.stderr).splitlines()[0].strip()
        except (OSError, IndexError, subprocess.TimeoutExpired) as err:
            return f"{cmd[0]}: {err}"

    from importlib.metadata import PackageNotFoundError, version

    try:
        xet = version("hf_xet")
    except PackageNotFoundError:
        xet = "absent"
    return [first([RCLONE, "--version"]), first([S3FS, "--version"]), f"boto3 {boto3.__version__}",
            f"huggingface_hub {huggingface_hub.__version__}, hf_xet {xet}", f"Python {platform.python_version()}, "
            f"Linux {platform.release()}, {os.cpu_count()} CPUs (store, hub and clients share them)"]


def write_tree(root: Path, n: int) -> list[str]:
    rels = []
    for i in range(n):
        rel = f"d{i // 1000:02d}/{i:05d}.bin"
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(os.urandom(4096))
        rels.append(rel)
    return rels


def wanted(only: list[str] | None) -> set[int]:
    if not only:
        return set(CASES)
    by_name = {v: k for k, v in CASES.items()}
    out = set()
    for x in only:
        for part in x.split(","):
            part = part.strip()
            if part.isdigit() and int(part) in CASES:
                out.add(int(part))
            elif part in by_name:
                out.add(by_name[part])
            elif part:
                sys.exit(f"unknown case {part!r}: choose from {', '.join(f'{k} {v}' for k, v in CASES.items())}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3, help="rounds of each case (median reported)")
    ap.add_argument("--small-rounds", type=int, default=1,
                    help="rounds of the small-file cases 4, 6 and 8 (default 1: a peer's sequential read of 5,000 "
                         "files through its mount takes ~4 min here, `hf upload` of them ~4 min)")
    ap.add_argument("--small-mounts", default="rclone-off,s3fs",
                    help="the peers' mounts of case 4 (default rclone-off,s3fs; rclone-full reads small files "
                         "as rclone-off does, ~48 ms a file either way, and would add ~4 min)")
    ap.add_argument("--size", default="1GiB", help="the big file")
    ap.add_argument("--skip", nargs="+", default=[], metavar="TOOL",
                    help="peers left out of the small-file upload (e.g. --skip 'hf upload': ~4 min a round)")
    ap.add_argument("--files", type=int, default=5000, help="files of 4 KiB")
    ap.add_argument("--quick", action="store_true", help="128 MiB, 500 files, 1 round")
    ap.add_argument("--only", nargs="+", metavar="CASE", help="cases by number or name: " +
                    ", ".join(f"{k} {v}" for k, v in CASES.items()))
    args = ap.parse_args()
    if args.quick:
        args.size, args.files, args.rounds = "128MiB", 500, 1
    args.small_mounts = [m for m in args.small_mounts.split(",") if m]
    if set(args.small_mounts) - set(MOUNTS[1:]):
        sys.exit(f"--small-mounts: choose from {', '.join(MOUNTS[1:])}")
    want = wanted(args.only)
    for tool in ("fusermount3", RCLONE, S3FS, "dd"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is missing")
    size = parse_size(args.size)
    label = f"{size / MiB:.0f} MiB" if size < GiB else f"{size / GiB:g} GiB"
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the finally blocks still run
    started = time.perf_counter()
    print("# bench/peers.py " + " ".join(sys.argv[1:]), flush=True)
    for line in versions():
        print(f"# {line}", flush=True)
    print(f"# load at start {load()}; cases {sorted(want)}; rounds {args.rounds} (small-file cases 4, 6, 8: "
          f"{args.small_rounds}; mounts of case 4: hub, {', '.join(args.small_mounts)})", flush=True)
    print(f"# rclone mount: --vfs-cache-mode off | full, --cache-dir <empty dir>, otherwise defaults; rclone copy: "
          f"{' '.join(RCLONE_BIG_COPY)} (big download), {' '.join(RCLONE_SMALL_COPY)} (small files), defaults for the "
          "big upload; s3fs: -f -o url=http://127.0.0.1:7480,use_path_request_style,passwd_file=FILE (defaults "
          "otherwise: no use_cache)", flush=True)

    tmp = Path(tempfile.mkdtemp(prefix="peers-bench-"))
    hub, rgw, _hub_bucket, stop = start_hub(tmp)
    e = None
    peer_bucket = f"peers-bench-{uuid.uuid4().hex[:10]}"
    try:
        import boto3
        from botocore.config import Config

        s3 = boto3.client("s3", endpoint_url=rgw["AWS_ENDPOINT_URL"], aws_access_key_id=rgw["AWS_ACCESS_KEY_ID"],
                          aws_secret_access_key=rgw["AWS_SECRET_ACCESS_KEY"], region_name="us-east-1",
                          config=Config(max_pool_connections=16, s3={"addressing_style": "path"}))
        s3.create_bucket(Bucket=peer_bucket)
        conf = tmp / "rclone.conf"
        conf.write_text(f"[rgw]\ntype = s3\nprovider = Ceph\nendpoint = {rgw['AWS_ENDPOINT_URL']}\n"
                        f"access_key_id = {rgw['AWS_ACCESS_KEY_ID']}\nsecret_access_key = {rgw['AWS_SECRET_ACCESS_KEY']}\n")
        conf.chmod(0o600)
        passwd = tmp / "s3fs.passwd"
        passwd.write_text(f"{rgw['AWS_ACCESS_KEY_ID']}:{rgw['AWS_SECRET_ACCESS_KEY']}\n")
        passwd.chmod(0o600)
        logs = tmp / "logs"
        logs.mkdir()
        token = hub.token("bench")
        e = Env(tmp, hub, token, rgw, peer_bucket, s3, conf, passwd, logs)
        client = HubClient(hub.url, token)

        big_src, small_src = tmp / "src-big", tmp / "src-small"
        big_src.mkdir()
        t = time.perf_counter()
        with open(big_src / "big.bin", "wb") as fh:
            left = size
            while left:
                fh.write(os.urandom(min(left, 64 * MiB)))
                left -= min(left, 64 * MiB)
        rels = write_tree(small_src, args.files)
        e.small_keys = [f"small/{rel}" for rel in rels]
        need_big = bool(want & {1, 2, 3, 5, 9, 10})
        need_small = bool(want & {4, 6})
        if need_big:
            push(client, big_src, "dataset", "bench/big", progress=False)
            s3.upload_file(str(big_src / "big.bin"), peer_bucket, "big/big.bin")
            say(f"published {label} (hub push + boto3) in {time.perf_counter() - t:.1f} s")
        if need_small:
            t = time.perf_counter()
            push(client, small_src, "dataset", "bench/small", progress=False)
            t_push = time.perf_counter() - t
            t = time.perf_counter()
            with ThreadPoolExecutor(16) as pool:
                list(pool.map(lambda rel: s3.put_object(Bucket=peer_bucket, Key=f"small/{rel}",
                                                        Body=(small_src / rel).read_bytes()), rels))
            say(f"published {args.files} small files: hub push {t_push:.1f} s, boto3 (16 threads) "
                f"{time.perf_counter() - t:.1f} s")

        reads = pulls = None
        if want & {1, 3, 9, 10}:
            reads = case_cold_warm(e, args, label, want)
        if 2 in want:
            case_pyread(e, args, label, size)
        if 4 in want:
            case_small_mount(e, args, rels)
        if want & {5, 9}:
            pulls = case_pull(e, args, label, size)
        if 6 in want:
            case_pull_small(e, args, args.files)
        if 7 in want:
            case_upload(e, args, label, big_src)
        if 8 in want:
            case_push_small(e, args, small_src, rels)
        if 9 in want:
            case_cpu(e, label, size, pulls, reads)
        if 10 in want:
            case_memory(e, label, big_src)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second TERM must not leave mounts, buckets, a database
        if e is not None:
            unmount_all(e)
        from tests.support.servers import drop_bucket

        try:
            drop_bucket(rgw, peer_bucket)
        finally:
            stop()
            if os.environ.get("BENCH_KEEP_LOGS"):
                say(f"logs kept in {tmp / 'logs'}")
                shutil.rmtree(tmp / "data", ignore_errors=True)
            else:
                shutil.rmtree(tmp, ignore_errors=True)
        print(f"# load at end {load()}; took {time.perf_counter() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
