from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from hub.accounts.models import Membership, Namespace
from hub.accounts.services import do_add_member, do_create_org, do_ensure_user
from hub.errors import HubError


class Command(BaseCommand):
    help = "Create organisation NAME (if missing) owned by --owner, and add --member users to it."

    def add_arguments(self, parser) -> None:
        parser.add_argument("name")
        parser.add_argument("--owner", required=True, help="user who administers the organisation")
        parser.add_argument("--member", action="append", default=[], help="USER or USER:read (repeatable)")

    def handle(self, *args, name: str, owner: str, member: list[str], **kw) -> None:
        try:
            owner_user = do_ensure_user(owner)
            org = Namespace.objects.filter(name=name, kind=Namespace.ORG).first() or do_create_org(name, owner_user)
            for spec in member:
                username, _, role = spec.partition(":")
                user = get_user_model().objects.filter(username=username).first() or do_ensure_user(username)
                do_add_member(org, user, role or Membership.WRITE)
        except HubError as err:
            raise CommandError(err.message) from None
        members = ", ".join(f"{m.user.username}:{m.role}" for m in org.memberships.select_related("user"))
        self.stdout.write(f"organisation {org.name}: {members}")
