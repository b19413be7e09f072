from django.apps import AppConfig


class HfApiConfig(AppConfig):
    name = "hub.hfapi"
    label = "hfapi"
