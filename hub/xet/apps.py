from django.apps import AppConfig


class XetConfig(AppConfig):
    name = "hub.xet"
    label = "xet"
    verbose_name = "Xet content store"
