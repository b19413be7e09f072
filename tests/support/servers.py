"""Hub servers of the tests and what they run on: a gunicorn process (`Hub`), a Celery worker
(`Worker`), and the PostgreSQL database, RGW bucket and Redis database a hub gets for itself.

Each scratch resource is a context manager that gives it back whatever happens inside, so a fixture
or test stacks them in one `with` (or an ExitStack) and tears down in the reverse order:

    with scratch_bucket(rgw_env, f"hub-x-{suffix}") as bucket, fresh_database(f"hub_x_{suffix}") as db, \\
            launch_hub("x", base_env() | rgw_env | {"DATABASE_URL": db, ...}, data) as hub:
        ...                      # then: hub (and its worker) stopped, database dropped, bucket emptied
"""
from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent.parent
PYTHON = sys.executable
PG_ADMIN_URL = os.environ.get("HUB_TEST_PG", "postgresql://postgres@127.0.0.1:5432")

# Variables of the developer's shell that must not leak into a test server.
_SERVER_VARS = ("DATABASE_URL", "HUB_STORAGE_URL", "CELERY_BROKER_URL", "HUB_DATA_DIR", "AWS_ENDPOINT_URL",
                "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "HF_ENDPOINT", "HF_TOKEN", "HUB_ENDPOINT",
                "HUB_TOKEN", "DJANGO_SETTINGS_MODULE")

# gunicorn's arguments for a test hub, after `hub.wsgi -b 127.0.0.1:PORT`.
SERVER_ARGS = ("-k", "gthread", "--threads", "8", "-w", "2", "--timeout", "300", "--graceful-timeout", "5",
               # Clients keep connections open between requests; gunicorn's default of 2 s closes them
               # under a client about to reuse one ("connection reset by peer" in a later request).
               "--keep-alive", "30")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SERVER_VARS}
    env["PYTHONPATH"] = str(ROOT)
    # Small parts so that multipart uploads are exercised by files of tens of MB, not GBs.
    env["HUB_MULTIPART_CHUNK"] = "8MiB"
    # Tests send wrong tokens and create tokens by the hundred on purpose; the limits themselves are
    # tested on a server of their own (tests/test_rate_limits.py).
    env["HUB_AUTH_FAIL_RATE"] = "100000/m"
    env["HUB_TOKEN_CREATE_RATE"] = "100000/m"
    # Test upstreams (a second hub) listen on loopback; users may mirror from there in tests only.
    env["HUB_MIRROR_USER_HOSTS"] = "127.0.0.1,huggingface.co"
    # Xorbs reach an S3 store this long after they arrived (30 s by default): long enough for a test
    # to see them staged, short enough for one to wait for the write (tests/test_xet.py).
    env["HUB_XET_WRITE_BEHIND"] = "10"
    # Catalog entries are not fetched from huggingface.co (there is no internet here): the tests of
    # fetching on first use turn it on with a second hub as the upstream (tests/test_ondemand.py).
    env["HUB_ONDEMAND"] = "0"
    # The dataset viewer reads 2 MB of a split (5 GB by default), so that a test shows a partial one
    # with a file of a few MB (tests/test_viewer.py).
    env["HUB_VIEWER_MAX_BYTES"] = "2MB"
    return env


def _log_tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


# manage.py commands that Hub.manage runs in a child of manage_fork.py (see there).
FORKED_COMMANDS = ("hub_token", "shell", "hub_init", "hub_password", "hub_org")


