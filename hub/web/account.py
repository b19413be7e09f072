"""Account pages (session sign-in, CSRF on every form): overview with quota, the volume, API tokens
and instances. Each view parses the form, calls the services of hub.volumes, hub.accounts,
hub.quotas or hub.instances, and renders or redirects back."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from datetime import timedelta
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, pgettext
from django.views.decorators.http import require_GET, require_POST

from hub.accounts import services as accounts
from hub.accounts.middleware import limit_failures, limit_token_creation
from hub.catalog import services as catalog
from hub.config import format_size, parse_duration
from hub.content import blobs, serving
from hub.content.signing import base_url
from hub.errors import BadRequest, Conflict, InvalidPath, PreconditionFailed, RepoNotFound, TooManyRequests
from hub.instances import services as instances
from hub.quotas import services as quotas
from hub.repos import services as repos
from hub.repos.models import Repo
from hub.uploads import sessions as uploads
from hub.volumes import services as volumes
from hub.web.pages import actor_of, error_page, form_action, page

VOLUME_PAGE = 200


class LoginView(auth_views.LoginView):
    """Django's sign-in, with wrong passwords counted against the client address like wrong tokens."""

    template_name = "web/login.html"
    redirect_authenticated_user = True

    def form_invalid(self, form) -> HttpResponse:
        if limit_failures(self.request):
            return error_page(self.request, TooManyRequests(
                _("too many failed sign-ins from your address; wait a minute and try again")))
        return super().form_invalid(form)


@login_required
@require_GET
@page
def overview(request: HttpRequest) -> HttpResponse:
    ns = quotas.namespace_for(request.user)
    return render(request, "web/account/overview.html", {
        "section": "overview", "report": quotas.report(ns), "repos": catalog.repos_of(request.user),
        "orgs": accounts.user_orgs(request.user)})


def _back_to_account(request: HttpRequest, *args, **kwargs) -> str:
    return "/settings"


@login_required
@require_POST
@form_action(_back_to_account)
def abort_upload(request: HttpRequest, upload_id: str) -> HttpResponse:
    """Ends one of the user's interrupted uploads listed on the overview: its bytes given back now."""
    ns = quotas.namespace_for(request.user)
    held = [r for r in quotas.reservations_of(ns) if r["upload"] == upload_id]
    uploads.end_upload(request.user, upload_id)
    if held:
        messages.success(request, _("Aborted the upload to %(what)s; %(size)s given back.")
                         % {"what": held[0]["what"], "size": format_size(sum(r["bytes"] for r in held))})
    return redirect("/settings")


# --- volume -----------------------------------------------------------------------------------------
# The forms' errors show on the volume page, worded for the form: the services speak the API's words
# ("pass overwrite to replace it"), which the form has no way to do.

def _volume_url(path: str) -> str:
    return "/settings/volume" + (f"?{urlencode({'path': path})}" if path else "")


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


def _back_to_volume(request: HttpRequest) -> str:
    """The folder the form was in: its `path` field, or the parent of what it renamed or deleted."""
    if "path" in request.POST:
        return _volume_url((request.POST.get("path") or "").strip("/"))
    return _volume_url(_parent((request.POST.get("src") or request.POST.get("target") or "").strip("/")))


def _dir(request: HttpRequest) -> str:
    return volumes.check_volume_path(request.POST.get("path") or "", root_ok=True, directory=True)


def _typed_path(text: str) -> str:
    """A path typed into a form, from the volume root (surrounding blanks and slashes dropped)."""
    path = (text or "").strip().strip("/")
    if not path:
        raise BadRequest(_("Give a name"))
    try:
        return volumes.check_volume_path(path)
    except InvalidPath:
        if any(part in ("", ".", "..") for part in path.split("/")):
            raise InvalidPath(_("Names cannot be empty, “.” or “..”: give a path inside your volume, "
                                "like runs/ckpt.bin")) from None
        raise


