"""Starting a detached mount process and hearing back from it: where `--auto` mounts go
(mount_root), where a mount's log goes (default_log), the pipe over which the process says it is
ready (Ready), and spawn, which starts `python -m storage.mount ... --foreground` and waits for it.
Shared by the `mount` command (commands) and the `--auto` agent (agent)."""
from __future__ import annotations

import argparse
import os
import select
import subprocess
import sys
import time
from pathlib import Path

from storage.client import HubClientError
from storage.mount import system
from storage.transfer.blobcache import cache_dir


def mount_root(args: argparse.Namespace) -> Path:
    return Path(os.path.abspath(args.root or os.environ.get("HUB_MOUNT_ROOT") or "/mnt/hub"))


def default_log(mountpoint: str) -> str:
    d = cache_dir() / "logs"
    d.mkdir(parents=True, exist_ok=True)
    slug = mountpoint.strip("/").replace("/", "_") or "root"
    return str(d / f"mount-{slug}.log")


class Ready:
    """Tells the `hub mount` that started this process how it went, over an inherited pipe."""

    def __init__(self, fd: int | None) -> None:
        self.fd = fd

    def send(self, line: str) -> None:
        if self.fd is None:
            return
        try:
            os.write(self.fd, (line.replace("\n", " ") + "\n").encode())
        except OSError:
            pass

    def close(self) -> None:
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = None

    def ok(self) -> None:
        self.send("ready")
        self.close()

    def error(self, message: str) -> None:
        self.send(f"error: {message}")
        self.close()


def spawn(argv: list[str], *, log_file: str, timeout: float, env: dict | None = None) -> list[str]:
    """Runs `python -m storage.mount ARGV --foreground` detached (its own session, cwd /, output to
    the log), and waits for it to report. Returns its warnings; raises HubClientError with its error."""
    import storage

    env = dict(os.environ if env is None else env)
    src_root = str(Path(storage.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src_root, env.get("PYTHONPATH")) if p)
    r, w = os.pipe()
    Path(log_file).parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as logf:
        proc = subprocess.Popen([sys.executable, "-m", "storage.mount", *argv, "--foreground", "--ready-fd", str(w),
                                 "--log-file", log_file], pass_fds=(w,), stdin=subprocess.DEVNULL, stdout=logf,
                                stderr=logf, start_new_session=True, cwd="/", env=env)
    os.close(w)
    warnings: list[str] = []
    buf = b""
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                system.terminate(proc.pid, 10)
                raise HubClientError(f"the mount was not ready after {timeout:.0f} s; see {log_file}", code="Timeout")
            readable, _, _ = select.select([r], [], [], min(left, 1.0))
            if not readable:
                continue
            chunk = os.read(r, 4096)
            if not chunk:
                status = proc.wait(10)
                raise HubClientError(f"the mount process exited (status {status}) before the mount was ready; "
                                     f"see {log_file}", code="MountFailed")
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                text = line.decode(errors="replace")
                if text == "ready":
                    return warnings
                if text.startswith("error: "):
                    proc.wait(30)
                    raise HubClientError(text[len("error: "):], code="MountFailed")
                if text.startswith("warn: "):
                    warnings.append(text[len("warn: "):])
    finally:
        os.close(r)
