"""Running a mirror job: list the source, fetch what is not stored yet, commit each revision once.

A run first claims the job (a conditional update that gives it a fresh lease) and keeps a
heartbeat; a run whose lease another run took over stops before writing anything else. Then:

1. plan — list every requested revision; record each distinct file (MirrorFile); skip files whose
   bytes are stored already (known by sha256: LFS listings say it, and earlier jobs of the same
   source remember what a path+ETag hashed to); reserve quota for the rest before any byte lands;
2. fetch — several files at a time; each downloads to a partial file under HUB_DATA_DIR (a run
   that dies leaves it; the next run hashes it and continues with an HTTP Range), is verified
   against what the source said (sha256, git blob id, S3 MD5 ETag) and becomes a blob;
3. commit — one commit per upstream revision, recorded (MirrorRevision) in the same transaction
   as the commit and looked up first, so a run that repeats this step commits nothing twice; an
   upstream tag becomes a tag here.

Everything that may pass (source unreachable or 5xx, object store down, database gone) is raised
for the task to retry with backoff; everything else fails the job with its reason."""
from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import queue
import shutil
import threading
import time
import uuid
from datetime import timedelta

import requests
from django.conf import settings
from django.db import IntegrityError, InterfaceError, OperationalError, connections, transaction
from django.db.models import F, Q
from django.utils import timezone

from hub.content import blobs
from hub.content.models import Blob
from hub.errors import Conflict, HubError
from hub.mirrors import services
from hub.mirrors.models import MirrorFile, MirrorJob, MirrorRevision, OnDemandRepo
from hub.mirrors.sources import (
    HFSource,
    LocalSource,
    RemoteFile,
    Revision,
    S3Source,
    Source,
    SourceError,
    TransientSourceError,
    listing_digest,
)
from hub.quotas import services as quotas
from hub.quotas.models import Reservation
from hub.repos import services as repos
from hub.repos import trees
from hub.repos.models import Ref
from hub.sealed import UNREADABLE
from hub.uploads import transfers
from storage.store.objectstore import StoreUnavailableError
from storage.transfer.ratelimit import RateLimiter

log = logging.getLogger("hub.mirrors")
TRANSIENT = (TransientSourceError, StoreUnavailableError, requests.ConnectionError, requests.Timeout,
             OperationalError, InterfaceError)
GITATTRIBUTES = ".gitattributes"
SMALL_FILE = 8 << 20  # at most this size, a file is fetched into memory (no partial file to resume)
IN_PLACE_RETRIES = 3  # a file whose transfer breaks off is asked for again this often before the job retries


class Superseded(Exception):
    """Another run holds the job now (this one was presumed dead): stop without writing."""


def open_source(job: MirrorJob) -> Source:
    if job.credentials.get(UNREADABLE):
        raise SourceError("the job's credentials cannot be opened with this server's SECRET_KEY (it changed, and "
                          "the key that sealed them is not in SECRET_KEY_FALLBACKS): put the old key there, or "
                          "start the mirror again with the credentials")
    if job.source_kind == MirrorJob.HF:
        return HFSource(job.source_url, job.source_repo, job.source_type, job.credentials.get("token"),
                        use_manifest=settings.HUB_MIRROR_MANIFEST)
    if job.source_kind == MirrorJob.S3:
        return S3Source(job.source_url, job.s3_endpoint_url, job.credentials)
    return LocalSource(job.source_url)


def claim(job_id: int, worker: str) -> str | None:
    """Takes the job for this run if it is queued, or running with a stale heartbeat (its worker
    died). Returns the run's lease, or None if the job is finished or another run is alive."""
    now = timezone.now()
    stale = now - timedelta(seconds=settings.HUB_MIRROR_STALE)
    lease = uuid.uuid4().hex
    taken = MirrorJob.objects.filter(pk=job_id).filter(
        Q(state=MirrorJob.QUEUED) | Q(state=MirrorJob.RUNNING, heartbeat__lt=stale)
    ).update(state=MirrorJob.RUNNING, lease=lease, worker=worker[:200], heartbeat=now, updated=now, started=now,
             attempts=F("attempts") + 1, rate=0)
    return lease if taken else None


