"""Trees of files on the local disk, as {relative posix path: bytes}; small disks that fill up."""
from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path

import pytest


def read_snapshot(folder: str | Path) -> dict[str, bytes]:
    root = Path(folder)
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".cache" not in p.relative_to(root).parts
    }


def make_tree(root: Path, files: dict[str, bytes]) -> dict[str, bytes]:
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return files


def read_tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".cache" not in p.relative_to(root).parts}


@contextlib.contextmanager
def small_disk(path: Path, size: str):
    """A tmpfs of `size` at `path` (root only), unmounted however the test ends."""
    path.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)
