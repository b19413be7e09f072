"""The web tier is stateless: two server processes on different ports, one PostgreSQL database and
one Ceph RGW bucket. A repo pushed through one is pulled through the other, a multipart upload
started on one completes on the other, a quota race split across both holds the limit; and the
production compose file validates and wires the services the way the docs say."""
from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from huggingface_hub import snapshot_download

from tests.support.hf import auth
from tests.support.servers import ROOT, base_env, fresh_database, launch_hub, scratch_bucket

MB = 10**6
MIB = 2**20


@pytest.fixture(scope="module")
def pair(tmp_path_factory, rgw_env):
    """Two hubs sharing one database and one bucket (and nothing else: separate data dirs)."""
    suffix = uuid.uuid4().hex[:10]
    with contextlib.ExitStack() as stack:
        bucket = stack.enter_context(scratch_bucket(rgw_env, f"hub-pair-{suffix}"))
        db = stack.enter_context(fresh_database(f"hub_pair_{suffix}"))
        shared = base_env() | rgw_env | {"DATABASE_URL": db, "HUB_STORAGE_URL": f"s3://{bucket}",
                                         "SECRET_KEY": f"shared-secret-{suffix}"}
        hubs = []
        for name in ("a", "b"):
            data = tmp_path_factory.mktemp(f"pair-{name}")
            hub = launch_hub(f"pair-{name}", shared | {"HUB_DATA_DIR": str(data)}, data)
            hubs.append(stack.enter_context(hub))
        yield hubs


def test_a_repo_pushed_through_one_server_is_pulled_through_the_other(pair, unique, tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)  # LFS multipart, as the README says
    a, b = pair
    token = a.cached_token("alice")
    files = {"config.json": b'{"layers": 2}', "weights.bin": os.urandom(12 * MIB)}
    src = tmp_path / "src"
    src.mkdir()
    for name, data in files.items():
        (src / name).write_bytes(data)
    a.api(token).create_repo(f"alice/spread-{unique}")
    a.api(token).upload_folder(folder_path=src, repo_id=f"alice/spread-{unique}")
    out = snapshot_download(f"alice/spread-{unique}", endpoint=b.url, token=token, cache_dir=tmp_path / "cache")
    for name, data in files.items():
        assert open(os.path.join(out, name), "rb").read() == data


def test_a_multipart_upload_started_on_one_server_completes_on_the_other(pair, unique):
    a, b = pair
    token = a.cached_token("alice")
    data = os.urandom(20 * MIB + 5)
    r = requests.post(f"{a.url}/api/volume/uploads", headers=auth(token), timeout=60,
                      json={"path": f"moved/{unique}.bin", "size": len(data)})
    assert r.status_code == 201, r.text
    session = r.json()
    part_size = session["part_size"]
    half = len(session["parts"]) // 2
    for n, url in sorted(session["parts"].items(), key=lambda kv: int(kv[0]))[:half]:
        start = (int(n) - 1) * part_size
        assert requests.put(url, data=data[start:start + part_size], timeout=120).ok
    # the rest of the parts, and the completion, through the other server
    status = requests.get(f"{b.url}/api/volume/uploads/{session['id']}", headers=auth(token), timeout=60).json()
    assert sorted(status["received"]) == list(range(1, half + 1))
    for n, url in status["parts"].items():
        start = (int(n) - 1) * part_size
        assert requests.put(url, data=data[start:start + part_size], timeout=120).ok
    done = requests.post(f"{b.url}/api/volume/uploads/{session['id']}/complete", headers=auth(token), timeout=120,
                         json={"sha256": hashlib.sha256(data).hexdigest()})
    assert done.status_code == 200, done.text
    got = requests.get(f"{a.url}/api/volume/files/moved/{unique}.bin", headers=auth(token), timeout=120)
    assert got.content == data


def test_a_quota_race_split_across_both_servers_holds_the_limit(pair, unique):
    a, b = pair
    name = f"split{unique}"
    token = a.manage("hub_token", name, "--quota", "10MB").stdout.strip().splitlines()[-1]
    a.api(token).create_repo(f"{name}/race")
    used = requests.get(f"{a.url}/api/quota", headers=auth(token), timeout=30).json()["used"]
    oids = [hashlib.sha256(os.urandom(16)).hexdigest() for _ in range(40)]

    def ask(i_oid: tuple[int, str]) -> int:
        hub = (a, b)[i_oid[0] % 2]
        return requests.post(f"{hub.url}/{name}/race.git/info/lfs/objects/batch", timeout=60,
                             headers=auth(token) | {"Content-Type": "application/vnd.git-lfs+json"},
                             json={"operation": "upload", "objects": [{"oid": i_oid[1], "size": MB}]}).status_code

    with ThreadPoolExecutor(max_workers=20) as pool:
        statuses = list(pool.map(ask, enumerate(oids)))
    granted = statuses.count(200)
    assert statuses.count(413) == len(oids) - granted
    assert granted == (10 * MB - used) // MB
    for hub in (a, b):
        q = requests.get(f"{hub.url}/api/quota", headers=auth(token), timeout=30).json()
        assert q["reserved"] == granted * MB and q["used"] + q["reserved"] <= q["limit"]


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="Debian's docker-compose is not installed")
def test_the_compose_file_validates_and_wires_the_services():
    env = {**os.environ, "SECRET_KEY": "x"}
    out = subprocess.run(["docker-compose", "-f", str(ROOT / "docker-compose.yml"), "config"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    import yaml

    config = yaml.safe_load(out.stdout)
    services = config["services"]
    assert {"postgres", "redis", "minio", "web", "worker", "beat"} <= set(services)
    for name in ("web", "worker", "beat"):
        env_of = services[name]["environment"]
        assert env_of["DATABASE_URL"].startswith("postgresql://") and "@postgres:5432/" in env_of["DATABASE_URL"]
        assert env_of["CELERY_BROKER_URL"].startswith("redis://redis:")
        assert env_of["AWS_ENDPOINT_URL"] == "http://minio:9000"
    assert all("healthcheck" in services[name] for name in ("web", "worker", "postgres", "redis", "minio"))
    assert "hub_init" in " ".join(services["web"]["command"])  # migrations on start
    assert any("mc mb" in " ".join(map(str, s.get("command") or s.get("entrypoint") or []))
               for s in services.values()), "the bucket is created"
    documented = open(ROOT / ".env.example").read()
    for var in ("SECRET_KEY", "POSTGRES_PASSWORD", "MINIO_ROOT_USER", "MINIO_ROOT_PASSWORD", "HUB_DEFAULT_QUOTA"):
        assert var in documented, var
    # Every setting the hub reads (hub.config's env helpers, in hub/settings.py) is documented there.
    read = set(re.findall(r'\benv(?:int|bool|size)?\("([A-Z][A-Z0-9_]+)"', (ROOT / "hub" / "settings.py").read_text()))
    assert len(read) > 30 and "HUB_PAGE_CACHE_SECONDS" in read
    # ...and what the server side reads from the environment directly: hub/ and the object store
    # (storage/store/); the client's own settings are the README's.
    for source in [*(ROOT / "hub").rglob("*.py"), *(ROOT / "storage" / "store").rglob("*.py")]:
        read |= set(re.findall(r'os\.(?:environ\.get\(|getenv\(|environ\[)"([A-Z][A-Z0-9_]+)"', source.read_text()))
    assert "HUB_S3_ADDRESSING" in read
    assert not {v for v in read if not re.search(rf"\b{v}\b", documented)}, "settings missing from .env.example"
