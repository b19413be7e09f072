from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from hub.accounts.services import do_create_token, do_ensure_user
from hub.errors import HubError


class Command(BaseCommand):
    help = "Create USERNAME if needed and print a new API token for it alone on the last line."

    def add_arguments(self, parser) -> None:
        parser.add_argument("username")
        parser.add_argument("--read-only", action="store_true", help="the token can read but not write")
        parser.add_argument("--name", default="cli", help="a label for the token")
        parser.add_argument("--quota", help="set the account's storage quota, e.g. 100GB or 500MiB")

    def handle(self, *args, username: str, read_only: bool, name: str, quota: str | None, **kw) -> None:
        try:
            user = do_ensure_user(username)
        except HubError as err:
            raise CommandError(err.message) from None
        if quota:
            from hub.config import ConfigError, format_size, parse_size
            from hub.quotas.services import set_quota

            try:
                size = parse_size(quota)
            except ConfigError as err:
                raise CommandError(str(err)) from None
            set_quota(user.namespace, size)
            self.stdout.write(f"quota of {username}: {format_size(size)}")
        token = do_create_token(user, name=name, read_only=read_only)
        self.stdout.write(f"{'read-only' if read_only else 'read/write'} token for {username}:")
        self.stdout.write(token)
