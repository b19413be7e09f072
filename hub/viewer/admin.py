from django.contrib import admin

from hub.viewer.models import ViewerFile, ViewerRun


@admin.register(ViewerRun)
class ViewerRunAdmin(admin.ModelAdmin):
    """What the viewer computed per commit (operators look here when a page says it failed)."""

    list_display = ("commit", "repo", "state", "attempts", "created", "finished")
    list_filter = ("state",)
    search_fields = ("commit__oid", "repo__name")
    readonly_fields = ("repo", "commit", "state", "splits", "files", "error", "attempts", "created", "started",
                       "finished")

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(ViewerFile)
class ViewerFileAdmin(admin.ModelAdmin):
    list_display = ("digest", "format", "num_rows", "partial", "size", "created", "used")
    list_filter = ("format", "partial")
    search_fields = ("digest", "sha256")
    readonly_fields = ("digest", "sha256", "format", "key", "size", "num_rows", "num_bytes", "row_groups",
                       "features", "partial", "error", "created", "used")

    def has_add_permission(self, request) -> bool:
        return False
