from django.contrib import admin

from hub.repos.models import Blob, Commit, Ref, Repo, UploadSession


class RefInline(admin.TabularInline):
    model = Ref
    extra = 0
    fields = ("kind", "name", "commit", "updated")
    readonly_fields = fields
    can_delete = False


@admin.register(Repo)
class RepoAdmin(admin.ModelAdmin):
    list_display = ("__str__", "private", "file_count", "total_size", "downloads", "last_modified")
    list_filter = ("type", "private")
    search_fields = ("name", "namespace__name")
    readonly_fields = ("head_sha", "file_count", "total_size", "created", "last_modified", "card_data")
    inlines = [RefInline]


@admin.register(Commit)
class CommitAdmin(admin.ModelAdmin):
    list_display = ("oid", "repo", "title", "author_name", "created")
    search_fields = ("oid", "repo__name", "title")
    readonly_fields = [f.name for f in Commit._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(Blob)
class BlobAdmin(admin.ModelAdmin):
    list_display = ("sha256", "size", "verified", "created")
    list_filter = ("verified",)
    search_fields = ("sha256",)
    readonly_fields = ("sha256", "size", "verified", "created")

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(UploadSession)
class UploadSessionAdmin(admin.ModelAdmin):
    list_display = ("id", "sha256", "size", "state", "user", "created", "expires")
    list_filter = ("state",)
    readonly_fields = [f.name for f in UploadSession._meta.fields]
