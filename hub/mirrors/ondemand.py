"""Catalog entries served from their upstream on first use, like a pull-through registry.

Pinning. The first access to a catalog repo that is not mirrored (any door: resolve_revision asks
`revision_source`) lists its upstream's default branch and commits that listing here, as a mirror
job would: small regular files (README, configs, .gitattributes) are fetched and stored right away,
the others become *remote* blobs (Blob.remote: sha256 and size known, bytes at the upstream). The
branch is checked against the upstream again no more often than HUB_ONDEMAND_RECHECK; a new upstream
commit becomes a new commit (MirrorRevision maps them, so `manage.py mirror` knows them too). One
process asks the upstream at a time (OnDemandRepo.checking_until is a lease in the database); the
others wait for its answer.

Fetching. The first read of a remote blob claims its fetch (OnDemandBlob.lease, with a heartbeat)
and runs it in a thread of that process: the bytes go to a partial file under HUB_DATA_DIR/ondemand
(a fetch taken over after its worker died resumes from it with an HTTP Range), hashed as they
arrive; once they hash right they are stored and recorded (Blob.remote False) and served like any
upload. Readers on the same node follow the partial file as it grows, so N first readers cause one
upstream transfer; the last bytes of a file are released to a reader only once the whole file has
been verified, so no client ever receives a complete wrong file. A reader whose range lies far
beyond what has arrived gets it by a ranged upstream read of whole blocks, without waiting.

Budget. Fetched bytes no user repo or volume references are evicted least recently used first when
they exceed HUB_ONDEMAND_BUDGET (the blob becomes remote again; its object is deleted once no
process can still hold its key). Operator-pinned entries (a full mirror) are never evicted."""
from __future__ import annotations

import hashlib
import logging
import os
import queue
import re
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, connections, transaction
from django.db.models import Count, Exists, F, OuterRef, Q, Sum
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.utils import timezone
from django.utils.translation import gettext, gettext_noop

from hub.accounts.actor import Actor
from hub.content import blobs, refs, serving
from hub.content.models import Blob
from hub.errors import GatedRepo, HubError, NotFound, RepoNotFound, UpstreamUnavailable
from hub.mirrors import services as mirrors
from hub.mirrors.engine import IN_PLACE_RETRIES
from hub.mirrors.models import MirrorRevision, OnDemandBlob, OnDemandRepo, source_hash
from hub.mirrors.sources import HFSource, RemoteFile, SourceError, TransientSourceError
from hub.repos import services as repos
from hub.repos import trees
from hub.repos.models import Commit, Ref, Repo
from hub.xet.staging import NODE

log = logging.getLogger("hub.mirrors.ondemand")
SMALL = 8 << 20  # regular (non-LFS) files up to this size are fetched when the listing is pinned
CHECK_LEASE = 120  # seconds one process may spend asking the upstream before another may try
RETRY_FAILED = 10  # seconds before a failed check is tried again (meanwhile the last pin is served)
NOT_THERE = "its upstream does not have it"
GATED = "it is gated upstream"
HOLD = 64 << 10  # the bytes a follower keeps back until the whole file is verified
_local = threading.local()


# --- which repos, and their origin -------------------------------------------------------------------

_ORIGINS: dict[int, tuple[float, OnDemandRepo | None]] = {}
ORIGIN_TTL = 30.0  # seconds a process trusts what it read about a repo's origin


def allowed(repo: Repo) -> bool:
    rules = settings.HUB_ONDEMAND_ALLOW
    return "*" in rules or repo.namespace.name in rules or repo.repo_id in rules


def origin_of(repo: Repo, *, fresh: bool = False) -> OnDemandRepo | None:
    """The repo's upstream, if it is a catalog entry this hub may fetch on demand (made on first
    asking). Cached per process for ORIGIN_TTL seconds unless `fresh`."""
    if not settings.HUB_ONDEMAND:
        return None
    now = time.monotonic()
    cached = _ORIGINS.get(repo.pk)
    if cached is not None and now - cached[0] < ORIGIN_TTL and not fresh:
        return cached[1]
    origin = OnDemandRepo.objects.filter(repo=repo).first()
    if origin is None:
        upstream = repos.upstream_id(repo)
        if upstream and allowed(repo):
            try:
                origin, _ = OnDemandRepo.objects.get_or_create(repo=repo, defaults={
                    "source_url": settings.HUB_MIRROR_UPSTREAM.rstrip("/"), "source_repo": upstream,
                    "source_type": repo.type})
            except IntegrityError:
                origin = OnDemandRepo.objects.filter(repo=repo).first()
    if len(_ORIGINS) > 50_000:
        _ORIGINS.clear()
    _ORIGINS[repo.pk] = (now, origin)
    return origin


def open_source(origin: OnDemandRepo) -> HFSource:
    return HFSource(origin.source_url, origin.source_repo, origin.source_type, settings.HUB_ONDEMAND_TOKEN or None,
                    use_manifest=settings.HUB_MIRROR_MANIFEST)


