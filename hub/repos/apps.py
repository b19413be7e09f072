from django.apps import AppConfig


class ReposConfig(AppConfig):
    name = "hub.repos"
    label = "repos"
