from django.contrib import admin

from hub.accounts.models import Membership, Namespace
from hub.config import format_size
from hub.quotas import services
from hub.quotas.models import Plan, Reservation


@admin.register(Plan)
class PlanAdmin(admin.ModelAdmin):
    list_display = ("name", "quota_bytes", "is_default", "description")


@admin.register(Reservation)
class ReservationAdmin(admin.ModelAdmin):
    list_display = ("namespace", "size", "purpose", "sha256", "created", "expires")
    search_fields = ("namespace__name", "sha256")
    readonly_fields = [f.name for f in Reservation._meta.fields]


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
        return format_size(services.limit_of(ns))

    @admin.display(description="used", ordering="used_bytes")
    def used(self, ns: Namespace) -> str:
        return format_size(ns.used_bytes)

    @admin.display(description="reserved", ordering="reserved_bytes")
    def reserved(self, ns: Namespace) -> str:
        return format_size(ns.reserved_bytes)

    @admin.action(description="Recompute usage from the stored references")
    def reconcile_usage(self, request, queryset) -> None:
        for ns in queryset:
            services.reconcile(ns)
        self.message_user(request, f"usage recomputed for {queryset.count()} account(s)")
