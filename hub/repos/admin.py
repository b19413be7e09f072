from django.contrib import admin

from hub.content.models import Blob, UploadSession
from hub.repos.models import AccessRequest, Commit, Ref, Repo, RepoLike, RepoRedirect


class RefInline(admin.TabularInline):
    model = Ref
    extra = 0
    fields = ("kind", "name", "commit", "updated")
    readonly_fields = fields
    can_delete = False


@admin.register(Repo)
class RepoAdmin(admin.ModelAdmin):
    list_display = ("__str__", "private", "gated", "file_count", "total_size", "downloads", "likes", "last_modified")
    list_filter = ("type", "private", "gated", "gate_mode")
    search_fields = ("name", "namespace__name")
    readonly_fields = ("head_sha", "file_count", "total_size", "created", "last_modified", "card_data", "likes")
    inlines = [RefInline]


@admin.register(RepoRedirect)
class RepoRedirectAdmin(admin.ModelAdmin):
    """Former ids of moved repos, which redirect to them: an operator may delete one to free the id
    (creating a repo there frees it too)."""

    list_display = ("former_id", "type", "repo", "created")
    list_filter = ("type",)
    search_fields = ("former_id", "repo__name")
    readonly_fields = ("type", "key", "former_id", "repo", "created")

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(Commit)
class CommitAdmin(admin.ModelAdmin):
    list_display = ("oid", "repo", "title", "author_name", "created")
    search_fields = ("oid", "repo__name", "title")
    readonly_fields = [f.name for f in Commit._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False


class CorruptFilter(admin.SimpleListFilter):
    title = "integrity"
    parameter_name = "integrity"

    def lookups(self, request, model_admin):
        return [("corrupt", "corrupt or missing"), ("unchecked", "never checked")]

    def queryset(self, request, queryset):
        if self.value() == "corrupt":
            return queryset.filter(corrupt_at__isnull=False)
        if self.value() == "unchecked":
            return queryset.filter(checked_at__isnull=True)
        return queryset


@admin.register(Blob)
class BlobAdmin(admin.ModelAdmin):
    list_display = ("sha256", "size", "verified", "checked_at", "corrupt_at", "corrupt_reason", "created")
    list_filter = (CorruptFilter, "verified")
    search_fields = ("sha256", "key")
    readonly_fields = ("sha256", "size", "verified", "key", "created", "touched", "checked_at", "corrupt_at",
                       "corrupt_reason")
    actions = ["verify_now"]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.action(description="Verify the selected blobs now (queued)")
    def verify_now(self, request, queryset) -> None:
        from hub.repos.tasks import verify_blob

        for sha in queryset.values_list("sha256", flat=True)[:1000]:
            verify_blob.delay(sha)
        self.message_user(request, "queued; corrupt blobs are marked and stop being served")


@admin.register(UploadSession)
class UploadSessionAdmin(admin.ModelAdmin):
    list_display = ("id", "sha256", "size", "state", "user", "created", "expires")
    list_filter = ("state",)
    readonly_fields = [f.name for f in UploadSession._meta.fields]


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows only domain functions write (a count or a decision hangs on them): shown, never edited here."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(AccessRequest)
class AccessRequestAdmin(ReadOnlyAdmin):
    """Requests for gated repos' files; the repo's owners handle them on its access-requests page or
    through huggingface_hub's *_access_request calls."""

    list_display = ("user", "repo", "status", "created", "decided", "decided_by", "granted")
    list_filter = ("status", "granted")
    search_fields = ("user__username", "repo__name", "repo__namespace__name")
    list_select_related = ("user", "repo__namespace", "decided_by")


@admin.register(RepoLike)
class RepoLikeAdmin(ReadOnlyAdmin):
    """Likes, which Repo.likes counts (hub.repos.likes keeps the two together)."""

    list_display = ("user", "repo", "created")
    search_fields = ("user__username", "repo__name", "repo__namespace__name")
    list_select_related = ("user", "repo__namespace")
