from django.apps import AppConfig


class QuotasConfig(AppConfig):
    name = "hub.quotas"
    label = "quotas"
