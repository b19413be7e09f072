from django.apps import AppConfig


class MirrorsConfig(AppConfig):
    name = "hub.mirrors"
    default_auto_field = "django.db.models.BigAutoField"
