from django.apps import AppConfig


class VolumesConfig(AppConfig):
    name = "hub.volumes"
    label = "volumes"

    def ready(self) -> None:
        from hub.content import refs
        from hub.volumes.services import readable_refs, volume_consumers

        # A volume's files reference blobs: they count against the account, keep the bytes from
        # garbage collection, and let the volume's owner name them by hash.
        refs.declare(refs.Kind("volume", "volumes.VolumeEntry", blob="blob", namespace="volume__namespace",
                               readable=readable_refs, consumers=volume_consumers))
