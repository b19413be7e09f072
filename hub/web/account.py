"""Account pages (session sign-in, CSRF on every form): overview with quota, the volume, API tokens
and instances. Each view parses the form, calls the services of hub.volumes, hub.accounts,
hub.quotas or hub.instances, and renders or redirects back."""
from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from hub.accounts import services as accounts
from hub.accounts.middleware import limit_failures, limit_token_creation
from hub.catalog import services as catalog
from hub.config import format_size
from hub.errors import BadRequest, TooManyRequests
from hub.hfapi.views import base_url
from hub.instances import services as instances
from hub.quotas import services as quotas
from hub.repos import blobs, serving
from hub.repos.models import Repo
from hub.volumes import services as volumes
from hub.web.pages import actor_of, error_page, page

VOLUME_PAGE = 200


class LoginView(auth_views.LoginView):
    """Django's sign-in, with wrong passwords counted against the client address like wrong tokens."""

    template_name = "web/login.html"
    redirect_authenticated_user = True

    def form_invalid(self, form) -> HttpResponse:
        if limit_failures(self.request):
            return error_page(self.request, TooManyRequests(
                "too many failed sign-ins from your address; wait a minute and try again"))
        return super().form_invalid(form)


@login_required
@require_GET
@page
def overview(request: HttpRequest) -> HttpResponse:
    ns = quotas.namespace_for(request.user)
    return render(request, "web/account/overview.html", {
        "section": "overview", "report": quotas.report(ns), "repos": catalog.repos_of(request.user),
        "orgs": accounts.user_orgs(request.user)})


# --- volume -----------------------------------------------------------------------------------------

def _volume_url(path: str) -> str:
    return "/settings/volume" + (f"?{urlencode({'path': path})}" if path else "")


def _dir(request: HttpRequest) -> str:
    return volumes.check_volume_path(request.POST.get("path") or "", root_ok=True, directory=True)


def _join(directory: str, name: str) -> str:
    name = (name or "").strip().strip("/")
    if not name:
        raise BadRequest("give a name")
    return volumes.check_volume_path(f"{directory}/{name}" if directory else name)


@login_required
@require_GET
@page
def volume(request: HttpRequest) -> HttpResponse:
    vol = volumes.volume_of(request.user)
    path = volumes.check_volume_path(request.GET.get("path") or "", root_ok=True, directory=True)
    rows, after = volumes.list_dir(vol, path, request.GET.get("after") or None, VOLUME_PAGE)
    parts = path.split("/") if path else []
    base = f"{path}/" if path else ""
    return render(request, "web/account/volume.html", {
        "section": "volume", "nav": "volume", "path": path, "entries": [(base + e.name, e) for e in rows], "after": after,
        "crumbs": [(p, "/".join(parts[: i + 1])) for i, p in enumerate(parts)],
        "parent": "/".join(parts[:-1]) if parts else None, "report": quotas.report(vol.namespace)})


@login_required
@require_GET
@page
def volume_file(request: HttpRequest) -> HttpResponse:
    vol = volumes.volume_of(request.user)
    path = volumes.check_volume_path(request.GET.get("path"))
    entry = volumes.access_file(vol, path)
    return serving.blob_response(request, blobs.key_for(entry.blob_id), entry.size, {"ETag": f'"{entry.blob_id}"'},
                                 path.rsplit("/", 1)[-1])


@login_required
@require_POST
@page
def volume_upload(request: HttpRequest) -> HttpResponse:
    vol = volumes.volume_of(request.user)
    directory = _dir(request)
    upload = request.FILES.get("file")
    if upload is None:
        raise BadRequest("choose a file to upload")
    path = _join(directory, request.POST.get("name") or upload.name)
    volumes.do_write(vol, path, upload, upload.size, user=request.user)
    messages.success(request, f"Uploaded {path} ({format_size(upload.size)}).")
    return redirect(_volume_url(directory))


@login_required
@require_POST
@page
def volume_mkdir(request: HttpRequest) -> HttpResponse:
    vol = volumes.volume_of(request.user)
    directory = _dir(request)
    path = _join(directory, request.POST.get("name", ""))
    volumes.do_mkdir(vol, path, parents=True)
    messages.success(request, f"Created the folder {path}.")
    return redirect(_volume_url(directory))


