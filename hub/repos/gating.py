"""Access requests to gated repos, as upstream's gates work (hub.repos.services.check_gate reads them).

A person asks (the repo page's button, the native `/access` route); on an "auto" gate the request is
accepted as it is made, on a "manual" one it waits. The writers of the repo's namespace see the
requests by status and move them between pending, accepted and rejected, or grant access to someone
who never asked (the owner's page, and huggingface_hub's `*_access_request` and `grant_access`).

Every change is one conditional UPDATE (or an INSERT guarded by the one-request-per-user constraint),
so two owners handling one request at once, or a person asking twice, end in one consistent row: the
second of two accepts finds the request accepted already and says so, as upstream does (404)."""
from __future__ import annotations

import json

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext

from hub.accounts.actor import Actor
from hub.errors import BadRequest, Forbidden, NotFound, Unauthorized
from hub.repos.models import AccessRequest, Repo
from hub.repos.services import check_can_write, role_in

STATUSES = (AccessRequest.PENDING, AccessRequest.ACCEPTED, AccessRequest.REJECTED)
REASON_MAX = 200
FIELDS_MAX_BYTES = 10_000
# What moving a request to each status is called, in upstream's error messages.
VERB = {AccessRequest.PENDING: "cancel", AccessRequest.ACCEPTED: "accept", AccessRequest.REJECTED: "reject"}


# --- the person asking ------------------------------------------------------------------------------

def request_of(actor: Actor, repo: Repo) -> AccessRequest | None:
    """The caller's own request for this repo, if they made one (or were granted access)."""
    if actor.user is None:
        return None
    return AccessRequest.objects.filter(repo=repo, user=actor.user).first()


def check_fields(fields: object) -> dict:
    """What a requester filled in: a JSON object of a reasonable size."""
    if fields is None:
        return {}
    if not isinstance(fields, dict) or not all(isinstance(k, str) for k in fields):
        raise BadRequest(gettext("'fields' must be a JSON object of the answers to the gate's questions"))
    if len(json.dumps(fields)) > FIELDS_MAX_BYTES:
        raise BadRequest(gettext("'fields' is too large: at most %(fields_max_bytes)s bytes of JSON") % {"fields_max_bytes": FIELDS_MAX_BYTES})
    return fields


def do_request_access(actor: Actor, repo: Repo, fields: dict | None = None) -> AccessRequest | None:
    """The caller asks for the repo's files, agreeing to its conditions. On an "auto" gate the request
    is accepted at once (a pending one, left from a manual gate, too); on a "manual" gate it is
    pending until an owner handles it. Asking again changes nothing, and a rejection stands: only the
    owners can reopen it. Members of the repo's namespace need no request: None for them.

    Safe to call concurrently: the one-request-per-user constraint lets one INSERT win."""
    if actor.user is None:
        raise Unauthorized(gettext("log in (pass a token) to ask for access to a repo"))
    if actor.on_instance or not actor.can_write:
        # Asking is a change made in the person's name: not for a read-only or an instance token.
        raise Forbidden(gettext("this token cannot ask for access (it is read-only or an instance's); "
                                "ask on the repo's page, or with a write token"))
    if not repo.gated:
        raise BadRequest(gettext("%(repo_id)s is not gated: there is nothing to accept") % {"repo_id": repo.repo_id})
    fields = check_fields(fields)
    if role_in(actor.user, repo.namespace) is not None:
        return None
    auto = repo.gate_mode == Repo.AUTO
    status = AccessRequest.ACCEPTED if auto else AccessRequest.PENDING
    try:
        with transaction.atomic():
            return AccessRequest.objects.create(repo=repo, user=actor.user, status=status,
                                                fields=fields,
                                                decided=timezone.now() if auto else None)
    except IntegrityError:
        pass  # asked before (or at the same moment)
    if auto:
        AccessRequest.objects.filter(repo=repo, user=actor.user, status=AccessRequest.PENDING).update(
            status=AccessRequest.ACCEPTED, decided=timezone.now(), decided_by=None)
    return AccessRequest.objects.get(repo=repo, user=actor.user)


# --- the repo's owners --------------------------------------------------------------------------------

def check_manage_requests(actor: Actor, repo: Repo) -> None:
    """Only writers of the repo's namespace, with a credential that may write, see or handle its
    access requests (they hold people's emails); a repo without a gate has none (400, as upstream)."""
    check_can_write(actor, repo.namespace)
    if not repo.gated:
        raise BadRequest(gettext("%(repo_id)s is not gated: it has no access requests (gate it first: "
                                 "update_repo_settings(gated='auto' or 'manual'))") % {"repo_id": repo.repo_id})


