"""`hub mount --auto`: the instance agent.

It reads the instance's mount spec (GET /api/instances/spec with HUB_INSTANCE_TOKEN, which is the
bearer token of every call it and its mounts make), runs one mount process per entry under
HUB_MOUNT_ROOT — repos pinned to the commit the spec resolved, the volume read-write; one process
each, so a repo mount keeps hour-long kernel caches while the volume's stay short — and then, every
`heartbeat_seconds` (60), sends a heartbeat and reads the spec again: a repo attached since is
mounted, one detached is unmounted. A mount process that dies is restarted (with backoff); one that
ends because someone unmounted it is left alone. SIGTERM (or `hub umount --auto`) unmounts all.
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from storage.client import (
    AuthError,
    HubClient,
    HubClientError,
    NotFoundError,
    RetryPolicy,
    UsageError,
)
from storage.client.http import _version
from storage.mount import system
from storage.mount.process import Ready, default_log, mount_root, spawn

log = logging.getLogger("hub.mount")
HEARTBEAT = 60.0
HEARTBEAT_RETRY = RetryPolicy(attempts=3, base=1.0, cap=4.0)


@dataclass
class Child:
    path: str  # absolute mount point
    what: str  # volume, or TYPEs/NS/NAME@COMMIT
    proc: subprocess.Popen | None = None
    restarts: list[float] = field(default_factory=list)
    next_start: float = 0.0


def instance_client(endpoint: str | None = None) -> HubClient:
    from storage.mount.common import MountClient

    token = os.environ.get("HUB_INSTANCE_TOKEN", "").strip()
    if not token:
        raise UsageError("hub mount --auto needs HUB_INSTANCE_TOKEN (the token the hub gave this instance when it "
                         "was registered)", code="NoInstanceToken")
    return MountClient(endpoint, token)


def fetch_spec(client: HubClient) -> dict:
    try:
        return client.json("GET", "api/instances/spec")
    except AuthError as err:
        raise AuthError(f"the hub rejected HUB_INSTANCE_TOKEN ({err.message}); the instance may have been revoked",
                        code=err.code, status=err.status) from None


def plan(spec: dict, root: Path) -> tuple[dict[str, str], list[str]]:
    """{mount point: what} for the spec's mounts, and a sentence per entry that cannot be mounted."""
    out: dict[str, str] = {}
    problems = []
    for m in spec.get("mounts") or []:
        rel = str(m.get("path") or "").strip("/")
        parts = rel.split("/")
        if not rel or any(p in ("", ".", "..") for p in parts):
            problems.append(f"the spec has an unusable mount path {m.get('path')!r}; skipped")
            continue
        label = m.get("repo_id") or m.get("kind")
        if m.get("error"):
            problems.append(f"{label}: {m['error']}; not mounted")
            continue
        if m.get("kind") == "volume":
            what = "volume"
        elif m.get("kind") in ("dataset", "model") and m.get("commit") and m.get("repo_id"):
            what = f"{m['kind']}s/{m['repo_id']}@{m['commit']}"
        else:
            problems.append(f"{label}: not a mount this agent knows ({m.get('kind')!r}); skipped")
            continue
        out[str(root / rel)] = what
    return out, problems


def cmd_auto(args: argparse.Namespace) -> int:
    system.check_fuse()
    client = instance_client()
    root = mount_root(args)
    spec = fetch_spec(client)
    wanted, problems = plan(spec, root)
    if not args.foreground:
        log_file = args.log_file or default_log(str(root))
        extra = [*(["--no-prefetch"] if args.no_prefetch else []), *(["-v"] if args.verbose else []),
                 *([] if args.allow_other is None else ["--allow-other" if args.allow_other else "--no-allow-other"]),
                 "--root", str(root)]
        warnings = spawn(["mount", "--auto", *extra], log_file=log_file,
                         timeout=args.timeout + 30 * len(wanted))
        for w in warnings:
            print(f"warning: {w}", file=sys.stderr)
        name = (spec.get("instance") or {}).get("name", "")
        print(f"mounted {len(wanted) - len(warnings)} of {len(wanted)} for instance {name} under {root} "
              f"(log: {log_file})", file=sys.stderr)
        return 0
    from storage.mount.common import configure_logging

    configure_logging(args.log_file, args.verbose)
    agent = Agent(client, root, args)
    return agent.run(spec, wanted, problems)


