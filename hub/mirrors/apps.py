from django.apps import AppConfig


class MirrorsConfig(AppConfig):
    name = "hub.mirrors"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from hub.mirrors.ondemand import revision_source
        from hub.repos import services as repos

        # Catalog entries not mirrored are pinned to their upstream on first access.
        repos.add_revision_source(revision_source)
