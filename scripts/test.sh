#!/usr/bin/env bash
# Installs everything the tests need and runs the whole suite: both backends (embedded default, and
# PostgreSQL + a one-node Ceph RADOS Gateway that this script installs with apt and starts).
# Extra arguments go to pytest, e.g.  scripts/test.sh -k tree  or  HUB_TEST_BACKENDS=embedded scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

# PostgreSQL and Redis run on this kind of machine before any session; start them if they stopped.
if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start || true
fi

# Debian's docker-compose validates docker-compose.yml (no container engine runs here).
if ! command -v docker-compose >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose >/dev/null 2>&1 || {
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose >/dev/null; }
fi

# FUSE 3 for the mount tests (tests/test_mount.py): apt-get only when fusermount3 is missing.
if ! command -v fusermount3 >/dev/null 2>&1; then
    sudo=(); [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends fuse3 >/dev/null
fi

[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check -e '.[server,test]'

if [[ ",${HUB_TEST_BACKENDS:-embedded,pg_rgw}," == *",pg_rgw,"* ]]; then
    # CI starts from an empty cluster: a data dir left by an earlier run may hold GBs of old objects.
    if [ -n "${CI:-}" ]; then bash tests/s3/rgw.sh destroy; fi
    bash tests/s3/rgw.sh start
    if [ -z "${HUB_KEEP_RGW:-}" ]; then trap 'bash tests/s3/rgw.sh stop >/dev/null 2>&1 || true' EXIT; fi
fi

# The web tests drive Debian's Chromium through Playwright (`playwright install` cannot download a browser here).
if ! command -v chromium >/dev/null 2>&1; then
    apt-get install -y -qq chromium >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }
fi
# A CJK font, so the screenshots of the pages in 简体中文 show characters, not empty boxes (a user's
# browser has its own; the headless one here has only Latin fonts).
if ! fc-list 2>/dev/null | grep -qi "wenquanyi\|noto sans cjk"; then
    apt-get install -y -qq --no-install-recommends fonts-wqy-microhei >/dev/null 2>&1 || {
        apt-get update -qq && apt-get install -y -qq --no-install-recommends fonts-wqy-microhei >/dev/null; }
fi

# GNU gettext for the translation tests (tests/test_i18n.py runs makemessages and msgfmt); the pages
# need none of it: the compiled locale/*/LC_MESSAGES/django.mo is committed beside its .po.
if ! command -v xgettext >/dev/null 2>&1 || ! command -v msgfmt >/dev/null 2>&1; then
    apt-get install -y -qq gettext >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq gettext >/dev/null; }
fi

# Lint first (pyproject.toml's [tool.ruff]) and check the layering (.importlinter: imports point down
# the layers, no cycles, the client imports no server code): a finding fails the run as a failing test does.
.venv/bin/ruff check hub storage tests bench scripts
.venv/bin/lint-imports --no-cache

set +e
.venv/bin/python -m pytest "$@"
status=$?
set -e
# pytest exits 5 when it collected nothing: that is a failure here, not a pass.
exit $status
