"""The instances API (/api/instances...): thin DRF views over hub.instances.services.

Owners (and operators, with staff tokens) register instances, attach and detach repos, list them
with status and last heartbeat, and revoke them. The instance's agent, with the instance token,
reads its mount spec and sends heartbeats."""
from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from hub.accounts.actor import Actor
from hub.accounts.middleware import limit_token_creation
from hub.errors import Forbidden
from hub.instances import services
from hub.instances.serializers import (
    HeartbeatSerializer,
    InstanceInSerializer,
    InstanceSerializer,
    MountInSerializer,
    MountSerializer,
    RegisteredSerializer,
    SpecSerializer,
    instance_data,
    mount_data,
)
from hub.volumes.api import VolumeView, errors
from hub.volumes.serializers import validated


class InstancesBase(VolumeView):
    # Token required (401 without); errors as {"error", "code"}, like the volume API.
    def initial(self, request: Request, *args, **kwargs) -> None:
        super(VolumeView, self).initial(request, *args, **kwargs)  # read-only checks are the services'

    @property
    def actor(self) -> Actor:
        return Actor.from_request(self.request._request)


def _mount(data) -> services.MountRequest:
    ser = MountInSerializer(data=data)
    validated(MountInSerializer, data)
    ser.is_valid()
    return ser.to_mount()


class InstancesView(InstancesBase):
    @extend_schema(operation_id="instances_list", summary="Your instances (operators: ?owner=USER)",
                   parameters=[OpenApiParameter("owner", str, description="operators only")],
                   responses={200: InstanceSerializer(many=True), **errors(401, 403)})
    def get(self, request: Request) -> Response:
        rows = services.instances_of(self.actor, request.query_params.get("owner"))
        return Response([instance_data(i) for i in rows])

    @extend_schema(operation_id="instances_register", summary="Register an instance; returns its token once",
                   request=InstanceInSerializer,
                   responses={201: RegisteredSerializer, **errors(400, 401, 403, 404, 409, 429)})
    def post(self, request: Request) -> Response:
        data = validated(InstanceInSerializer, request.data)
        if request.user.is_authenticated:
            limit_token_creation(request._request, request.user)
        mounts = [_mount(m) for m in request.data.get("mounts") or []]
        instance, token = services.do_register(self.actor, data["name"], mounts, owner=data["owner"] or None)
        return Response({**instance_data(instance), "token": token}, status=201)


class InstanceView(InstancesBase):
    @extend_schema(operation_id="instances_get", summary="One instance with its mounts and status",
                   responses={200: InstanceSerializer, **errors(401, 403, 404)})
    def get(self, request: Request, instance_id: str) -> Response:
        return Response(instance_data(services.access_instance(self.actor, instance_id)))

    @extend_schema(operation_id="instances_revoke", summary="Revoke an instance and its token",
                   responses={200: InstanceSerializer, **errors(401, 403, 404)})
    def delete(self, request: Request, instance_id: str) -> Response:
        instance = services.access_instance(self.actor, instance_id)
        return Response(instance_data(services.do_revoke(self.actor, instance)))


class MountsView(InstancesBase):
    @extend_schema(operation_id="instances_attach", summary="Attach a repo to an instance",
                   request=MountInSerializer, responses={201: MountSerializer, **errors(400, 401, 403, 404, 409)})
    def post(self, request: Request, instance_id: str) -> Response:
        instance = services.access_instance(self.actor, instance_id)
        return Response(mount_data(services.do_attach(self.actor, instance, _mount(request.data))), status=201)


class MountView(InstancesBase):
    @extend_schema(operation_id="instances_detach", summary="Detach a repo from an instance",
                   responses={204: None, **errors(401, 403, 404, 409)})
    def delete(self, request: Request, instance_id: str, mount_id: int) -> Response:
        instance = services.access_instance(self.actor, instance_id)
        services.do_detach(self.actor, instance, mount_id)
        return Response(status=204)


class AgentView(InstancesBase):
    def instance(self):
        instance = getattr(self.request._request, "instance", None)
        if instance is None:
            raise Forbidden("this call needs an instance token (HUB_INSTANCE_TOKEN), not a user token")
        return instance


class SpecView(AgentView):
    @extend_schema(operation_id="instances_spec", summary="The calling instance's mount spec (instance token)",
                   responses={200: SpecSerializer, **errors(401, 403)})
    def get(self, request: Request) -> Response:
        return Response(services.spec(self.instance()))


class HeartbeatView(AgentView):
    @extend_schema(operation_id="instances_heartbeat", summary="The agent is alive (instance token)",
                   request=HeartbeatSerializer, responses={204: None, **errors(400, 401, 403)})
    def post(self, request: Request) -> Response:
        data = validated(HeartbeatSerializer, request.data or {})
        services.do_heartbeat(self.instance(), data["agent"])
        return Response(status=204)
