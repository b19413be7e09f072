"""Mirror jobs: who may start one, starting and retrying them, and how far they are.

`check_*` authorize and validate, then call `do_*`; `access_*` fetch or raise. The work itself
(listing, fetching, committing) is in hub.mirrors.engine and runs in a Celery task.

Who may mirror what: operators (staff) into any namespace, creating it as an organisation if it
does not exist, from any source; users only into namespaces they can write, from an upstream hub
or from S3 with credentials of their own (the workers' S3 credentials and the server's directories
are the operator's)."""
from __future__ import annotations

import logging
import shutil
import threading
from datetime import timedelta
from urllib.parse import urlparse

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connections, transaction
from django.db.models import Q
from django.utils import timezone

from hub.accounts.actor import Actor
from hub.accounts.models import Namespace
from hub.accounts.services import do_create_org, do_ensure_user
from hub.celery import task
from hub.errors import BadRequest, Conflict, Forbidden, NotFound, Unauthorized
from hub.mirrors.models import MirrorFile, MirrorJob, MirrorRevision
from hub.repos import services as repos
from hub.repos.models import Repo
from hub.validation import check_name

log = logging.getLogger("hub.mirrors")
BOT = "hub-mirror"
ACTIVE = (MirrorJob.QUEUED, MirrorJob.RUNNING)
RETRY_BACKOFF_MAX = 300  # seconds: the longest wait between two attempts of a job (tasks.run_mirror)


def is_operator(user) -> bool:
    return bool(user is not None and (user.is_staff or user.is_superuser))


def mirror_user():
    """The account mirror commits are made by when the job's creator cannot write the target
    (an operator mirroring into someone else's namespace, or the `mirror` command). It cannot log
    in and has no tokens; its superuser flag is what lets the repo services accept its commits."""
    User = get_user_model()
    user = User.objects.filter(username=BOT).first()
    if user is None:
        user = do_ensure_user(BOT)
    if not user.is_superuser or user.is_active or user.has_usable_password():
        user.is_superuser, user.is_active = True, False
        user.set_unusable_password()
        user.save(update_fields=["is_superuser", "is_active", "password"])
    return user


def _can_write(user, ns: Namespace) -> bool:
    try:
        repos.check_can_write(Actor(user), ns)
    except (Forbidden, Unauthorized):
        return False
    return True


def commit_actor(job: MirrorJob) -> Actor:
    """Commits are the creator's when they can write the namespace, otherwise the mirror account's."""
    user = job.created_by
    if user is not None and user.is_active and _can_write(user, job.repo.namespace):
        return Actor(user)
    return Actor(mirror_user())


# --- starting a job -----------------------------------------------------------------------------------

def parse_source(source: str | None) -> tuple[str, str]:
    """'https://host' → hf, 's3://bucket/prefix' → s3, '/dir' → local; None → the default upstream."""
    source = (source or settings.HUB_MIRROR_UPSTREAM).strip()
    if any(c.isspace() or ord(c) < 32 for c in source):
        raise BadRequest(f"unsupported source {source!r}: it contains spaces or control characters")
    try:
        urlparse(source)
    except ValueError as err:
        raise BadRequest(f"unsupported source {source!r}: {err}") from None
    if source.startswith("s3://"):
        if not urlparse(source).netloc:
            raise BadRequest(f"no bucket in {source!r}: use s3://bucket/prefix")
        return MirrorJob.S3, source.rstrip("/")
    if source.startswith(("http://", "https://")):
        if not urlparse(source).netloc:
            raise BadRequest(f"no host in {source!r}")
        return MirrorJob.HF, source.rstrip("/")
    if source.startswith("/"):
        return MirrorJob.LOCAL, source.rstrip("/") or "/"
    raise BadRequest(f"unsupported source {source!r}: give an http(s) hub URL, s3://bucket/prefix or an "
                     "absolute directory on the server")


