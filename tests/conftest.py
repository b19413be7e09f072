"""Live hubs for the integration tests.

Each backend is a real gunicorn process on its own port:
  * ``embedded`` — the default engines: SQLite file, local object directory, in-process tasks;
  * ``pg_rgw``   — the machine's PostgreSQL (127.0.0.1:5432) and a one-node Ceph RADOS Gateway
                   started by tests/s3/rgw.sh.

The ``hub`` fixture is parametrized over both; ``HUB_TEST_BACKENDS=embedded`` narrows a local run.
Tests talk to the servers over HTTP only — with the stock huggingface_hub client or plain requests.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests

# The helpers of tests/support assert as the tests do: pytest rewrites their asserts too, to explain
# a failure with the values involved (it does so by itself for test modules and conftest only).
pytest.register_assert_rewrite("tests.support")

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
RGW_SCRIPT = ROOT / "tests" / "s3" / "rgw.sh"
BACKENDS = [b for b in os.environ.get("HUB_TEST_BACKENDS", "embedded,pg_rgw").split(",") if b]
PG_ADMIN_URL = os.environ.get("HUB_TEST_PG", "postgresql://postgres@127.0.0.1:5432")

# Variables of the developer's shell that must not leak into a test server.
_SERVER_VARS = ("DATABASE_URL", "HUB_STORAGE_URL", "CELERY_BROKER_URL", "HUB_DATA_DIR", "AWS_ENDPOINT_URL",
                "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "HF_ENDPOINT", "HF_TOKEN", "HUB_ENDPOINT",
                "HUB_TOKEN", "DJANGO_SETTINGS_MODULE")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def django_modules_after(code: str) -> str:
    """Runs `code` in a fresh interpreter (no DJANGO_* settings) and returns the Django and hub
    modules it left imported, comma-separated: "" for client code that must run without Django."""
    probe = code + "\nimport sys\nprint(','.join(sorted(m for m in sys.modules if m == 'django' or m.startswith(('django.', 'hub.')))))\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


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
    return env


@dataclass
class Hub:
    """A running hub server and the environment it was started with."""

    name: str
    env: dict[str, str]
    data_dir: Path
    port: int = 0
    proc: subprocess.Popen | None = None
    _tokens: dict = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def manage(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run([PYTHON, str(ROOT / "manage.py"), *args], env=self.env, cwd=ROOT,
                              capture_output=True, text=True, check=check, timeout=300)

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

    def start(self, log_path: Path) -> None:
        self.manage("hub_init")
        self.port = free_port()
        self.log = open(log_path, "ab")
        self.proc = subprocess.Popen(
            [PYTHON, "-m", "gunicorn", "hub.wsgi", "-b", f"127.0.0.1:{self.port}", "-k", "gthread",
             "--threads", "8", "-w", "2", "--timeout", "300", "--graceful-timeout", "5",
             # Clients keep connections open between requests; gunicorn's default of 2 s closes them
             # under a client about to reuse one ("connection reset by peer" in a later request).
             "--keep-alive", "30"],
            env=self.env, cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"hub server {self.name} exited; see {log_path}")
            try:
                if requests.get(f"{self.url}/healthz", timeout=2).ok:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"hub server {self.name} did not answer in 60 s; see {log_path}")

    def stop(self) -> None:
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


def _rgw(cmd: str) -> str:
    return subprocess.run(["bash", str(RGW_SCRIPT), cmd], capture_output=True, text=True, check=True,
                          timeout=900).stdout


@pytest.fixture(scope="session")
def rgw_env() -> dict[str, str]:
    """A running Ceph RGW (started if needed) as AWS_* variables."""
    if not RGW_SCRIPT.exists():
        pytest.fail("tests/s3/rgw.sh is missing")
    try:
        _rgw("start")
    except subprocess.CalledProcessError as err:
        pytest.fail(f"could not start Ceph RGW:\n{err.stdout}\n{err.stderr}")
    env = {}
    for line in _rgw("env").split():
        if "=" in line:
            k, v = line.split("=", 1)
            env[k] = v
    return env


@pytest.fixture(scope="session")
def embedded_hub(tmp_path_factory) -> Hub:
    if "embedded" not in BACKENDS:
        pytest.skip("embedded backend not selected in HUB_TEST_BACKENDS")
    data = tmp_path_factory.mktemp("embedded")
    env = base_env() | {"HUB_DATA_DIR": str(data)}
    hub = Hub("embedded", env, data)
    hub.start(data / "server.log")
    yield hub
    hub.stop()


@pytest.fixture(scope="session")
def pg_rgw_hub(tmp_path_factory, rgw_env) -> Hub:
    if "pg_rgw" not in BACKENDS:
        pytest.skip("pg_rgw backend not selected in HUB_TEST_BACKENDS")
    import psycopg

    suffix = uuid.uuid4().hex[:10]
    db = f"hub_test_{suffix}"
    with psycopg.connect(f"{PG_ADMIN_URL}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{db}"')
    data = tmp_path_factory.mktemp("pg_rgw")
    env = base_env() | rgw_env | {
        "HUB_DATA_DIR": str(data),
        "DATABASE_URL": f"{PG_ADMIN_URL}/{db}",
        "HUB_STORAGE_URL": f"s3://hub-test-{suffix}",
    }
    hub = Hub("pg_rgw", env, data)
    hub.start(data / "server.log")
    yield hub
    hub.stop()
    with psycopg.connect(f"{PG_ADMIN_URL}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    drop_bucket(rgw_env, f"hub-test-{suffix}")


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


@pytest.fixture(scope="session")
def celery_hub(tmp_path_factory, rgw_env):
    """A hub on PostgreSQL + Ceph RGW whose tasks go through Redis to a real Celery worker process
    (``celery_hub.worker``: start / kill -9 / stop)."""
    import psycopg
    import redis

    suffix = uuid.uuid4().hex[:10]
    db = f"hub_celery_{suffix}"
    with psycopg.connect(f"{PG_ADMIN_URL}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{db}"')
    # A Redis database of its own, so that parallel runs and leftovers do not share queues.
    redis_db = 1 + int(suffix[:4], 16) % 15
    broker = f"redis://127.0.0.1:6379/{redis_db}"
    redis.Redis.from_url(broker).flushdb()
    data = tmp_path_factory.mktemp("celery")
    env = base_env() | rgw_env | {
        "HUB_DATA_DIR": str(data),
        "DATABASE_URL": f"{PG_ADMIN_URL}/{db}",
        "HUB_STORAGE_URL": f"s3://hub-celery-{suffix}",
        "CELERY_BROKER_URL": broker,
    }
    hub = Hub("celery", env, data)
    hub.start(data / "server.log")
    hub.worker = Worker(hub)
    hub.worker.start()
    yield hub
    hub.worker.stop()
    hub.stop()
    redis.Redis.from_url(broker).flushdb()
    with psycopg.connect(f"{PG_ADMIN_URL}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    drop_bucket(rgw_env, f"hub-celery-{suffix}")


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


@pytest.fixture(scope="session", autouse=True)
def uploads_without_xet():
    """This hub does not speak Xet yet (issue 22), and huggingface_hub >= 1.20 sends every file its
    preupload marks `lfs` (weights, data and binary files, as upstream marks them) through Xet when
    hf_xet is installed. In this process uploads go through LFS, as HF_HUB_DISABLE_XET=1 makes them
    for users; what default settings do is tested in client processes (tests/test_hf_compat.py)."""
    from huggingface_hub import constants

    saved = constants.HF_HUB_DISABLE_XET
    constants.HF_HUB_DISABLE_XET = True
    yield
    constants.HF_HUB_DISABLE_XET = saved


@pytest.fixture(scope="session", params=["embedded", "pg_rgw"])
def hub(request) -> Hub:
    return request.getfixturevalue(f"{request.param}_hub")


def one_backend(hub: Hub) -> None:
    """For a test of what neither the database nor the object store changes (a page's layout, a
    client's message): the embedded hub alone, to keep the suite within its time budget."""
    if hub.name != "embedded":
        pytest.skip("one backend is enough: nothing here depends on the database or the store")


@pytest.fixture
def unique() -> str:
    """A short unique suffix for repo names, so tests sharing a session server never collide."""
    return uuid.uuid4().hex[:8]


@pytest.fixture
def hf_cache(tmp_path) -> Path:
    path = tmp_path / "hf-cache"
    path.mkdir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def alice(hub: Hub) -> str:
    """A token of alice, who owns the repos of a test (created on first use)."""
    return hub.cached_token("alice")


@pytest.fixture
def bob(hub: Hub) -> str:
    """A token of bob, another signed-up user: no rights on alice's repos."""
    return hub.cached_token("bob")
