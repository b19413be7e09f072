"""Checkpoints that survive the instance: save atomically, find the latest complete one, resume.

    from storage.fs.checkpoint import Checkpoints

    ckpts = Checkpoints("hub://volume/runs/exp1")      # or "/mnt/hub/volume/runs/exp1", or any local dir
    latest = ckpts.latest()                             # None on a fresh run
    if latest is not None:
        state = latest.load_torch("state.pt")           # sha256-checked while it loads
        step = latest.step
    ...
    ckpts.save_torch(step, {"model": model.state_dict(), "optim": opt.state_dict()})

Layout: `ROOT/step-00000042/` holds the files and, written last, `checkpoint.json` — the manifest
(step, every file's size and sha256, your metadata). A checkpoint exists only once its manifest
does, so a process killed half-way through a save leaves a directory that `latest()` skips (and the
next save of that step clears). Each file, and the manifest, is written under a temporary name and
renamed into place; where the filesystem has no rename (some object-store mounts) the file is
written in place, which is still safe because only the manifest makes a checkpoint count.

`latest()` never trusts a directory name: it walks steps from the highest down and returns the
first whose manifest parses and whose files are all there with the sizes it records; loading
verifies the sha256 and raises CorruptCheckpointError on a mismatch (then use
`latest(verify=True)`, which hashes every file, to fall back to an older one).

Any fsspec URL works; for `torch.distributed.checkpoint`, give `dcp_dir(step)` to its
FileSystemWriter/FsspecWriter and call `commit(step, ...)` after `dcp.save` returns. Imports
neither Django nor torch (torch is imported only by the *_torch helpers).
"""
from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import fsspec

MANIFEST = "checkpoint.json"
FORMAT = 1
STEP_DIR = re.compile(r"step-(\d{8,})$")
CHUNK = 8 * 2**20

Payload = bytes | Callable[[BinaryIO], None]


class CorruptCheckpointError(OSError):
    """A checkpoint file does not match its manifest (size or sha256)."""


@dataclass
class Checkpoint:
    step: int
    path: str  # the step directory, as the filesystem names it
    files: dict[str, dict]  # name → {"size", "sha256"}
    metadata: dict = field(default_factory=dict)
    fs: Any = None

    def open(self, name: str) -> BinaryIO:
        """The file's bytes, in a local temporary file, after checking size and sha256."""
        want = self.files.get(name)
        if want is None:
            raise FileNotFoundError(f"checkpoint step {self.step} has no file {name!r} (it has {sorted(self.files)})")
        out = tempfile.TemporaryFile()
        h, n = hashlib.sha256(), 0
        with self.fs.open(f"{self.path}/{name}", "rb", block_size=CHUNK) as src:
            while chunk := src.read(CHUNK):
                h.update(chunk)
                out.write(chunk)
                n += len(chunk)
        if n != want["size"] or h.hexdigest() != want["sha256"]:
            out.close()
            raise CorruptCheckpointError(f"{self.path}/{name}: {n} bytes with sha256 {h.hexdigest()}, but the "
                                         f"manifest says {want['size']} bytes with sha256 {want['sha256']}")
        out.seek(0)
        return out

    def read_bytes(self, name: str) -> bytes:
        with self.open(name) as f:
            return f.read()

    def load_torch(self, name: str = "state.pt", **kwargs):
        import torch

        kwargs.setdefault("map_location", "cpu")
        kwargs.setdefault("weights_only", True)
        with self.open(name) as f:
            return torch.load(f, **kwargs)

    def verify(self) -> None:
        for name in self.files:
            self.open(name).close()


