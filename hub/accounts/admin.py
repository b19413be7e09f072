from django.contrib import admin

from hub.accounts.models import ApiToken, Membership, Namespace


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0


@admin.register(Namespace)
class NamespaceAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "user", "created")
    list_filter = ("kind",)
    search_fields = ("name",)
    inlines = [MembershipInline]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("prefix", "user", "name", "read_only", "created", "last_used", "revoked_at")
    list_filter = ("read_only",)
    search_fields = ("user__username", "prefix", "name")
    readonly_fields = ("prefix", "digest", "created", "last_used")
