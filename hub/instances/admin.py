"""Operators see instances, their mounts and heartbeats, and can revoke them (which revokes the token)."""
from __future__ import annotations

from django.contrib import admin

from hub.accounts.actor import Actor
from hub.instances import services
from hub.instances.models import Instance, InstanceMount


class MountInline(admin.TabularInline):
    model = InstanceMount
    fields = ("repo", "revision", "path", "created")
    readonly_fields = ("created",)
    raw_id_fields = ("repo",)
    extra = 0


@admin.register(Instance)
class InstanceAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "status", "last_heartbeat", "created", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("name", "owner__username")
    readonly_fields = ("id", "owner", "token", "created", "created_by", "revoked_at", "last_heartbeat", "agent")
    inlines = [MountInline]
    actions = ["revoke"]

    def has_add_permission(self, request) -> bool:
        return False  # registration returns the token once: use the API

    @admin.action(description="Revoke the selected instances (and their tokens)")
    def revoke(self, request, queryset) -> None:
        for instance in queryset.filter(revoked_at=None):
            services.do_revoke(Actor(request.user), instance)
        self.message_user(request, "revoked")
