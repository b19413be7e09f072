"""Mirror credentials are sealed at rest (hub.sealed): the column becomes text, and the credentials
already stored (JSON in clear) are sealed with the current SECRET_KEY."""
import json

from django.db import migrations

import hub.sealed


def seal_existing(apps, schema_editor) -> None:
    with schema_editor.connection.cursor() as cur:
        cur.execute("SELECT id, credentials FROM mirrors_mirrorjob")
        for pk, text in cur.fetchall():
            if not text or hub.sealed.is_sealed(text):
                continue
            value = json.loads(text)
            sealed = hub.sealed.seal(value) if value else ""
            cur.execute("UPDATE mirrors_mirrorjob SET credentials = %s WHERE id = %s", [sealed, pk])


class Migration(migrations.Migration):
    dependencies = [("mirrors", "0001_initial")]
    operations = [
        migrations.AlterField(model_name="mirrorjob", name="credentials",
                              field=hub.sealed.SealedJSONField(blank=True, default=dict)),
        migrations.RunPython(seal_existing, migrations.RunPython.noop),
    ]
