"""The access log of the default gunicorn configuration (hub/gunicorn_config.py, which scripts/run.sh
and docker-compose.yml start the hub with) records every request, but never a capability: the signed
path of an LFS upload or download, nor the `sig` of a volume part URL — whoever reads the log could
otherwise upload into, or download, what they name."""
from __future__ import annotations

import hashlib
import os
import time
from urllib.parse import urlparse

import pytest
import requests

from tests.support.hf import auth, lfs_batch
from tests.support.servers import base_env, launch_hub


@pytest.fixture
def logged_hub(tmp_path):
    """The embedded hub, started the way scripts/run.sh starts it, its output in a file."""
    data = tmp_path / "data"
    data.mkdir()
    with launch_hub("access-log", base_env() | {"HUB_DATA_DIR": str(data)}, data,
                    gunicorn_args=("-c", "python:hub.gunicorn_config", "--workers", "1"),
                    log_path=tmp_path / "gunicorn.log") as hub:
        yield hub  # (its log: hub.log_path)


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
