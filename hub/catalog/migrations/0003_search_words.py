"""Recomputes every entry's search text (and, on PostgreSQL, its tsvector): ids and titles are now
also indexed as the words a search is split into, so "llama 2" finds "llama-2"."""
from django.db import migrations


def reindex(apps, schema_editor) -> None:
    from hub.catalog.services import search_text, search_vector

    entry_model = apps.get_model("catalog", "CatalogEntry")
    entries = list(entry_model.objects.select_related("repo__namespace"))
    for e in entries:
        e.search_text = search_text(f"{e.repo.namespace.name}/{e.repo.name}", e)
    entry_model.objects.bulk_update(entries, ["search_text"], batch_size=500)
    if schema_editor.connection.vendor == "postgresql" and entries:
        entry_model.objects.update(search=search_vector())


class Migration(migrations.Migration):
    dependencies = [("catalog", "0002_search_gin")]
    operations = [migrations.RunPython(reindex, migrations.RunPython.noop)]