def _join(directory: str, name: str) -> str:
    name = (name or "").strip().strip("/")
    return _typed_path(f"{directory}/{name}" if directory and name else name)


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
@form_action(_back_to_volume)
def volume_upload(request: HttpRequest) -> HttpResponse:
    """Writes the file; one already at that path is replaced only when the form's `replace` box is
    ticked, as a rename never overwrites: a file is not lost to a name that happens to clash."""
    vol = volumes.volume_of(request.user)
    directory = _dir(request)
    upload = request.FILES.get("file")
    if upload is None:
        raise BadRequest(_("Choose a file to upload"))
    path = _join(directory, request.POST.get("name") or upload.name)
    replace = bool(request.POST.get("replace"))
    try:
        _file, created = volumes.do_write(vol, path, upload, upload.size, user=request.user, if_none_match=not replace)
    except (PreconditionFailed, volumes.IsADirectory):
        if volumes.resolve(vol, path).is_dir:
            raise Conflict(_("“%(path)s” is a folder: upload the file under another name") % {"path": path}) from None
        raise Conflict(_("“%(path)s” already exists: tick “Replace a file of the same name” to overwrite it, "
                         "or rename or delete it first") % {"path": path}) from None
    if created:
        messages.success(request, _("Uploaded %(path)s (%(size)s).") % {"path": path, "size": format_size(upload.size)})
    else:
        messages.success(request, _("Replaced %(path)s with the uploaded file (%(size)s); the previous version is "
                                    "gone.") % {"path": path, "size": format_size(upload.size)})
    return redirect(_volume_url(directory))


@login_required
@require_POST
@form_action(_back_to_volume)
def volume_mkdir(request: HttpRequest) -> HttpResponse:
    vol = volumes.volume_of(request.user)
    directory = _dir(request)
    path = _join(directory, request.POST.get("name", ""))
    try:
        _folder, created = volumes.do_mkdir(vol, path, parents=True)
    except volumes.FileExists:
        raise Conflict(_("“%(path)s” is a file: pick another name for the folder") % {"path": path}) from None
    if created:
        messages.success(request, _("Created the folder %(path)s.") % {"path": path})
    else:
        messages.info(request, _("The folder %(path)s was already there; nothing changed.") % {"path": path})
    return redirect(_volume_url(directory))


@login_required
@require_POST
@form_action(_back_to_volume)
def volume_rename(request: HttpRequest) -> HttpResponse:
    vol = volumes.volume_of(request.user)
    src = volumes.check_volume_path(request.POST.get("src"))
    dst = _typed_path(request.POST.get("dst"))
    try:
        volumes.do_move(vol, src, dst, parents=True)
    except volumes.FileExists:
        raise Conflict(_("“%(path)s” already exists: pick another name or delete it first") % {"path": dst}) from None
    messages.success(request, _("Renamed %(src)s to %(dst)s.") % {"src": src, "dst": dst})
    return redirect(_volume_url(_parent(dst)))


@login_required
@require_POST
@form_action(_back_to_volume)
def volume_delete(request: HttpRequest) -> HttpResponse:
    vol = volumes.volume_of(request.user)
    path = volumes.check_volume_path(request.POST.get("target"))
    freed = volumes.do_delete(vol, path, recursive=True)
    messages.success(request, _("Deleted %(path)s; %(size)s freed.") % {"path": path, "size": format_size(freed)} if freed
                     else _("Deleted %(path)s.") % {"path": path})
    return redirect(_volume_url(_parent(path)))


# --- tokens -----------------------------------------------------------------------------------------

def _back_to_tokens(request: HttpRequest, *args, **kwargs) -> str:
    return "/settings/tokens"


# The tokens page's expiry choices, spelled as `manage.py hub_token --expires` takes them. The form
# starts at 30 days: a token pasted into a notebook and forgotten stops working on its own.
TOKEN_LIFETIMES = [("never", gettext_lazy("No expiry")), ("7d", gettext_lazy("7 days")), ("30d", gettext_lazy("30 days")),
                   ("90d", gettext_lazy("90 days")), ("365d", gettext_lazy("1 year"))]
DEFAULT_LIFETIME = "30d"


def _lifetime(request: HttpRequest) -> timedelta | None:
    value = request.POST.get("expires", DEFAULT_LIFETIME)
    if value not in dict(TOKEN_LIFETIMES):
        raise BadRequest(_("Choose when the token expires from the list"))
    return None if value == "never" else parse_duration(value)


