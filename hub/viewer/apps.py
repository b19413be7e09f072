from django.apps import AppConfig


def _commit_landed(sender, repo_pk: int, commit_pk: int, **kwargs) -> None:
    from hub.viewer import services

    services.request_viewer(repo_pk, commit_pk)


class ViewerConfig(AppConfig):
    name = "hub.viewer"
    label = "viewer"

    def ready(self) -> None:
        from hub.repos.signals import commit_landed

        commit_landed.connect(_commit_landed, dispatch_uid="viewer-commit-landed")
        from hub.repos import gc
        from hub.viewer import services

        gc.add_collector("viewer", services.collect_copies)
