from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _ensure_search_index(using: str = "default", **kwargs) -> None:
    from hub.catalog import sqlite_search

    sqlite_search.ensure(using)


class CatalogConfig(AppConfig):
    name = "hub.catalog"
    label = "catalog"

    def ready(self) -> None:
        # After every migrate (sent once per app; ensure() is a lookup when all is there).
        post_migrate.connect(_ensure_search_index, dispatch_uid="catalog-sqlite-search")