def run_job(job_id: int, *, worker: str = "", final: bool = True) -> str:
    """Runs the job if it can be claimed. Transient errors are raised for the task to retry,
    unless this is the `final` attempt; then, like any other error, they fail the job."""
    lease = claim(job_id, worker)
    if lease is None:
        log.info("mirror #%s: finished, or another run has it; nothing to do", job_id)
        return "skipped"
    run = JobRun(job_id, lease)
    try:
        run.execute()
        return MirrorJob.DONE
    except Superseded:
        log.warning("mirror #%s: another run took over; this one stops", job_id)
        return "superseded"
    except TRANSIENT as err:
        message = _describe(err)
        if final:
            run.fail(f"gave up after {run.job.attempts} attempts: {message}")
            return MirrorJob.FAILED
        log.warning("mirror #%s: attempt %s failed (%s); retrying", job_id, run.job.attempts, message)
        run.requeue(f"attempt {run.job.attempts} failed: {message}; retrying")
        raise
    except (SourceError, HubError) as err:
        run.fail(_describe(err))
        return MirrorJob.FAILED
    except Exception as err:
        log.exception("mirror #%s failed", job_id)
        run.fail(f"internal error: {type(err).__name__}: {err}")
        return MirrorJob.FAILED


def _describe(err: BaseException) -> str:
    if isinstance(err, HubError):
        return err.message
    if isinstance(err, StoreUnavailableError):
        return f"the hub's object store is unavailable ({err})"
    if isinstance(err, (OperationalError, InterfaceError)):
        return f"the database is unavailable ({err})"
    return str(err) or type(err).__name__


class Progress:
    """Counters shared by the fetching threads, written to the job by the heartbeat."""

    def __init__(self, job: MirrorJob) -> None:
        self.lock = threading.Lock()
        self.files_done = self.bytes_done = self.files_skipped = self.bytes_skipped = 0
        self.fetched = job.bytes_fetched
        self.resumed = job.bytes_resumed
        self.inflight: dict[int, int] = {}
        self._last = (time.monotonic(), self.fetched)
        self.rate = 0.0

    def add(self, key: int, n: int) -> None:
        with self.lock:
            self.fetched += n
            self.inflight[key] = self.inflight.get(key, 0) + n

    def file_done(self, key: int, size: int) -> None:
        with self.lock:
            self.inflight.pop(key, None)
            self.files_done += 1
            self.bytes_done += size

    def snapshot(self) -> dict:
        with self.lock:
            now = time.monotonic()
            then, fetched_then = self._last
            if now - then >= 1.0:
                current = (self.fetched - fetched_then) / (now - then)
                self.rate = current if self.rate == 0 else 0.5 * self.rate + 0.5 * current
                self._last = (now, self.fetched)
            return {"files_done": self.files_done, "bytes_done": self.bytes_done + sum(self.inflight.values()),
                    "files_skipped": self.files_skipped, "bytes_skipped": self.bytes_skipped,
                    "bytes_fetched": self.fetched, "bytes_resumed": self.resumed, "rate": self.rate}


class Hashers:
    def __init__(self, f: RemoteFile, git: bool, md5: bool) -> None:
        self.sha256 = hashlib.sha256()
        self.git = hashlib.sha1(b"blob %d\x00" % f.size) if git else None
        self.md5 = hashlib.md5(usedforsecurity=False) if md5 else None

    def update(self, data: bytes) -> None:
        self.sha256.update(data)
        if self.git is not None:
            self.git.update(data)
        if self.md5 is not None:
            self.md5.update(data)


