"""Runs huggingface_hub's own tests (from its sdist, unpacked by scripts/hf-suite.sh) against a live
hub of ours and summarises where they fail.

    python scripts/hf_suite/harness.py --suite-dir DIR --out DIR [--module test_lfs ...] [-- PYTEST ARGS]

It starts a fresh embedded hub (SQLite + a local directory, gunicorn on a free port) unless
HUB_SUITE_ENDPOINT names a running one, provisions the suite's users, rewrites the unpacked copy's
testing_constants.py to name them, installs our conftest.py, runs pytest once per module (a junit XML
each) and writes summary.md. Exit status 0 whatever the tests did; non-zero only when the harness
itself could not do its job (no hub, no users, a module that crashed pytest or ran out of time).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
PYTHON = sys.executable

DEFAULT_MODULES = ["test_hf_api", "test_commit_api", "test_file_download", "test_snapshot_download",
                   "test_hf_file_system", "test_lfs"]

# Our stand-ins for the suite's accounts. Its own names (__DUMMY_HUB_USER__, DVUser, EnterpriseAdmin, …)
# break our name rules, and its hf_… tokens are not ours: these are valid names, given real tokens.
USER = "hubci-user"
OTHER_USER = "hubci-other"
ENTERPRISE_USER = "hubci-enterprise-admin"
ENTERPRISE_ORG = "hubci-enterprise-org"
FULL_NAME = "HubCI User"
# Fixture data of upstream's staging hub that a test reads: USER belongs to this organisation, whose
# display name whoami-v2 reports (test_whoami_with_passing_token).
MEMBER_ORG, MEMBER_ORG_FULLNAME = "valid_org_hub", "Dummy Hub Org"

# Display names have no command (operators set them in the admin); this does what the admin would.
_SET_DISPLAY_NAMES = """
from django.contrib.auth import get_user_model
from hub.accounts.models import Namespace
first, last = {full_name!r}.split(" ", 1)
get_user_model().objects.filter(username={user!r}).update(first_name=first, last_name=last)
Namespace.objects.filter(name={org!r}).update(fullname={org_fullname!r})
"""

# The hub's own variables that must not leak from the caller's shell into a hub we start (the same
# list tests/support/servers.py keeps), and the client's, which we set ourselves for the pytest runs.
_SERVER_VARS = ("DATABASE_URL", "HUB_STORAGE_URL", "CELERY_BROKER_URL", "HUB_DATA_DIR", "AWS_ENDPOINT_URL",
                "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "HF_ENDPOINT", "HF_TOKEN", "HUB_ENDPOINT",
                "HUB_TOKEN", "DJANGO_SETTINGS_MODULE")
_CLIENT_VARS = ("HF_ENDPOINT", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACE_CO_STAGING", "HF_HOME",
                "HF_HUB_CACHE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_XET", "HF_TOKEN_PATH",
                "HF_XET_CACHE", "HF_ASSETS_CACHE", "HUGGINGFACE_HUB_CACHE", "DJANGO_SETTINGS_MODULE",
                "PYTHONPATH")


class HarnessError(Exception):
    """The harness could not do its job (as opposed to a test of the suite failing)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Hub:
    """The hub under test: one we started (proc set) or one already running at `url`. `env` is what
    manage.py runs with, so that it reaches that hub's database."""

    url: str
    env: dict[str, str]
    proc: subprocess.Popen | None = None
    log_path: Path | None = None

    def manage(self, *args: str) -> str:
        out = subprocess.run([PYTHON, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True,
                             text=True, timeout=300)
        if out.returncode != 0:
            raise HarnessError(f"manage.py {' '.join(args)} failed:\n{out.stdout}{out.stderr}")
        return out.stdout

    def token(self, username: str) -> str:
        """A new write token for `username` (created if missing): hub_token prints it on its last line."""
        return self.manage("hub_token", username, "--name", "hf-suite").strip().splitlines()[-1]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def start_hub(data_dir: Path) -> Hub:
    """A fresh embedded hub on a free port, started the way scripts/run.sh serves one (gunicorn with
    hub/gunicorn_config.py: its access log, in server.log, shows every call the suite made)."""
    env = {k: v for k, v in os.environ.items() if k not in _SERVER_VARS}
    env |= {
        "HUB_DATA_DIR": str(data_dir),
        "PYTHONPATH": str(ROOT),
        # The suite sends wrong tokens on purpose and we mint a few; the limits are not under test here.
        "HUB_AUTH_FAIL_RATE": "100000/m",
        "HUB_TOKEN_CREATE_RATE": "100000/m",
    }
    port = free_port()
    hub = Hub(url=f"http://127.0.0.1:{port}", env=env, log_path=data_dir / "server.log")
    hub.manage("hub_init")
    with open(hub.log_path, "ab") as log:
        hub.proc = subprocess.Popen(
            [PYTHON, "-m", "gunicorn", "hub.wsgi", "-c", "python:hub.gunicorn_config",
             "--bind", f"127.0.0.1:{port}", "--workers", "2", "--graceful-timeout", "5"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 90
    while time.time() < deadline:
        if hub.proc.poll() is not None:
            raise HarnessError(f"the hub exited at start; see {hub.log_path}")
        try:
            if requests.get(f"{hub.url}/healthz", timeout=2).ok:
                return hub
        except requests.RequestException:
            pass
        time.sleep(0.3)
    hub.stop()
    raise HarnessError(f"the hub did not answer /healthz in 90 s; see {hub.log_path}")


def provision(hub: Hub) -> dict[str, str]:
    """Creates the suite's users and organisation on the hub and returns testing_constants values."""
    token, other_token, enterprise_token = hub.token(USER), hub.token(OTHER_USER), hub.token(ENTERPRISE_USER)
    hub.manage("hub_org", ENTERPRISE_ORG, "--owner", ENTERPRISE_USER)
    hub.manage("hub_org", MEMBER_ORG, "--owner", USER)
    hub.manage("shell", "-c", _SET_DISPLAY_NAMES.format(full_name=FULL_NAME, user=USER, org=MEMBER_ORG,
                                                          org_fullname=MEMBER_ORG_FULLNAME))
    who = requests.get(f"{hub.url}/api/whoami-v2", headers={"authorization": f"Bearer {token}"}, timeout=30)
    if who.status_code != 200 or who.json().get("name") != USER:
        raise HarnessError(f"the new token of {USER} is not accepted by {hub.url}: {who.status_code} {who.text[:300]}")
    if who.json().get("fullname") != FULL_NAME:
        # Not a harness failure: test_whoami_with_passing_token will show what the hub said instead.
        print(f"hf-suite: whoami-v2 reports fullname {who.json().get('fullname')!r}, not {FULL_NAME!r}",
              file=sys.stderr)
    return {
        "USER": USER,
        "FULL_NAME": FULL_NAME,
        "TOKEN": token,
        "OTHER_USER": OTHER_USER,
        "OTHER_TOKEN": other_token,
        "ENTERPRISE_USER": ENTERPRISE_USER,
        "ENTERPRISE_ORG": ENTERPRISE_ORG,
        "ENTERPRISE_TOKEN": enterprise_token,
        # Upstream runs against its staging hub; ours takes its place.
        "ENDPOINT_STAGING": hub.url,
    }


def prepare_suite(suite_dir: Path, constants: dict[str, str]) -> None:
    """Points the unpacked tests at our hub: constants rewritten, our conftest.py, a pytest.ini of ours
    (instead of the sdist's pyproject settings, which need pytest-env) and the tests/__init__.py the
    sdist lacks (test_hf_api does `from .conftest import RepoFactory`). Test bodies stay as shipped."""
    tests = suite_dir / "tests"
    path = tests / "testing_constants.py"
    if not path.exists():
        raise HarnessError(f"{path} is missing: is {suite_dir} an unpacked huggingface_hub sdist?")
    original = path.with_suffix(".py.orig")
    if not original.exists():
        shutil.copyfile(path, original)
    text = original.read_text()
    for name, value in constants.items():
        text, n = re.subn(rf"^{name} = .*$", f"{name} = {value!r}  # hf-suite: our hub", text, flags=re.M)
        if n != 1:
            raise HarnessError(f"{path}: expected one assignment to {name}, found {n}")
    path.write_text(text)
    shutil.copyfile(HERE / "suite_conftest.py", tests / "conftest.py")
    (tests / "__init__.py").touch()
    (suite_dir / "pytest.ini").write_text(
        "[pytest]\n"
        "# hf-suite: upstream's addopts minus -sv and --durations (see scripts/hf_suite/harness.py)\n"
        "addopts = -W error::FutureWarning -p no:django -p no:cacheprovider\n"
        "junit_family = xunit2\n"
        "junit_logging = no\n"
    )


def client_env(hub_url: str, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _CLIENT_VARS}
    env |= {
        "HF_ENDPOINT": hub_url,
        "HF_HOME": str(home),  # the conftest gives each test its own; this keeps imports off ~/.cache
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }
    return env


@dataclass
class ModuleResult:
    module: str
    exit_code: int | None  # None: killed at the module time limit
    counts: dict[str, int] = field(default_factory=lambda: {"passed": 0, "failed": 0, "skipped": 0, "error": 0})
    problems: list[tuple[str, str, str]] = field(default_factory=list)  # (outcome, test id, message)
    seconds: float = 0.0


def run_module(suite_dir: Path, module: str, out: Path, env: dict[str, str], extra: list[str],
               time_limit: int) -> ModuleResult:
    junit = out / f"{module}.xml"
    junit.unlink(missing_ok=True)
    cmd = [PYTHON, "-m", "pytest", "-c", str(suite_dir / "pytest.ini"), "--rootdir", str(suite_dir),
           f"tests/{module}.py", f"--junitxml={junit}", "--timeout=300", "-q", "-rfE", "--no-header", *extra]
    started = time.time()
    with open(out / f"{module}.log", "w") as log:
        log.write(" ".join(cmd) + "\n")
        log.flush()
        # A session of its own, so that a module over its time limit is stopped with its children.
        proc = subprocess.Popen(cmd, cwd=suite_dir, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            code: int | None = proc.wait(time_limit)
        except subprocess.TimeoutExpired:
            code = None
        except BaseException:  # interrupted: the run in its own session would outlive us
            os.killpg(proc.pid, signal.SIGKILL)
            raise
        if code is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    result = ModuleResult(module, code, seconds=time.time() - started)
    if junit.exists():
        read_junit(junit, result)
    return result


def read_junit(path: Path, result: ModuleResult) -> None:
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}".removeprefix("tests.")
        outcome, message = "passed", ""
        for tag in ("error", "failure", "skipped"):
            node = case.find(tag)
            if node is not None:
                outcome = {"failure": "failed"}.get(tag, tag)
                message = _reason(node.get("message") or node.text or "")
                break
        result.counts[outcome] += 1
        if outcome in ("failed", "error"):
            result.problems.append((outcome, name, message))


# Lines of huggingface_hub's error messages that are the same for every error of a kind.
_BOILERPLATE = ("Please make sure you specified", "If you are trying to access", "For more details, see",
                "[+", "Note: Creating a commit assumes")


def _reason(text: str) -> str:
    """The first few informative lines of a failure message, on one line (the client puts the hub's
    own words on the lines after its generic "404 Client Error.")."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith(_BOILERPLATE)]
    line = " / ".join(lines[:3])
    return line if len(line) <= 300 else line[:297] + "..."


def harness_failure(result: ModuleResult, filtered: bool) -> str | None:
    """Why this module's run says nothing about the hub, or None if its results stand."""
    if result.exit_code is None:
        return "stopped at the module time limit (HUB_SUITE_MODULE_TIMEOUT)"
    if result.exit_code == 5 and filtered:
        return None  # -k/-m selected nothing in this module
    if result.exit_code not in (0, 1):
        return f"pytest exited {result.exit_code} (interrupted, internal error, usage error or nothing collected)"
    if sum(result.counts.values()) == 0:
        return "no junit results"
    return None


def write_summary(results: list[ModuleResult], out: Path, hub_url: str, broken: dict[str, str]) -> str:
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"# huggingface_hub 2.4.0 test suite against {hub_url} ({now})", "",
             "| module | passed | failed | skipped | error | time |", "|---|---:|---:|---:|---:|---:|"]
    total = {"passed": 0, "failed": 0, "skipped": 0, "error": 0}
    for r in results:
        c = r.counts
        for k in total:
            total[k] += c[k]
        note = f" — harness: {broken[r.module]}" if r.module in broken else ""
        lines.append(f"| {r.module}{note} | {c['passed']} | {c['failed']} | {c['skipped']} | {c['error']} "
                     f"| {r.seconds:.0f} s |")
    lines.append(f"| **total** | {total['passed']} | {total['failed']} | {total['skipped']} | {total['error']} | |")
    for r in results:
        if r.problems:
            lines += ["", f"## {r.module}: failed and erroring tests", ""]
            lines += [f"- {outcome.upper()} `{name}` — {message}" for outcome, name, message in r.problems]
    text = "\n".join(lines) + "\n"
    (out / "summary.md").write_text(text)
    return text


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite-dir", type=Path, required=True, help="the unpacked huggingface_hub sdist")
    parser.add_argument("--out", type=Path, required=True, help="junit XML, logs and summary.md go here")
    parser.add_argument("--module", action="append", help="a test module to run (default: the six)")
    parser.add_argument("pytest_args", nargs="*", help="after --: passed to every pytest run, e.g. -k tree")
    args = parser.parse_args(argv)
    modules = args.module or os.environ.get("HUB_SUITE_MODULES", "").split() or DEFAULT_MODULES
    time_limit = int(os.environ.get("HUB_SUITE_MODULE_TIMEOUT", "5400"))
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    suite_dir: Path = args.suite_dir.resolve()

    # SIGTERM (e.g. from `timeout`) must still stop the hub we started: make it unwind like Ctrl-C.
    signal.signal(signal.SIGTERM, _interrupt)
    hub: Hub | None = None
    try:
        endpoint = os.environ.get("HUB_SUITE_ENDPOINT")
        if endpoint:
            # manage.py then runs with the caller's environment, which must reach that hub's database.
            hub = Hub(url=endpoint.rstrip("/"), env=dict(os.environ) | {"PYTHONPATH": str(ROOT)})
            print(f"hf-suite: using the running hub at {hub.url}", file=sys.stderr)
        else:
            # A fresh hub each run; its data (and server.log) stay for a look afterwards.
            data_dir = out / "hub-data"
            shutil.rmtree(data_dir, ignore_errors=True)
            data_dir.mkdir()
            hub = start_hub(data_dir)
            print(f"hf-suite: started a hub at {hub.url} (data and server.log in {data_dir})", file=sys.stderr)
        prepare_suite(suite_dir, provision(hub))
        env = client_env(hub.url, out / "hf-home")
        results, broken = [], {}
        for module in modules:
            if not (suite_dir / "tests" / f"{module}.py").exists():
                raise HarnessError(f"no module tests/{module}.py in {suite_dir}")
            print(f"hf-suite: running {module} ...", file=sys.stderr, flush=True)
            result = run_module(suite_dir, module, out, env, args.pytest_args, time_limit)
            results.append(result)
            problem = harness_failure(result, filtered=bool(args.pytest_args))
            if problem:
                broken[module] = problem
            c = result.counts
            print(f"hf-suite: {module}: {c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped, "
                  f"{c['error']} error in {result.seconds:.0f} s" + (f" — HARNESS: {problem}" if problem else ""),
                  file=sys.stderr, flush=True)
        print(write_summary(results, out, hub.url, broken))
        print(f"hf-suite: junit XML, logs and summary.md in {out}", file=sys.stderr)
        return 3 if broken else 0
    except HarnessError as err:
        print(f"hf-suite: harness error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("hf-suite: interrupted", file=sys.stderr)
        return 130
    finally:
        if hub is not None:
            hub.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
