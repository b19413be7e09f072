"""python manage.py hub_gc [--grace SECONDS] [--dry-run] [--queue]"""
from __future__ import annotations

import json
from datetime import timedelta

from django.conf import settings
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = ("Garbage collection: expire idle upload sessions, delete unreferenced blobs and orphan objects "
            "older than the grace period, Xet xorbs past HUB_XET_RETENTION, reconcile quota usage. Prints what it "
            "did as JSON.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--grace", type=int, default=settings.HUB_GC_GRACE,
                            help="seconds unreferenced bytes are kept (default HUB_GC_GRACE)")
        parser.add_argument("--dry-run", action="store_true", help="report what would be deleted, delete nothing")
        parser.add_argument("--queue", action="store_true", help="send it to the Celery workers instead")

    def handle(self, *args, grace: int, dry_run: bool, queue: bool, **kw) -> None:
        if queue:
            from hub.repos.tasks import collect_garbage

            self.stdout.write(f"queued {collect_garbage.delay(grace).id}")
            return
        from hub.repos import gc

        self.stdout.write(json.dumps(gc.run(timedelta(seconds=grace), dry_run=dry_run).as_dict()))
