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
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

# The helpers of tests/support assert as the tests do: pytest rewrites their asserts too, to explain
# a failure with the values involved (it does so by itself for test modules and conftest only). So
# this comes before the first import from there.
pytest.register_assert_rewrite("tests.support")

from tests.support.servers import (  # noqa: E402
    ROOT,
    Hub,
    base_env,
    flushed_redis,
    fresh_database,
    launch_hub,
    scratch_bucket,
)

RGW_SCRIPT = ROOT / "tests" / "s3" / "rgw.sh"
BACKENDS = [b for b in os.environ.get("HUB_TEST_BACKENDS", "embedded,pg_rgw").split(",") if b]


def django_modules_after(code: str) -> str:
    """Runs `code` in a fresh interpreter (no DJANGO_* settings) and returns the Django and hub
    modules it left imported, comma-separated: "" for client code that must run without Django."""
    probe = code + "\nimport sys\nprint(','.join(sorted(m for m in sys.modules if m == 'django' or m.startswith(('django.', 'hub.')))))\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


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
    with launch_hub("embedded", base_env() | {"HUB_DATA_DIR": str(data)}, data) as hub:
        yield hub


@pytest.fixture(scope="session")
def pg_rgw_hub(tmp_path_factory, rgw_env) -> Hub:
    if "pg_rgw" not in BACKENDS:
        pytest.skip("pg_rgw backend not selected in HUB_TEST_BACKENDS")
    suffix = uuid.uuid4().hex[:10]
    with scratch_bucket(rgw_env, f"hub-test-{suffix}") as bucket, fresh_database(f"hub_test_{suffix}") as db:
        data = tmp_path_factory.mktemp("pg_rgw")
        env = base_env() | rgw_env | {
            "HUB_DATA_DIR": str(data),
            "DATABASE_URL": db,
            "HUB_STORAGE_URL": f"s3://{bucket}",
        }
        with launch_hub("pg_rgw", env, data) as hub:
            yield hub


@pytest.fixture(scope="session")
def celery_hub(tmp_path_factory, rgw_env):
    """A hub on PostgreSQL + Ceph RGW whose tasks go through Redis to a real Celery worker process
    (``celery_hub.worker``: start / kill -9 / stop)."""
    suffix = uuid.uuid4().hex[:10]
    # A Redis database of its own, so that parallel runs and leftovers do not share queues.
    redis_db = 1 + int(suffix[:4], 16) % 15
    with scratch_bucket(rgw_env, f"hub-celery-{suffix}") as bucket, \
            fresh_database(f"hub_celery_{suffix}") as db, \
            flushed_redis(f"redis://127.0.0.1:6379/{redis_db}") as broker:
        data = tmp_path_factory.mktemp("celery")
        env = base_env() | rgw_env | {
            "HUB_DATA_DIR": str(data),
            "DATABASE_URL": db,
            "HUB_STORAGE_URL": f"s3://{bucket}",
            "CELERY_BROKER_URL": broker,
        }
        with launch_hub("celery", env, data, celery_worker=True) as hub:
            yield hub


@pytest.fixture(scope="session", autouse=True)
def uploads_without_xet():
    """huggingface_hub >= 1.20 sends every file its preupload marks `lfs` through Xet when hf_xet is
    installed. In this process uploads go through LFS, as HF_HUB_DISABLE_XET=1 makes them for users,
    so that the LFS door stays tested by every module; the Xet door is tested with default settings
    in tests/test_xet.py (and in the client processes of other modules)."""
    from huggingface_hub import constants

    saved = constants.HF_HUB_DISABLE_XET
    constants.HF_HUB_DISABLE_XET = True
    yield
    constants.HF_HUB_DISABLE_XET = saved


@pytest.fixture(scope="session", params=["embedded", "pg_rgw"])
def hub(request) -> Hub:
    return request.getfixturevalue(f"{request.param}_hub")


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium (Debian's, driven by Playwright) for every browser test of the session:
    Playwright's sync API allows one instance at a time, so no test starts its own."""
    chromium = os.environ.get("HUB_TEST_CHROMIUM", "/usr/bin/chromium")
    if not os.path.exists(chromium):
        pytest.skip(f"no Chromium at {chromium}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-dev-shm-usage"])
        yield b
        b.close()


@pytest.fixture(scope="session")
def site(hub) -> Hub:
    """The hub with the real seed catalog and the samples loaded (once per backend)."""
    out = hub.manage("seed_catalog", check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "sample hub-samples/tiny-gpt2" in out.stdout
    return hub


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
