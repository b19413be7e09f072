"""Web pages. Fixed paths (lists, accounts, settings) come before the repo patterns, whose first
segment is a namespace: `datasets`, `models`, `accounts` and `settings` are reserved namespace
names (hub.validation), so no repo can hide these pages, and /models/NS/NAME (the form the CLI
and hub:// take) can only be a model's page under its other name."""
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import path, re_path
from django.views.generic import RedirectView

from hub.web import account, discussions, language, views

REPO = r"^(?P<prefix>datasets/|)(?P<ns>[A-Za-z0-9][A-Za-z0-9._-]*)/(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)"
REV = r"(?P<rev>[^/]+)"
NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*"
NUM = r"/discussions/(?P<num>[0-9]{1,9})"

urlpatterns = [
    re_path(r"^$", views.home, name="home"),
    re_path(r"^healthz$", views.healthz),
    # Browsers and tools ask for /favicon.ico whatever the page links; base.html links the SVG.
    re_path(r"^favicon\.ico$", RedirectView.as_view(url=static("web/favicon.svg"))),
    re_path(r"^(?P<kind>datasets|models)$", views.repo_list, name="list"),
    path("accounts/login", account.LoginView.as_view(), name="login"),
    path("accounts/logout", auth_views.LogoutView.as_view(), name="logout"),
    path("settings", account.overview, name="account"),
    path("settings/uploads/<str:upload_id>/abort", account.abort_upload),
    path("settings/language", language.set_language, name="set_language"),
    path("settings/volume", account.volume, name="volume"),
    path("settings/volume/file", account.volume_file),
    path("settings/volume/upload", account.volume_upload),
    path("settings/volume/mkdir", account.volume_mkdir),
    path("settings/volume/rename", account.volume_rename),
    path("settings/volume/delete", account.volume_delete),
    path("settings/tokens", account.tokens, name="tokens"),
    path("settings/tokens/<str:token_id>/revoke", account.revoke_token),
    path("settings/instances", account.instance_list, name="instances"),
    path("settings/instances/<str:instance_id>/attach", account.instance_attach),
    path("settings/instances/<str:instance_id>/mounts/<int:mount_id>/detach", account.instance_detach),
    path("settings/instances/<str:instance_id>/revoke", account.instance_revoke),
    re_path(r"^models/(?P<rest>" + NAME + r"(?:/.*)?)$", views.model_alias),
    re_path(REPO + r"$", views.repo_page, name="repo"),
    re_path(REPO + r"/tree/" + REV + r"(?:/(?P<path>.*))?$", views.tree),
    re_path(REPO + r"/blob/" + REV + r"/(?P<path>.+)$", views.blob),
    re_path(REPO + r"/commits/" + REV + r"$", views.commits),
    re_path(REPO + r"/commit/(?P<sha>[0-9a-f]{40})$", views.commit),
    re_path(REPO + r"/refs$", views.refs),
    re_path(REPO + r"/access$", views.accept_gate),
    re_path(REPO + r"/like$", views.like),
    re_path(REPO + r"/pin$", views.pin),
    re_path(REPO + r"/access-requests$", views.access_requests),
    re_path(REPO + r"/access-requests/handle$", views.handle_access_request),
    re_path(REPO + r"/access-requests/grant$", views.grant_access),
    re_path(REPO + r"/discussions$", discussions.listing),
    re_path(REPO + r"/discussions/new$", discussions.open_discussion),
    re_path(REPO + NUM + r"$", discussions.detail),
    re_path(REPO + NUM + r"/comment$", discussions.comment),
    re_path(REPO + NUM + r"/status$", discussions.status),
    re_path(REPO + NUM + r"/merge$", discussions.merge),
]
