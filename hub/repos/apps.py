from django.apps import AppConfig


class ReposConfig(AppConfig):
    name = "hub.repos"
    label = "repos"

    def ready(self) -> None:
        from django.conf import settings
        from django.db.models.signals import pre_delete

        from hub.repos.likes import forget_likes_of

        # A person deleted (in the admin) takes their likes with them: the counts follow, in the
        # deletion's own transaction.
        pre_delete.connect(forget_likes_of, sender=settings.AUTH_USER_MODEL, dispatch_uid="repos-forget-likes")
