#!/usr/bin/env bash
# Runs huggingface_hub's own test suite (from its sdist on PyPI) against a live hub of ours, to see where
# we differ from the Hub protocol as that client's authors test it. See docs/hf-compatibility.md.
#
#   scripts/hf-suite.sh                        # a fresh embedded hub, the six modules, summary on stdout
#   scripts/hf-suite.sh -k "tree or refs"      # extra arguments go to every pytest run
#   HUB_SUITE_MODULES="test_lfs test_commit_api" scripts/hf-suite.sh
#   HUB_SUITE_ENDPOINT=http://127.0.0.1:8000 scripts/hf-suite.sh   # a hub already running; manage.py must
#                                              # reach its database with this shell's environment
#
# Results (junit XML and log per module, summary.md, the hub's data and server.log, the unpacked
# sdist) go to $HUB_SUITE_OUT (default build/hf-suite). Exit status: 0 whatever the suite's tests did — their
# failures are the report — and non-zero only when the harness itself broke.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VERSION=${HUB_SUITE_HF_VERSION:-2.4.0}
OUT=${HUB_SUITE_OUT:-build/hf-suite}

# The project's venv, made as scripts/test.sh makes it, plus what the suite's modules need beyond it.
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
    .venv/bin/pip install --quiet --disable-pip-version-check -e '.[server,test]'
fi
# pytest-mock: the suite's `mocker` fixture; pytest-timeout: one hung test must not hold up the run.
.venv/bin/python -c 'import pytest_mock, pytest_timeout' 2>/dev/null ||
    .venv/bin/pip install --quiet --disable-pip-version-check pytest-mock pytest-timeout
installed=$(.venv/bin/python -c 'import huggingface_hub; print(huggingface_hub.__version__)')
if [ "$installed" != "$VERSION" ]; then
    echo "hf-suite: .venv has huggingface_hub $installed, the tests are those of $VERSION" >&2
    exit 2
fi

# The unpacked copy stays in $OUT/sdist until the next run, to read the tests the report names.
work="$OUT/sdist"
rm -rf "$work"
mkdir -p "$work"
.venv/bin/pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
    -d "$work/dl" "huggingface_hub==$VERSION"
tar -xzf "$work/dl/huggingface_hub-$VERSION.tar.gz" -C "$work"

# exec: a SIGTERM (e.g. from `timeout`) then reaches the harness, which stops the hub it started.
exec .venv/bin/python scripts/hf_suite/harness.py --suite-dir "$work/huggingface_hub-$VERSION" --out "$OUT" -- "$@"
