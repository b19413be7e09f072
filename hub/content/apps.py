from django.apps import AppConfig


class ContentConfig(AppConfig):
    name = "hub.content"
    label = "content"
    verbose_name = "content store"
