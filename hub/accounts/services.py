"""Accounts, namespaces and tokens: the only code that writes them."""
from __future__ import annotations

import hashlib
import secrets
from datetime import UTC, datetime, timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext

from hub.accounts.models import ApiToken, Membership, Namespace
from hub.errors import BadRequest, Conflict, TokenExpired, Unauthorized
from hub.validation import check_name

TOKEN_PREFIX = "hub_"
User = get_user_model()


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@transaction.atomic
def do_ensure_user(username: str, *, email: str = "") -> User:
    """The user with this name, created (with its namespace) if missing."""
    check_name(username, what="user name")
    # Names are case-insensitive (as upstream's): "Alice" is alice's account if alice exists.
    user = User.objects.filter(username__iexact=username).order_by("pk").first()
    ns = Namespace.objects.filter(name__iexact=username).first()
    if ns is not None and (user is None or ns.user_id != user.id):
        raise BadRequest(gettext("the name %(username)r is taken by an organisation") % {"username": username})
    if user is None:
        user = User.objects.create(username=username, email=email)
    if ns is None:
        Namespace.objects.create(name=user.username, kind=Namespace.USER, user=user)
    return user


@transaction.atomic
def do_create_org(name: str, owner: User) -> Namespace:
    check_name(name, what="organisation name")
    if Namespace.objects.filter(name__iexact=name).exists():
        raise BadRequest(gettext("the name %(name)r is taken") % {"name": name})
    ns = Namespace.objects.create(name=name, kind=Namespace.ORG)
    Membership.objects.create(namespace=ns, user=owner, role=Membership.ADMIN)
    return ns


def do_create_token(user: User, *, name: str = "token", read_only: bool = False, kind: str = ApiToken.USER,
                    expires: datetime | None = None) -> str:
    """Creates a token and returns it; this is the only time the token text exists. `expires` comes
    from token_expiry (checked), and only for user tokens: an instance's lives as long as the instance."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(30)
    ApiToken.objects.create(user=user, name=name, prefix=token[:10], digest=hash_token(token),
                            read_only=read_only, kind=kind, expires=expires)
    return token


TOKEN_NAME_MAX = 100
# The longest the tokens page offers; a token that must live on beyond it is made without an expiry.
TOKEN_LIFETIME_MAX = timedelta(days=365)


def token_expiry(lifetime: timedelta | None) -> datetime | None:
    """When a user token made now with this lifetime expires (None: never); its errors are sentences
    for the tokens page and `manage.py hub_token`."""
    if lifetime is None:
        return None
    if lifetime <= timedelta(0):
        raise BadRequest(gettext("A token's expiry must be in the future: give a lifetime of more than "
                                 "zero, e.g. 30d"))
    if lifetime > TOKEN_LIFETIME_MAX:
        raise BadRequest(gettext("A token expires at most %(days)s days after it is made (or never: give "
                                 "no expiry)") % {"days": TOKEN_LIFETIME_MAX.days})
    return timezone.now() + lifetime


def utc(when: datetime) -> str:
    """A token's expiry as messages and pages say it: '2026-12-03 18:00 UTC'."""
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def check_create_token(user: User, *, name: str, read_only: bool = False, lifetime: timedelta | None = None) -> str:
    """A token a person names (on the tokens page): the name must be given and differ from those of
    their live tokens (neither revoked nor expired), so the list tells them apart when one is to be
    revoked; it expires after `lifetime` (None: never). Its errors are sentences for the page's form.
    Creations for one user run one at a time (the user row is locked), so two at once cannot both
    take a name."""
    name = (name or "").strip()
    if not name:
        raise BadRequest(gettext("Give the token a name, e.g. laptop or training-job"))
    if len(name) > TOKEN_NAME_MAX:
        raise BadRequest(gettext("A token name has at most %(token_name_max)s characters") % {"token_name_max": TOKEN_NAME_MAX})
    expires = token_expiry(lifetime)
    with transaction.atomic():
        User.objects.select_for_update().only("pk").get(pk=user.pk)
        live = Q(expires=None) | Q(expires__gt=timezone.now())
        if ApiToken.objects.filter(live, user=user, kind=ApiToken.USER, revoked_at=None, name__iexact=name).exists():
            raise Conflict(gettext("You already have a token named “%(name)s”: pick another name, or "
                                   "revoke that one first") % {"name": name})
        return do_create_token(user, name=name, read_only=read_only, expires=expires)


def authenticate_token(token: str) -> ApiToken:
    """The live token row for this token text, or Unauthorized (TokenExpired past its expiry). One
    query (and a write at most once a minute)."""
    row = (ApiToken.objects.select_related("user").filter(digest=hash_token(token), revoked_at=None).first()
           if token.startswith(TOKEN_PREFIX) else None)
    if row is None or not row.user.is_active:
        raise Unauthorized(gettext("Invalid credentials in Authorization header"))
    now = timezone.now()
    if row.expires is not None and row.expires <= now:
        raise TokenExpired(gettext("this token expired on %(expires)s; create a new one at "
                                   "/settings/tokens (or with `manage.py hub_token`)") % {"expires": utc(row.expires)})
    # Record use at most once a minute: a write per request would serialise every read on SQLite.
    if row.last_used is None or now - row.last_used > timedelta(minutes=1):
        ApiToken.objects.filter(pk=row.pk).update(last_used=now)
    return row


def revoke_token(token_row: ApiToken) -> None:
    ApiToken.objects.filter(pk=token_row.pk, revoked_at=None).update(revoked_at=timezone.now())


def user_orgs(user: User) -> list[Namespace]:
    return list(Namespace.objects.filter(kind=Namespace.ORG, memberships__user=user).order_by("name"))


def do_add_member(org: Namespace, user: User, role: str = Membership.WRITE) -> Membership:
    if role not in (Membership.READ, Membership.WRITE, Membership.ADMIN):
        raise BadRequest(gettext("unknown role %(role)r: use read, write or admin") % {"role": role})
    membership, _ = Membership.objects.update_or_create(namespace=org, user=user, defaults={"role": role})
    return membership


def tokens_of(user: User) -> list[ApiToken]:
    """The user's own API tokens (not those of their instances), newest first, then the revoked and
    the expired ones."""
    from django.db.models import F

    rows = (ApiToken.objects.filter(user=user, kind=ApiToken.USER)
            .order_by(F("revoked_at").asc(nulls_first=True), "-created"))
    return sorted(rows, key=lambda t: t.revoked_at is not None or t.expired)  # stable: the order above within each


def access_token(user: User, token_id) -> ApiToken:
    """One of the user's own tokens; anyone else's is as missing as a wrong id."""
    from hub.errors import NotFound

    row = ApiToken.objects.filter(pk=token_id, user=user, kind=ApiToken.USER).first() if str(token_id).isdigit() else None
    if row is None:
        raise NotFound(gettext("token not found (or it is not yours)"))
    return row
