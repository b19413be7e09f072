"""Instances: registration, attachments, the mount spec an instance's agent reads, heartbeats and
revocation. The only code that writes Instance and InstanceMount rows.

Who may do what: the owner manages their instances; an operator (a staff user's token) may
register and manage instances for any user. An instance's own token reaches only `spec`,
`heartbeat`, the attached repos (read) and the owner's volume — see `scope_allows`."""
from __future__ import annotations

import re
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext

from hub.accounts import services as accounts
from hub.accounts.actor import Actor
from hub.accounts.models import ApiToken
from hub.errors import BadRequest, Conflict, Forbidden, HubError, NotFound, Unauthorized
from hub.instances.models import Instance, InstanceMount
from hub.repos import services as repos
from hub.repos.models import Repo
from hub.validation import check_name, check_path

User = get_user_model()
TYPES = {"model": Repo.MODEL, "dataset": Repo.DATASET}
VOLUME_PATH = "volume"
MAX_MOUNTS = 100


@dataclass
class MountRequest:
    repo_id: str  # NS/NAME
    type: str = Repo.MODEL
    revision: str = ""
    path: str = ""


def _is_operator(user) -> bool:
    return bool(user is not None and (user.is_staff or user.is_superuser))


def check_manager(actor: Actor) -> None:
    """Managing instances needs a user's own write-capable token (or a web session)."""
    if actor.user is None:
        raise Unauthorized(gettext("you must be logged in (pass a token) to manage instances"))
    if actor.on_instance:
        raise Forbidden(gettext("an instance token cannot manage instances; use your own token"))
    if not actor.can_write:
        raise Forbidden(gettext("this token is read-only; create a write token to manage instances"))


def default_path(repo: Repo) -> str:
    return f"{'datasets' if repo.type == Repo.DATASET else 'models'}/{repo.namespace.name}/{repo.name}"


def check_mount_path(path: str) -> str:
    path = (path or "").strip("/")
    if not path:
        return ""
    check_path(path)
    if path == VOLUME_PATH or path.startswith(VOLUME_PATH + "/"):
        raise BadRequest(gettext("mount path %(path)r is taken by the volume; choose another") % {"path": path})
    return path


def _overlap(a: str, b: str) -> bool:
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def _check_paths(instance_mounts: list[tuple[str, str]]) -> None:
    """(path, what) pairs: no two mounts on the same path or one inside another."""
    for i, (p, what) in enumerate(instance_mounts):
        for q, other in instance_mounts[i + 1:]:
            if _overlap(p, q):
                raise Conflict(gettext("mount path %(p)r of %(what)s clashes with %(q)r of %(other)s; "
                                       "give one of them another path") % {"p": p, "what": what, "q": q, "other": other})


def _resolve_mount(owner, m: MountRequest) -> tuple[Repo, str, str]:
    """(repo, revision, path) after checking the owner can read the repo at that revision."""
    if m.type not in TYPES.values():
        raise BadRequest(gettext("unsupported repo type %(type)r: use model or dataset") % {"type": m.type})
    if not isinstance(m.repo_id, str) or m.repo_id.count("/") != 1:
        raise BadRequest(gettext("invalid repo id %(repo_id)r: expected NAMESPACE/NAME") % {"repo_id": m.repo_id})
    ns, name = m.repo_id.split("/")
    repo = repos.access_repo(Actor(owner, can_write=False), m.type, ns, name)
    revision = (m.revision or "").strip()
    if revision and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,199}", revision):
        raise BadRequest(gettext("invalid revision %(revision)r") % {"revision": revision})
    repos.resolve_revision(repo, revision or None)  # RevisionNotFound now rather than at mount time
    return repo, revision, check_mount_path(m.path)


