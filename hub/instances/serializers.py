"""Shapes of the instances API: input validation and the OpenAPI schema."""
from __future__ import annotations

from rest_framework import serializers

from hub.instances.models import Instance, InstanceMount
from hub.instances.services import MountRequest, default_path


class MountInSerializer(serializers.Serializer):
    repo = serializers.CharField(help_text="NAMESPACE/NAME of a repo the owner can read")
    type = serializers.ChoiceField(choices=["model", "dataset"], default="model")
    revision = serializers.CharField(required=False, allow_blank=True, default="",
                                     help_text="branch, tag or commit; empty = the default branch")
    path = serializers.CharField(required=False, allow_blank=True, default="",
                                 help_text="where under the mount root; empty = datasets/NS/NAME or models/NS/NAME")

    def to_mount(self) -> MountRequest:
        d = self.validated_data
        return MountRequest(repo_id=d["repo"], type=d["type"], revision=d["revision"], path=d["path"])


class InstanceInSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=64)
    owner = serializers.CharField(required=False, allow_blank=True, default="",
                                  help_text="operators only: register the instance for this user")
    mounts = MountInSerializer(many=True, required=False, default=list)


class MountSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=["model", "dataset"])
    repo = serializers.CharField()
    revision = serializers.CharField()
    path = serializers.CharField()


class InstanceSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    owner = serializers.CharField()
    status = serializers.ChoiceField(choices=["pending", "online", "offline", "revoked"],
                                     help_text="pending: never heard from; online: a heartbeat in the last 3 minutes")
    created = serializers.DateTimeField()
    last_heartbeat = serializers.DateTimeField(allow_null=True)
    revoked_at = serializers.DateTimeField(allow_null=True)
    agent = serializers.CharField()
    mounts = MountSerializer(many=True)


class RegisteredSerializer(InstanceSerializer):
    token = serializers.CharField(help_text="the instance's token (HUB_INSTANCE_TOKEN); shown only this once")


class SpecMountSerializer(serializers.Serializer):
    id = serializers.IntegerField(allow_null=True)
    kind = serializers.ChoiceField(choices=["model", "dataset", "volume"])
    repo_id = serializers.CharField(allow_null=True)
    revision = serializers.CharField(allow_null=True)
    commit = serializers.CharField(allow_null=True, help_text="the revision resolved now: mount this commit")
    path = serializers.CharField(help_text="relative to the mount root (HUB_MOUNT_ROOT)")
    read_only = serializers.BooleanField()
    error = serializers.CharField(allow_null=True, help_text="why this repo cannot be mounted now")


class SpecSerializer(serializers.Serializer):
    instance = serializers.DictField()
    mounts = SpecMountSerializer(many=True)
    heartbeat_seconds = serializers.IntegerField()


class HeartbeatSerializer(serializers.Serializer):
    agent = serializers.CharField(required=False, allow_blank=True, default="", max_length=200)


def mount_data(m: InstanceMount) -> dict:
    repo = m.repo
    return {"id": m.pk, "kind": repo.type, "repo": f"{repo.namespace.name}/{repo.name}",
            "revision": m.revision or repo.default_branch, "path": m.path or default_path(repo)}


def instance_data(i: Instance) -> dict:
    return {"id": i.id, "name": i.name, "owner": i.owner.username, "status": i.status, "created": i.created,
            "last_heartbeat": i.last_heartbeat, "revoked_at": i.revoked_at, "agent": i.agent,
            "mounts": [mount_data(m) for m in i.mounts.all()]}
