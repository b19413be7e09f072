"""Plans and reservations. An account's counters (used, reserved) live on its Namespace row, which
every quota change locks, so concurrent uploads of one account are serialised and can never push
usage past the limit."""
from __future__ import annotations

from django.conf import settings
from django.db import models


class Plan(models.Model):
    """A storage tier. Plans are data: operators add or change them in the admin."""

    name = models.CharField(max_length=50, unique=True)
    quota_bytes = models.BigIntegerField(null=True, blank=True,
                                         help_text="empty = the server default (HUB_DEFAULT_QUOTA)")
    description = models.CharField(max_length=200, blank=True)
    is_default = models.BooleanField(default=False, help_text="plan of accounts that have none")

    def __str__(self) -> str:
        return self.name


class Reservation(models.Model):
    """Bytes an upload in progress may still add to an account. Completion converts it to usage;
    abort or expiry releases it."""

    namespace = models.ForeignKey("accounts.Namespace", on_delete=models.CASCADE, related_name="reservations")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    sha256 = models.CharField(max_length=64, blank=True, db_index=True)
    size = models.BigIntegerField()
    purpose = models.CharField(max_length=100, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    expires = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"{self.size} B for {self.namespace} ({self.purpose})"