def display(origin: OnDemandRepo) -> str:
    return f"{origin.source_url}/{'datasets/' if origin.source_type == Repo.DATASET else ''}{origin.source_repo}"


# --- pinning ---------------------------------------------------------------------------------------

def revision_source(repo: Repo, rev: str, missing: bool) -> Commit | None:
    """Registered with repos.add_revision_source: keeps an on-demand repo's default branch pinned
    to its upstream (asked before every lookup, cheap when nothing is due), and maps upstream commit
    ids that were pinned here to their commits (asked when a revision is not found)."""
    if getattr(_local, "pinning", False):
        return None
    if missing:
        origin = origin_of(repo)
        if origin is None:
            return None
        row = (MirrorRevision.objects.select_related("commit")
               .filter(repo=repo, source_hash=source_hash(origin.source_key), upstream=rev).first())
        return row.commit if row else None
    if rev not in (repo.default_branch, f"refs/heads/{repo.default_branch}"):
        return None
    origin = origin_of(repo)
    if origin is None:
        return None
    if _due(origin):
        origin = origin_of(repo, fresh=True)  # (another process may have checked meanwhile)
        if origin is not None and _due(origin):
            if origin.commit_id is not None:  # pinned: served as it is while a thread asks the upstream
                _refresh_in_background(repo.pk)
                return None
            try:
                ensure_pinned(repo, origin)
            finally:
                origin = origin_of(repo, fresh=True)
    if origin is not None and origin.commit_id is None and origin.error:
        raise _failure(origin.error)  # never pinned, and the last try failed: say why until the next
    return None


_REFRESHING: set[int] = set()


def _refresh_in_background(repo_pk: int) -> None:
    """Checks a pinned repo's upstream on a thread of this process (one per repo at a time)."""
    with _START:
        if repo_pk in _REFRESHING:
            return
        _REFRESHING.add(repo_pk)

    def run() -> None:
        try:
            repo = Repo.objects.select_related("namespace").get(pk=repo_pk)
            origin = origin_of(repo, fresh=True)
            if origin is not None and _due(origin):
                ensure_pinned(repo, origin)
            origin_of(repo, fresh=True)
        except Exception:  # noqa: BLE001 - the next request that finds it due tries again
            log.exception("checking the upstream of repo %s failed", repo_pk)
        finally:
            with _START:
                _REFRESHING.discard(repo_pk)
            connections.close_all()

    threading.Thread(target=run, name=f"ondemand-check-{repo_pk}", daemon=True).start()


_STORED = [  # the shapes of the failures `_check` stores (in English: the row is everyone's), to say them in the
    # reader's language (the API's is English)
    (re.compile(r"(?s)(?P<repo_id>\S+) is in this hub's catalog, but it is gated upstream: it is fetched on first "
                r"use only with an operator's upstream token \(HUB_ONDEMAND_TOKEN\); ask an operator to set one, "
                r"or to mirror it"),
     gettext_noop("%(repo_id)s is in this hub's catalog, but it is gated upstream: it is fetched on first use only "
                  "with an operator's upstream token (HUB_ONDEMAND_TOKEN); ask an operator to set one, or to mirror "
                  "it")),
    (re.compile(r"(?s)(?P<repo_id>\S+) is in this hub's catalog, but its upstream does not have it: (?P<err>.*)"),
     gettext_noop("%(repo_id)s is in this hub's catalog, but its upstream does not have it: %(err)s")),
    (re.compile(r"(?s)the upstream of (?P<repo_id>\S+) \((?P<origin>.*?)\) cannot be reached or failed: "
                r"(?P<err>.*); retry in a minute"),
     gettext_noop("the upstream of %(repo_id)s (%(origin)s) cannot be reached or failed: %(err)s; retry in a "
                  "minute")),
]


def _localized(message: str) -> str:
    for shape, text in _STORED:
        if m := shape.fullmatch(message):
            return gettext(text) % m.groupdict()
    return message


def _failure(message: str) -> HubError:
    shown = _localized(message)
    if GATED in message:
        return GatedRepo(shown)
    if NOT_THERE in message:
        return RepoNotFound(shown)
    return UpstreamUnavailable(shown, retry_after=RETRY_FAILED)


def _due(origin: OnDemandRepo) -> bool:
    if origin.checked is None:
        return True
    wait = RETRY_FAILED if origin.error and origin.commit_id is None else settings.HUB_ONDEMAND_RECHECK
    return timezone.now() - origin.checked > timedelta(seconds=max(wait, 1))


