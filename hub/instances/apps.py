from django.apps import AppConfig


class InstancesConfig(AppConfig):
    name = "hub.instances"
    label = "instances"
    verbose_name = "compute instances"