@dataclass
class Hub:
    """A running hub server and the environment it was started with."""

    name: str
    env: dict[str, str]
    data_dir: Path
    port: int = 0
    proc: subprocess.Popen | None = None
    _tokens: dict = field(default_factory=dict)
    _fork: subprocess.Popen | None = None  # tests/support/manage_fork.py for this env (see manage)
    _fork_env: dict | None = None
    _fork_failed: dict | None = None  # the environment it could not set up with
    _fork_buf: bytes = b""
    _fork_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def manage(self, *args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
        """`manage.py ARGS…` with this hub's environment. The commands tests run by the hundred (tokens,
        accounts, `shell` scripts, the `hub_init` of every start) run in a child forked from a process
        that set Django up once (manage_fork.py): the same command in a fresh process state, without
        ~0.8 s of start-up each. The others, whose own behaviour tests check, run in a process of their
        own, as an operator runs them."""
        argv = [PYTHON, str(ROOT / "manage.py"), *args]
        if args and args[0] in FORKED_COMMANDS:
            with self._fork_lock:
                done = self._forked(list(args), timeout)
            if done is not None:
                code, out, err = done
                if check and code:
                    raise subprocess.CalledProcessError(code, argv, out, err)
                return subprocess.CompletedProcess(argv, code, out, err)
        return subprocess.run(argv, env=self.env, cwd=ROOT, capture_output=True, text=True, check=check,
                              timeout=timeout)

    def _forked(self, args: list[str], timeout: float) -> tuple[int, str, str] | None:
        """(exit code, stdout, stderr) of `manage.py ARGS…` run by manage_fork.py, started again when
        this hub's environment changed; None if it cannot run there (the caller starts a process)."""
        if self._fork is not None and (self._fork.poll() is not None or self._fork_env != self.env):
            self._stop_fork()
        if self._fork is None and self._fork_failed == self.env:
            return None  # (it could not set up with this environment)
        if self._fork is None:
            self._fork_env = dict(self.env)
            self._fork = subprocess.Popen([PYTHON, str(ROOT / "tests" / "support" / "manage_fork.py")],
                                          env=self.env, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL, bufsize=0)
            self._fork_buf = b""
        with tempfile.TemporaryDirectory(prefix="hub-manage-") as tmp:
            out, err = Path(tmp) / "out", Path(tmp) / "err"
            try:
                self._fork.stdin.write((json.dumps({"argv": args, "out": str(out), "err": str(err)}) + "\n").encode())
                self._fork.stdin.flush()
                started = self._fork_line(120)  # (the first one waits for Django's set-up)
            except OSError:
                started = None
            if not started:  # it could not set up: a process of its own then, for this environment
                self._fork_failed = dict(self.env)
                self._stop_fork()
                return None
            pid = json.loads(started)["pid"]
            ended = self._fork_line(timeout)
            if ended is None:
                os.kill(pid, signal.SIGKILL)
                self._fork_line(None)
                raise subprocess.TimeoutExpired(["manage.py", *args], timeout)
            if not ended:
                self._stop_fork()
                raise RuntimeError(f"manage_fork.py died while it ran manage.py {' '.join(args)}")
            code = json.loads(ended)["code"]
            return code, out.read_text(errors="replace"), err.read_text(errors="replace")

    def _fork_line(self, timeout: float | None) -> str | None:
        """The next line manage_fork.py writes ("" when it ended), or None after `timeout` seconds."""
        fd = self._fork.stdout.fileno()
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._fork_buf:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([fd], [], [], wait)[0]:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                return ""
            self._fork_buf += chunk
        line, self._fork_buf = self._fork_buf.split(b"\n", 1)
        return line.decode()

    def _stop_fork(self) -> None:
        if self._fork is not None:
            with contextlib.suppress(OSError):
                self._fork.stdin.close()
            try:
                self._fork.wait(10)
            except subprocess.TimeoutExpired:
                self._fork.kill()
                self._fork.wait()
            self._fork = None

    def token(self, username: str, *, read_only: bool = False) -> str:
        """A fresh token for `username` (created on first use), from `manage.py hub_token`."""
        out = self.manage("hub_token", username, *(["--read-only"] if read_only else [])).stdout
        return out.strip().splitlines()[-1]

    def cached_token(self, username: str, *, read_only: bool = False) -> str:
        key = (username, read_only)
        if key not in self._tokens:
            self._tokens[key] = self.token(username, read_only=read_only)
        return self._tokens[key]

    def session(self, username: str, password: str = "correct horse battery") -> requests.Session:
        """A requests session signed in to the web pages as `username` (given that password first),
        with the CSRF cookie set: send `csrf_headers(session)` along with its forms' POSTs."""
        self.manage("hub_password", username, "--password", password)
        s = requests.Session()
        s.get(f"{self.url}/accounts/login", timeout=30)
        r = s.post(f"{self.url}/accounts/login", data={"username": username, "password": password,
                                                        "csrfmiddlewaretoken": s.cookies["csrftoken"]},
                   headers={"Referer": f"{self.url}/accounts/login"}, timeout=30, allow_redirects=False)
        assert r.status_code == 302 and "sessionid" in s.cookies, (r.status_code, r.text[:300])
        return s

    def api(self, token: str | None = None):
        from huggingface_hub import HfApi

        return HfApi(endpoint=self.url, token=token if token is not None else False)

    def start(self, log_path: Path, *, gunicorn_args: tuple[str, ...] = SERVER_ARGS, port: int = 0,
              init: bool = True) -> None:
        """`manage.py hub_init` (unless `init` is false: a restart), then `gunicorn hub.wsgi` on
        127.0.0.1:`port` (a free one by default) with `gunicorn_args`, its output appended to `log_path`;
        returns once /healthz answers. A hub whose server died is started again with this too (the
        previous log file is closed)."""
        if init:
            self.manage("hub_init")
        self.port = port or free_port()
        if getattr(self, "log", None):
            self.log.close()
        self.log_path = log_path
        self.log = open(log_path, "ab")
        self.proc = subprocess.Popen(
            [PYTHON, "-m", "gunicorn", "hub.wsgi", "-b", f"127.0.0.1:{self.port}", *gunicorn_args],
            env=self.env, cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"hub server {self.name} exited; see {log_path}:\n{_log_tail(log_path)}")
            try:
                if requests.get(f"{self.url}/healthz", timeout=2).ok:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"hub server {self.name} did not answer in 60 s; see {log_path}:\n"
                           f"{_log_tail(log_path)}")

    def stop(self) -> None:
        with self._fork_lock:
            self._stop_fork()
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if getattr(self, "log", None):
            self.log.close()

    def worker_pids(self) -> list[int]:
        """PIDs of the gunicorn master and its workers (for memory measurements)."""
        import psutil

        master = psutil.Process(self.proc.pid)
        return [master.pid] + [c.pid for c in master.children(recursive=True)]


