"""`pip install gpu-hub` without extras is the client alone, and it works: a fresh virtualenv gets
the checkout (a normal, non-editable install), has no Django, Celery, boto3 or huggingface_hub,
and its own `hub` command and Python pull a repo, read it through hub:// and mount it, against a
live hub. Nothing here sets PYTHONPATH or runs from the checkout: the installed copy is what runs.

The virtualenv is made once per module (pip's cache keeps it quick)."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

from tests.conftest import ROOT, one_backend
from tests.support.mount import _fuse_missing, _stop

SERVER_ONLY = ("django", "rest_framework", "celery", "boto3", "botocore", "huggingface_hub")


class ClientVenv:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.python = root / "bin" / "python"
        self.hub = root / "bin" / "hub"


def _run(cmd: list[str], *, env: dict[str, str] | None = None, cwd: Path, timeout: float = 120,
         input: bytes | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, timeout=timeout, input=input)
    assert proc.returncode == 0, (f"{cmd}: exit {proc.returncode}\nstdout: {proc.stdout[-2000:]!r}\n"
                                  f"stderr: {proc.stderr[-4000:]!r}")
    return proc


def _bare_env(**extra: str) -> dict[str, str]:
    """The environment of a machine with only the client: no PYTHONPATH, nothing of Django or a hub."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
           and not k.startswith(("HF_", "HUB_", "HUGGINGFACE_", "DJANGO_", "AWS_"))}
    return env | {"HUB_DISABLE_PROGRESS_BARS": "1"} | extra


@pytest.fixture(scope="module")
def client_venv(tmp_path_factory) -> ClientVenv:
    base = tmp_path_factory.mktemp("client-install")
    # A copy of what the package is built from, so the build writes nothing into the checkout.
    src = base / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("storage", "hub"):
        shutil.copytree(ROOT / name, src / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    env = base / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env)
    cv = ClientVenv(env)
    _run([str(cv.python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(src)],
         env=_bare_env(), cwd=base, timeout=600)
    return cv


def _push(hub, token: str, repo: str, files: dict[str, bytes], tmp: Path) -> None:
    from storage.client import HubClient
    from storage.transfer.push import push

    src = tmp / "src"
    for name, data in files.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_bytes(data)
    push(HubClient(hub.url, token), src, "model", repo, message="files", progress=False)


def _files() -> dict[str, bytes]:
    return {"config.json": b'{"hidden_size": 8}\n', "sub/notes.txt": b"read me\n",
            "weights.bin": os.urandom(3 * 2**20 + 123)}


def test_the_bare_install_is_the_client_without_the_server(client_venv, tmp_path):
    probe = ("import importlib.util, json, storage, storage.cli, storage.fs.hubfs, storage.mount.commands\n"
             "import storage.transfer.pull, storage.transfer.push, storage.fs.checkpoint, sys\n"
             f"present = [m for m in {SERVER_ONLY!r} if importlib.util.find_spec(m)]\n"
             "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('hub', 'django', 'boto3'))\n"
             "print(json.dumps({'storage': storage.__file__, 'present': present, 'loaded': loaded}))")
    out = _run([str(client_venv.python), "-c", probe], env=_bare_env(), cwd=tmp_path)
    seen = json.loads(out.stdout)
    assert seen["storage"].startswith(str(client_venv.root)), seen  # the installed copy, not the checkout
    assert seen["present"] == [], f"server packages in a client-only install: {seen['present']}"
    assert seen["loaded"] == []
    version = _run([str(client_venv.hub), "--version"], env=_bare_env(), cwd=tmp_path)
    assert version.stdout.decode().startswith("hub ")


def test_the_installed_client_pulls_and_reads_hub_paths(client_venv, hub, alice, unique, tmp_path):
    one_backend(hub)
    repo = f"alice/installed-{unique}"
    files = _files()
    _push(hub, alice, repo, files, tmp_path)
    env = _bare_env(HUB_ENDPOINT=hub.url, HUB_TOKEN=alice, HUB_CONFIG_DIR=str(tmp_path / "config"),
                    HF_HUB_CACHE=str(tmp_path / "hf-cache"), HUB_CACHE_DIR=str(tmp_path / "cache"))

    pulled = _run([str(client_venv.hub), "pull", repo, "--local-dir", str(tmp_path / "pulled")], env=env,
                  cwd=tmp_path)
    assert Path(pulled.stdout.decode().strip()) == tmp_path / "pulled"
    for name, data in files.items():
        assert (tmp_path / "pulled" / name).read_bytes() == data, name

    read = ("import fsspec, sys\n"
            f"with fsspec.open('hub://models/{repo}/weights.bin', 'rb') as fh:\n"
            "    sys.stdout.buffer.write(fh.read())\n"
            f"print(fsspec.filesystem('hub').cat('hub://models/{repo}/sub/notes.txt').decode(), file=sys.stderr)\n")
    out = _run([str(client_venv.python), "-c", read], env=env, cwd=tmp_path)
    assert hashlib.sha256(out.stdout).hexdigest() == hashlib.sha256(files["weights.bin"]).hexdigest()
    assert out.stderr.decode().strip() == "read me"


@pytest.mark.skipif(_fuse_missing() is not None, reason=str(_fuse_missing()))
def test_the_installed_client_mounts_a_repo(client_venv, hub, alice, unique, tmp_path):
    one_backend(hub)
    repo = f"alice/installed-mount-{unique}"
    files = _files()
    _push(hub, alice, repo, files, tmp_path)
    cache = tmp_path / "cache"
    env = _bare_env(HUB_ENDPOINT=hub.url, HUB_TOKEN=alice, HUB_CONFIG_DIR=str(tmp_path / "config"),
                    HUB_CACHE_DIR=str(cache))
    point = tmp_path / "mnt"
    try:
        _run([str(client_venv.hub), "mount", repo, str(point), "--log-file", str(tmp_path / "mount.log")],
             env=env, cwd=tmp_path, timeout=180)
        assert os.path.ismount(point)
        for name, data in files.items():
            assert (point / name).read_bytes() == data, name
        _run([str(client_venv.hub), "umount", str(point)], env=env, cwd=tmp_path)
        assert not os.path.ismount(point)
    finally:
        if os.path.ismount(point):
            subprocess.run(["fusermount3", "-u", "-z", str(point)], capture_output=True)
        for pidfile in (cache / "run").glob("*.json") if (cache / "run").is_dir() else ():
            try:
                _stop(json.loads(pidfile.read_text())["pid"])
            except (ValueError, KeyError, OSError):
                pass

