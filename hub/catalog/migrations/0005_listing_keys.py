"""The catalog lists sort by columns of repos_repo alone (repos.0005: sort_name, listed_size), so each
sort is served by a partial index of public repos and no list sorts a join: fills the new columns of
existing repos, and indexes the name and size sorts. The downloads index gains the name key, which
breaks ties, so a page of the default sort is read from the index in order."""
from django.db import migrations

INDEXES = {
    "catalog_public_by_downloads": "repos_repo (type, downloads DESC, sort_name, id) WHERE NOT private",
    "catalog_public_by_name": "repos_repo (type, sort_name, id) WHERE NOT private",
    # PostgreSQL puts NULLs first in a DESC index unless told; SQLite puts them last and has no NULLS clause.
    "catalog_public_by_size": "repos_repo (type, listed_size DESC{nulls}, sort_name, id) WHERE NOT private",
}
OLD_DOWNLOADS = "repos_repo (type, downloads DESC) WHERE NOT private"


def forward(apps, schema_editor) -> None:
    run = schema_editor.execute
    run("UPDATE repos_repo SET sort_name = LOWER((SELECT name FROM accounts_namespace n "
        "WHERE n.id = repos_repo.namespace_id) || ' ' || name)")
    run("UPDATE repos_repo SET upstream_size = (SELECT upstream_size FROM catalog_catalogentry e "
        "WHERE e.repo_id = repos_repo.id)")
    nulls = " NULLS LAST" if schema_editor.connection.vendor == "postgresql" else ""
    run("DROP INDEX IF EXISTS catalog_public_by_downloads")
    for name, on in INDEXES.items():
        run(f"CREATE INDEX IF NOT EXISTS {name} ON {on.format(nulls=nulls)}")


def backward(apps, schema_editor) -> None:
    for name in INDEXES:
        schema_editor.execute(f"DROP INDEX IF EXISTS {name}")
    schema_editor.execute(f"CREATE INDEX IF NOT EXISTS catalog_public_by_downloads ON {OLD_DOWNLOADS}")


class Migration(migrations.Migration):
    # PostgreSQL will not index a table with pending deferred-constraint events from the UPDATEs in
    # the same transaction; each statement commits on its own (all are safe to run again).
    atomic = False
    dependencies = [("catalog", "0004_listing_indexes"), ("repos", "0005_listing_keys")]
    operations = [migrations.RunPython(forward, backward)]