def check_create_job(actor: Actor | None, repo_id: str, *, repo_type: str = Repo.MODEL, source: str | None = None,
                     source_repo: str = "", source_type: str = "", token: str = "", revisions: list[str] = (),
                     s3_endpoint_url: str = "", s3_credentials: dict | None = None, max_rate: int | None = None,
                     created_by=None, inline: bool = False) -> MirrorJob:
    """Validates and authorizes a mirror request, then creates the job (and the target namespace
    and repo if missing) and queues it once the transaction commits. `actor` None is the server's
    operator (the `mirror` command); `created_by` then names whom to credit, if anyone. `inline`
    runs it right here when there is no broker (see enqueue)."""
    system = actor is None
    user = created_by if system else actor.user
    if not system:
        if actor.user is None:
            raise Unauthorized("you must be logged in (pass a token) to start a mirror")
        if not actor.can_write or actor.on_instance:
            raise Forbidden("this token cannot write; use a write token of your own to start a mirror")
    operator = system or is_operator(user)
    if repo_type not in (Repo.MODEL, Repo.DATASET):
        raise BadRequest(f"unsupported repo type {repo_type!r}: use model or dataset")
    ns_name, _, name = (repo_id or "").partition("/")
    if not ns_name or not name or "/" in name:
        raise BadRequest(f"invalid repo id {repo_id!r}: use NAMESPACE/NAME")
    check_name(ns_name, what="namespace")
    check_name(name, what="repo name")
    kind, url = parse_source(source)
    revisions = [str(r).strip() for r in revisions or () if str(r).strip()]
    if kind == MirrorJob.HF:
        source_repo = source_repo or repo_id
        up_ns, _, up_name = source_repo.partition("/")
        if not up_ns or not up_name or "/" in up_name:
            raise BadRequest(f"invalid upstream repo id {source_repo!r}: use NAMESPACE/NAME")
        check_name(up_ns, what="upstream namespace")
        check_name(up_name, what="repo name")
        source_type = source_type or repo_type
        if source_type not in (Repo.MODEL, Repo.DATASET):
            raise BadRequest(f"unsupported upstream repo type {source_type!r}")
        if any(repos.HEX40.fullmatch(r) for r in revisions):
            raise BadRequest("mirror branches or tags: a bare commit id has no name to keep it by here")
    elif revisions:
        raise BadRequest(f"a {'directory' if kind == MirrorJob.LOCAL else 'S3 prefix'} has no revisions; "
                         "leave them out (it is mirrored to the default branch)")
    if s3_endpoint_url:
        try:
            parsed = urlparse(s3_endpoint_url)
        except ValueError:
            parsed = None
        if parsed is None or parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise BadRequest(f"invalid S3 endpoint URL {s3_endpoint_url!r}: use http(s)://host[:port]")
    creds = {}
    if kind == MirrorJob.HF and token:
        creds["token"] = token
    if kind == MirrorJob.S3 and s3_credentials and s3_credentials.get("aws_access_key_id"):
        creds = {k: v for k, v in s3_credentials.items() if v}
    if not operator:
        if kind == MirrorJob.LOCAL:
            raise Forbidden("only an operator may mirror a directory of the server")
        # The server fetches what the source names: users may only name the allowed hosts.
        host = urlparse(url if kind == MirrorJob.HF else s3_endpoint_url).hostname if (
            kind == MirrorJob.HF or s3_endpoint_url) else None
        if host is not None and host.lower() not in settings.HUB_MIRROR_USER_HOSTS:
            raise Forbidden(f"mirroring from {host} is for operators; you may mirror from "
                            f"{', '.join(settings.HUB_MIRROR_USER_HOSTS)}")
        if kind == MirrorJob.S3 and not creds:
            raise Forbidden("mirroring S3 with the server's own credentials is for operators; give "
                            "aws_access_key_id and aws_secret_access_key of your own")
    if max_rate is not None and max_rate <= 0:
        raise BadRequest("max_rate must be a positive number of bytes per second")

    with transaction.atomic():
        ns = Namespace.objects.filter(name=ns_name).first()
        if ns is None:
            if not operator:
                raise NotFound(f"namespace {ns_name!r} does not exist; only an operator may create it by mirroring")
            ns = do_create_org(ns_name, user or mirror_user())
        elif not operator:
            repos.check_can_write(actor, ns)
        repo = Repo.objects.select_related("namespace").filter(type=repo_type, namespace=ns, name=name).first()
        job = MirrorJob(source_kind=kind, source_url=url, source_repo=source_repo if kind == MirrorJob.HF else "",
                        source_type=source_type if kind == MirrorJob.HF else "",
                        s3_endpoint_url=s3_endpoint_url if kind == MirrorJob.S3 else "", credentials=creds,
                        revisions=revisions, max_rate=max_rate, created_by=user)
        if repo is None:
            job.repo = Repo(namespace=ns)  # for commit_actor's namespace check
            repo = repos.do_create_repo(commit_actor(job), ns.name, name, repo_type, private=False)
        elif MirrorJob.objects.filter(repo=repo, state__in=ACTIVE).exists():
            raise Conflict(f"a mirror of {repo_id} is already queued or running; wait for it or retry it")
        job.repo = repo
        job.save()
        log.info("mirror #%s queued: %s → %s %s", job.pk, job.source_display, repo_type, repo_id)
        # robust: a broker that is down must not fail the request; recover_stalled queues it later
        transaction.on_commit(lambda: enqueue(job, inline=inline), robust=not inline)
    return job