@login_required
@form_action(_back_to_tokens)
def tokens(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        limit_token_creation(request, request.user)
        name = (request.POST.get("name") or "").strip()
        read_only = request.POST.get("role") != "write"
        token = accounts.check_create_token(request.user, name=name, read_only=read_only, lifetime=_lifetime(request))
        # Shown once, on the page this redirects to; only its hash is kept after that.
        request.session["new_token"] = {"name": name, "token": token, "read_only": read_only}
        return redirect("/settings/tokens")
    return render(request, "web/account/tokens.html", {
        "section": "tokens", "tokens": accounts.tokens_of(request.user),
        "new_token": request.session.pop("new_token", None),
        "lifetimes": TOKEN_LIFETIMES, "default_lifetime": DEFAULT_LIFETIME})


@login_required
@require_POST
@form_action(_back_to_tokens)
def revoke_token(request: HttpRequest, token_id: str) -> HttpResponse:
    row = accounts.access_token(request.user, token_id)
    accounts.revoke_token(row)
    messages.success(request, _("Revoked the token %(name)s (%(prefix)s…). It no longer works.")
                     % {"name": row.name, "prefix": row.prefix})
    return redirect("/settings/tokens")


# --- instances --------------------------------------------------------------------------------------

def _back_to_instances(request: HttpRequest, *args, **kwargs) -> str:
    return "/settings/instances"


def _mount(request: HttpRequest) -> instances.MountRequest:
    repo_type = Repo.DATASET if request.POST.get("type") == Repo.DATASET else Repo.MODEL
    repo_id = (request.POST.get("repo") or "").strip().strip("/")
    if repo_id.startswith("datasets/"):
        repo_type, repo_id = Repo.DATASET, repo_id[len("datasets/"):]
    elif repo_id.startswith("models/"):
        repo_type, repo_id = Repo.MODEL, repo_id[len("models/"):]
    return instances.MountRequest(repo_id=repo_id, type=repo_type, revision=(request.POST.get("revision") or "").strip(),
                                  path=(request.POST.get("mount_path") or "").strip())


def _type_word(repo_type: str) -> str:
    """"dataset" or "model" as the form's list shows it."""
    return pgettext("repo type", "dataset") if repo_type == Repo.DATASET else pgettext("repo type", "model")


@contextmanager
def _repo_named(actor, mount: instances.MountRequest) -> Iterator[None]:
    """A repo the form names but the actor cannot see, said for the form: the repo may be of the other
    kind than the one picked in the list (the list starts at "dataset")."""
    try:
        yield
    except RepoNotFound:
        other = (repos.other_type_seen(actor, mount.type, *mount.repo_id.split("/"))
                 if mount.repo_id.count("/") == 1 else None)
        if other is not None:
            raise RepoNotFound(_("“%(repo)s” is a %(type)s, not a %(wanted)s: choose “%(type)s” in the list")
                               % {"repo": mount.repo_id, "type": _type_word(other.type), "wanted": _type_word(mount.type)}) from None
        raise RepoNotFound(_("No dataset or model %(repo)s, or you cannot see it") % {"repo": mount.repo_id}) from None


@login_required
@form_action(_back_to_instances)
def instance_list(request: HttpRequest) -> HttpResponse:
    actor = actor_of(request)
    if request.method == "POST":
        limit_token_creation(request, request.user)
        mounts = [_mount(request)] if (request.POST.get("repo") or "").strip() else []
        with _repo_named(actor, mounts[0]) if mounts else nullcontext():
            instance, token = instances.do_register(actor, (request.POST.get("name") or "").strip(), mounts)
        request.session["new_instance"] = {"name": instance.name, "token": token}
        return redirect("/settings/instances")
    rows = list(instances.instances_of(actor).order_by("revoked_at", "name"))
    return render(request, "web/account/instances.html", {
        "section": "instances", "instances": rows, "new_instance": request.session.pop("new_instance", None),
        "mount_root": "/mnt/hub", "endpoint": base_url(request)})


@login_required
@require_POST
@form_action(_back_to_instances)
def instance_attach(request: HttpRequest, instance_id: str) -> HttpResponse:
    actor = actor_of(request)
    instance = instances.access_instance(actor, instance_id)
    mount = _mount(request)
    with _repo_named(actor, mount):
        attached = instances.do_attach(actor, instance, mount)
    messages.success(request, _("Attached %(repo)s to %(instance)s.") % {"repo": attached.repo.repo_id, "instance": instance.name})
    return redirect("/settings/instances")


@login_required
@require_POST
@form_action(_back_to_instances)
def instance_detach(request: HttpRequest, instance_id: str, mount_id: int) -> HttpResponse:
    actor = actor_of(request)
    instance = instances.access_instance(actor, instance_id)
    instances.do_detach(actor, instance, mount_id)
    messages.success(request, _("Detached it from %(instance)s.") % {"instance": instance.name})
    return redirect("/settings/instances")


@login_required
@require_POST
@form_action(_back_to_instances)
def instance_revoke(request: HttpRequest, instance_id: str) -> HttpResponse:
    actor = actor_of(request)
    instance = instances.access_instance(actor, instance_id)
    instances.do_revoke(actor, instance)
    messages.success(request, _("Revoked %(instance)s: its token no longer works.") % {"instance": instance.name})
    return redirect("/settings/instances")