@transaction.atomic
def do_register(actor: Actor, name: str, mounts: list[MountRequest], *, owner: str | None = None
                ) -> tuple[Instance, str]:
    """Registers an instance and returns it with its token (shown this once)."""
    check_manager(actor)
    check_name(name, what="instance name")
    if owner and owner != actor.user.username:
        if not _is_operator(actor.user):
            raise Forbidden(gettext("only operators (staff accounts) may register instances for another user"))
        owner_user = User.objects.filter(username=owner, is_active=True).first()
        if owner_user is None:
            raise NotFound(gettext("user %(owner)r does not exist") % {"owner": owner})
    else:
        owner_user = actor.user
    if len(mounts) > MAX_MOUNTS:
        raise BadRequest(gettext("at most %(max_mounts)s repos can be attached to one instance") % {"max_mounts": MAX_MOUNTS})
    resolved = [_resolve_mount(owner_user, m) for m in mounts]
    seen: set[int] = set()
    for repo, _, _ in resolved:
        if repo.pk in seen:
            raise Conflict(gettext("%(type)s %(name)s/%(name2)s is attached twice") % {"type": repo.type, "name": repo.namespace.name, "name2": repo.name})
        seen.add(repo.pk)
    _check_paths([(path or default_path(repo), f"{repo.namespace.name}/{repo.name}") for repo, _, path in resolved]
                 + [(VOLUME_PATH, "the volume")])
    if Instance.objects.filter(owner=owner_user, name=name, revoked_at=None).exists():
        raise Conflict(gettext("%(username)s already has an instance named %(name)r") % {"username": owner_user.username, "name": name})
    token_text = accounts.do_create_token(owner_user, name=f"instance {name}", kind=ApiToken.INSTANCE)
    token = ApiToken.objects.get(digest=accounts.hash_token(token_text))
    try:
        with transaction.atomic():
            instance = Instance.objects.create(owner=owner_user, name=name, created_by=actor.user, token=token)
    except IntegrityError:
        raise Conflict(gettext("%(username)s already has an instance named %(name)r") % {"username": owner_user.username, "name": name}) from None
    InstanceMount.objects.bulk_create([InstanceMount(instance=instance, repo=repo, revision=rev, path=path)
                                       for repo, rev, path in resolved])
    return instance, token_text


def instances_of(actor: Actor, owner: str | None = None):
    check_manager(actor)
    qs = Instance.objects.select_related("owner").prefetch_related("mounts__repo__namespace")
    if owner and owner != actor.user.username:
        if not _is_operator(actor.user):
            raise Forbidden(gettext("only operators (staff accounts) may list another user's instances"))
        return qs.filter(owner__username=owner)
    return qs.filter(owner=actor.user)


def access_instance(actor: Actor, instance_id) -> Instance:
    """The instance, if the actor manages it; anyone else's is as missing as a wrong id."""
    check_manager(actor)
    instance = (Instance.objects.select_related("owner", "token").filter(pk=instance_id).first()
                if _uuid(instance_id) else None)
    if instance is None or not (instance.owner_id == actor.user.pk or _is_operator(actor.user)):
        raise NotFound(gettext("instance not found (or it is not yours)"))
    return instance


def _uuid(value) -> bool:
    import uuid

    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return True


def _live(instance: Instance) -> None:
    if instance.revoked_at:
        raise Conflict(gettext("instance %(name)s was revoked; register a new one") % {"name": instance.name})


@transaction.atomic
def do_attach(actor: Actor, instance: Instance, m: MountRequest) -> InstanceMount:
    _live(instance)
    repo, revision, path = _resolve_mount(instance.owner, m)
    current = list(instance.mounts.select_related("repo__namespace"))
    if any(x.repo_id == repo.pk for x in current):
        raise Conflict(gettext("%(type)s %(name)s/%(name2)s is already attached to %(name3)s") % {"type": repo.type, "name": repo.namespace.name, "name2": repo.name, "name3": instance.name})
    if len(current) >= MAX_MOUNTS:
        raise BadRequest(gettext("at most %(max_mounts)s repos can be attached to one instance") % {"max_mounts": MAX_MOUNTS})
    _check_paths([(path or default_path(repo), f"{repo.namespace.name}/{repo.name}")]
                 + [(x.path or default_path(x.repo), f"{x.repo.namespace.name}/{x.repo.name}") for x in current]
                 + [(VOLUME_PATH, "the volume")])
    return InstanceMount.objects.create(instance=instance, repo=repo, revision=revision, path=path)


