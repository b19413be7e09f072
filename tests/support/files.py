"""Trees of files on the local disk, as {relative posix path: bytes}."""
from __future__ import annotations

from pathlib import Path


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
