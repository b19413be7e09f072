from django.contrib import admin

from hub.accounts.models import ApiToken

# Namespaces (accounts with their quota figures) are administered in hub/quotas/admin.py.


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("prefix", "user", "name", "kind", "read_only", "created", "last_used", "expires", "revoked_at")
    list_filter = ("kind", "read_only")
    search_fields = ("user__username", "prefix", "name")
    # The expiry is set when the token is made (hub.accounts.services.token_expiry checks it); to end
    # a token sooner, revoke it.
    readonly_fields = ("prefix", "digest", "created", "last_used", "expires")