@login_required
@require_POST
@page
def volume_rename(request: HttpRequest) -> HttpResponse:
    vol = volumes.volume_of(request.user)
    src = volumes.check_volume_path(request.POST.get("src"))
    dst = volumes.check_volume_path((request.POST.get("dst") or "").strip().strip("/"))
    volumes.do_move(vol, src, dst, parents=True)
    messages.success(request, f"Renamed {src} to {dst}.")
    return redirect(_volume_url(dst.rsplit("/", 1)[0] if "/" in dst else ""))


@login_required
@require_POST
@page
def volume_delete(request: HttpRequest) -> HttpResponse:
    vol = volumes.volume_of(request.user)
    path = volumes.check_volume_path(request.POST.get("target"))
    freed = volumes.do_delete(vol, path, recursive=True)
    messages.success(request, f"Deleted {path}" + (f"; {format_size(freed)} freed." if freed else "."))
    return redirect(_volume_url(path.rsplit("/", 1)[0] if "/" in path else ""))


# --- tokens -----------------------------------------------------------------------------------------

@login_required
@page
def tokens(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        limit_token_creation(request, request.user)
        name = (request.POST.get("name") or "").strip()[:100] or "web"
        read_only = request.POST.get("role") != "write"
        token = accounts.do_create_token(request.user, name=name, read_only=read_only)
        # Shown once, on the page this redirects to; only its hash is kept after that.
        request.session["new_token"] = {"name": name, "token": token, "read_only": read_only}
        return redirect("/settings/tokens")
    return render(request, "web/account/tokens.html", {
        "section": "tokens", "tokens": accounts.tokens_of(request.user),
        "new_token": request.session.pop("new_token", None)})


@login_required
@require_POST
@page
def revoke_token(request: HttpRequest, token_id: str) -> HttpResponse:
    row = accounts.access_token(request.user, token_id)
    accounts.revoke_token(row)
    messages.success(request, f"Revoked the token {row.name} ({row.prefix}…). It no longer works.")
    return redirect("/settings/tokens")


# --- instances --------------------------------------------------------------------------------------

def _mount(request: HttpRequest) -> instances.MountRequest:
    repo_type = Repo.DATASET if request.POST.get("type") == Repo.DATASET else Repo.MODEL
    repo_id = (request.POST.get("repo") or "").strip().strip("/")
    if repo_id.startswith("datasets/"):
        repo_type, repo_id = Repo.DATASET, repo_id[len("datasets/"):]
    return instances.MountRequest(repo_id=repo_id, type=repo_type, revision=(request.POST.get("revision") or "").strip(),
                                  path=(request.POST.get("mount_path") or "").strip())


@login_required
@page
def instance_list(request: HttpRequest) -> HttpResponse:
    actor = actor_of(request)
    if request.method == "POST":
        limit_token_creation(request, request.user)
        mounts = [_mount(request)] if (request.POST.get("repo") or "").strip() else []
        instance, token = instances.do_register(actor, (request.POST.get("name") or "").strip(), mounts)
        request.session["new_instance"] = {"name": instance.name, "token": token}
        return redirect("/settings/instances")
    rows = list(instances.instances_of(actor).order_by("revoked_at", "name"))
    return render(request, "web/account/instances.html", {
        "section": "instances", "instances": rows, "new_instance": request.session.pop("new_instance", None),
        "mount_root": "/mnt/hub", "endpoint": base_url(request)})


@login_required
@require_POST
@page
def instance_attach(request: HttpRequest, instance_id: str) -> HttpResponse:
    actor = actor_of(request)
    instance = instances.access_instance(actor, instance_id)
    mount = instances.do_attach(actor, instance, _mount(request))
    messages.success(request, f"Attached {mount.repo.repo_id} to {instance.name}.")
    return redirect("/settings/instances")


@login_required
@require_POST
@page
def instance_detach(request: HttpRequest, instance_id: str, mount_id: int) -> HttpResponse:
    actor = actor_of(request)
    instance = instances.access_instance(actor, instance_id)
    instances.do_detach(actor, instance, mount_id)
    messages.success(request, f"Detached it from {instance.name}.")
    return redirect("/settings/instances")


@login_required
@require_POST
@page
def instance_revoke(request: HttpRequest, instance_id: str) -> HttpResponse:
    actor = actor_of(request)
    instance = instances.access_instance(actor, instance_id)
    instances.do_revoke(actor, instance)
    messages.success(request, f"Revoked {instance.name}: its token no longer works.")
    return redirect("/settings/instances")
