from django.apps import AppConfig


class VolumesConfig(AppConfig):
    name = "hub.volumes"
    label = "volumes"
