"""Each user's volume: a mutable POSIX-like tree of (path → blob). Entries form a parent/child tree,
so a rename or move of a file or a whole directory is one row update."""
from __future__ import annotations

from django.db import models

from hub.accounts.models import Namespace
from hub.content.models import Blob


class Volume(models.Model):
    namespace = models.OneToOneField(Namespace, on_delete=models.CASCADE, related_name="volume")
    # SET_NULL, not PROTECT: deleting an account (its namespace, volume and entries) must not be blocked
    # by its own root entry. The services never delete a root.
    root = models.OneToOneField("VolumeEntry", null=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"volume of {self.namespace}"


class VolumeEntry(models.Model):
    volume = models.ForeignKey(Volume, on_delete=models.CASCADE, related_name="entries")
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="children")
    name = models.CharField(max_length=255)
    is_dir = models.BooleanField(default=False)
    blob = models.ForeignKey(Blob, null=True, blank=True, on_delete=models.PROTECT, related_name="volume_entries")
    size = models.BigIntegerField(default=0)
    mtime = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["parent", "name"], name="volume_entry_unique_name")]
        indexes = [models.Index(fields=["volume", "blob"])]

    @property
    def etag(self) -> str | None:
        return self.blob_id