def enqueue(job: MirrorJob, *, inline: bool = False) -> None:
    """Sends the job to the workers. Without a broker (the embedded default) tasks run in-process:
    in a background thread of this process, or right here with `inline`."""
    run_mirror = task("hub.mirrors.tasks.run_mirror")
    if settings.CELERY_TASK_ALWAYS_EAGER and not inline:
        def run() -> None:
            try:
                run_mirror.apply(args=(job.pk,))
            finally:
                connections.close_all()

        threading.Thread(target=run, name=f"mirror-{job.pk}", daemon=True).start()
        return
    run_mirror.delay(job.pk)


# --- reading and retrying -------------------------------------------------------------------------

def access_job(actor: Actor, job_id: int) -> MirrorJob:
    """The job, if the actor may see it: its creator, operators, and whoever can read the repo."""
    job = MirrorJob.objects.select_related("repo__namespace", "created_by").filter(pk=job_id).first()
    missing = NotFound(f"mirror job {job_id} not found")
    if job is None:
        raise missing
    if actor.user is not None and (job.created_by_id == actor.user.pk or is_operator(actor.user)):
        return job
    try:
        repos.access_repo(actor, job.repo.type, job.repo.namespace.name, job.repo.name)
    except Exception:
        raise missing from None
    return job


def jobs_of_repo(actor: Actor, repo_type: str, repo_id: str, limit: int = 50) -> list[MirrorJob]:
    ns, _, name = repo_id.partition("/")
    repo = repos.access_repo(actor, repo_type, ns, name)
    return list(MirrorJob.objects.select_related("repo__namespace", "created_by").filter(repo=repo)
                .order_by("-created")[:limit])


def jobs_of(actor: Actor, limit: int = 50) -> list[MirrorJob]:
    """The caller's own jobs; every job for operators."""
    if actor.user is None:
        raise Unauthorized("you must be logged in (pass a token) to list your mirror jobs")
    qs = MirrorJob.objects.select_related("repo__namespace", "created_by").order_by("-created")
    if not is_operator(actor.user):
        qs = qs.filter(created_by=actor.user)
    return list(qs[:limit])


def check_retry(actor: Actor | None, job: MirrorJob) -> MirrorJob:
    """Retries a failed job or re-runs a finished one (it then skips what is stored)."""
    if actor is not None:
        if actor.user is None:
            raise Unauthorized("you must be logged in (pass a token) to retry a mirror")
        if not (is_operator(actor.user) or job.created_by_id == actor.user.pk):
            repos.check_can_write(actor, job.repo.namespace)
        if not actor.can_write:
            raise Forbidden("this token is read-only")
    return do_retry(job)


def do_retry(job: MirrorJob, *, inline: bool = False) -> MirrorJob:
    """Re-queues the job unless a live run has it. A finished or failed job starts its counters
    over; its files are checked again (those stored are skipped, partial downloads resumed)."""
    stale = timezone.now() - timedelta(seconds=settings.HUB_MIRROR_STALE)
    with transaction.atomic():
        fresh = MirrorJob.objects.filter(pk=job.pk, state__in=(MirrorJob.DONE, MirrorJob.FAILED)).update(
            state=MirrorJob.QUEUED, error="", notes="", finished=None, lease="", rate=0, files_done=0,
            files_skipped=0, bytes_done=0, bytes_skipped=0, bytes_fetched=0, bytes_resumed=0, results=[])
        if fresh:
            MirrorFile.objects.filter(job=job).update(state=MirrorFile.PENDING, fetched=False)
        else:
            taken = MirrorJob.objects.filter(pk=job.pk).filter(
                Q(state=MirrorJob.QUEUED) | Q(state=MirrorJob.RUNNING, heartbeat__lt=stale)
            ).update(state=MirrorJob.QUEUED, lease="")
            if not taken:
                raise Conflict(f"mirror job {job.pk} is running; wait for it to finish or fail")
        transaction.on_commit(lambda: enqueue(job, inline=inline), robust=not inline)
    job.refresh_from_db()
    return job


def recover_stalled() -> int:
    """Puts back in the queue running jobs whose worker died (heartbeat stale, or the worker does
    not answer a ping), and queued jobs nobody picked up for longer than the longest retry backoff
    (their message was lost with a worker, or never sent). Their task is gone, or comes back only
    when the broker's visibility timeout runs out; the claim makes a duplicate harmless. Returns the
    jobs queued again."""
    now = timezone.now()
    stale = now - timedelta(seconds=settings.HUB_MIRROR_STALE)
    lost = now - timedelta(seconds=RETRY_BACKOFF_MAX + settings.HUB_MIRROR_STALE)
    n = 0
    forgotten = MirrorJob.objects.filter(state=MirrorJob.QUEUED).filter(
        Q(updated__lt=lost) | Q(updated__isnull=True, created__lt=lost))
    for job in forgotten:
        if MirrorJob.objects.filter(pk=job.pk, state=MirrorJob.QUEUED, updated=job.updated).update(updated=now):
            log.warning("mirror #%s: queued since %s and not picked up; queued again", job.pk, job.updated or job.created)
            enqueue(job)
            n += 1
    for job in MirrorJob.objects.filter(state=MirrorJob.RUNNING):
        dead = job.heartbeat is None or job.heartbeat < stale
        if not dead and job.worker and not settings.CELERY_TASK_ALWAYS_EAGER:
            dead = not _worker_alive(job.worker)
        if dead and MirrorJob.objects.filter(pk=job.pk, state=MirrorJob.RUNNING, lease=job.lease).update(
                state=MirrorJob.QUEUED, lease=""):
            log.warning("mirror #%s: its worker %s stopped; queued again", job.pk, job.worker or "(in-process)")
            enqueue(job)
            n += 1
    _prune_partials()
    return n


