"""The catalog version (0007) also moves when a repo is created: visitors' list counts are kept
under it (hub.catalog.services._plain_count), and a new public repo lengthens their list.

On PostgreSQL the trigger is made here (per statement, as for deletes); on SQLite by
hub.catalog.sqlite_search.ensure after every migrate, with the others."""
from django.db import migrations

FORWARD = [
    "DROP TRIGGER IF EXISTS catalog_facet_version_repo_ins ON repos_repo",
    """CREATE TRIGGER catalog_facet_version_repo_ins AFTER INSERT ON repos_repo
        FOR EACH STATEMENT EXECUTE FUNCTION catalog_facet_version_bump()""",
]


def forward(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        for sql in FORWARD:
            schema_editor.execute(sql)


def backward(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP TRIGGER IF EXISTS catalog_facet_version_repo_ins ON repos_repo")
    else:
        schema_editor.execute("DROP TRIGGER IF EXISTS catalog_facet_version_repo_ins")


class Migration(migrations.Migration):
    dependencies = [("catalog", "0009_entry_trust_remote_code")]
    operations = [migrations.RunPython(forward, backward)]
