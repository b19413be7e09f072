"""A number that changes whenever the filter options' counts can (a facet row added or removed, a
repo made private or public, or deleted), so processes keep the options per number instead of for
a fixed time: counts shown next to a filter are never older than the data.

`catalog_facet_version` holds one row. On PostgreSQL the triggers that bump it are made here (a
statement-level one for facet rows, so a seed bumps it once per statement); on SQLite by
hub.catalog.sqlite_search.ensure after every migrate, as SQLite drops a table's triggers when a
later migration rebuilds the table."""
from django.db import migrations

PG_FORWARD = [
    """CREATE OR REPLACE FUNCTION catalog_facet_version_bump() RETURNS trigger
        LANGUAGE plpgsql AS $$ BEGIN UPDATE catalog_facet_version SET n = n + 1 WHERE id = 1; RETURN NULL; END $$""",
    "DROP TRIGGER IF EXISTS catalog_facet_version_facets ON catalog_catalogfacet",
    """CREATE TRIGGER catalog_facet_version_facets AFTER INSERT OR DELETE ON catalog_catalogfacet
        FOR EACH STATEMENT EXECUTE FUNCTION catalog_facet_version_bump()""",
    "DROP TRIGGER IF EXISTS catalog_facet_version_private ON repos_repo",
    """CREATE TRIGGER catalog_facet_version_private AFTER UPDATE OF private ON repos_repo
        FOR EACH ROW WHEN (OLD.private IS DISTINCT FROM NEW.private) EXECUTE FUNCTION catalog_facet_version_bump()""",
    "DROP TRIGGER IF EXISTS catalog_facet_version_repo_del ON repos_repo",
    """CREATE TRIGGER catalog_facet_version_repo_del AFTER DELETE ON repos_repo
        FOR EACH STATEMENT EXECUTE FUNCTION catalog_facet_version_bump()""",
]
PG_BACKWARD = [
    "DROP TRIGGER IF EXISTS catalog_facet_version_facets ON catalog_catalogfacet",
    "DROP TRIGGER IF EXISTS catalog_facet_version_private ON repos_repo",
    "DROP TRIGGER IF EXISTS catalog_facet_version_repo_del ON repos_repo",
    "DROP FUNCTION IF EXISTS catalog_facet_version_bump()",
]


def forward(apps, schema_editor) -> None:
    run = schema_editor.execute
    run("CREATE TABLE IF NOT EXISTS catalog_facet_version (id integer PRIMARY KEY, n bigint NOT NULL)")
    run("INSERT INTO catalog_facet_version (id, n) SELECT 1, 0 WHERE NOT EXISTS "
        "(SELECT 1 FROM catalog_facet_version WHERE id = 1)")
    if schema_editor.connection.vendor == "postgresql":
        for sql in PG_FORWARD:
            run(sql)


def backward(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        for sql in PG_BACKWARD:
            schema_editor.execute(sql)
    else:
        for name in ("catalog_facet_version_facets_ins", "catalog_facet_version_facets_del",
                     "catalog_facet_version_private", "catalog_facet_version_repo_del"):
            schema_editor.execute(f"DROP TRIGGER IF EXISTS {name}")
    schema_editor.execute("DROP TABLE IF EXISTS catalog_facet_version")


class Migration(migrations.Migration):
    dependencies = [("catalog", "0006_pg_repo_search")]
    operations = [migrations.RunPython(forward, backward)]
