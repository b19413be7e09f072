"""python manage.py hub_scrub [--blobs N] [--sha256 SHA ...] [--queue]"""
from __future__ import annotations

import json

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = ("Integrity: hash stored bytes back and compare with their sha256; corrupt blobs stop being served "
            "and are reported. Without --sha256, re-checks the blobs checked longest ago.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--blobs", type=int, default=100, help="how many blobs to check (default 100)")
        parser.add_argument("--sha256", nargs="*", default=[], help="check exactly these blobs")
        parser.add_argument("--queue", action="store_true", help="send it to the Celery workers instead")

    def handle(self, *args, blobs: int, sha256: list[str], queue: bool, **kw) -> None:
        from hub.content import integrity
        from hub.repos import tasks

        if queue:
            ids = ([tasks.verify_blob.delay(s).id for s in sha256] if sha256
                   else [tasks.scrub.delay(blobs).id])
            self.stdout.write(f"queued {' '.join(ids)}")
            return
        if sha256:
            result = {s: integrity.verify_blob(s) for s in sha256}
        else:
            result = integrity.scrub(max_blobs=blobs)
        self.stdout.write(json.dumps(result))