def _worker_alive(name: str) -> bool:
    from hub.celery import app

    try:
        return bool(app.control.ping(destination=[name], timeout=2.0))
    except Exception:  # noqa: BLE001 - no broker answer: assume alive, the heartbeat decides later
        return True


def partial_dir(job: MirrorJob | int):
    return settings.HUB_DATA_DIR / "mirrors" / f"job-{job if isinstance(job, int) else job.pk}"


def _prune_partials() -> None:
    """Partial downloads of jobs that finished, were deleted, or failed over a week ago."""
    root = settings.HUB_DATA_DIR / "mirrors"
    if not root.is_dir():
        return
    ids = {int(p.name[4:]): p for p in root.iterdir() if p.name.startswith("job-") and p.name[4:].isdigit()}
    if not ids:
        return
    week = timezone.now() - timedelta(days=7)
    keep = set(MirrorJob.objects.filter(pk__in=list(ids)).filter(
        Q(state__in=ACTIVE) | Q(state=MirrorJob.FAILED, finished__gt=week)).values_list("pk", flat=True))
    for pk, path in ids.items():
        if pk not in keep:
            shutil.rmtree(path, ignore_errors=True)


# --- progress, for the API and the repo page ------------------------------------------------------

def active_jobs(repo: Repo) -> list[MirrorJob]:
    """Queued and running mirror jobs of the repo, newest first (render each with job_progress)."""
    return list(MirrorJob.objects.select_related("repo__namespace", "created_by")
                .filter(repo=repo, state__in=ACTIVE).order_by("-created"))


def recent_jobs(repo: Repo, limit: int = 5) -> list[MirrorJob]:
    return list(MirrorJob.objects.select_related("repo__namespace", "created_by").filter(repo=repo)
                .order_by("-created")[:limit])


def job_progress(job: MirrorJob) -> dict:
    """Everything a page or a client shows about a job: state, reason of failure, files and bytes,
    rate (bytes/s) and ETA (seconds; None when unknown)."""
    rate = job.rate if job.state == MirrorJob.RUNNING else 0.0
    remaining = max(0, job.bytes_total - job.bytes_done)
    eta = round(remaining / rate) if rate > 0 and remaining else (0 if job.state == MirrorJob.DONE else None)
    elapsed = None
    if job.started:
        end = job.finished or job.updated or timezone.now()
        elapsed = max(0.0, (end - job.started).total_seconds())
    return {
        "id": job.pk,
        "repo": job.repo.repo_id,
        "type": job.repo.type,
        "source": {"kind": job.source_kind, "url": job.source_url, "repo": job.source_repo or None,
                   "type": job.source_type or None, "display": job.source_display,
                   "endpoint_url": job.s3_endpoint_url or None},
        "revisions": job.revisions,
        "state": job.state,
        "error": job.error or None,
        "notes": job.notes or None,
        "attempts": job.attempts,
        "files": {"total": job.files_total, "done": job.files_done, "skipped": job.files_skipped},
        "bytes": {"total": job.bytes_total, "done": job.bytes_done, "skipped": job.bytes_skipped,
                  "fetched": job.bytes_fetched, "resumed": job.bytes_resumed},
        "percent": round(100.0 * job.bytes_done / job.bytes_total, 1) if job.bytes_total else
        (100.0 if job.state == MirrorJob.DONE else 0.0),
        "rate": round(rate, 1),
        "eta_seconds": eta,
        "elapsed_seconds": round(elapsed, 1) if elapsed is not None else None,
        "max_rate": job.max_rate,
        "commits": job.results,
        "created_by": job.created_by.username if job.created_by else None,
        "created": job.created,
        "started": job.started,
        "updated": job.updated,
        "finished": job.finished,
    }


def revisions_of(job: MirrorJob) -> list[MirrorRevision]:
    return list(MirrorRevision.objects.filter(repo=job.repo, source_hash=job.source_hash).select_related("commit"))