class Agent:
    def __init__(self, client: HubClient, root: Path, args: argparse.Namespace) -> None:
        self.client = client
        self.root = root
        self.args = args
        self.children: dict[str, Child] = {}
        self.dropped: set[str] = set()  # unmounted by someone: left alone until the agent restarts
        self.stop = threading.Event()
        self.auth_failed = False
        self.agent_name = f"hub-mount/{_version()} {socket.gethostname()}"[:200]

    def _child_argv(self, c: Child) -> list[str]:
        a = self.args
        return ["mount", c.what, c.path, *(["--no-prefetch"] if a.no_prefetch else []),
                *(["-v"] if a.verbose else []),
                *([] if a.allow_other is None else ["--allow-other" if a.allow_other else "--no-allow-other"])]

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["HUB_ENDPOINT"] = self.client.endpoint
        env["HUB_TOKEN"] = self.client.token or ""
        return env

    def start(self, c: Child) -> str | None:
        """Starts the mount process of `c` and waits until it is mounted; an error sentence, or None."""
        try:
            system.prepare_mountpoint(c.path)
            log_file = self.args.log_file or os.devnull
            c.proc = _start(self._child_argv(c), self._env(), log_file)
            err = _wait_ready(c.proc, self.args.timeout)
        except HubClientError as err_:
            err = err_.message
        if err:
            log.error("cannot mount %s on %s: %s", c.what, c.path, err)
        return err

    def run(self, spec: dict, wanted: dict[str, str], problems: list[str]) -> int:
        ready = Ready(self.args.ready_fd)
        system.write_pidfile(self.root, "auto")
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, lambda *_: self.stop.set())
        try:
            for p in problems:
                log.error("%s", p)
                ready.send(f"warn: {p}")
            for path, what in wanted.items():
                c = self.children[path] = Child(path, what)
                err = self.start(c)
                if err:
                    ready.send(f"warn: {what} on {path}: {err}")
            instance = spec.get("instance") or {}
            log.info("instance %s (%s): %d mounts under %s", instance.get("name"), instance.get("owner"),
                     sum(1 for c in self.children.values() if c.proc and c.proc.poll() is None), self.root)
            ready.ok()
            every = float(spec.get("heartbeat_seconds") or HEARTBEAT)
            self.heartbeat()
            due = time.monotonic() + every
            while not self.stop.wait(1.0):
                self.watch()
                if time.monotonic() >= due:
                    due = time.monotonic() + every
                    self.heartbeat()
                    self.refresh()
        finally:
            self.shutdown()
            system.remove_pidfile(self.root, "auto")
        return 0

    def heartbeat(self) -> None:
        try:
            self.client.json("POST", "api/instances/heartbeat", data={"agent": self.agent_name},
                             retry=HEARTBEAT_RETRY)
            if self.auth_failed:
                log.info("the hub accepts the instance token again")
            self.auth_failed = False
        except NotFoundError:
            pass  # a hub without heartbeats
        except AuthError as err:
            if not self.auth_failed:
                log.error("the hub rejected the instance token (%s); has the instance been revoked? mounts keep "
                          "what they cached, new reads fail with EACCES", err.message)
            self.auth_failed = True
        except HubClientError as err:
            log.warning("heartbeat failed: %s", err.message)

    def refresh(self) -> None:
        """Mounts what was attached since, unmounts what was detached."""
        if self.auth_failed:
            return
        try:
            wanted, _ = plan(fetch_spec(self.client), self.root)
        except HubClientError as err:
            log.warning("could not read the mount spec: %s", err.message)
            return
        for path, what in wanted.items():
            c = self.children.get(path)
            if c is None and path not in self.dropped:
                log.info("newly attached: %s on %s", what, path)
                c = self.children[path] = Child(path, what)
                self.start(c)
            elif c is not None and c.what != what and c.what != "volume":
                log.info("%s now resolves to %s; %s stays pinned to what it mounted until it is remounted",
                         path, what.rsplit("@", 1)[-1][:12], path)
        for path in [p for p in self.children if p not in wanted]:
            log.info("detached: unmounting %s", path)
            self._stop_child(self.children.pop(path))

    def watch(self) -> None:
        """Restarts mount processes that died; forgets those that ended because of an unmount."""
        now = time.monotonic()
        for path, c in list(self.children.items()):
            if c.proc is None or c.proc.poll() is None:
                if c.proc is None and c.next_start and now >= c.next_start:
                    c.next_start = 0.0
                    self.start(c)
                continue
            status = c.proc.returncode
            c.proc = None
            if status == 0 and not system.is_mounted(path):
                log.info("%s was unmounted; not mounting it again until the agent restarts", path)
                del self.children[path]
                self.dropped.add(path)
                continue
            c.restarts = [t for t in c.restarts if now - t < 3600] + [now]
            delay = min(60.0, 2.0 ** len(c.restarts))
            log.error("the mount process of %s exited (status %s); mounting it again in %.0f s", path, status, delay)
            if system.is_mounted(path):
                system.fusermount(path, lazy=True)
            c.next_start = now + delay

    def _stop_child(self, c: Child) -> None:
        if system.is_mounted(c.path):
            ok, said = system.fusermount(c.path)
            if not ok:
                system.fusermount(c.path, lazy=True)
        if c.proc is not None:
            try:
                c.proc.wait(30)
            except subprocess.TimeoutExpired:
                system.terminate(c.proc.pid, 10)
                c.proc.wait()

    def shutdown(self) -> None:
        for c in self.children.values():
            self._stop_child(c)
        log.info("agent stopped; everything under %s unmounted", self.root)