def do_detach(actor: Actor, instance: Instance, mount_id) -> None:
    _live(instance)
    deleted, _ = InstanceMount.objects.filter(instance=instance, pk=mount_id).delete()
    if not deleted:
        raise NotFound(gettext("mount %(mount_id)s is not attached to %(name)s") % {"mount_id": mount_id, "name": instance.name})


def do_revoke(actor: Actor, instance: Instance) -> Instance:
    """Revokes the instance and its token at once; a mount using it gets 401 from then on."""
    now = timezone.now()
    with transaction.atomic():
        Instance.objects.filter(pk=instance.pk, revoked_at=None).update(revoked_at=now)
        accounts.revoke_token(instance.token)
    instance.refresh_from_db()
    return instance


# --- the instance's own calls ---------------------------------------------------------------------

def instance_of(token: ApiToken | None) -> Instance | None:
    if token is None or token.kind != ApiToken.INSTANCE:
        return None
    return Instance.objects.select_related("owner").filter(token=token, revoked_at=None).first()


def spec(instance: Instance) -> dict:
    """What the agent mounts: every attached repo with its revision resolved to a commit now, and
    the volume. A repo the owner can no longer read is listed with its error instead of a commit."""
    owner = Actor(instance.owner, can_write=False)
    mounts = []
    for m in instance.mounts.select_related("repo__namespace"):
        repo = m.repo
        item = {"id": m.pk, "kind": repo.type, "repo_id": f"{repo.namespace.name}/{repo.name}",
                "revision": m.revision or repo.default_branch, "path": m.path or default_path(repo),
                "read_only": True, "commit": None, "error": None}
        try:
            repos.access_repo(owner, repo.type, repo.namespace.name, repo.name)
            item["commit"] = repos.resolve_revision(repo, m.revision or None).oid
        except HubError as err:
            item["error"] = err.message
        mounts.append(item)
    mounts.append({"id": None, "kind": "volume", "repo_id": None, "revision": None, "path": VOLUME_PATH,
                   "read_only": False, "commit": None, "error": None})
    return {"instance": {"id": str(instance.id), "name": instance.name, "owner": instance.owner.username},
            "mounts": mounts, "heartbeat_seconds": 60}


def do_heartbeat(instance: Instance, agent: str = "") -> None:
    Instance.objects.filter(pk=instance.pk, revoked_at=None).update(
        last_heartbeat=timezone.now(), agent=(agent or "")[:200])


def attached_repos(instance: Instance) -> frozenset:
    """The pks of the repos attached to the instance: all its token may read."""
    return frozenset(InstanceMount.objects.filter(instance=instance).values_list("repo_id", flat=True))


# Deny by default: an instance token reaches these and nothing else. Repo endpoints are further
# limited to the attached repos by repos.access_repo, and to reading by Actor.can_write.
_SCOPE = [re.compile(p) for p in (
    r"^/api/instances/(spec|heartbeat)$",
    r"^/api/volume/",
    r"^/api/quota$",
    r"^/api/whoami-v2$",
    r"^/api/v1/repos/(model|dataset)/[^/]+/[^/]+/(manifest|access)$",
    r"^/api/(models|datasets)/[^/]+/[^/]+(/(revision|tree|paths-info|refs|commits|xet-read-token)(/.*)?)?$",
    r"^/(datasets/)?[^/]+/[^/]+/resolve/",
    r"^/lfs/objects/",
)]


def scope_allows(path: str) -> bool:
    return any(p.match(path) for p in _SCOPE)
