from django.contrib import admin

from hub.quotas.models import Plan, Reservation


@admin.register(Plan)
class PlanAdmin(admin.ModelAdmin):
    list_display = ("name", "quota_bytes", "is_default", "description")


@admin.register(Reservation)
class ReservationAdmin(admin.ModelAdmin):
    list_display = ("namespace", "size", "purpose", "sha256", "created", "expires")
    search_fields = ("namespace__name", "sha256")
    readonly_fields = [f.name for f in Reservation._meta.fields]
