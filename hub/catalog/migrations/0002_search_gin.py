"""Full-text search on PostgreSQL: a GIN index over the stored tsvector. Other engines keep the
column NULL and search by substring (hub.catalog.services.search), so they get no index."""
from django.db import migrations


def create_gin(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("CREATE INDEX IF NOT EXISTS catalog_entry_search_gin "
                              "ON catalog_catalogentry USING gin (search)")


def drop_gin(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP INDEX IF EXISTS catalog_entry_search_gin")


class Migration(migrations.Migration):
    dependencies = [("catalog", "0001_initial")]
    operations = [migrations.RunPython(create_gin, drop_gin)]
