"""The driver behind bench/run: run each benchmark, collect its RESULT lines, rewrite the table
between the markers in bench/README.md (the rest of the file is left alone)."""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = str(ROOT / ".venv" / "bin" / "python")
START, END = "<!-- bench/run: results start -->", "<!-- bench/run: results end -->"

# (name, full command, quick command). Every script runs its workload and its baseline in one run.
BENCHES = [
    ("volume_upload", "bench/volume_upload.py --rounds 3", "bench/volume_upload.py --rounds 1 --size-mib 256"),
    ("pull_vs_boto3", "bench/pull_vs_boto3.py --files 2000 --big 1GiB --runs 3",
     "bench/pull_vs_boto3.py --files 200 --big 128MiB --runs 1"),
    ("mount", "bench/mount.py --repeat 3", "bench/mount.py --quick"),
    ("catalog", "bench/catalog.py", "bench/catalog.py --repos 2000"),
    ("catalog_pg", "bench/catalog.py --database-url postgresql://postgres@127.0.0.1:5432/catalog_bench",
     "bench/catalog.py --repos 2000 --database-url postgresql://postgres@127.0.0.1:5432/catalog_bench"),
    ("mirror", "bench/mirror.py", "bench/mirror.py --quick"),
    ("xet", "bench/xet.py --size-mib 1024 --rounds 3", "bench/xet.py --size-mib 128"),
    ("ondemand", "bench/ondemand.py --size-mib 1024 --rounds 3", "bench/ondemand.py --size-mib 128 --rounds 1"),
    ("viewer", "bench/viewer.py --size-mib 1024 --requests 200", "bench/viewer.py --size-mib 128 --requests 50"),
    ("peers", "bench/peers.py --rounds 3", "bench/peers.py --quick"),
    ("tree_scale", "bench/tree_scale.py --files 1000000 --database-url "
                   "postgresql://postgres@127.0.0.1:5432/tree_scale_bench",
     "bench/tree_scale.py --files 20000"),
]


def run(name: str, command: str, logs: Path) -> tuple[list[dict], str]:
    script = ROOT / command.split()[0]
    if not script.exists():
        return [], f"missing ({script.name} not in this checkout)"
    log = logs / f"{name}.log"
    t = time.time()
    with open(log, "w") as out:
        proc = subprocess.run([PY, *command.split()], cwd=ROOT, stdout=subprocess.PIPE, stderr=out, text=True,
                              env=os.environ | {"PYTHONPATH": str(ROOT)})
    out_text = proc.stdout
    with open(log, "a") as out:
        out.write("\n--- stdout ---\n" + out_text)
    results = [json.loads(line[7:]) for line in out_text.splitlines() if line.startswith("RESULT ")]
    status = f"exit {proc.returncode}, {time.time() - t:.0f} s" if proc.returncode else f"{time.time() - t:.0f} s"
    return results, status


def table(rows: list[tuple[str, str, list[dict], str]], earlier: dict[str, list[str]]) -> str:
    """The results block: a row per measured case of the benchmarks run now, and the rows of the
    others as the last table had them (`--only` re-runs some and keeps the rest)."""
    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    lines = [START, "",
             f"Written by `bench/run` ({when}), {os.cpu_count()} CPUs (client, hub and store share them unless a case "
             "says otherwise). Ratio = ours "
             "relative to the baseline measured in the same run (higher is better).", "",
             "| benchmark | case | ratio | target | met | measured | when | command |", "|---|---|---|---|---|---|---|---|"]
    ran = {name: (command, results, status) for name, command, results, status in rows}
    for name, _, _ in BENCHES:
        if name not in ran:
            lines += earlier.get(name, [])
            continue
        command, results, status = ran[name]
        if not results:
            lines.append(f"| {name} | — | — | — | — | no result ({status}) | {when} | `{command}` |")
        for r in results:
            ratio = "—" if r["ratio"] is None else f"{r['ratio']:.2f}×"
            target = "—" if r["target"] is None else f"≥ {r['target']}×"
            met = "—" if r["target"] is None or r["ratio"] is None else ("yes" if r["ratio"] >= r["target"] else "no")
            lines.append(f"| {name} | {r['case']} | {ratio} | {target} | {met} | {r['detail']} | {when} | `{command}` |")
    lines += ["", END]
    return "\n".join(lines)


def earlier_rows(block: str) -> dict[str, list[str]]:
    """The rows of the last results table, by benchmark."""
    out: dict[str, list[str]] = {}
    for line in block.splitlines():
        name = line.strip("| ").split(" | ", 1)[0]
        if line.startswith("| ") and name != "benchmark":
            out.setdefault(name, []).append(line)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run; ratios are not comparable)")
    ap.add_argument("--only", nargs="*", help="run only these benchmarks (the table keeps the others' rows)")
    args = ap.parse_args()
    logs = ROOT / "bench" / "logs"
    logs.mkdir(exist_ok=True)
    subprocess.run(["bash", str(ROOT / "tests/s3/rgw.sh"), "start"], check=True, stdout=subprocess.DEVNULL)
    rows = []
    for name, full, quick in BENCHES:
        if args.only and name not in args.only:
            continue
        command = quick if args.quick else full
        print(f"[bench/run] {name}: {command}", file=sys.stderr, flush=True)
        results, status = run(name, command, logs)
        for r in results:
            print(f"  {r['case']}: {r['ratio']} (target {r['target']}) — {r['detail']}", file=sys.stderr)
        if not results:
            print(f"  no result: {status}; see bench/logs/{name}.log", file=sys.stderr)
        rows.append((name, command, results, status))
    readme = ROOT / "bench" / "README.md"
    text = readme.read_text()
    old = text[text.index(START):text.index(END)] if START in text and END in text else ""
    block = table(rows, earlier_rows(old))
    if START in text and END in text:
        text = text[:text.index(START)] + block + text[text.index(END) + len(END):]
    else:
        text = text.replace("# Benchmarks\n", "# Benchmarks\n\n" + block + "\n", 1)
    readme.write_text(text)
    print("[bench/run] bench/README.md updated", file=sys.stderr)


if __name__ == "__main__":
    main()
