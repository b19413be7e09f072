"""Reading through the FUSE mount vs raw boto3 from the same Ceph RGW, in one run:

* one 1 GiB file read sequentially through the mount, cold (empty cache, fresh mount) and warm
  (read again: page cache / local cache), against one boto3 `get_object` streamed to nothing;
* 10,000 files of 4 KiB read through the mount (fresh mount, empty cache) against 10,000 boto3
  `get_object` calls from one thread (what a data loader's reader does without the mount);
* `ls -R` (os.walk + stat) of the 10,000-file tree through the mount.

    .venv/bin/python bench/mount.py [--big 1GiB] [--files 10000] [--quick] [--repeat 3]

--repeat N does the big-file comparison (GET, fresh mount, cold read) N times and reports the
median ratio, with each run's ratio and the disk's work during each side (/proc/diskstats). Each
repeat also reads the same bytes from a local file on the same disk, cold: the ceiling of any
read path that fills the kernel's page cache, as the mount does so that warm reads stay in the kernel.

It starts RGW, a PostgreSQL database and a hub server of its own (bench/pull_vs_boto3.start_hub),
pushes two dataset repos with `hub push`, mounts them with `hub mount` into a temporary directory
(each mount with its own empty HUB_CACHE_DIR for the cold cases) and unmounts at the end.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import drop_page_cache, keys_of, start_hub  # noqa: E402
from bench.result import report  # noqa: E402
from storage.client import HubClient  # noqa: E402
from storage.sizes import parse_size  # noqa: E402
from storage.transfer.push import push  # noqa: E402

CHUNK = 4 << 20


def client_env(hub, token: str, cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUB_", "DJANGO_", "AWS_"))}
    return env | {"HUB_ENDPOINT": hub.url, "HUB_TOKEN": token, "HUB_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT),
                  "HUB_DISABLE_PROGRESS_BARS": "1"}


def mount(hub, token: str, repo: str, point: Path, cache: Path, log: Path) -> None:
    point.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "storage.cli", "mount", repo, str(point), "--log-file", str(log)],
                   env=client_env(hub, token, cache), check=True, stdout=subprocess.DEVNULL)
    assert os.path.ismount(point), f"{point} is not mounted"


def umount(point: Path) -> None:
    subprocess.run(["fusermount3", "-u", "-z", str(point)], capture_output=True)


def read_all(path: Path, stalls: list[tuple[float, int]] | None = None) -> int:
    """Reads the file through, in CHUNK reads; each read that took over 0.5 s goes into `stalls`
    (seconds, offset) when a list is given."""
    n = 0
    with open(path, "rb", buffering=0) as fh:
        while True:
            t = time.perf_counter()
            chunk = fh.read(CHUNK)
            if stalls is not None and (took := time.perf_counter() - t) > 0.5:
                stalls.append((took, n))
            if not chunk:
                return n
            n += len(chunk)


def disk_io() -> tuple[int, int, int]:
    """MiB read, MiB written and milliseconds busy so far, over the machine's disks."""
    disks = [d for d in os.listdir("/sys/block") if not d.startswith(("loop", "ram", "zram"))]
    r = w = busy = 0
    with open("/proc/diskstats") as fh:
        for line in fh:
            f = line.split()
            if f[2] in disks:
                r, w, busy = r + int(f[5]) // 2048, w + int(f[9]) // 2048, busy + int(f[12])
    return r, w, busy


def cpu_times() -> list[int]:
    """The machine's CPU ticks so far: user, nice, system, idle, iowait, irq, softirq, steal."""
    with open("/proc/stat") as fh:
        return [int(x) for x in fh.readline().split()[1:9]]


def disk_work(before: tuple[int, int, int], cpu_before: list[int] | None = None) -> str:
    r, w, busy = (b - a for a, b in zip(before, disk_io(), strict=True))
    out = f"disk read {r} MiB, wrote {w} MiB, busy {busy / 1000:.1f} s"
    if cpu_before is not None:  # where the two CPUs' time went meanwhile (steal: taken by the host)
        d = [b - a for a, b in zip(cpu_before, cpu_times(), strict=True)]
        hz = os.sysconf("SC_CLK_TCK")
        out += (f"; cpu user {(d[0] + d[1]) / hz:.1f} s, sys {(d[2] + d[5] + d[6]) / hz:.1f} s, "
                f"idle {d[3] / hz:.1f} s, iowait {d[4] / hz:.1f} s, steal {d[7] / hz:.1f} s")
    return out


ALL_CPUS = frozenset(os.sched_getaffinity(0))
STORE_DAEMONS = ("ceph-mon", "ceph-osd", "radosgw")
LAYOUTS = {
    "shared": "store and client share both CPUs",
    "split": "store on CPU 0, hub and client on CPU 1",
}


