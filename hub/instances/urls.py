"""Routes of the instances API, mounted at /api/instances."""
from django.urls import re_path

from hub.instances import api

ID = r"(?P<instance_id>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"

urlpatterns = [
    re_path(r"^$", api.InstancesView.as_view(), name="instances"),
    re_path(r"^/spec$", api.SpecView.as_view(), name="instance-spec"),
    re_path(r"^/heartbeat$", api.HeartbeatView.as_view(), name="instance-heartbeat"),
    re_path(r"^/" + ID + r"$", api.InstanceView.as_view(), name="instance"),
    re_path(r"^/" + ID + r"/mounts$", api.MountsView.as_view(), name="instance-mounts"),
    re_path(r"^/" + ID + r"/mounts/(?P<mount_id>[0-9]{1,12})$", api.MountView.as_view(), name="instance-mount"),
]
