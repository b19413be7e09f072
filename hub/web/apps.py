from django.apps import AppConfig


class WebConfig(AppConfig):
    name = "hub.web"
    label = "web"