class Worker:
    """A real Celery worker process of a hub (broker: the machine's Redis)."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        log = open(self.hub.data_dir / "worker.log", "ab")
        self.proc = subprocess.Popen(
            [PYTHON, "-m", "celery", "-A", "hub", "worker", "-l", "info", "-c", "2", "--without-gossip",
             "--without-mingle", "--without-heartbeat", "-n", f"test-{uuid.uuid4().hex[:6]}@%h"],
            env=self.hub.env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.time() + 60
        while time.time() < deadline:
            if "ready." in (self.hub.data_dir / "worker.log").read_text(errors="replace"):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        raise RuntimeError(f"celery worker did not start; see {self.hub.data_dir / 'worker.log'}")

    def kill(self) -> None:
        """SIGKILL the whole worker (main process and pool children), as a crashed machine would."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, 9)
            self.proc.wait(30)
        # The log's "ready." must not satisfy the next start.
        log = self.hub.data_dir / "worker.log"
        log.rename(log.with_suffix(f".{int(time.time() * 1000)}.log"))

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait(10)


@contextlib.contextmanager
def launch_hub(name: str, env: dict[str, str], data_dir: Path, *, log_path: Path | None = None,
               gunicorn_args: tuple[str, ...] = SERVER_ARGS, celery_worker: bool = False) -> Iterator[Hub]:
    """A started `Hub` (see Hub.start; its log is data_dir/server.log unless `log_path` says), with a
    Celery worker of its own as `hub.worker` if `celery_worker`; stopped on exit (worker first), also
    when starting failed half-way."""
    hub = Hub(name, env, data_dir)
    try:
        hub.start(log_path or data_dir / "server.log", gunicorn_args=gunicorn_args)
        if celery_worker:
            hub.worker = Worker(hub)
            hub.worker.start()
        yield hub
    finally:
        if getattr(hub, "worker", None):
            hub.worker.stop()
        hub.stop()


@contextlib.contextmanager
def fresh_database(name: str) -> Iterator[str]:
    """A new, empty PostgreSQL database `name` on PG_ADMIN_URL's server; yields its URL (a hub's
    DATABASE_URL) and drops it on exit WITH (FORCE), so connections left open do not keep it."""
    import psycopg

    with psycopg.connect(f"{PG_ADMIN_URL}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{PG_ADMIN_URL}/{name}"
    finally:
        with psycopg.connect(f"{PG_ADMIN_URL}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def scratch_bucket(rgw_env: dict[str, str], name: str) -> Iterator[str]:
    """The name of a bucket for one hub (which creates it on first use: HUB_STORAGE_URL=s3://name);
    on exit the bucket, if any, is emptied and deleted (drop_bucket)."""
    try:
        yield name
    finally:
        drop_bucket(rgw_env, name)


@contextlib.contextmanager
def flushed_redis(url: str) -> Iterator[str]:
    """A Redis database (redis://host:port/N) emptied before and after use; yields `url`."""
    import redis

    redis.Redis.from_url(url).flushdb()
    try:
        yield url
    finally:
        redis.Redis.from_url(url).flushdb()


def drop_bucket(rgw_env: dict[str, str], bucket: str) -> None:
    """Empties and deletes a test bucket, so repeated runs do not fill the one-node cluster."""
    import boto3
    from botocore.exceptions import ClientError

    s3 = boto3.client("s3", endpoint_url=rgw_env["AWS_ENDPOINT_URL"], region_name="us-east-1",
                      aws_access_key_id=rgw_env["AWS_ACCESS_KEY_ID"],
                      aws_secret_access_key=rgw_env["AWS_SECRET_ACCESS_KEY"])
    try:
        for page in s3.get_paginator("list_multipart_uploads").paginate(Bucket=bucket):
            for up in page.get("Uploads", []):
                s3.abort_multipart_upload(Bucket=bucket, Key=up["Key"], UploadId=up["UploadId"])
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if keys:
                s3.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
        s3.delete_bucket(Bucket=bucket)
    except ClientError:
        pass