class Checkpoints:
    def __init__(self, url: str, *, keep: int | None = None, **storage_options) -> None:
        self.fs, root = fsspec.core.url_to_fs(url, **storage_options)
        self.root = root.rstrip("/")
        self.keep = keep

    # --- writing ---------------------------------------------------------------------------------

    def step_dir(self, step: int) -> str:
        if not isinstance(step, int) or step < 0:
            raise ValueError(f"step must be a non-negative integer, not {step!r}")
        return f"{self.root}/step-{step:08d}"

    def save(self, step: int, files: dict[str, Payload], *, metadata: dict | None = None) -> Checkpoint:
        """Writes `files` (name → bytes, or a function that writes to a binary file) as checkpoint
        `step`, manifest last. Replaces an incomplete directory of that step; refuses to overwrite
        a complete one (FileExistsError)."""
        if not files:
            raise ValueError("a checkpoint needs at least one file")
        for name in files:
            if not name or name == MANIFEST or "/" in name or name.startswith("."):
                raise ValueError(f"bad checkpoint file name {name!r}")
        directory = self._fresh_dir(step)
        record = {}
        for name, payload in files.items():
            record[name] = self._write(f"{directory}/{name}", payload)
        self.commit(step, record, metadata=metadata)
        return self._read(step)

    def save_torch(self, step: int, obj, name: str = "state.pt", *, metadata: dict | None = None) -> Checkpoint:
        import torch

        return self.save(step, {name: lambda f: torch.save(obj, f)}, metadata=metadata)

    def dcp_dir(self, step: int) -> str:
        """A fresh step directory (as a URL) for writers that lay out their own files
        (torch.distributed.checkpoint's FsspecWriter): write there, then `commit(step)`."""
        self._fresh_dir(step)
        return self.url(step)

    def url(self, step: int) -> str:
        """The step directory as a URL any fsspec user (FsspecReader, Lightning) can open."""
        return self.fs.unstrip_protocol(self.step_dir(step))

    def commit(self, step: int, files: dict[str, dict] | None = None, *, metadata: dict | None = None) -> None:
        """Makes checkpoint `step` count by writing its manifest. Without `files`, records (and
        hashes) whatever the step directory holds."""
        directory = self.step_dir(step)
        if files is None:
            files = {}
            for info in self.fs.ls(directory, detail=True):
                name = info["name"].rstrip("/").rsplit("/", 1)[-1]
                if info["type"] == "file" and name != MANIFEST and not name.startswith(".tmp-"):
                    files[name] = {"size": info["size"], "sha256": self._sha256(info["name"])}
        manifest = {"format": FORMAT, "step": step, "created": time.time(), "files": files,
                    "metadata": metadata or {}}
        self._write(f"{directory}/{MANIFEST}", json.dumps(manifest, indent=1, sort_keys=True).encode())
        if self.keep:
            self.prune(self.keep)

    # --- reading ---------------------------------------------------------------------------------

    def steps(self) -> list[int]:
        """Step numbers that have a directory, complete or not, highest first."""
        self.fs.invalidate_cache(self.root)  # another process (instance) may have saved since
        try:
            names = self.fs.ls(self.root, detail=False)
        except FileNotFoundError:
            return []
        found = [int(m.group(1)) for n in names if (m := STEP_DIR.match(n.rstrip("/").rsplit("/", 1)[-1]))]
        return sorted(found, reverse=True)

    def latest(self, *, verify: bool = False) -> Checkpoint | None:
        """The highest complete checkpoint: manifest present and every file there at its size (and,
        with verify=True, its sha256)."""
        for step in self.steps():
            ckpt = self._read(step)
            if ckpt is None:
                continue
            if verify:
                try:
                    ckpt.verify()
                except (CorruptCheckpointError, FileNotFoundError):
                    continue
            return ckpt
        return None

    def list(self) -> list[Checkpoint]:
        return [c for s in self.steps() if (c := self._read(s)) is not None]

    def prune(self, keep: int) -> list[int]:
        """Deletes complete checkpoints beyond the newest `keep`, and incomplete directories older than
        the newest complete one. Returns the steps removed."""
        complete = [c.step for c in self.list()]
        if not complete:
            return []
        newest = complete[0]
        doomed = complete[max(keep, 1):] + [s for s in self.steps() if s < newest and s not in complete]
        for step in doomed:
            self.fs.rm(self.step_dir(step), recursive=True)
        return doomed

    # --- internals -------------------------------------------------------------------------------

    def _fresh_dir(self, step: int) -> str:
        directory = self.step_dir(step)
        if self.fs.exists(directory):
            if self._read(step) is not None:
                raise FileExistsError(f"checkpoint step {step} already exists at {directory}")
            self.fs.rm(directory, recursive=True)  # what a killed save left behind
        self.fs.makedirs(directory, exist_ok=True)
        return directory

    def _read(self, step: int) -> Checkpoint | None:
        directory = self.step_dir(step)
        self.fs.invalidate_cache(directory)
        try:
            with self.fs.open(f"{directory}/{MANIFEST}", "rb") as f:
                manifest = json.loads(f.read())
            files = manifest["files"]
            if manifest.get("format") != FORMAT or manifest.get("step") != step or not isinstance(files, dict):
                return None
            sizes = {info["name"].rstrip("/").rsplit("/", 1)[-1]: info.get("size")
                     for info in self.fs.ls(directory, detail=True)}
        except (FileNotFoundError, ValueError, KeyError, TypeError):
            return None
        if any(sizes.get(name) != meta.get("size") for name, meta in files.items()):
            return None
        return Checkpoint(step, directory, files, manifest.get("metadata") or {}, self.fs)

    def _sha256(self, path: str) -> str:
        h = hashlib.sha256()
        with self.fs.open(path, "rb", block_size=CHUNK) as f:
            while chunk := f.read(CHUNK):
                h.update(chunk)
        return h.hexdigest()

    def _write(self, path: str, payload: Payload) -> dict:
        """Writes via a local temporary file (so writers that seek work, and the sha256 is known),
        then to a temporary name beside `path`, then renames. Returns {size, sha256}."""
        with tempfile.TemporaryFile() as local:
            if isinstance(payload, bytes | bytearray | memoryview):
                local.write(payload)
            else:
                payload(local)
            local.flush()
            local.seek(0)
            h, size = hashlib.sha256(), 0
            while chunk := local.read(CHUNK):
                h.update(chunk)
                size += len(chunk)
            parent, name = path.rsplit("/", 1)
            tmp = f"{parent}/.tmp-{name}-{uuid.uuid4().hex[:8]}"
            self._copy(local, tmp)
            try:
                self.fs.mv(tmp, path)
            except (NotImplementedError, OSError):
                # No rename here: write in place (the manifest, written last, is what makes it count).
                self.fs.rm(tmp)
                self._copy(local, path)
        return {"size": size, "sha256": h.hexdigest()}

    def _copy(self, local: BinaryIO, path: str) -> None:
        local.seek(0)
        with self.fs.open(path, "wb") as out:
            shutil.copyfileobj(local, out, CHUNK)


def torch_bytes(obj) -> bytes:
    """torch.save into bytes (for small states, e.g. RNG states in metadata-sized files)."""
    import torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


__all__ = ["Checkpoint", "Checkpoints", "CorruptCheckpointError", "MANIFEST", "torch_bytes"]
