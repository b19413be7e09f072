"""Operators see discussions and pull requests with their threads, read-only: changes go through
the site (close, reopen, hide a comment), where the rules are, and nothing is deleted here (a pull
request's ref refs/pr/N stays, so its number must stay taken)."""
from __future__ import annotations

from django.contrib import admin

from hub.discussions.models import Discussion, Event


class EventInline(admin.TabularInline):
    model = Event
    fields = ("kind", "author", "created", "content", "hidden", "data")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Discussion)
class DiscussionAdmin(admin.ModelAdmin):
    list_display = ("__str__", "title", "is_pull_request", "status", "author", "created", "updated")
    list_filter = ("is_pull_request", "status")
    search_fields = ("title", "repo__name", "repo__namespace__name", "author__username")
    readonly_fields = [f.name for f in Discussion._meta.fields]
    inlines = [EventInline]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
