from django.urls import re_path

from hub.web import views

urlpatterns = [
    re_path(r"^$", views.home, name="home"),
    re_path(r"^healthz$", views.healthz),
    re_path(r"^(?P<prefix>datasets/|)(?P<ns>[A-Za-z0-9][A-Za-z0-9._-]*)/(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)"
            r"(?:/commit/[0-9a-f]{40})?$", views.repo_page, name="repo"),
]
