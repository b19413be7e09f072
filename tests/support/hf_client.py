"""The stock huggingface_hub client in a process of its own, configured only through environment
variables, as users run it: its environment, a script to run, what it printed."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# Environment of the developer's shell that must not reach a client subprocess.
_CLIENT_VARS = (
    "DJANGO_SETTINGS_MODULE",
    "DATABASE_URL",
    "HUB_STORAGE_URL",
    "HUB_DATA_DIR",
    "AWS_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "PYTHONPATH",
)


def client_env(hub, token: str, home: Path, **extra: str) -> dict[str, str]:
    """A clean environment for a client process: the hub and the token, nothing else of ours."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HF_", "HUGGINGFACE_")) and k not in _CLIENT_VARS
    }
    home.mkdir(parents=True, exist_ok=True)
    return (
        env
        | {
            "HF_ENDPOINT": hub.url,
            "HF_TOKEN": token,
            "HF_HOME": str(home),
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        }
        | extra
    )


def run_client(
    script: str, env: dict[str, str], *, python: str = sys.executable, timeout: int = 300
) -> subprocess.CompletedProcess:
    return subprocess.run([python, "-c", script], env=env, capture_output=True, text=True, timeout=timeout)


def check_ok(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, f"client failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def result(stdout: str) -> dict:
    line = next(ln for ln in stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])