def list_requests(actor: Actor, repo: Repo, status: str, *, before: int | None = None, limit: int = 1000
                  ) -> list[AccessRequest]:
    """The repo's requests with this status, newest first, `limit` at most, those older than the
    request id `before` if given (the next page)."""
    check_manage_requests(actor, repo)
    if status not in STATUSES:
        raise NotFound(gettext("no such list: %(status)r (pending, accepted or rejected)") % {"status": status})
    qs = AccessRequest.objects.filter(repo=repo, status=status).select_related("user").order_by("-id")
    if before is not None:
        qs = qs.filter(id__lt=before)
    return list(qs[:limit])


def count_pending(repo: Repo) -> int:
    return AccessRequest.objects.filter(repo=repo, status=AccessRequest.PENDING).count()


def _user_named(username: object):
    if not isinstance(username, str) or not username:
        raise BadRequest(gettext("'user' must be a user name"))
    user = get_user_model().objects.filter(username__iexact=username).order_by("pk").first()
    if user is None:
        raise NotFound(gettext("user %(username)r not found") % {"username": username})
    return user


def _find(repo: Repo, *, user: object = None, request_id: object = None) -> AccessRequest:
    if (user is None) == (request_id is None):
        raise BadRequest(gettext("name the request by exactly one of 'user' and 'requestId'"))
    if user is not None:
        who = _user_named(user)
        found = AccessRequest.objects.filter(repo=repo, user=who).select_related("user").first()
        if found is None:
            raise NotFound(gettext("%(username)s has not asked for access to %(repo_id)s") % {"username": who.username, "repo_id": repo.repo_id})
        return found
    try:
        pk = int(str(request_id), 16)
    except ValueError:
        raise NotFound(gettext("no access request %(request_id)r for %(repo_id)s") % {"request_id": request_id, "repo_id": repo.repo_id}) from None
    found = AccessRequest.objects.filter(repo=repo, pk=pk).select_related("user").first()
    if found is None:
        raise NotFound(gettext("no access request %(request_id)r for %(repo_id)s") % {"request_id": request_id, "repo_id": repo.repo_id})
    return found


def do_handle_request(actor: Actor, repo: Repo, status: str, *, user: object = None, request_id: object = None,
                      rejection_reason: object = None) -> AccessRequest:
    """An owner moves a request to `status`: accepted (the files open), rejected (with a reason the
    requester sees, at most 200 characters) or pending (cancel: access is taken back until it is
    handled again). A request already in that list is 404, as upstream answers.

    One conditional UPDATE (WHERE status differs): of two owners doing the same at once, one wins and
    the other gets the 404."""
    check_manage_requests(actor, repo)
    if status not in STATUSES:
        raise BadRequest(gettext("status must be one of %(statuses)s, not %(status)r") % {"statuses": ', '.join(STATUSES), "status": status})
    if rejection_reason is not None and status != AccessRequest.REJECTED:
        raise BadRequest(gettext("a rejection reason goes only with status 'rejected'"))
    reason = "" if rejection_reason is None else rejection_reason
    if not isinstance(reason, str) or len(reason) > REASON_MAX:
        raise BadRequest(gettext("the rejection reason must be text of at most %(reason_max)s characters") % {"reason_max": REASON_MAX})
    found = _find(repo, user=user, request_id=request_id)
    moved = (AccessRequest.objects.filter(pk=found.pk).exclude(status=status)
             .update(status=status, decided=timezone.now(), decided_by=actor.user, rejection_reason=reason.strip()))
    if not moved:
        raise NotFound(gettext("cannot %(verb)s the request of %(username)s: it is already %(status)s") % {"verb": VERB[status], "username": found.user.username, "status": status})
    found.refresh_from_db()
    return found


def do_grant_access(actor: Actor, repo: Repo, username: object) -> AccessRequest:
    """An owner opens the repo to a user who may never have asked: their request, made now or moved
    from pending or rejected, is accepted. Someone who has access already is 400, as upstream answers.

    The INSERT is guarded by the one-request-per-user constraint and the move is a conditional UPDATE,
    so two grants at once give one accepted request and one 400."""
    check_manage_requests(actor, repo)
    user = _user_named(username)
    if role_in(user, repo.namespace) is not None:
        raise BadRequest(gettext("%(username)s already has access to %(repo_id)s: they belong to %(name)s") % {"username": user.username, "repo_id": repo.repo_id, "name": repo.namespace.name})
    now = timezone.now()
    try:
        with transaction.atomic():
            return AccessRequest.objects.create(repo=repo, user=user, status=AccessRequest.ACCEPTED, granted=True,
                                                decided=now, decided_by=actor.user)
    except IntegrityError:
        pass
    moved = (AccessRequest.objects.filter(repo=repo, user=user).exclude(status=AccessRequest.ACCEPTED)
             .update(status=AccessRequest.ACCEPTED, decided=now, decided_by=actor.user, rejection_reason=""))
    if not moved:
        raise BadRequest(gettext("%(username)s already has access to %(repo_id)s") % {"username": user.username, "repo_id": repo.repo_id})
    return AccessRequest.objects.select_related("user").get(repo=repo, user=user)
