"""Indexes that serve the catalog lists' two main sorts (most downloaded, recently updated) on
repos_repo, so a list page reads its 30 rows in order instead of sorting every repo of the type.
They live here, not in Repo.Meta, because the catalog's listing is what sorts by them. Partial
(public repos only, the WHERE matching the `NOT private` the ORM writes for what a visitor sees):
SQLite would not use a (type, private, …) index for the order given `NOT private`, and a visitor's
COUNT becomes an index-only scan."""
from django.db import migrations

INDEXES = {
    "catalog_public_by_downloads": "repos_repo (type, downloads DESC) WHERE NOT private",
    "catalog_public_by_updated": "repos_repo (type, last_modified DESC, id DESC) WHERE NOT private",
}


def create(apps, schema_editor) -> None:
    for name, on in INDEXES.items():
        schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {on}")


def drop(apps, schema_editor) -> None:
    for name in INDEXES:
        schema_editor.execute(f"DROP INDEX IF EXISTS {name}")


class Migration(migrations.Migration):
    dependencies = [("catalog", "0003_search_words"), ("repos", "0004_repo_gate_prompt_repo_gated_gateacceptance")]
    operations = [migrations.RunPython(create, drop)]
