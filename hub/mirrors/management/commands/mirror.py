"""python manage.py mirror REPO [--type model|dataset] [--source URL|s3://...|/dir] [--revision REV ...] [--wait]"""
from __future__ import annotations

import sys
import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from hub.config import ConfigError, format_size, parse_size
from hub.errors import HubError
from hub.mirrors import services
from hub.mirrors.models import MirrorJob


class Command(BaseCommand):
    help = ("Mirror a repo into this hub, one commit per upstream revision: from a hub speaking the Hugging Face "
            "protocol (default HUB_MIRROR_UPSTREAM), an S3 prefix or a directory on the server. Without a broker "
            "(the embedded default) it runs right here; with one it is queued (--wait follows it).")

    def add_arguments(self, parser) -> None:
        parser.add_argument("repo", nargs="?", help="NAMESPACE/NAME here (created if missing)")
        parser.add_argument("--type", default="model", choices=["model", "dataset"])
        parser.add_argument("--source", help="https://hub, s3://bucket/prefix or /a/directory")
        parser.add_argument("--source-repo", default="", help="upstream repo id (default: REPO)")
        parser.add_argument("--source-type", default="", choices=["", "model", "dataset"])
        parser.add_argument("--revision", action="append", default=[], help="branch or tag (repeatable; default all)")
        parser.add_argument("--token", default="", help="token for the upstream hub")
        parser.add_argument("--s3-endpoint-url", default="", help="S3-compatible endpoint (default AWS_ENDPOINT_URL)")
        parser.add_argument("--max-rate", help="bandwidth limit, e.g. 50MB (per second)")
        parser.add_argument("--user", help="credit the job to this user")
        parser.add_argument("--retry", type=int, metavar="JOB_ID", help="retry (or re-run) this job instead")
        parser.add_argument("--wait", action="store_true", help="with a broker: follow the job until it ends")

    def handle(self, *args, repo: str | None, retry: int | None, wait: bool, **opts) -> None:
        inline = settings.CELERY_TASK_ALWAYS_EAGER
        try:
            if retry is not None:
                job = MirrorJob.objects.filter(pk=retry).first()
                if job is None:
                    raise CommandError(f"no mirror job {retry}")
                job = services.do_retry(job, inline=inline)
            else:
                if not repo:
                    raise CommandError("give the repo to mirror (NAMESPACE/NAME) or --retry JOB_ID")
                job = services.check_create_job(None, repo, **self._options(opts), inline=inline)
        except HubError as err:
            raise CommandError(err.message) from None
        if not inline:
            self.stdout.write(f"queued mirror job {job.pk}: {job.source_display} → {job.repo.type} {job.repo.repo_id}")
            if not wait:
                return
            self._follow(job)
        job.refresh_from_db()
        self._report(job)

    def _options(self, opts: dict) -> dict:
        user = None
        if opts["user"]:
            user = get_user_model().objects.filter(username=opts["user"]).first()
            if user is None:
                raise CommandError(f"no user {opts['user']!r}")
        try:
            max_rate = parse_size(opts["max_rate"]) if opts["max_rate"] else None
        except ConfigError as err:
            raise CommandError(str(err)) from None
        return {"repo_type": opts["type"], "source": opts["source"], "source_repo": opts["source_repo"],
                "source_type": opts["source_type"], "revisions": opts["revision"], "token": opts["token"],
                "s3_endpoint_url": opts["s3_endpoint_url"], "max_rate": max_rate, "created_by": user}

    def _follow(self, job: MirrorJob) -> None:
        last = ""
        while True:
            job.refresh_from_db()
            p = services.job_progress(job)
            line = (f"{job.state}: {p['files']['done']}/{p['files']['total']} files, "
                    f"{format_size(p['bytes']['done'])} of {format_size(p['bytes']['total'])}")
            if p["rate"]:
                line += f", {format_size(int(p['rate']))}/s"
            if p["eta_seconds"]:
                line += f", ETA {p['eta_seconds']} s"
            if line != last:
                print(line, file=sys.stderr, flush=True)
                last = line
            if job.state in (MirrorJob.DONE, MirrorJob.FAILED):
                return
            time.sleep(1)

    def _report(self, job: MirrorJob) -> None:
        p = services.job_progress(job)
        if job.notes:
            self.stderr.write(job.notes)
        if job.state == MirrorJob.FAILED:
            raise CommandError(f"mirror job {job.pk} failed: {job.error} (retry: manage.py mirror --retry {job.pk})")
        for c in job.results:
            self.stdout.write(f"{c['kind']} {c['name']}: upstream {c['upstream'][:12]} → commit {c['commit']}")
        self.stdout.write(f"mirror job {job.pk} {job.state}: {p['files']['total']} files "
                          f"({p['files']['skipped']} already stored), {format_size(p['bytes']['total'])}, "
                          f"{format_size(p['bytes']['fetched'])} fetched")