class JobRun:
    def __init__(self, job_id: int, lease: str) -> None:
        self.job = MirrorJob.objects.select_related("repo__namespace", "created_by").get(pk=job_id)
        self.lease = lease
        self.actor = services.commit_actor(self.job)
        self.notes: list[str] = []
        self.progress = Progress(self.job)
        self.limit = RateLimiter(self.job.max_rate, burst=0.2)  # a fifth of a second of burst
        self.stop = threading.Event()
        self.lost = threading.Event()
        self.remote: dict[tuple[str, str], RemoteFile] = {}
        self.rows: dict[tuple[str, str], MirrorFile] = {}
        self.bulk_reservation: Reservation | None = None
        self.lfs_threshold = settings.HUB_LFS_THRESHOLD

    # --- the whole run -----------------------------------------------------------------------------

    def execute(self) -> None:
        source = open_source(self.job)
        beat = threading.Thread(target=self._heartbeat, name=f"mirror-{self.job.pk}-heartbeat", daemon=True)
        beat.start()
        try:
            revisions = source.revisions(self.job.revisions, self.notes)
            for rev in revisions:
                rev.files = source.list_files(rev, self.notes)
                rev.upstream = rev.upstream or listing_digest(rev.files)
            pending = self.plan(revisions)
            self.fetch(source, pending)
            self._check_lease()
            results = self.commit_all(revisions, source)
            self.finish(results)
        finally:
            self.stop.set()
            beat.join()
            source.close()

    def _check_lease(self) -> None:
        if self.lost.is_set():
            raise Superseded()

    def _heartbeat(self) -> None:
        try:
            while not self.stop.wait(settings.HUB_MIRROR_HEARTBEAT):
                try:
                    if not self._save_progress():
                        self.lost.set()
                        self.stop.set()
                    quotas.renew(list(self.job.reservation_ids or []))
                except (OperationalError, InterfaceError) as err:
                    log.warning("mirror #%s: heartbeat failed: %s", self.job.pk, err)
        finally:
            connections.close_all()

    def _save_progress(self, **extra) -> bool:
        now = timezone.now()
        return bool(MirrorJob.objects.filter(pk=self.job.pk, lease=self.lease, state=MirrorJob.RUNNING).update(
            heartbeat=now, updated=now, **self.progress.snapshot(), **extra))

    # --- plan ----------------------------------------------------------------------------------------

    def plan(self, revisions: list[Revision]) -> list[MirrorFile]:
        job = self.job
        for rev in revisions:
            for f in rev.files:
                self.remote.setdefault((f.path, f.etag), f)
        h = job.source_hash
        new = [MirrorFile(job=job, source_hash=h, path=f.path, etag=f.etag, size=f.size, sha256=f.sha256,
                          git_oid=f.git_oid, lfs=f.lfs) for f in self.remote.values()]
        MirrorFile.objects.bulk_create(new, batch_size=1000, ignore_conflicts=True)
        for row in MirrorFile.objects.filter(job=job).iterator(chunk_size=2000):
            if (row.path, row.etag) in self.remote:
                self.rows[(row.path, row.etag)] = row
        self._learn_from_earlier_jobs()
        # Stored bytes are reused by hash only where the job's committer may use them (their own
        # uploads, repos they can read): otherwise an upstream claiming someone's private sha256
        # would get its bytes copied into a public repo. Other bytes are fetched, which proves them.
        stored = transfers.reusable(self.actor.user, {r.sha256: r.size for r in self.rows.values() if r.sha256})
        done, undone = [], []
        for row in self.rows.values():
            if row.sha256 and row.sha256 in stored:
                if row.state != MirrorFile.DONE:
                    row.state = MirrorFile.DONE
                    done.append(row.pk)
            elif row.state == MirrorFile.DONE:  # its blob was collected since: fetch it again
                row.state, row.fetched = MirrorFile.PENDING, False
                undone.append(row.pk)
        _update_in_chunks(done, state=MirrorFile.DONE)
        _update_in_chunks(undone, state=MirrorFile.PENDING, fetched=False)
        rows = list(self.rows.values())
        p = self.progress
        p.files_done = sum(1 for r in rows if r.state == MirrorFile.DONE)
        p.bytes_done = sum(r.size for r in rows if r.state == MirrorFile.DONE)
        p.files_skipped = sum(1 for r in rows if r.state == MirrorFile.DONE and not r.fetched)
        p.bytes_skipped = sum(r.size for r in rows if r.state == MirrorFile.DONE and not r.fetched)
        self._reserve(rows)
        if not self._save_progress(files_total=len(rows), bytes_total=sum(r.size for r in rows),
                                   notes="\n".join(self.notes)[:20000]):
            raise Superseded()
        log.info("mirror #%s: %d files (%d bytes), %d already stored", job.pk, len(rows),
                 sum(r.size for r in rows), p.files_done)
        return [r for r in rows if r.state != MirrorFile.DONE]

    def _learn_from_earlier_jobs(self) -> None:
        """Files earlier jobs of the same source hashed: same path, ETag and size → same sha256."""
        unknown = {k: r for k, r in self.rows.items() if not r.sha256}
        paths = list({p for p, _ in unknown})
        learned = []
        for i in range(0, len(paths), 500):
            known = (MirrorFile.objects.filter(source_hash=self.job.source_hash, path__in=paths[i:i + 500],
                                               state=MirrorFile.DONE).exclude(sha256="").exclude(job=self.job)
                     .values_list("path", "etag", "size", "sha256", "git_oid"))
            for path, etag, size, sha, git_oid in known:
                row = unknown.get((path, etag))
                if row is not None and row.size == size and not row.sha256:
                    row.sha256, row.git_oid = sha, row.git_oid or git_oid
                    learned.append(row)
        MirrorFile.objects.bulk_update(learned, ["sha256", "git_oid"], batch_size=500)

    def _reserve(self, rows: list[MirrorFile]) -> None:
        """Reserves the bytes this job may add to the namespace, before any of them land: blobs by
        sha256 where known, one reservation for the files whose hash is not known yet. Replaces the
        reservations of an earlier attempt."""
        ns = self.job.repo.namespace
        self._release_reservations()
        known: dict[str, int] = {}
        for r in rows:
            if r.sha256:
                known[r.sha256] = r.size
        unknown = sum(r.size for r in rows if not r.sha256 and r.state != MirrorFile.DONE)
        # Held while this run lives: the heartbeat renews their lease, so a killed worker's lapse.
        made = quotas.reserve_many(ns, known, user=self.actor.user, purpose="mirror", ttl=quotas.lease())
        try:
            if unknown:
                self.bulk_reservation = quotas.reserve(ns, unknown, user=self.actor.user, purpose="mirror",
                                                       ttl=quotas.lease())
                made.append(self.bulk_reservation)
        except BaseException:
            for r in made:
                quotas.release(r)
            raise
        MirrorJob.objects.filter(pk=self.job.pk).update(reservation_ids=[r.pk for r in made])
        self.job.reservation_ids = [r.pk for r in made]

    def _release_reservations(self) -> None:
        ids = MirrorJob.objects.filter(pk=self.job.pk).values_list("reservation_ids", flat=True).first() or []
        for r in Reservation.objects.filter(pk__in=ids, purpose="mirror"):
            quotas.release(r)

    # --- fetch ---------------------------------------------------------------------------------------

    def fetch(self, source: Source, pending: list[MirrorFile]) -> None:
        if not pending:
            return
        work: queue.Queue = queue.Queue()
        for row in sorted(pending, key=lambda r: -r.size):  # big files first: the tail stays parallel
            work.put(row)
        errors: list[BaseException] = []
        os.makedirs(services.partial_dir(self.job), exist_ok=True)

        def worker() -> None:
            try:
                while not self.stop.is_set():
                    try:
                        row = work.get_nowait()
                    except queue.Empty:
                        return
                    try:
                        self._fetch_one(source, row)
                    except BaseException as err:
                        errors.append(err)
                        self.stop.set()
                        return
            finally:
                connections.close_all()

        threads = [threading.Thread(target=worker, name=f"mirror-{self.job.pk}-fetch-{i}", daemon=True)
                   for i in range(min(settings.HUB_MIRROR_THREADS, len(pending)))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self._check_lease()
        if errors:
            raise next((e for e in errors if not isinstance(e, (Superseded, _Stopped))), errors[0])
        if self.stop.is_set():
            raise Superseded()

    def _fetch_one(self, source: Source, row: MirrorFile) -> None:
        f = self.remote[(row.path, row.etag)]
        git = (not f.lfs and f.size < self.lfs_threshold) or bool(f.git_oid)
        md5 = isinstance(source, S3Source) and len(f.etag) == 32 and "-" not in f.etag
        local = source.local_path(f)
        data = path = None
        if local is not None:
            path, hashers = local, self._hash_local(source, f, row, git)
        elif f.size <= SMALL_FILE:  # nothing worth resuming: kept in memory, never on disk
            data, hashers = self._download_small(source, f, row, git, md5)
        else:
            path = str(services.partial_dir(self.job) / f"{row.pk}.part")
            hashers = self._download(source, f, row, path, git, md5)
        sha = hashers.sha256.hexdigest()
        problem = None
        if f.sha256 and sha != f.sha256:
            problem = f"hash to sha256 {sha}, the source lists {f.sha256}"
        elif f.git_oid and hashers.git is not None and hashers.git.hexdigest() != f.git_oid:
            problem = f"hash to git blob {hashers.git.hexdigest()}, the source lists {f.git_oid}"
        elif md5 and hashers.md5.hexdigest() != f.etag:
            problem = f"hash to MD5 {hashers.md5.hexdigest()}, the source's ETag is {f.etag}"
        if problem:
            if path is not None and local is None:
                os.unlink(path)
            raise SourceError(f"the bytes received for {f.path} {problem}: the source contradicts itself "
                              "(a retry fetches the file again)")
        self._check_lease()
        if data is not None:
            blobs.ingest_bytes(bytes(data), self.actor.user)  # a no-op for bytes stored already
        elif blobs.reuse(sha, self.actor.user) is None:
            with open(path, "rb") as fh:
                blobs.ingest_stream(fh, f.size, sha256=sha, user=self.actor.user)
        if path is not None and local is None:
            os.unlink(path)
        row.sha256 = sha
        row.git_oid = hashers.git.hexdigest() if hashers.git is not None and not f.lfs else row.git_oid
        row.state, row.fetched = MirrorFile.DONE, True
        MirrorFile.objects.filter(pk=row.pk).update(sha256=row.sha256, git_oid=row.git_oid, state=row.state,
                                                    fetched=True)
        self.progress.file_done(row.pk, f.size)

    def _chunks(self, chunks, row: MirrorFile):
        """The chunks, counted, throttled, and cut short when the run must stop."""
        for chunk in chunks:
            if self.stop.is_set():
                self._check_lease()
                raise _Stopped()
            self.progress.add(row.pk, len(chunk))
            yield chunk
            self.limit.take(len(chunk))

    def _download_small(self, source: Source, f: RemoteFile, row: MirrorFile, git: bool, md5: bool
                        ) -> tuple[bytearray, Hashers]:
        for attempt in range(IN_PLACE_RETRIES):
            data, hashers = bytearray(), Hashers(f, git, md5)
            try:
                _, chunks = source.open(f, 0)
                for chunk in self._chunks(chunks, row):
                    data += chunk
                    hashers.update(chunk)
                    if len(data) > f.size:
                        raise TransientSourceError(f"{f.path}: the source sent more than the {f.size} bytes it "
                                                   "listed (it changed?)")
                if len(data) != f.size:
                    raise TransientSourceError(f"{f.path}: the source ended the file at byte {len(data)} of {f.size}")
                return data, hashers
            except TransientSourceError:
                with self.progress.lock:
                    self.progress.inflight.pop(row.pk, None)
                if attempt == IN_PLACE_RETRIES - 1:
                    raise
                time.sleep(0.5 * (attempt + 1))
        raise AssertionError("unreachable")

    def _download(self, source: Source, f: RemoteFile, row: MirrorFile, path: str, git: bool, md5: bool) -> Hashers:
        """Downloads into `path`, continuing from what a previous run left there (no fsync: the
        next run re-hashes what it finds, and the final hash check catches anything torn). The
        file lock keeps a run presumed dead (still writing) and its successor off each other's
        bytes."""
        with open(path, "a+b") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            self._check_lease()
            have = os.fstat(fh.fileno()).st_size
            if have > f.size:
                fh.truncate(0)
                have = 0
            hashers = _rehash(fh, have, f, git, md5)
            if have:
                log.info("mirror #%s: resuming %s at byte %d of %d", self.job.pk, f.path, have, f.size)
                with self.progress.lock:
                    self.progress.resumed += have
                    self.progress.inflight[row.pk] = have
            failures = 0
            while have < f.size:
                try:
                    offset, chunks = source.open(f, have)
                    if offset != have:  # the source ignored the range: start over
                        fh.truncate(0)
                        have = 0
                        hashers = Hashers(f, git, md5)
                        with self.progress.lock:
                            self.progress.inflight[row.pk] = 0
                    got = 0
                    for chunk in self._chunks(chunks, row):
                        fh.write(chunk)
                        hashers.update(chunk)
                        have += len(chunk)
                        got += len(chunk)
                        if have > f.size:
                            fh.truncate(0)
                            raise TransientSourceError(f"{f.path}: the source sent more than the {f.size} bytes it "
                                                       "listed (it changed?); fetching it again")
                    if not got and have < f.size:
                        raise TransientSourceError(f"{f.path}: the source ended the file at byte {have} of {f.size}")
                    failures = 0
                except TransientSourceError:  # continue with a Range from what arrived, a few times
                    failures += 1
                    if failures >= IN_PLACE_RETRIES:
                        raise
                    fh.flush()
                    have = os.fstat(fh.fileno()).st_size
                    hashers = _rehash(fh, have, f, git, md5)
                    with self.progress.lock:
                        self.progress.inflight[row.pk] = have
                    time.sleep(0.5 * failures)
            fh.flush()
        return hashers

    def _hash_local(self, source: Source, f: RemoteFile, row: MirrorFile, git: bool) -> Hashers:
        hashers = Hashers(f, git, False)
        n = 0
        _, chunks = source.open(f, 0)
        for chunk in self._chunks(chunks, row):
            hashers.update(chunk)
            n += len(chunk)
        if n != f.size:
            raise TransientSourceError(f"{f.path} changed while it was read ({n} bytes, listed {f.size})")
        return hashers

    # --- commit --------------------------------------------------------------------------------------

    def commit_all(self, revisions: list[Revision], source: Source) -> list[dict]:
        """Commits every revision, in an order that gives the default branch the upstream's
        history: tags on its upstream lineage that are newer than anything mirrored before are
        committed onto it oldest first, then its head. Other branches follow, then the remaining
        tags, each committed on a scratch branch off the default branch and tagged there."""
        hf = isinstance(source, HFSource)
        default = self.job.repo.default_branch
        mains = [r for r in revisions if r.kind == "branch" and r.name in ("", default)]
        branches = [r for r in revisions if r.kind == "branch" and r not in mains]
        tags = [r for r in revisions if r.kind == "tag"]
        on_main: list[Revision] = []
        if hf and mains and tags:
            pos = {sha: i for i, sha in enumerate(source.history(mains[0].upstream))}  # 0 = head
            mirrored = MirrorRevision.objects.filter(repo=self.job.repo, source_hash=self.job.source_hash,
                                                     upstream__in=list(pos)).values_list("upstream", flat=True)
            newest = min((pos[u] for u in mirrored), default=len(pos))
            on_main = sorted((t for t in tags if 0 < pos.get(t.upstream, -1) < newest), key=lambda t: -pos[t.upstream])
        plan = ([(t, default) for t in on_main] + [(r, default) for r in mains] + [(r, r.name) for r in branches]
                + [(t, self.scratch) for t in tags if t not in on_main])
        self._drop_scratch()
        results = [self._commit_revision(rev, branch, hf=hf) for rev, branch in plan]
        self._drop_scratch()
        return results

    @property
    def scratch(self) -> str:
        return f"mirror-{self.job.pk}-tmp"

    def _drop_scratch(self) -> None:
        if Ref.objects.filter(repo=self.job.repo, kind=Ref.BRANCH, name=self.scratch).exists():
            repos.do_delete_branch(self.actor, self.job.repo, self.scratch)

    def _commit_revision(self, rev: Revision, branch: str, *, hf: bool) -> dict:
        repo = self.job.repo
        files = {}
        for f in rev.files:
            row = self.rows[(f.path, f.etag)]
            lfs = f.lfs if hf else f.size >= self.lfs_threshold
            files[f.path] = (row.sha256, f.size, lfs, "" if lfs else (row.git_oid or _git_oid_of(row.sha256)))
        h = self.job.source_hash
        label = rev.name or repo.default_branch
        title = (f"Mirror {self.job.source_display} @ {rev.upstream[:12]} ({label})" if hf
                 else f"Mirror {self.job.source_display}")
        message = (f"Mirrored from {self.job.source_display}, {rev.kind} {label}, upstream commit {rev.upstream}, "
                   f"by mirror job #{self.job.pk}." if hf else
                   f"Mirrored from {self.job.source_display} ({len(files)} files; {rev.upstream}) "
                   f"by mirror job #{self.job.pk}.")
        for attempt in range(5):
            try:
                with transaction.atomic():
                    lease = (MirrorJob.objects.select_for_update().filter(pk=self.job.pk)
                             .values_list("lease", flat=True).first())
                    if lease != self.lease:
                        raise Superseded()
                    mapped = (MirrorRevision.objects.select_related("commit")
                              .filter(repo=repo, source_hash=h, upstream=rev.upstream).first())
                    if mapped is not None:
                        commit = mapped.commit
                    else:
                        self._ensure_branch(branch)
                        head = Ref.objects.select_related("commit").get(repo=repo, kind=Ref.BRANCH, name=branch).commit
                        ops = self._ops(head, files, keep_gitattributes=not hf)
                        if self.bulk_reservation is not None:
                            ops.reservations = [self.bulk_reservation]
                        commit = (repos.do_commit(self.actor, repo, branch, ops, title=title, message=message)
                                  if ops else head)
                        MirrorRevision.objects.create(repo=repo, source_hash=h, upstream=rev.upstream, commit=commit,
                                                      job=self.job, name=label)
                        self.bulk_reservation = None  # converted by the commit
                break
            except (IntegrityError, Conflict):  # another job mapped it, or a commit raced ours: look again
                if attempt == 4:
                    raise
        if rev.kind == "branch":
            self._point_branch(label, commit)
        else:
            self._ensure_tag(rev.name, commit)
            if branch == self.scratch:
                self._drop_scratch()
        log.info("mirror #%s: %s %s (upstream %s) is commit %s", self.job.pk, rev.kind, label, rev.upstream[:12],
                 commit.oid[:12])
        return {"name": label, "kind": rev.kind, "upstream": rev.upstream, "commit": commit.oid}

    def _ensure_branch(self, name: str) -> None:
        repo = self.job.repo
        if not Ref.objects.filter(repo=repo, kind=Ref.BRANCH, name=name).exists():
            repos.do_create_branch(self.actor, repo, name, repo.default_branch)

    def _point_branch(self, name: str, commit) -> None:
        """A branch deleted here since an earlier mirror comes back at the mirrored commit; one that
        moved on here is left alone (its commits are not ours to drop)."""
        repo = self.job.repo
        ref = Ref.objects.filter(repo=repo, kind=Ref.BRANCH, name=name).first()
        if ref is None:
            repos.do_create_branch(self.actor, repo, name, commit.oid)
        elif ref.commit_id != commit.pk:
            self.notes.append(f"branch {name} here has moved past the mirrored commit {commit.oid[:12]}; left as is")

    def _ensure_tag(self, name: str, commit) -> None:
        repo = self.job.repo
        ref = Ref.objects.filter(repo=repo, kind=Ref.TAG, name=name).first()
        if ref is not None and ref.commit_id == commit.pk:
            return
        if ref is not None:
            repos.do_delete_tag(self.actor, repo, name)
            self.notes.append(f"tag {name} moved to {commit.oid[:12]}, as upstream")
        try:
            repos.do_create_tag(self.actor, repo, name, commit.oid, f"mirrored from {self.job.source_display}")
        except Conflict:  # a concurrent run made it
            pass

    def _ops(self, head, files: dict[str, tuple[str, int, bool, str]], *, keep_gitattributes: bool
             ) -> repos.CommitOps:
        """What turns `head` into exactly the upstream file set (a directory or S3 prefix keeps the
        hub's .gitattributes)."""
        ours = {path: e for path, e in trees.walk(trees.NodeStore(), head.tree) if not e.is_dir}
        ops = repos.CommitOps(user=self.actor.user)
        for path, (sha, size, lfs, git_oid) in sorted(files.items()):
            e = ours.get(path)
            if e is not None and e.ref == sha and e.lfs == lfs and (lfs or e.git_oid == git_oid):
                continue
            ops.add_file(path, Blob(sha256=sha, size=size), lfs=lfs, git_oid=git_oid or None)
        for path in ours:
            if path not in files and not (keep_gitattributes and path == GITATTRIBUTES):
                ops.delete(path)
        return ops

    # --- the end -------------------------------------------------------------------------------------

    def finish(self, results: list[dict]) -> None:
        self._release_reservations()
        now = timezone.now()
        if not MirrorJob.objects.filter(pk=self.job.pk, lease=self.lease).update(
                state=MirrorJob.DONE, finished=now, updated=now, heartbeat=now, error="", lease="",
                reservation_ids=[], results=results, notes="\n".join(self.notes)[:20000],
                **self.progress.snapshot()):
            raise Superseded()
        shutil.rmtree(services.partial_dir(self.job), ignore_errors=True)
        # A catalog entry served on demand is whole here now: its files are never evicted.
        OnDemandRepo.objects.filter(repo=self.job.repo).update(pinned=True)
        log.info("mirror #%s done: %s", self.job.pk, ", ".join(f"{r['name']}={r['commit'][:12]}" for r in results))

    def fail(self, message: str) -> None:
        """The job failed for `message`; its partial downloads stay for a retry to continue."""
        log.warning("mirror #%s failed: %s", self.job.pk, message)
        try:
            self._release_reservations()
        except (OperationalError, InterfaceError):
            pass  # they expire on their own
        now = timezone.now()
        MirrorJob.objects.filter(pk=self.job.pk, lease=self.lease).update(
            state=MirrorJob.FAILED, finished=now, updated=now, error=message[:5000], lease="", reservation_ids=[],
            notes="\n".join(self.notes)[:20000], **self.progress.snapshot())

    def requeue(self, message: str) -> None:
        """A transient failure: back in the queue until the task's retry runs it."""
        MirrorJob.objects.filter(pk=self.job.pk, lease=self.lease).update(
            state=MirrorJob.QUEUED, updated=timezone.now(), error=message[:5000], lease="",
            **self.progress.snapshot())


class _Stopped(Exception):
    """Another thread of this run failed; this one stops (the first error is reported)."""


def _rehash(fh, have: int, f: RemoteFile, git: bool, md5: bool) -> Hashers:
    """Hashers fed with the first `have` bytes of the partial file `fh`."""
    hashers = Hashers(f, git, md5)
    fh.seek(0)
    left = have
    while left:
        data = fh.read(min(left, 1 << 20))
        if not data:
            break
        hashers.update(data)
        left -= len(data)
    return hashers


def _update_in_chunks(pks: list[int], **fields) -> None:
    for i in range(0, len(pks), 500):
        MirrorFile.objects.filter(pk__in=pks[i:i + 500]).update(**fields)


def _git_oid_of(sha256: str) -> str:
    """Git blob id of a small stored blob (for a file whose listing did not give it)."""
    data = blobs.object_store().read_bytes(blobs.key_for(sha256))
    return blobs.git_blob_oid(data)
