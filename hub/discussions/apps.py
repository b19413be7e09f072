from django.apps import AppConfig


class DiscussionsConfig(AppConfig):
    name = "hub.discussions"
    label = "discussions"
