from django.apps import AppConfig


class CatalogConfig(AppConfig):
    name = "hub.catalog"
    label = "catalog"
