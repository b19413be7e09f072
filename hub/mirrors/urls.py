"""Routes of the mirror API, mounted at /api/v1/."""
from django.urls import re_path

from hub.mirrors import api

urlpatterns = [
    re_path(r"^mirrors$", api.MirrorsView.as_view(), name="mirrors"),
    re_path(r"^mirrors/(?P<job_id>[0-9]{1,12})$", api.MirrorView.as_view(), name="mirror"),
    re_path(r"^mirrors/(?P<job_id>[0-9]{1,12})/retry$", api.MirrorRetryView.as_view(), name="mirror-retry"),
]
