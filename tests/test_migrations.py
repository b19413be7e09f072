"""Upgrading a database made before the content layer: blobs, proofs and upload sessions moved from
the repos app to the content app by migrations that change only Django's state. A database holding
rows from the previous release keeps them, readable through the new models, with the foreign keys
from repos and volumes intact; and the move can be undone."""
from __future__ import annotations

import json
import subprocess

from tests.support.servers import PYTHON, ROOT, base_env

SHA = "ab" * 32

# One process (Django starts once): the previous release's heads, a blob row as it wrote them, the
# upgrade, what the new models see, and the way back.
SCRIPT = f"""
import io, json
from django.core.management import call_command
from django.db import connection

def migrate(*args):
    call_command("migrate", *args, verbosity=0)

def sizes():
    with connection.cursor() as c:
        c.execute("SELECT size FROM repos_blob")
        return [row[0] for row in c.fetchall()]

migrate("repos", "0011_ref_kind_pr")
migrate("volumes", "0002_root_set_null")
with connection.cursor() as c:
    c.execute("INSERT INTO repos_blob (sha256, size, verified, key, created, corrupt_reason) "
              "VALUES (%s, 5, %s, '', CURRENT_TIMESTAMP, '')", ["{SHA}", True])
migrate()
from django.contrib.contenttypes.models import ContentType
from hub.content.models import Blob
from hub.repos.models import RepoBlob
from hub.volumes.models import VolumeEntry
blob = Blob.objects.get(pk="{SHA}")
out = io.StringIO()
call_command("makemigrations", "--check", "--dry-run", stdout=out)
seen = {{"size": blob.size, "verified": blob.verified, "table": Blob._meta.db_table,
        "repo_fk": RepoBlob._meta.get_field("blob").related_model._meta.label,
        "volume_fk": VolumeEntry._meta.get_field("blob").related_model._meta.label,
        "ctype": sorted(ContentType.objects.filter(model="blob").values_list("app_label", flat=True)),
        "pending": out.getvalue().strip()}}
migrate("repos", "0011_ref_kind_pr")
migrate("content", "zero")
seen["after_undo"] = sizes()
print(json.dumps(seen))
"""


def test_it_upgrades_a_database_of_the_previous_release_with_its_blobs(tmp_path):
    env = base_env() | {"HUB_DATA_DIR": str(tmp_path)}
    proc = subprocess.run([PYTHON, "manage.py", "shell", "-c", SCRIPT], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen == {"size": 5, "verified": True, "table": "repos_blob", "repo_fk": "content.Blob",
                    "volume_fk": "content.Blob", "ctype": ["content"], "pending": "No changes detected",
                    "after_undo": [5]}