def ensure_pinned(repo: Repo, origin: OnDemandRepo) -> None:
    """Brings the default branch to the upstream's, once per HUB_ONDEMAND_RECHECK, one process at a
    time. The first pin raises when the upstream fails (nothing to serve yet); later ones log it and
    the last pin is served meanwhile."""
    now = timezone.now()
    lease_end = now + timedelta(seconds=CHECK_LEASE)
    claimed = OnDemandRepo.objects.filter(pk=origin.pk).filter(
        Q(checking_until__isnull=True) | Q(checking_until__lt=now)).update(checking_until=lease_end)
    if not claimed:
        if origin.commit_id is None:  # the first pin: nothing to serve until it lands
            _wait_for_check(repo, origin)
        return
    done = threading.Event()

    def renew() -> None:  # a long listing (or many small files): the check stays this process's
        try:
            while not done.wait(CHECK_LEASE / 4):
                OnDemandRepo.objects.filter(pk=origin.pk).update(
                    checking_until=timezone.now() + timedelta(seconds=CHECK_LEASE))
        finally:
            connections.close_all()

    renewer = threading.Thread(target=renew, name=f"ondemand-lease-{origin.pk}", daemon=True)
    renewer.start()
    try:
        _check(repo, origin)
    finally:
        done.set()
        renewer.join()
        OnDemandRepo.objects.filter(pk=origin.pk).update(checking_until=None)
        repo.refresh_from_db()  # (its head, file count and card, for the caller's response)


def _wait_for_check(repo: Repo, origin: OnDemandRepo) -> None:
    """Another process is asking the upstream: wait for its answer (then serve what it pinned, or
    fail as it did when nothing was ever pinned)."""
    deadline = time.monotonic() + CHECK_LEASE
    while time.monotonic() < deadline:
        time.sleep(0.1)
        row = OnDemandRepo.objects.filter(pk=origin.pk).values("checking_until", "commit_id", "error").first()
        if row is None or row["checking_until"] is None:
            repo.refresh_from_db()
            return


def _check(repo: Repo, origin: OnDemandRepo) -> None:
    if _diverged(repo, origin):
        return
    source = open_source(origin)
    try:
        try:
            gated = source.repo_info().get("gated")
            if gated and not settings.HUB_ONDEMAND_TOKEN:
                raise SourceError(f"{GATED}: it is fetched on first use only with an operator's upstream token "
                                  "(HUB_ONDEMAND_TOKEN); ask an operator to set one, or to mirror it")
            if gated in (Repo.AUTO, Repo.MANUAL) and not repo.gated:
                # Its users accept its conditions here, as they would upstream.
                repos.do_update_settings(Actor(mirrors.mirror_user()), repo, gated=gated)
            revs = source.revisions([], [])
            branch = repo.default_branch
            rev = next((r for r in revs if r.kind == "branch" and r.name == branch), None)
            if rev is None:
                raise SourceError(f"{display(origin)} has no branch {branch!r}")
            if rev.upstream == origin.upstream_commit and origin.commit_id is not None:
                OnDemandRepo.objects.filter(pk=origin.pk).update(checked=timezone.now(), error="")
                return
            rev.files = source.list_files(rev, [])
            _pin(repo, origin, source, rev)
        except TransientSourceError as err:
            message = (f"the upstream of {repo.repo_id} ({display(origin)}) cannot be reached or failed: {err}; "
                       "retry in a minute")
            OnDemandRepo.objects.filter(pk=origin.pk).update(checked=timezone.now(), error=message[:2000])
            if origin.commit_id is None:
                raise UpstreamUnavailable(_localized(message), status=504 if "timed out" in str(err) else 503) from None
            log.warning("%s; serving the pin of upstream %s", message, origin.upstream_commit[:12])
        except SourceError as err:
            message = (f"{repo.repo_id} is in this hub's catalog, but {err}" if str(err).startswith(GATED) else
                       f"{repo.repo_id} is in this hub's catalog, but {NOT_THERE}: {err}")
            OnDemandRepo.objects.filter(pk=origin.pk).update(checked=timezone.now(), error=message[:2000])
            if origin.commit_id is None:
                raise _failure(message) from None
            log.warning("%s; serving the pin of upstream %s", message, origin.upstream_commit[:12])
    finally:
        source.close()


def _pin(repo: Repo, origin: OnDemandRepo, source: HFSource, rev) -> None:
    h = source_hash(origin.source_key)
    head = Ref.objects.select_related("commit").get(repo=repo, kind=Ref.BRANCH, name=repo.default_branch).commit
    mapped = MirrorRevision.objects.filter(repo=repo, source_hash=h, upstream=rev.upstream).first()
    if mapped is not None:
        commit = mapped.commit
    else:
        commit = _commit_listing(repo, origin, source, rev, head, h)
    OnDemandRepo.objects.filter(pk=origin.pk).update(upstream_commit=rev.upstream, commit=commit,
                                                     checked=timezone.now(), error="")
    origin.upstream_commit, origin.commit = rev.upstream, commit


