"""`hub mount` as a user runs it: a detached process per mount (an endpoint, a token, a cache
directory), and the mounts a test made, all unmounted at its end whatever happened."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.servers import ROOT


def _fuse_missing() -> str | None:
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing"
    if shutil.which("fusermount3") is None:
        return "fusermount3 is missing (apt-get install fuse3)"
    try:
        import mfusepy  # noqa: F401

        import storage.mount  # noqa: F401 - picks libfuse3 for mfusepy
    except (ImportError, OSError) as err:
        return f"mfusepy cannot load libfuse3: {err}"
    return None


def client_env(hub, token: str, cache: Path, **extra: str) -> dict[str, str]:
    """An instance's environment: the hub's address, a token, a cache directory; nothing of Django."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUB_", "HUGGINGFACE_", "DJANGO_", "AWS_"))}
    return env | {"HUB_ENDPOINT": hub.url, "HUB_TOKEN": token, "HUB_CACHE_DIR": str(cache),
                  "HUB_DISABLE_PROGRESS_BARS": "1", "PYTHONPATH": str(ROOT)} | extra


def hub_mount(env: dict[str, str], *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "storage.mount", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
    return proc


def _pidfile(cache: Path, path: Path) -> Path:
    return cache / "run" / f"{hashlib.sha256(os.path.abspath(path).encode()).hexdigest()[:20]}.json"


class Mounts:
    """Mounts made by a test; all of them go away at its end, whatever happened."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.made: list[tuple[Path, Path]] = []  # (mount point, cache dir)

    def mount(self, env: dict[str, str], what: str, name: str, *extra: str) -> Path:
        path = self.base / name
        self.made.append((path, Path(env["HUB_CACHE_DIR"])))
        ok(hub_mount(env, "mount", what, str(path), "--log-file", str(self.base / f"{name}.log"), *extra))
        assert os.path.ismount(path)
        return path

    def pid(self, path: Path) -> int | None:
        for p, cache in self.made:
            if p == path:
                try:
                    return json.loads(_pidfile(cache, path).read_text())["pid"]
                except (FileNotFoundError, ValueError, KeyError):
                    return None
        return None

    def log(self, name: str) -> str:
        p = self.base / f"{name}.log"
        return p.read_text() if p.exists() else ""

    def cleanup(self) -> None:
        for path, _cache in reversed(self.made):
            pid = self.pid(path)
            subprocess.run(["fusermount3", "-u", "-z", str(path)], capture_output=True)
            if pid:
                _stop(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False


def _stop(pid: int) -> None:
    deadline = time.time() + 10
    while time.time() < deadline and _alive(pid):
        time.sleep(0.05)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not _alive(pid):
            return
        os.kill(pid, sig)
        time.sleep(1)
