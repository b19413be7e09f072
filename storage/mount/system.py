"""The machine side of mounting: the mount table, fusermount3, mount points, pid files."""
from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from storage.client import HubClientError, UsageError
from storage.transfer.blobcache import alive, cache_dir


def _unescape(field: str) -> str:
    """Mount points in /proc/self/mountinfo escape space, tab, newline and backslash as \\ooo."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 3 < len(field) and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mounts() -> list[tuple[str, str, str]]:
    """(mount point, filesystem type, source) of every mount this process sees. Reads the mount
    table, never the mount points themselves (a dead FUSE mount would answer ENOTCONN, or hang)."""
    out = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            left, _, right = line.partition(" - ")
            fields, rest = left.split(), right.split()
            if len(fields) >= 5 and len(rest) >= 2:
                out.append((_unescape(fields[4]), rest[0], _unescape(rest[1])))
    return out


def is_mounted(path: str | Path) -> bool:
    p = os.path.abspath(path)
    return any(mp == p for mp, _, _ in mounts())


def device_of(path: str | Path) -> str | None:
    """major:minor of the mount at `path`, from the mount table."""
    p = os.path.abspath(path)
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            fields = line.split()
            if len(fields) >= 5 and _unescape(fields[4]) == p:
                return fields[2]
    return None


def fuse_mounts_under(root: str | Path) -> list[str]:
    """FUSE mount points at or below `root`, deepest first."""
    r = os.path.abspath(root)
    found = [mp for mp, fstype, _ in mounts()
             if fstype.startswith("fuse") and (mp == r or mp.startswith(r.rstrip("/") + "/"))]
    return sorted(set(found), key=lambda p: (-p.count("/"), p))


def check_fuse() -> None:
    """UsageError naming what to install when FUSE cannot work here."""
    if not os.path.exists("/dev/fuse"):
        raise UsageError("FUSE is not available here: /dev/fuse is missing (load the fuse module, or give the "
                         "container --device /dev/fuse --cap-add SYS_ADMIN)", code="NoFuse")
    if shutil.which("fusermount3") is None:
        raise UsageError("fusermount3 is missing: install FUSE 3 (apt-get install fuse3)", code="NoFuse")


def prepare_mountpoint(path: str) -> str:
    """The absolute mount point, created if missing; a mount left by a process that died is
    detached first. HubClientError if something is mounted there already."""
    p = os.path.abspath(os.path.expanduser(path))
    if is_mounted(p):
        try:
            os.stat(p)
        except OSError as err:
            if err.errno != errno.ENOTCONN:
                raise
            fusermount(p, lazy=True)  # the mount of a process that is gone
        else:
            raise HubClientError(f"{p} is already a mount point: run `hub umount {p}` first", code="AlreadyMounted")
    try:
        os.makedirs(p, exist_ok=True)
    except OSError as err:
        raise HubClientError(f"cannot create the mount point {p}: {err.strerror}", code="BadMountPoint") from None
    if not os.path.isdir(p):
        raise HubClientError(f"{p} is not a directory", code="BadMountPoint")
    if os.listdir(p):
        raise HubClientError(f"{p} is not empty: mount on an empty directory (what is in it would be hidden)",
                             code="BadMountPoint")
    return p


def fusermount(path: str, *, lazy: bool = False) -> tuple[bool, str]:
    """Unmounts a FUSE mount; (done, what fusermount3 said)."""
    cmd = ["fusermount3", "-u", *(["-z"] if lazy else []), path]
    if shutil.which("fusermount3") is None:
        cmd = ["umount", *(["-l"] if lazy else []), path]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    return proc.returncode == 0, (proc.stderr or proc.stdout).strip()


def unmount(path: str, *, lazy: bool = False) -> str:
    """Unmounts `path` and waits for its mount process to end. A busy mount is detached lazily
    (it disappears once the last file on it is closed). Returns a note for the user, or ''."""
    ok, said = fusermount(path)
    note = ""
    if not ok:
        if not is_mounted(path):
            raise HubClientError(f"{path} is not mounted", code="NotMounted")
        if not lazy and "busy" not in said.lower():
            raise HubClientError(f"could not unmount {path}: {said}", code="UnmountFailed")
        ok, said = fusermount(path, lazy=True)
        if not ok:
            raise HubClientError(f"could not unmount {path}: {said}", code="UnmountFailed")
        note = f"{path} was busy: detached; it goes away when the last file on it is closed"
    info = read_pidfile(path)
    if info and not note:
        wait_gone(info["pid"], 30)
    return note


# --- pid files --------------------------------------------------------------------------------------

def run_dir() -> Path:
    d = cache_dir() / "run"
    d.mkdir(parents=True, exist_ok=True)
    return d


def pidfile(path: str | Path, kind: str = "mount") -> Path:
    """Where the process serving the mount at `path` (kind "mount"), or the agent mounting under
    `path` (kind "auto"), records its pid."""
    key = f"{kind}:{os.path.abspath(path)}"
    return run_dir() / f"{kind}-{hashlib.sha256(key.encode()).hexdigest()[:20]}.json"


def write_pidfile(path: str | Path, kind: str = "mount", **info) -> Path:
    p = pidfile(path, kind)
    tmp = p.with_name(p.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"pid": os.getpid(), "path": os.path.abspath(path), **info}))
    os.replace(tmp, p)
    return p


def read_pidfile(path: str | Path, kind: str = "mount") -> dict | None:
    """What the pid file says, if the process it names is alive."""
    try:
        info = json.loads(pidfile(path, kind).read_text())
    except (FileNotFoundError, ValueError):
        return None
    if not isinstance(info, dict) or not isinstance(info.get("pid"), int) or not alive(info["pid"]):
        return None
    return info


def remove_pidfile(path: str | Path, kind: str = "mount") -> None:
    p = pidfile(path, kind)
    try:
        if json.loads(p.read_text()).get("pid") == os.getpid():
            p.unlink()
    except (FileNotFoundError, ValueError):
        pass


def wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def terminate(pid: int, timeout: float = 30.0) -> None:
    """SIGTERM, then SIGKILL if it is still there after `timeout`."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    if not wait_gone(pid, timeout):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
