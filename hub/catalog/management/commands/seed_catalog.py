from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError

from hub.catalog import samples, seed, services
from hub.errors import HubError


class Command(BaseCommand):
    help = ("Load the seed catalog (hub/catalog/seed/catalog.yaml) idempotently: one public repo per entry "
            "under its upstream id, with its metadata; then publish the offline samples (scikit-learn data "
            "sets, tiny models) with real files. Re-running updates, never duplicates.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--file", default=str(seed.SEED_FILE), help="seed file (default: %(default)s)")
        parser.add_argument("--no-samples", action="store_true", help="skip the samples with real files")

    def handle(self, *args, file: str, no_samples: bool, **kw) -> None:
        started = time.monotonic()
        try:
            items = seed.load(file)
        except seed.SeedError as err:
            raise CommandError(str(err)) from None
        try:
            result = seed.do_seed(items)
        except HubError as err:
            raise CommandError(err.message) from None
        for line in result.skipped:
            self.stderr.write(f"skipped {line}")
        gone = seed.entries_not_in(items)
        if gone:
            self.stderr.write(f"{gone} seeded entries are no longer in {file}; they are kept")
        self.stdout.write(f"catalog: {len(items)} entries in {file}: {result.summary()}")
        carded = services.index_cards()
        if carded:
            self.stdout.write(f"catalog: {carded} repos listed with the metadata of their own cards")
        if not no_samples:
            bot = seed.ensure_bot()
            for repo_id, outcome in samples.do_publish_all(bot):
                self.stdout.write(f"sample {repo_id}: {outcome}")
        self.stdout.write(f"done in {time.monotonic() - started:.1f} s")
