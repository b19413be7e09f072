"""The access log of the default gunicorn configuration (hub/gunicorn_config.py, which scripts/run.sh
and docker-compose.yml start the hub with) records every request, but never a capability: the signed
path of an LFS upload or download, nor the `sig` of a volume part URL — whoever reads the log could
otherwise upload into, or download, what they name."""
from __future__ import annotations

import hashlib
import os
import subprocess
import time
from urllib.parse import urlparse

import pytest
import requests

from tests.conftest import PYTHON, ROOT, Hub, base_env, free_port
from tests.support.hf import auth, lfs_batch


@pytest.fixture
def logged_hub(tmp_path):
    """The embedded hub, started the way scripts/run.sh starts it, its output in a file."""
    data = tmp_path / "data"
    data.mkdir()
    hub = Hub("access-log", base_env() | {"HUB_DATA_DIR": str(data)}, data)
    hub.manage("hub_init")
    hub.port = free_port()
    log_path = tmp_path / "gunicorn.log"
    with open(log_path, "wb") as log:
        hub.proc = subprocess.Popen([PYTHON, "-m", "gunicorn", "hub.wsgi", "-c", "python:hub.gunicorn_config",
                                     "--bind", f"127.0.0.1:{hub.port}", "--workers", "1"],
                                    env=hub.env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while True:
        try:
            if requests.get(f"{hub.url}/healthz", timeout=2).ok:
                break
        except requests.RequestException:
            pass
        assert time.time() < deadline and hub.proc.poll() is None, log_path.read_text()
        time.sleep(0.2)
    hub.log_path = log_path
    yield hub
    hub.stop()


def test_the_access_log_shows_requests_but_no_capability(logged_hub):
    hub = logged_hub
    token = hub.token("alice")
    repo = "alice/logged"
    hub.api(token).create_repo(repo)
    data = os.urandom(2**20)
    oid = hashlib.sha256(data).hexdigest()
    upload = lfs_batch(hub, token, repo, [(oid, len(data))])["objects"][0]["actions"]["upload"]["href"]
    assert "/lfs/upload/" in upload
    assert requests.put(upload, data=data, timeout=60).status_code == 200
    download = lfs_batch(hub, token, repo, [(oid, len(data))], operation="download")["objects"][0]["actions"][
        "download"]["href"]
    assert "/lfs/objects/" in download and requests.get(download, timeout=60).content == data
    session = requests.post(f"{hub.url}/api/volume/uploads", json={"path": "big.bin", "size": 20 * 2**20},
                            headers=auth(token), timeout=30).json()
    part = session["parts"]["1"]
    assert "sig=" in part
    assert requests.put(part, data=os.urandom(session["part_size"]), timeout=60).ok
    requests.get(f"{hub.url}/datasets", headers={"Referer": upload}, timeout=30)

    time.sleep(1)  # (the access log is written as each response ends)
    log = hub.log_path.read_text()
    secrets = [urlparse(upload).path.rsplit("/", 1)[1], urlparse(download).path.rsplit("/", 1)[1],
               part.split("sig=", 1)[1].split("&")[0]]
    for secret in secrets:
        assert secret not in log, f"a capability is in the access log: {secret[:12]}…"
    lines = log.splitlines()
    assert any('"PUT /lfs/upload/[redacted] HTTP/1.1" 200' in ln for ln in lines), log[-2000:]
    assert any('"GET /lfs/objects/[redacted] HTTP/1.1" 200' in ln for ln in lines), log[-2000:]
    assert any(f'"PUT /api/volume/uploads/{session["id"]}/parts/1?sig=[redacted] HTTP/1.1" 200' in ln
               for ln in lines), log[-2000:]
    assert any(f'"POST /{repo}.git/info/lfs/objects/batch HTTP/1.1" 200' in ln for ln in lines)  # as it was
    assert any('"GET /datasets HTTP/1.1" 200' in ln and "/lfs/upload/[redacted]" in ln for ln in lines)
