"""Read-only admin for volumes: every change goes through hub.volumes.services, which keeps the
account's usage right; editing rows here would not."""
from __future__ import annotations

from django.contrib import admin

from hub.volumes.models import Volume, VolumeEntry


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Volume)
class VolumeAdmin(ReadOnlyAdmin):
    list_display = ("namespace", "created")
    search_fields = ("namespace__name",)
    list_select_related = ("namespace",)


@admin.register(VolumeEntry)
class VolumeEntryAdmin(ReadOnlyAdmin):
    list_display = ("name", "volume", "is_dir", "size", "blob", "mtime")
    list_filter = ("is_dir",)
    search_fields = ("name", "volume__namespace__name", "blob__sha256")
    list_select_related = ("volume__namespace",)
    raw_id_fields = ("volume", "parent", "blob")
