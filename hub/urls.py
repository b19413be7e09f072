from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from hub.quotas.api import QuotaView

handler500 = "hub.errors.server_error"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/schema", SpectacularAPIView.as_view(), name="schema"),
    path("api/quota", QuotaView.as_view(), name="quota"),
    path("api/volume/", include("hub.volumes.urls")),
    path("api/instances", include("hub.instances.urls")),
    path("api/v1/", include("hub.repos.api")),
    path("api/v1/", include("hub.mirrors.urls")),
    path("", include("hub.hfapi.urls")),
    path("", include("hub.web.urls")),
]
