from django.apps import AppConfig


class ReposConfig(AppConfig):
    name = "hub.repos"
    label = "repos"

    def ready(self) -> None:
        from django.conf import settings
        from django.db.models.signals import pre_delete

        from hub.content import refs
        from hub.repos.likes import forget_likes_of
        from hub.repos.services import readable_refs, repo_consumers

        # A repo's commits reference blobs (every revision): they count against its account's quota,
        # keep the bytes from garbage collection, and let readers of the repo name them by hash.
        refs.declare(refs.Kind("repo", "repos.RepoBlob", blob="blob", namespace="repo__namespace",
                               readable=readable_refs, consumers=repo_consumers))

        # A person deleted (in the admin) takes their likes with them: the counts follow, in the
        # deletion's own transaction.
        pre_delete.connect(forget_likes_of, sender=settings.AUTH_USER_MODEL, dispatch_uid="repos-forget-likes")
