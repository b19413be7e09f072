"""Xorbs and Xet files for operators: what the Xet door holds, read-only (the CAS and its retention
sweep change them)."""
from django.contrib import admin

from hub.xet.models import XetFile, Xorb


class _ReadOnly(admin.ModelAdmin):
    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Xorb)
class XorbAdmin(_ReadOnly):
    list_display = ("hash", "chunk_count", "size", "unpacked", "in_store", "staged_on", "uploaded_by", "created",
                    "touched")
    list_filter = ("in_store",)  # (not in the store: staged on a server's disk, hub.xet.staging)
    search_fields = ("hash",)
    exclude = ("index",)
    date_hierarchy = "created"


@admin.register(XetFile)
class XetFileAdmin(_ReadOnly):
    list_display = ("hash", "blob", "size", "created")
    search_fields = ("hash", "blob__sha256")
    raw_id_fields = ("blob",)
    exclude = ("xorbs",)
    readonly_fields = ("terms",)
