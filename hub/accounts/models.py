from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models.functions import Lower
from django.utils import timezone


class Namespace(models.Model):
    """Owner of repos: one per user (same name as the user) and one per organisation."""

    USER, ORG = "user", "org"
    name = models.CharField(max_length=96, unique=True)
    kind = models.CharField(max_length=8, choices=[(USER, "user"), (ORG, "organisation")])
    user = models.OneToOneField(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                                related_name="namespace")
    fullname = models.CharField(max_length=200, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    # Quota: an explicit limit wins over the plan's, which wins over HUB_DEFAULT_QUOTA.
    plan = models.ForeignKey("quotas.Plan", null=True, blank=True, on_delete=models.SET_NULL)
    quota_bytes = models.BigIntegerField(null=True, blank=True, help_text="overrides the plan's quota")
    # Maintained by hub.quotas.services under a lock of this row; reconciled from the truth by a task.
    used_bytes = models.BigIntegerField(default=0)
    reserved_bytes = models.BigIntegerField(default=0)

    class Meta:
        # Names are case-insensitive, as upstream's: Alice and alice are one account.
        constraints = [models.UniqueConstraint(Lower("name"), name="namespace_name_folded")]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    READ, WRITE, ADMIN = "read", "write", "admin"
    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=8, default=WRITE, choices=[(READ, "read"), (WRITE, "write"),
                                                                  (ADMIN, "admin")])

    class Meta:
        unique_together = [("namespace", "user")]


class ApiToken(models.Model):
    """An API token. Only its sha256 is stored; the token itself is shown once, at creation."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, default="token")
    prefix = models.CharField(max_length=12, help_text="first characters, to recognise the token")
    digest = models.CharField(max_length=64, unique=True)
    read_only = models.BooleanField(default=False)
    # "user": acts as its user (read_only limits it). "instance": a compute instance's token, limited
    # by hub.instances to the instance's mount spec, attached repos and its owner's volume.
    USER, INSTANCE = "user", "instance"
    kind = models.CharField(max_length=8, default=USER, choices=[(USER, "user"), (INSTANCE, "instance")])
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    expires = models.DateTimeField(null=True, blank=True,
                                   help_text="after this the token no longer works; empty: it never expires "
                                             "(user tokens only: an instance token lives as long as its instance)")

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user}, {'read' if self.read_only else 'write'})"

    @property
    def expired(self) -> bool:
        return self.expires is not None and self.expires <= timezone.now()
