"""The `hub` command as a user runs it: a separate process with only an endpoint and a token, its
stdout (data), stderr (messages) and exit status; and the requests its client sends."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.support.servers import ROOT

HUB_BIN = Path(sys.executable).parent / "hub"


def client_env(hub, token: str | None, tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a GPU instance: no Django settings, only the client's variables."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "HUB_", "HUGGINGFACE_", "DJANGO_", "AWS_"))}
    env |= {"HUB_ENDPOINT": hub.url, "HUB_CONFIG_DIR": str(tmp_path / "hub-config"),
            "HF_HUB_CACHE": str(tmp_path / "hf-cache"), "PYTHONPATH": str(ROOT)}
    if token:
        env["HUB_TOKEN"] = token
    return env | extra


def hub_cmd() -> list[str]:
    return [str(HUB_BIN)] if HUB_BIN.exists() else [sys.executable, "-m", "storage.cli"]


def run(env: dict[str, str], *args: str, input: str | None = None, timeout: float = 180
        ) -> subprocess.CompletedProcess:
    return subprocess.run([*hub_cmd(), *args], env=env, capture_output=True, text=True, timeout=timeout,
                          input=input, cwd=ROOT)


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
    return proc


def failed(proc: subprocess.CompletedProcess, *needles: str) -> str:
    """A failure: non-zero exit, nothing on stdout, one line on stderr that says what went wrong."""
    assert proc.returncode not in (0, None), proc
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def fetched(proc: subprocess.CompletedProcess) -> int:
    return int(re.search(r"fetched (\d+) bytes?\b", proc.stderr).group(1))


def uploaded(proc: subprocess.CompletedProcess) -> int:
    return int(re.search(r"uploaded (\d+) bytes?\b", proc.stderr).group(1))


def watch_requests(monkeypatch) -> list[tuple[str, str, int]]:
    """Every request the client sends from now on, as (method, url, bytes sent + bytes received)."""
    from storage.client import HubClient

    seen: list[tuple[str, str, int]] = []
    real = HubClient.request

    def request(self, method, url, *, body=None, headers=None, preload=True, **kw):
        resp = real(self, method, url, body=body, headers=headers, preload=preload, **kw)
        sent = len(body) if isinstance(body, bytes) else int((headers or {}).get("Content-Length", 0))
        got = len(resp.data) if preload else int(resp.headers.get("Content-Length") or 0)
        seen.append((method, self.url(url), sent + got))
        return resp

    monkeypatch.setattr(HubClient, "request", request)
    return seen


def manifest_with_blake3(hub, token: str, repo: str, repo_type: str = "model", timeout: float = 60) -> dict[str, dict]:
    """path -> manifest item of every file of `repo`, once each lists the blake3 the hub records when
    it has hashed the stored bytes (on S3 a checked upload's whole file is hashed in the background)."""
    import time

    import requests

    url = f"{hub.url}/api/v1/repos/{repo_type}/{repo}/manifest"
    deadline = time.time() + timeout
    while True:
        resp = requests.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
        assert resp.status_code == 200, resp.text
        listed = {f["path"]: f for f in resp.json()["files"]}
        if all("blake3" in f for f in listed.values()) or time.time() > deadline:
            return listed
        time.sleep(0.3)


def set_blake3(hub, sha256: str, value: str) -> None:
    """Overwrites the blake3 the hub recorded for a blob (as a wrong record would be)."""
    hub.manage("shell", "-c", "from hub.content.models import Blob; "
               f"Blob.objects.filter(pk='{sha256}').update(blake3='{value}')")
