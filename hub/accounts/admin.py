from django.contrib import admin

from hub.accounts.models import ApiToken, Membership, Namespace


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0


@admin.register(Namespace)
class NamespaceAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "plan", "limit", "used", "reserved", "created")
    list_filter = ("kind", "plan")
    search_fields = ("name",)
    fields = ("name", "kind", "user", "fullname", "plan", "quota_bytes", "used_bytes", "reserved_bytes")
    readonly_fields = ("used_bytes", "reserved_bytes")
    inlines = [MembershipInline]
    actions = ["reconcile_usage"]

    @admin.display(description="limit")
    def limit(self, ns: Namespace) -> str:
        from hub.config import format_size
        from hub.quotas.services import limit_of

        return format_size(limit_of(ns))

    @admin.display(description="used", ordering="used_bytes")
    def used(self, ns: Namespace) -> str:
        from hub.config import format_size

        return format_size(ns.used_bytes)

    @admin.display(description="reserved", ordering="reserved_bytes")
    def reserved(self, ns: Namespace) -> str:
        from hub.config import format_size

        return format_size(ns.reserved_bytes)

    @admin.action(description="Recompute usage from the stored references")
    def reconcile_usage(self, request, queryset) -> None:
        from hub.quotas.services import reconcile

        for ns in queryset:
            reconcile(ns)
        self.message_user(request, f"usage recomputed for {queryset.count()} account(s)")


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("prefix", "user", "name", "kind", "read_only", "created", "last_used", "expires", "revoked_at")
    list_filter = ("kind", "read_only")
    search_fields = ("user__username", "prefix", "name")
    # The expiry is set when the token is made (hub.accounts.services.token_expiry checks it); to end
    # a token sooner, revoke it.
    readonly_fields = ("prefix", "digest", "created", "last_used", "expires")
