from django.apps import AppConfig
from django.db.models.signals import post_migrate, pre_migrate


def _ensure_search_index(using: str = "default", **kwargs) -> None:
    from hub.catalog import sqlite_search

    sqlite_search.ensure(using)


def _drop_search_triggers(using: str = "default", plan=None, **kwargs) -> None:
    if plan:  # (migrations to apply: one may rebuild a table the triggers name)
        from hub.catalog import sqlite_search

        sqlite_search.drop_triggers(using)


def _index_card(sender, repo_pk: int, **kwargs) -> None:
    from hub.catalog import services
    from hub.repos.models import Repo

    repo = Repo.objects.filter(pk=repo_pk).first()
    if repo is not None:
        services.do_index_card(repo)


class CatalogConfig(AppConfig):
    name = "hub.catalog"
    label = "catalog"

    def ready(self) -> None:
        from hub.catalog.services import not_mirrored_notice, upstream_of
        from hub.repos import services as repos
        from hub.repos.signals import card_changed

        # After every migrate (sent once per app; ensure() is a lookup when all is there).
        pre_migrate.connect(_drop_search_triggers, dispatch_uid="catalog-sqlite-search-drop")
        post_migrate.connect(_ensure_search_index, dispatch_uid="catalog-sqlite-search")
        card_changed.connect(_index_card, dispatch_uid="catalog-index-card")
        # The native manifest says why a catalog entry has no files yet (`hub pull` prints it).
        repos.add_notice(not_mirrored_notice)
        # Its seeded entries are fetched from upstream on first use (hub.mirrors.ondemand).
        repos.add_upstream_id(upstream_of)
