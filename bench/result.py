"""One line per measured ratio, for bench/run to collect:  RESULT {"bench": ..., "case": ..., ...}

    report("pull_vs_boto3", "1 GiB, hub pull / boto3", ratio=0.63, target=0.9, detail="1.72 s vs 2.71 s")

`ratio` is ours relative to the baseline (higher is better); `target` the ratio the issue asks for
(None: no target, reported only)."""
from __future__ import annotations

import json
import sys


def report(bench: str, case: str, *, ratio: float | None, target: float | None = None, detail: str = "") -> None:
    line = {"bench": bench, "case": case, "ratio": None if ratio is None else round(ratio, 3), "target": target,
            "detail": detail}
    print("RESULT " + json.dumps(line, ensure_ascii=False), flush=True)
    sys.stdout.flush()
