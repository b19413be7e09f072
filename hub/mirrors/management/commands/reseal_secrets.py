"""Seals every stored secret again under the current SECRET_KEY: the last step of rotating it, after
which the old key can leave SECRET_KEY_FALLBACKS (docs/operations.md)."""
from django.core.management.base import BaseCommand

from hub.mirrors.models import MirrorJob
from hub.sealed import UNREADABLE


class Command(BaseCommand):
    help = __doc__

    def handle(self, *args, **options) -> None:
        resealed, unreadable = 0, []
        for job in MirrorJob.objects.exclude(credentials="").only("pk", "credentials").iterator():
            if job.credentials.get(UNREADABLE):
                unreadable.append(job.pk)
                continue
            job.save(update_fields=["credentials"])
            resealed += 1
        self.stdout.write(f"{resealed} mirror job credentials sealed under the current SECRET_KEY")
        if unreadable:
            self.stderr.write(f"{len(unreadable)} could not be opened with SECRET_KEY or SECRET_KEY_FALLBACKS "
                              f"(jobs {', '.join(map(str, unreadable[:20]))}): add the key that sealed them to "
                              "SECRET_KEY_FALLBACKS and run this again, or start those mirrors again")
