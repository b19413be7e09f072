from __future__ import annotations

import getpass
import sys

from django.contrib.auth.password_validation import ValidationError, validate_password
from django.core.management.base import BaseCommand, CommandError

from hub.accounts.services import do_ensure_user
from hub.errors import HubError


class Command(BaseCommand):
    help = ("Set the web sign-in password of USERNAME, creating the user if needed. The password comes from "
            "--password, from standard input with --stdin, or is asked for twice.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("username")
        source = parser.add_mutually_exclusive_group()
        source.add_argument("--password", help="the password (visible in the process list: prefer --stdin)")
        source.add_argument("--stdin", action="store_true", help="read the password from the first line of stdin")

    def handle(self, *args, username: str, password: str | None, stdin: bool, **kw) -> None:
        if stdin:
            password = sys.stdin.readline().rstrip("\n")
        elif password is None:
            password = getpass.getpass(f"Password for {username}: ")
            if getpass.getpass("Again: ") != password:
                raise CommandError("the passwords differ; nothing was changed")
        try:
            user = do_ensure_user(username)
            validate_password(password, user)
        except HubError as err:
            raise CommandError(err.message) from None
        except ValidationError as err:
            raise CommandError(" ".join(err.messages)) from None
        user.set_password(password)
        user.save(update_fields=["password"])
        self.stdout.write(f"password set for {username}; sign in at /accounts/login")
