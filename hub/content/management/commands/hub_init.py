from __future__ import annotations

import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand

from hub.accounts.services import do_ensure_user
from hub.content.blobs import object_store
from storage.store.objectstore import S3Store


class Command(BaseCommand):
    help = ("Prepare a hub: apply migrations, create the S3 bucket if it is missing and, with --admin, an "
            "admin account (its password is written to HUB_DATA_DIR/admin-password.txt the first time).")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--admin", metavar="USERNAME", help="ensure this superuser exists")
        parser.add_argument("--no-migrate", action="store_true")

    def handle(self, *args, admin: str | None, no_migrate: bool, **kw) -> None:
        if not no_migrate:
            call_command("migrate", verbosity=0, interactive=False)
        store = object_store()
        if isinstance(store, S3Store):
            store.ensure_bucket()
            self.stdout.write(f"object store: s3 bucket {store.bucket!r} ready")
        else:
            self.stdout.write(f"object store: {settings.HUB_STORAGE_URL}")
        if admin:
            self._admin(admin)

    def _admin(self, username: str) -> None:
        user = do_ensure_user(username)
        path = settings.HUB_DATA_DIR / "admin-password.txt"
        if not user.is_superuser or not path.exists():
            password = secrets.token_urlsafe(12)
            user.is_superuser = user.is_staff = True
            user.set_password(password)
            user.save()
            path.write_text(password + "\n")
            path.chmod(0o600)
        User = get_user_model()
        assert User.objects.filter(username=username, is_superuser=True).exists()
        self.stdout.write(f"admin account: {username} / {path.read_text().strip()}  (password kept in {path})")
