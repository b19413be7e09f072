"""The one progress-bar wrapper of the client: tqdm on stderr, off when stderr is not a terminal,
with --quiet, or with HUB_DISABLE_PROGRESS_BARS=1 (HF_HUB_DISABLE_PROGRESS_BARS is honoured too);
HUB_PROGRESS=1 forces it on. Thread-safe: transfer workers update it concurrently.

Also how counts are written for people: with their noun in the right number (sizes: storage.sizes)."""
from __future__ import annotations

import os
import sys
import threading


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """'1 file', '3 files' (`nouns` for irregular plurals)."""
    return f"{n} {noun if n == 1 else nouns or noun + 's'}"


def enabled(quiet: bool = False) -> bool:
    if quiet:
        return False
    if os.environ.get("HUB_PROGRESS") == "1":
        return True
    for var in ("HUB_DISABLE_PROGRESS_BARS", "HF_HUB_DISABLE_PROGRESS_BARS"):
        if os.environ.get(var, "").lower() in ("1", "true", "yes"):
            return False
    return sys.stderr.isatty()


class Progress:
    """Bytes moved out of a total that may grow (manifest pages arrive while bytes flow)."""

    def __init__(self, desc: str, total: int = 0, *, show: bool = True) -> None:
        self._lock = threading.Lock()
        self.bar = None
        if show:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc=desc, unit="B", unit_scale=True, unit_divisor=1000,
                            file=sys.stderr, dynamic_ncols=True, mininterval=0.2, leave=True)

    def add_total(self, n: int) -> None:
        if self.bar is not None and n:
            with self._lock:
                self.bar.total = (self.bar.total or 0) + n
                self.bar.refresh()

    def update(self, n: int) -> None:
        if self.bar is not None and n:
            with self._lock:
                self.bar.update(n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