def _diverged(repo: Repo, origin: OnDemandRepo) -> bool:
    """Whether the default branch has commits of its own here (a sample's files, someone's commit):
    then it no longer follows the upstream, which is not even asked."""
    head = Ref.objects.select_related("commit").get(repo=repo, kind=Ref.BRANCH, name=repo.default_branch).commit
    ours = MirrorRevision.objects.filter(repo=repo, source_hash=source_hash(origin.source_key), commit=head)
    if head.parent_id is None or ours.exists():
        return False
    log.info("%s's %s has commits of its own here; it no longer follows %s", repo.repo_id, repo.default_branch,
             display(origin))
    OnDemandRepo.objects.filter(pk=origin.pk).update(checked=timezone.now(), error="", commit=head)
    return True


def _commit_listing(repo: Repo, origin: OnDemandRepo, source: HFSource, rev, head: Commit, h: str) -> Commit:
    files: dict[str, tuple[str, int, bool, str]] = {}  # path -> (sha256, size, lfs, git oid)
    remote: list[RemoteFile] = []
    eager: list[RemoteFile] = []
    for f in rev.files:
        if f.sha256 and (f.lfs or f.size > SMALL):
            remote.append(f)
        else:
            eager.append(f)
    for f in eager:
        if f.size > SMALL:
            raise SourceError(f"{f.path} ({f.size} bytes) is listed without a sha256; mirror this entry instead")
    for f, blob in zip(eager, _fetch_small(source, eager), strict=True):
        files[f.path] = (blob.sha256, f.size, f.lfs, "" if f.lfs else (f.git_oid or ""))
    known = set(Blob.objects.filter(pk__in=[f.sha256 for f in remote]).values_list("pk", flat=True))
    Blob.objects.filter(pk__in=list(known)).exclude(upstream=True).update(upstream=True)
    Blob.objects.bulk_create([Blob(sha256=f.sha256, size=f.size, remote=True, upstream=True) for f in
                              {f.sha256: f for f in remote if f.sha256 not in known}.values()],
                             ignore_conflicts=True, batch_size=500)
    OnDemandBlob.objects.bulk_create([OnDemandBlob(blob_id=f.sha256, origin=origin, upstream_commit=rev.upstream,
                                                   path=f.path) for f in {f.sha256: f for f in remote}.values()],
                                     ignore_conflicts=True, batch_size=500)
    for f in remote:
        files[f.path] = (f.sha256, f.size, f.lfs, "" if f.lfs else f.git_oid)
    user = mirrors.mirror_user()
    ops = repos.CommitOps(user=user, unmetered=True)
    current = {p: e for p, e in trees.walk(trees.NodeStore(), head.tree) if not e.is_dir}
    for path, (sha, size, lfs, git_oid) in sorted(files.items()):
        e = current.get(path)
        if e is not None and e.ref == sha and e.lfs == lfs and (lfs or not git_oid or e.git_oid == git_oid):
            continue
        ops.add_file(path, Blob(sha256=sha, size=size), lfs=lfs, git_oid=git_oid or None)
    for path in current:
        if path not in files:
            ops.delete(path)
    title = f"Upstream {rev.upstream[:12]} ({display(origin)}), fetched on first use"
    message = (f"The listing of {display(origin)} at {rev.name} (upstream commit {rev.upstream}); its files "
               "are fetched from there on their first download.")
    _local.pinning = True
    try:
        with transaction.atomic():
            commit = repos.do_commit(Actor(user), repo, repo.default_branch, ops, title=title, message=message) \
                if ops else head
            MirrorRevision.objects.create(repo=repo, source_hash=h, upstream=rev.upstream, commit=commit,
                                          name=rev.name)
    except IntegrityError:  # a check whose lease ran out pinned the same upstream commit meanwhile
        return MirrorRevision.objects.select_related("commit").get(repo=repo, source_hash=h,
                                                                   upstream=rev.upstream).commit
    finally:
        _local.pinning = False
    log.info("pinned %s at upstream %s as %s (%d files, %d to fetch on first read)", repo.repo_id,
             rev.upstream[:12], commit.oid[:12], len(files), len(remote))
    return commit


def _fetch_small(source: HFSource, files: list[RemoteFile]) -> list[Blob]:
    """Fetches and stores the small regular files of a listing, several at once, each checked
    against the git blob id the upstream gave."""
    from concurrent.futures import ThreadPoolExecutor

    def one(f: RemoteFile) -> Blob:
        try:
            _, chunks = source.open(f, 0)
            data = b"".join(chunks)
        finally:
            connections.close_all()
        if len(data) != f.size:
            raise TransientSourceError(f"{f.path}: the upstream sent {len(data)} bytes, it lists {f.size}")
        if f.git_oid and blobs.git_blob_oid(data) != f.git_oid:
            raise SourceError(f"{f.path}: the bytes the upstream sent do not match its git blob id {f.git_oid}")
        if f.sha256 and hashlib.sha256(data).hexdigest() != f.sha256:
            raise SourceError(f"{f.path}: the bytes the upstream sent do not hash to its sha256 {f.sha256}")
        return data

    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="ondemand-small") as pool:
        contents = list(pool.map(one, files))
    stored = blobs.ingest_many(contents) if contents else {}
    return [stored[hashlib.sha256(d).hexdigest()] for d in contents]


