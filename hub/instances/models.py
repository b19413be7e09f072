"""Compute instances and what they mount: the hub keeps the spec, the instance's agent mounts it."""
from __future__ import annotations

import uuid
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

ONLINE_WITHIN = timedelta(minutes=3)  # an agent heartbeats every minute


class Instance(models.Model):
    """A compute instance of a user. Its token (an ApiToken of kind "instance") can read its mount
    spec, the repos attached to it and its owner's volume, and nothing else."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="instances")
    name = models.CharField(max_length=64)
    created = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    token = models.OneToOneField("accounts.ApiToken", on_delete=models.PROTECT, related_name="instance")
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_heartbeat = models.DateTimeField(null=True, blank=True)
    agent = models.CharField(max_length=200, blank=True, help_text="what the agent said about itself")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["owner", "name"], condition=models.Q(revoked_at=None),
                                               name="one_live_instance_per_name")]
        ordering = ["owner_id", "name"]

    def __str__(self) -> str:
        return f"{self.owner}/{self.name}"

    @property
    def status(self) -> str:
        if self.revoked_at:
            return "revoked"
        if self.last_heartbeat is None:
            return "pending"
        return "online" if timezone.now() - self.last_heartbeat < ONLINE_WITHIN else "offline"


class InstanceMount(models.Model):
    """One repo attached to an instance: mounted read-only at `path` (relative to the instance's
    mount root; empty = datasets/NS/NAME or models/NS/NAME), pinned to what `revision` resolves to
    when the agent mounts it."""

    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="mounts")
    repo = models.ForeignKey("repos.Repo", on_delete=models.CASCADE, related_name="instance_mounts")
    revision = models.CharField(max_length=255, blank=True, help_text="branch, tag or commit; empty = default")
    path = models.CharField(max_length=300, blank=True, help_text="mount path override")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["instance", "repo"], name="repo_attached_once")]
        ordering = ["id"]
