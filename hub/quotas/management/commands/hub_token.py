from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from hub.accounts.services import do_create_token, do_ensure_user, token_expiry, utc
from hub.config import ConfigError, format_size, parse_duration, parse_size
from hub.errors import HubError


class Command(BaseCommand):
    help = "Create USERNAME if needed and print a new API token for it alone on the last line."

    def add_arguments(self, parser) -> None:
        parser.add_argument("username")
        parser.add_argument("--read-only", action="store_true", help="the token can read but not write")
        parser.add_argument("--name", default="cli", help="a label for the token")
        parser.add_argument("--quota", help="set the account's storage quota, e.g. 100GB or 500MiB")
        parser.add_argument("--expires", help="the token stops working after this long, e.g. 30d, 12h, 2w, 90m or "
                                              "45s (at most 365d; without it, it never expires)")

    def handle(self, *args, username: str, read_only: bool, name: str, quota: str | None, expires: str | None,
               **kw) -> None:
        # Checked before anything is written: a refused --expires leaves no new user behind.
        try:
            expiry = token_expiry(parse_duration(expires)) if expires is not None else None
        except ConfigError as err:
            raise CommandError(f"--expires: {err}") from None
        except HubError as err:
            raise CommandError(f"--expires {expires}: {err.message}") from None
        try:
            user = do_ensure_user(username)
        except HubError as err:
            raise CommandError(err.message) from None
        if quota:
            from hub.quotas.services import set_quota

            try:
                size = parse_size(quota)
            except ConfigError as err:
                raise CommandError(str(err)) from None
            set_quota(user.namespace, size)
            self.stdout.write(f"quota of {username}: {format_size(size)}")
        token = do_create_token(user, name=name, read_only=read_only, expires=expiry)
        until = f", expires {utc(expiry)}" if expiry else ""
        self.stdout.write(f"{'read-only' if read_only else 'read/write'} token for {username}{until}:")
        self.stdout.write(token)