# --- fetching --------------------------------------------------------------------------------------

def partial_path(sha256: str) -> Path:
    return settings.HUB_DATA_DIR / "ondemand" / f"{sha256}.part"


def _verified_mark(sha256: str) -> Path:
    return settings.HUB_DATA_DIR / "ondemand" / f"{sha256}.ok"


def _stale() -> timezone.datetime:
    return timezone.now() - timedelta(seconds=settings.HUB_MIRROR_STALE)


def _remote_file(od: OnDemandBlob, size: int) -> RemoteFile:
    return RemoteFile(od.path, size, od.blob_id, sha256=od.blob_id, lfs=True, at=od.upstream_commit)


class Fetch(threading.Thread):
    """One upstream transfer of a remote blob into the store, in a thread of the process that
    claimed it."""

    def __init__(self, od: OnDemandBlob, size: int, lease: str) -> None:
        super().__init__(name=f"ondemand-{od.blob_id[:12]}", daemon=True)
        self.od, self.size, self.lease = od, size, lease
        self.sha = od.blob_id
        self.answered = threading.Event()  # the upstream answered (bytes come), or the fetch failed
        self.failed = ""

    def run(self) -> None:
        try:
            self._run()
        except Exception as err:  # noqa: BLE001 - reported to the readers through the row
            message = str(err) if isinstance(err, (SourceError, TransientSourceError)) else (
                f"{type(err).__name__}: {err}")
            log.warning("fetch of %s (%s) failed: %s", self.od.path, self.sha[:12], message)
            self.failed = f"the upstream {display(self.od.origin)} failed: {message}; retry in a few seconds"
            OnDemandBlob.objects.filter(pk=self.sha, lease=self.lease).update(lease="", error=self.failed[:2000])
        finally:
            self.answered.set()
            _ACTIVE.pop(self.sha, None)
            connections.close_all()

    def _beat(self) -> bool:
        return bool(OnDemandBlob.objects.filter(pk=self.sha, lease=self.lease).update(heartbeat=timezone.now()))

    def _run(self) -> None:
        path = partial_path(self.sha)
        path.parent.mkdir(parents=True, exist_ok=True)
        source = open_source(self.od.origin)
        f = _remote_file(self.od, self.size)
        last_beat = time.monotonic()
        fetched = 0
        h = None
        try:
            with open(path, "a+b") as fh:
                have = os.fstat(fh.fileno()).st_size
                if have > self.size:
                    fh.truncate(0)
                    have = 0
                h = _Hasher()
                fh.seek(0)
                while chunk := fh.read(1 << 20):
                    h.update(chunk)
                failures = 0
                while have < self.size:
                    try:
                        offset, chunks = source.open(f, have)
                        self.answered.set()
                        if offset != have:
                            fh.truncate(0)
                            h.close()
                            have, h = 0, _Hasher()
                        for chunk in chunks:
                            fh.write(chunk)
                            h.update(chunk)
                            have += len(chunk)
                            fetched += len(chunk)
                            if have > self.size:
                                fh.truncate(0)
                                raise SourceError(f"{f.path}: the upstream sent more than the {self.size} bytes "
                                                  "it lists")
                            if time.monotonic() - last_beat > 1.0:
                                fh.flush()
                                last_beat = time.monotonic()
                                if not self._beat():
                                    log.warning("fetch of %s was taken over; this one stops", self.sha[:12])
                                    return
                        fh.flush()
                        if have < self.size:
                            raise TransientSourceError(f"{f.path}: the upstream ended at byte {have} of {self.size}")
                    except TransientSourceError:
                        failures += 1
                        fh.flush()
                        if failures >= IN_PLACE_RETRIES:
                            raise
                        time.sleep(0.5 * failures)
                fh.flush()
                digest = h.hexdigest()
                if digest != self.sha:
                    fh.truncate(0)
                    raise SourceError(f"{f.path}: the bytes the upstream sent hash to {digest}, not "
                                      f"the sha256 it lists ({self.sha}); nothing was kept")
            _verified_mark(self.sha).touch()
            # The readers of this process first: storing competes with them for the machine, and
            # until it is stored they (and newcomers) read the verified file here.
            deadline = time.monotonic() + STORE_WAIT
            while _READERS.get(self.sha) and time.monotonic() < deadline:
                self._beat()
                time.sleep(0.05)
            self._store(path)
        finally:
            source.close()
            if h is not None:
                h.close()
            OnDemandBlob.objects.filter(pk=self.sha).update(bytes_fetched=F("bytes_fetched") + fetched)

    def _store(self, path: Path) -> None:
        """The verified partial file becomes the blob (its sha256 was checked as it arrived)."""
        blobs.ingest_checked_file(path, self.sha, self.size)
        now = timezone.now()
        OnDemandBlob.objects.filter(pk=self.sha, lease=self.lease).update(
            lease="", fetched=now, last_used=now, error="")
        blobs.forget(self.sha)
        for p in (path, _verified_mark(self.sha)):
            p.unlink(missing_ok=True)
        log.info("fetched %s (%s, %d bytes) from %s", self.od.path, self.sha[:12], self.size, display(self.od.origin))
        try:
            evict()
        except Exception:  # noqa: BLE001 - the next fetch or hub_gc evicts
            log.exception("eviction after a fetch failed")