def _start(argv: list[str], env: dict[str, str], log_file: str) -> subprocess.Popen:
    import storage

    src_root = str(Path(storage.__file__).resolve().parent.parent)
    env = dict(env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src_root, env.get("PYTHONPATH")) if p)
    r, w = os.pipe()
    cmd = [sys.executable, "-m", "storage.mount", *argv, "--foreground", "--ready-fd", str(w)]
    if log_file != os.devnull:
        cmd += ["--log-file", log_file]
    proc = subprocess.Popen(cmd, pass_fds=(w,), stdin=subprocess.DEVNULL, env=env, cwd="/")
    os.close(w)
    proc.ready_fd = r  # type: ignore[attr-defined]
    return proc


def _wait_ready(proc: subprocess.Popen, timeout: float) -> str | None:
    """None once the process says it is mounted; else why not."""
    import select

    r = proc.ready_fd  # type: ignore[attr-defined]
    buf = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            readable, _, _ = select.select([r], [], [], 1.0)
            if not readable:
                continue
            chunk = os.read(r, 4096)
            if not chunk:
                return f"the mount process exited (status {proc.wait(10)})"
            buf += chunk
            if b"\n" in buf:
                line = buf.split(b"\n", 1)[0].decode(errors="replace")
                return None if line == "ready" else line.removeprefix("error: ")
        system.terminate(proc.pid, 10)
        return f"not ready after {timeout:.0f} s"
    finally:
        os.close(r)


def umount_auto(root: Path, *, lazy: bool = False) -> int:
    """Stops the agent for `root` (which unmounts its mounts) and unmounts whatever is left there."""
    info = system.read_pidfile(root, "auto")
    if info:
        system.terminate(info["pid"], 60)
    left = system.fuse_mounts_under(root)
    notes = []
    for path in left:
        try:
            note = system.unmount(path, lazy=lazy)
        except HubClientError as err:
            if system.is_mounted(path):
                note = system.unmount(path, lazy=True) or err.message
            else:
                note = ""
        if note:
            notes.append(note)
    for n in notes:
        print(n, file=sys.stderr)
    if not info and not left:
        print(f"nothing mounted under {root}", file=sys.stderr)
    else:
        print(f"unmounted everything under {root}", file=sys.stderr)
    return 0