def pin(layout: str, hub) -> None:
    """Places the processes for one layout. "shared": everything may run on every CPU (the store's
    work and ours compete for the same two cores). "split": the store's daemons on the first CPU,
    this process (hence the mounts and readers it starts, and boto3) and the hub server on the other:
    the instance's CPU does only the client's work, as where the store runs on machines of its own.
    Affinity is per thread; threads started later inherit their creator's."""
    import psutil

    cpus = sorted(ALL_CPUS)
    store, ours = (set(cpus), set(cpus)) if layout == "shared" else ({cpus[0]}, set(cpus[1:]))
    procs = [(p, store) for p in psutil.process_iter(["name"]) if p.info["name"] in STORE_DAEMONS]
    server = psutil.Process(hub.proc.pid)
    procs += [(p, ours) for p in [server, *server.children(recursive=True)]]
    for proc, where in procs:
        try:
            threads = proc.threads()
        except psutil.Error:
            continue  # a process that ended meanwhile
        for t in threads:
            try:
                os.sched_setaffinity(t.id, where)
            except OSError:
                pass  # a thread that ended meanwhile: the others are still placed
    os.sched_setaffinity(0, ours)


def timed(fn, *args) -> float:
    t = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--big", default="1GiB")
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--quick", action="store_true", help="128 MiB and 1,000 files")
    ap.add_argument("--repeat", type=int, default=1, help="cold big-file comparisons to make (median reported)")
    ap.add_argument("--layouts", default="shared,split" if len(ALL_CPUS) > 1 else "shared",
                    help="CPU layouts of the big-file comparison: shared (store and client on every CPU), "
                         "split (store on CPU 0, hub and client on the others)")
    args = ap.parse_args()
    if args.quick:
        args.big, args.files = "128MiB", 1000
    if shutil.which("fusermount3") is None:
        sys.exit("fusermount3 is missing: apt-get install fuse3")
    tmp = Path(tempfile.mkdtemp(prefix="mount-bench-"))
    hub, rgw, bucket, stop = start_hub(tmp)
    points: list[Path] = []
    try:
        import boto3
        from botocore.config import Config

        token = hub.token("bench")
        client = HubClient(hub.url, token)
        big_src, small_src = tmp / "big", tmp / "small"
        big_src.mkdir()
        size = parse_size(args.big)
        with open(big_src / "big.bin", "wb") as fh:
            for _ in range(max(1, size // (64 << 20))):
                fh.write(os.urandom(min(size, 64 << 20)))
        for i in range(args.files):
            d = small_src / f"d{i // 1000:02d}"
            d.mkdir(parents=True, exist_ok=True)
            (d / f"{i:05d}.bin").write_bytes(os.urandom(4096))
        t = time.perf_counter()
        push(client, big_src, "dataset", "bench/big", progress=False)
        push(client, small_src, "dataset", "bench/small", progress=False)
        print(f"published in {time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True)
        s3 = boto3.client("s3", endpoint_url=rgw["AWS_ENDPOINT_URL"], aws_access_key_id=rgw["AWS_ACCESS_KEY_ID"],
                          aws_secret_access_key=rgw["AWS_SECRET_ACCESS_KEY"], region_name="us-east-1",
                          config=Config(s3={"addressing_style": "path"}))
        big_key = max(keys_of(client, "bench/big"), key=lambda ks: ks[1])[0]  # not .gitattributes
        small_keys = [k for k, s in keys_of(client, "bench/small") if s == 4096]

        def boto3_big() -> None:
            body = s3.get_object(Bucket=bucket, Key=big_key)["Body"]
            while body.read(CHUNK):
                pass

        def boto3_small() -> None:
            for key in small_keys:
                s3.get_object(Bucket=bucket, Key=key)["Body"].read()

        # --- one big file ---------------------------------------------------------------------------
        mb = size / 2**20
        layouts = [x for x in args.layouts.split(",") if x]
        unknown = set(layouts) - set(LAYOUTS)
        if unknown:
            sys.exit(f"unknown layout(s): {', '.join(sorted(unknown))}; choose from {', '.join(LAYOUTS)}")
        runs = 0
        try:
            for layout in layouts:
                pin(layout, hub)
                ratios: list[float] = []
                local_ratios: list[float] = []
                for _ in range(args.repeat):
                    n = runs
                    runs += 1
                    drop_page_cache()
                    before, cpu = disk_io(), cpu_times()
                    t_boto_big = timed(boto3_big)
                    boto_disk = disk_work(before, cpu)
                    # The ceiling of any read that fills the kernel's page cache (which the mount must, for
                    # warm reads that never enter Python): the same bytes read the same way from a local file.
                    drop_page_cache()
                    before, cpu = disk_io(), cpu_times()
                    t_local = timed(read_all, big_src / "big.bin")
                    local_disk = disk_work(before, cpu)
                    local_ratios.append(t_boto_big / t_local)
                    point = tmp / f"m-big{n}"
                    points.append(point)
                    mount(hub, token, "datasets/bench/big", point, tmp / f"cache-big{n}", tmp / f"mount-big{n}.log")
                    drop_page_cache()
                    before, cpu = disk_io(), cpu_times()
                    stalls: list[tuple[float, int]] = []
                    perf = None
                    if os.environ.get("BENCH_PERF"):  # a system-wide profile of the cold read: perf report -i FILE.N
                        perf = subprocess.Popen(["perf", "record", "-a", "-g", "-q", "-o", f"{os.environ['BENCH_PERF']}.{n}"],
                                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                        time.sleep(1.0)
                    t_cold = timed(read_all, point / "big.bin", stalls)
                    if perf is not None:
                        perf.send_signal(signal.SIGINT)
                        perf.wait()
                    cold_disk = disk_work(before, cpu)
                    ratios.append(t_boto_big / t_cold)
                    print(f"[{layout}] 1 file of {mb:.0f} MiB: boto3 {t_boto_big:.2f} s ({mb / t_boto_big:.0f} MiB/s; "
                          f"{boto_disk}) | local file cold {t_local:.2f} s ({mb / t_local:.0f} MiB/s; {local_disk}) | "
                          f"mount cold {t_cold:.2f} s ({mb / t_cold:.0f} MiB/s; {cold_disk}) | ratio {ratios[-1]:.2f} | "
                          f"local file / boto3 {local_ratios[-1]:.2f} | load {os.getloadavg()[0]:.1f}", flush=True)
                    try:
                        print(f"  mount counters: {os.getxattr(point, 'user.hub.stats').decode()}", flush=True)
                    except OSError:
                        pass
                    if stalls:  # a read that waited this long is a stall, not throughput: say where, with the mount's log
                        print("  reads over 0.5 s: " + ", ".join(f"{t:.2f} s at {o >> 20} MiB" for t, o in stalls), flush=True)
                        log_tail = (tmp / f"mount-big{n}.log").read_text().splitlines()[-20:]
                        print("  mount log:\n    " + "\n    ".join(log_tail), file=sys.stderr, flush=True)
                    if n == 0:
                        t_warm = timed(read_all, point / "big.bin")
                        print(f"  warm {t_warm:.2f} s ({mb / t_warm:.0f} MiB/s)", flush=True)
                        report("mount", f"{mb:.0f} MiB sequential read, warm / cold", ratio=t_cold / t_warm, target=2.0,
                               detail=f"cold {t_cold:.2f} s, warm {t_warm:.2f} s ({LAYOUTS[layout]})")
                    umount(point)
                report("mount", f"{mb:.0f} MiB sequential read, cold mount / boto3 ({LAYOUTS[layout]})",
                       ratio=statistics.median(ratios), target=0.7,
                       detail="runs: " + ", ".join(f"{r:.2f}" for r in ratios))
                report("mount", f"{mb:.0f} MiB sequential read, cold local file (page cache filled) / boto3 "
                       f"({LAYOUTS[layout]})", ratio=statistics.median(local_ratios),
                       detail="the same read of a local file on this disk; runs: "
                              + ", ".join(f"{r:.2f}" for r in local_ratios))
        finally:
            pin("shared", hub)  # the store is shared with other work: give it every CPU again

        # --- many small files -----------------------------------------------------------------------
        t_boto_small = timed(boto3_small)
        point = tmp / "m-small"
        points.append(point)
        mount(hub, token, "datasets/bench/small", point, tmp / "cache-small", tmp / "mount-small.log")

        def walk() -> int:
            n = 0
            for dirpath, _dirs, files in os.walk(point):
                for f in files:
                    os.stat(os.path.join(dirpath, f))
                    n += 1
            return n

        t_ls = timed(walk)
        paths = sorted(p for p in point.rglob("*.bin"))
        t_small = timed(lambda: [read_all(p) for p in paths])
        n = len(paths)
        print(f"{n} files of 4 KiB: boto3 GETs {t_boto_small:.2f} s ({n / t_boto_small:.0f} files/s) | mount "
              f"{t_small:.2f} s ({n / t_small:.0f} files/s) | ls -R {t_ls:.2f} s", flush=True)
        # The mount side pays for its listing too (a reader must find the files); boto3 is given the keys.
        report("mount", f"{n:,} × 4 KiB through the mount (ls -R + reads) / boto3 GETs",
               ratio=t_boto_small / (t_ls + t_small), target=1.0,
               detail=f"boto3 {t_boto_small:.2f} s, mount {t_ls:.2f} s listing + {t_small:.2f} s reading")
        report("mount", f"ls -R of {n:,} files", ratio=None, detail=f"{t_ls:.2f} s")
    finally:
        for p in points:
            umount(p)
        stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