class _Hasher:
    """sha256 on a thread of its own, fed the chunks as they arrive: the fetch receives and writes
    while the previous chunks are hashed (hashlib lets go of the GIL), at most 32 chunks behind."""

    def __init__(self) -> None:
        self.h = hashlib.sha256()
        self.q: queue.Queue = queue.Queue(maxsize=32)
        self.thread = threading.Thread(target=self._run, name="ondemand-sha256", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while (chunk := self.q.get()) is not None:
            self.h.update(chunk)

    def update(self, chunk: bytes) -> None:
        self.q.put(chunk)

    def close(self) -> None:
        if self.thread.is_alive():
            self.q.put(None)
            self.thread.join()

    def hexdigest(self) -> str:
        self.close()
        return self.h.hexdigest()


_ACTIVE: dict[str, Fetch] = {}
_READERS: dict[str, int] = {}  # responses of this process streaming a blob not stored yet
STORE_WAIT = 300  # seconds a verified fetch waits for this process's readers before it is stored
_START = threading.Lock()


def start_fetch(sha256: str, size: int) -> tuple[OnDemandBlob, Fetch | None]:
    """Claims the fetch of the blob unless a live one has it, and starts it in this process
    (returned: None if a fetch was under way already, or the bytes are stored)."""
    od = OnDemandBlob.objects.select_related("origin").filter(pk=sha256).first()
    if od is None:
        raise NotFound(gettext("the bytes of %(sha256)s are not stored and no upstream is known for "
                               "them; tell the operator") % {"sha256": sha256})
    now = timezone.now()
    lease = uuid.uuid4().hex
    with _START:
        if sha256 in _ACTIVE:
            return od, None
        taken = OnDemandBlob.objects.filter(pk=sha256).filter(
            Q(lease="") | Q(heartbeat__lt=_stale()) | Q(heartbeat__isnull=True)).update(
            lease=lease, node=NODE, heartbeat=now, last_used=now, error="", fetches=F("fetches") + 1)
        if taken:
            if not Blob.objects.filter(pk=sha256, remote=True).exists():  # landed meanwhile
                OnDemandBlob.objects.filter(pk=sha256, lease=lease).update(lease="")
                return od, None
            fetch = Fetch(od, size, lease)
            _ACTIVE[sha256] = fetch
            fetch.start()
            return od, fetch
    return od, None


def serve(request: HttpRequest, sha256: str, size: int, headers: dict, filename: str) -> HttpResponse:
    """GET of a remote blob: started or followed fetch, streamed as it arrives."""
    rng = serving.parse_range(request.META.get("HTTP_RANGE", ""), size)
    start, end = rng if rng else (0, size)
    od, fetch = start_fetch(sha256, size)
    if fetch is not None:  # this request (re)started it: answer only once the upstream does
        if not fetch.answered.wait(settings.HUB_ONDEMAND_TIMEOUT):
            raise UpstreamUnavailable(gettext("the upstream %(origin)s did not answer in "
                                              "%(hub_ondemand_timeout)s s; retry") % {"origin": display(od.origin), "hub_ondemand_timeout": settings.HUB_ONDEMAND_TIMEOUT}, status=504)
        if fetch.failed:
            raise UpstreamUnavailable(fetch.failed)
    chunks = _follow(od, sha256, size, start, end)
    first = next(chunks, None)  # fails here (a clean 503/504) when the upstream does before any byte
    if first is None and end > start:
        raise UpstreamUnavailable(gettext("the upstream %(origin)s sent nothing; retry") % {"origin": display(od.origin)})

    def body():
        with _START:
            _READERS[sha256] = _READERS.get(sha256, 0) + 1
        try:
            if first:
                yield first
            yield from chunks
        finally:
            with _START:
                if _READERS.get(sha256, 0) <= 1:
                    _READERS.pop(sha256, None)
                else:
                    _READERS[sha256] -= 1

    resp = serving.ranged(StreamingHttpResponse(body(), content_type="application/octet-stream"), rng, size,
                          headers, filename)
    resp["Cache-Control"] = "private, no-cache"
    return resp


def _state(sha256: str) -> dict:
    return OnDemandBlob.objects.filter(pk=sha256).values("lease", "node", "heartbeat", "error").first() or {}


def _is_local(sha256: str) -> bool:
    return not Blob.objects.filter(pk=sha256, remote=True).exists()


def _follow(od: OnDemandBlob, sha256: str, size: int, start: int, end: int):
    """The bytes [start, end) of the blob as the fetch brings them: from the store once it is
    there, from this node's partial file while it grows (the last HOLD bytes of the file only once
    the fetch verified it), by a ranged upstream read when the fetch runs on another node or is far
    behind the range asked for."""
    timeout = settings.HUB_ONDEMAND_TIMEOUT
    mark = _verified_mark(sha256)
    pos, fh, verified = start, None, False
    waited_since = last_check = time.monotonic()
    try:
        while pos < end:
            now = time.monotonic()
            if fh is None:
                if _is_local(sha256):
                    yield from blobs.object_store().read(blobs.key_for(sha256), pos, end)
                    return
                state = _state(sha256)
                if state.get("lease") and state.get("node") != NODE:
                    yield from _passthrough(od, size, pos, end)
                    return
                try:
                    fh = open(partial_path(sha256), "rb")
                except FileNotFoundError:
                    if not state.get("lease"):
                        if state.get("error"):
                            raise UpstreamUnavailable(state["error"]) from None
                        start_fetch(sha256, size)  # (its first failure is reported by the row)
                    if now - waited_since > timeout:
                        raise UpstreamUnavailable(gettext("the upstream %(origin)s did not answer in "
                                                          "%(timeout)s s; retry") % {"origin": display(od.origin), "timeout": timeout}, status=504) from None
                    time.sleep(0.02)
                    continue
                if pos == start and start >= os.fstat(fh.fileno()).st_size + settings.HUB_ONDEMAND_BLOCK:
                    yield from _passthrough(od, size, pos, end)  # far ahead: the fetch fills in behind
                    return
            verified = verified or mark.exists()
            have = os.fstat(fh.fileno()).st_size
            cap = min(end, have if verified or end <= size - HOLD else min(have, size - HOLD))
            if cap > pos:
                fh.seek(pos)
                data = fh.read(min(cap - pos, 1 << 20))
                if data:
                    pos += len(data)
                    waited_since = now
                    yield data
                    continue
            if now - last_check > 0.25:
                last_check = now
                if _is_local(sha256):
                    verified = True  # stored: the fetch checked every byte of the file this reads
                    continue
                state = _state(sha256)
                if not state.get("lease"):
                    if state.get("error"):
                        raise UpstreamUnavailable(state["error"])
                    start_fetch(sha256, size)  # a failed or finished attempt: again, resuming
                elif state.get("heartbeat") and state["heartbeat"] < _stale():
                    start_fetch(sha256, size)  # its worker died: take it over, resuming from the partial file
            if now - waited_since > timeout:
                raise UpstreamUnavailable(gettext("the upstream %(origin)s sent nothing for %(timeout)s "
                                                  "s; retry") % {"origin": display(od.origin), "timeout": timeout},
                                          status=504)
            time.sleep(0.005)
    finally:
        if fh is not None:
            fh.close()


def _passthrough(od: OnDemandBlob, size: int, start: int, end: int):
    """[start, end) straight from the upstream, asked for in whole blocks (the fetch stores them)."""
    block = settings.HUB_ONDEMAND_BLOCK
    lo = start - start % block
    hi = min(size, -(-end // block) * block)
    source = open_source(od.origin)
    try:
        offset, chunks = source.open_range(_remote_file(od, size), lo, hi)
        if offset != lo:
            raise TransientSourceError("the upstream ignored the range asked for")
        pos = lo
        for chunk in chunks:
            a, b = max(pos, start), min(pos + len(chunk), end)
            if a < b:
                yield chunk[a - pos:b - pos]
            pos += len(chunk)
            if pos >= end:
                return
        if pos < end:
            raise TransientSourceError(f"the upstream ended at byte {pos}")
    except (TransientSourceError, SourceError) as err:
        raise UpstreamUnavailable(gettext("the upstream %(origin)s failed: %(err)s") % {"origin": display(od.origin), "err": err}) from None
    finally:
        source.close()


_TOUCHED: dict[str, float] = {}
TOUCH_EVERY = 600.0  # seconds: how stale a fetched blob's last use may be recorded (LRU eviction)


def touch(sha256: str) -> None:
    """A stored blob was just served: if it was fetched on demand, it is recently used (written at
    most every TOUCH_EVERY seconds per process; an UPDATE of no row for other blobs)."""
    now = time.monotonic()
    if now - _TOUCHED.get(sha256, -1e9) < TOUCH_EVERY or not settings.HUB_ONDEMAND:
        return
    if len(_TOUCHED) > 100_000:
        _TOUCHED.clear()
    _TOUCHED[sha256] = now
    OnDemandBlob.objects.filter(pk=sha256).update(last_used=timezone.now())


# --- budget ----------------------------------------------------------------------------------------

def local_bytes() -> int:
    return (Blob.objects.filter(ondemand__isnull=False, remote=False)
            .aggregate(n=Sum("size"))["n"] or 0)


def evictable():
    """Fetched blobs no user repo or volume references, and of no pinned entry, least recently used
    first."""
    qs = Blob.objects.filter(ondemand__isnull=False, remote=False).exclude(ondemand__origin__pinned=True)
    for kind in refs.kinds():
        rows = kind.rows().filter(**{kind.blob: OuterRef("pk")})
        if kind.model == "repos.RepoBlob":
            rows = rows.filter(repo__ondemand__isnull=True)
        qs = qs.filter(~Exists(rows))
    return qs.exclude(ondemand__lease__gt="").order_by(
        "ondemand__last_used")


def evict(budget: int | None = None) -> int:
    """Evicts least recently used fetched bytes until they fit the budget; returns bytes evicted.
    The rows turn remote at once (no new read is served from the store); objects are deleted by
    `sweep` once no presigned URL handed out for them may still be used."""
    budget = settings.HUB_ONDEMAND_BUDGET if budget is None else budget
    over = local_bytes() - budget
    freed = 0
    if over > 0:
        for sha, size in evictable().values_list("sha256", "size").iterator(chunk_size=500):
            if freed >= over:
                break
            with transaction.atomic():
                if Blob.objects.filter(pk=sha, remote=False).update(remote=True, verified=False):
                    OnDemandBlob.objects.filter(pk=sha).update(evicted=timezone.now())
                    freed += size
                    log.info("evicted %s (%d bytes): over the on-demand budget of %d bytes", sha[:12], size, budget)
    sweep()
    return freed


def sweep(grace: float | None = None) -> int:
    """Deletes the objects of evicted blobs once no read under way and no presigned URL handed out
    may still need them."""
    grace = settings.HUB_PRESIGN_SECONDS + 60 if grace is None else grace
    cutoff = timezone.now() - timedelta(seconds=grace)
    n = 0
    for sha, key in Blob.objects.filter(remote=True, ondemand__evicted__lt=cutoff).exclude(
            ondemand__evicted__isnull=True).values_list("sha256", "key"):
        with transaction.atomic():
            row = Blob.objects.select_for_update().filter(pk=sha, remote=True).first()
            if row is None:
                continue
            blobs.object_store().delete(key or blobs.blob_key(sha))
            Blob.objects.filter(pk=sha).update(key="")
            OnDemandBlob.objects.filter(pk=sha).update(evicted=None)
            n += 1
    return n


# --- what a page says ------------------------------------------------------------------------------

def status(repo: Repo) -> dict | None:
    """For the entry's page: served on demand, from where, how much is local."""
    origin = OnDemandRepo.objects.filter(repo=repo).first()
    if origin is None or (not origin.upstream_commit and not origin.error):  # (never pinned: a sample's own files)
        return None
    here = Q(remote=False)
    n = Blob.objects.filter(ondemand__origin=origin).aggregate(
        total=Sum("size"), local=Sum("size", filter=here), files=Count("pk"), local_files=Count("pk", filter=here))
    total, local = n["total"] or 0, n["local"] or 0
    return {"upstream": display(origin), "upstream_commit": origin.upstream_commit, "checked": origin.checked,
            "error": _localized(origin.error), "pinned": origin.pinned, "remote_bytes": total - local, "local_bytes": local,
            "files": n["files"], "local_files": n["local_files"]}


def check_pin(actor: Actor | None, repo: Repo) -> object:
    """An operator pins an on-demand entry: a mirror job fetches all of it now, and it is never
    evicted."""
    origin = origin_of(repo)
    if origin is None:
        raise HubError(gettext("%(repo_id)s is not served on demand") % {"repo_id": repo.repo_id})
    job = mirrors.check_create_job(actor, repo.repo_id, repo_type=repo.type, source=origin.source_url,
                                   source_repo=origin.source_repo, source_type=origin.source_type,
                                   token=settings.HUB_ONDEMAND_TOKEN, revisions=[repo.default_branch])
    OnDemandRepo.objects.filter(pk=origin.pk).update(pinned=True)
    return job


def prune_partials(age: float = 86400.0) -> int:
    """Partial files of fetches that are done, or that nobody resumed for `age` seconds."""
    root = settings.HUB_DATA_DIR / "ondemand"
    if not root.is_dir():
        return 0
    n = 0
    cutoff = time.time() - age
    for p in root.iterdir():
        sha = p.name.split(".")[0]
        try:
            old = p.stat().st_mtime < cutoff
        except FileNotFoundError:
            continue
        if old or _is_local(sha):
            if not _state(sha).get("lease") or old:
                p.unlink(missing_ok=True)
                n += 1
    return n
