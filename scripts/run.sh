#!/usr/bin/env bash
# Installs the hub into .venv and runs it on the embedded default (SQLite file, local object
# directory, in-process Celery tasks) at http://127.0.0.1:8000. Data lives in $HUB_DATA_DIR
# (default: .hub-data/ in this checkout). Any setting from the README can be passed in the environment.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check -e '.[server]'
.venv/bin/python manage.py hub_init --admin "${HUB_ADMIN:-hubadmin}"
.venv/bin/python manage.py collectstatic --noinput --verbosity 0
# The catalog: 300+ datasets and 50+ models (metadata) and a few samples with real files, made offline.
# Idempotent: a restart updates what changed and creates nothing twice.
.venv/bin/python manage.py seed_catalog
PORT=${PORT:-8000}
cat <<MSG

  Hub running at http://127.0.0.1:$PORT  (admin: http://127.0.0.1:$PORT/admin/, account above)
  Sign in to the web pages: .venv/bin/python manage.py hub_password alice   (then http://127.0.0.1:$PORT/accounts/login)
  A token for scripts:   .venv/bin/python manage.py hub_token alice
  Then, e.g.:            HF_ENDPOINT=http://127.0.0.1:$PORT HF_TOKEN=<token> hf upload alice/demo ./folder

MSG
# Worker model and the access log (capability URLs redacted) come from hub/gunicorn_config.py.
exec .venv/bin/gunicorn hub.wsgi -c python:hub.gunicorn_config --bind "127.0.0.1:$PORT" --workers 2
