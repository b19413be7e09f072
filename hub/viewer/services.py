"""The dataset viewer's domain functions: a commit of a dataset gets one ViewerRun, computed by a
Celery task (do_compute) that reads its data files once; pages and the datasets-server API read
its splits and a page of rows from what the task wrote, never from the data files themselves.

Ordering: request_viewer is called after the commit's transaction (the repos app's commit_landed
signal is sent on commit), and a run is claimed with a conditional update, so a second delivery
of the task or a second caller computes nothing."""
from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError
from django.db.models import F, Min, Q
from django.utils import timezone
from django.utils.translation import gettext as _

from hub.celery import run_soon
from hub.content import blobs
from hub.errors import BlobNotLocal, NotFound
from hub.repos import cards, trees
from hub.repos import services as repos
from hub.repos.models import Commit, Repo
from hub.viewer import convert, layout, reading
from hub.viewer.models import ViewerFile, ViewerRun

log = logging.getLogger("hub.viewer")

VERSION = 1  # of the copies' layout: a new one makes new copies
MAX_ENTRIES = 200_000  # a tree walked for data files stops here (image folders are not tables)
MAX_EXTRA_FILES = 100  # data files in no split (another format) read for their own page
MAX_LENGTH = 100  # rows per request, as upstream
CELL_MAX = 10_000  # characters of a cell in the API's rows; longer ones are truncated
STALE = timedelta(minutes=30)  # a run "running" this long lost its worker: it may be claimed again
WAIT_RECHECK = timedelta(seconds=30)  # a run waiting for fetched files is tried again this often


# --- starting -----------------------------------------------------------------------------------------

def _enqueue(run_id: int) -> None:
    """To the workers, or a thread of this process: a push does not wait for its dataset to be read."""
    run_soon("hub.viewer.tasks.compute_viewer", run_id)


def request_viewer(repo_pk: int, commit_pk: int) -> None:
    """A commit landed on a dataset's default branch: its viewer is computed (once)."""
    run, created = _get_or_create(repo_pk, commit_pk)
    if created:
        _enqueue(run.pk)


def _get_or_create(repo_pk: int, commit_pk: int) -> tuple[ViewerRun, bool]:
    try:
        return ViewerRun.objects.get_or_create(commit_id=commit_pk, defaults={"repo_id": repo_pk})
    except IntegrityError:  # (another request created it first)
        return ViewerRun.objects.get(commit_id=commit_pk), False


def run_of(repo: Repo, commit: Commit) -> ViewerRun | None:
    """The viewer of this commit of a dataset (None for a model), queued if it has none yet (a commit
    that did not come through do_commit on the default branch: another branch, a tag) and queued
    again if it waited for a catalog entry's files and some time has passed (they may be here now),
    or if the worker computing it died (running for longer than STALE)."""
    if repo.type != Repo.DATASET:
        return None
    run, created = _get_or_create(repo.pk, commit.pk)
    if created:
        _enqueue(run.pk)
    elif run.state == ViewerRun.WAITING and run.finished and timezone.now() - run.finished > WAIT_RECHECK:
        if ViewerRun.objects.filter(pk=run.pk, state=ViewerRun.WAITING).update(state=ViewerRun.PENDING):
            run.state = ViewerRun.PENDING
            _enqueue(run.pk)
    elif run.state == ViewerRun.RUNNING and run.started and timezone.now() - run.started > STALE:
        _enqueue(run.pk)  # (its worker died: the task claims it again, once)
    return run


# --- the task's work ----------------------------------------------------------------------------------

def _digest(sha256: str, fmt: str, limit: int | None) -> str:
    return hashlib.sha256(f"viewer v{VERSION} {fmt} {sha256} {limit or 'all'}".encode()).hexdigest()


def _limit(entry: trees.Entry, budget: int) -> int | None:
    """How much of the file a reading within `budget` takes (None: all of it)."""
    return budget if entry.size > budget else None


def plan_digest(entry: trees.Entry, fmt: str, budget: int) -> str:
    """What a reading of this file (at most `budget` bytes of it) is keyed by."""
    return _digest(entry.ref, fmt, _limit(entry, budget))


def ensure_file(entry: trees.Entry, fmt: str, budget: int) -> ViewerFile:
    """The file read (at most `budget` bytes of it), reusing an earlier reading of the same bytes.
    A reading reused is touched (`used` = now) in the same statement that finds it, so hub_gc, which
    only deletes a copy unused since its cutoff, cannot take it from under this run (a copy it took
    first is simply made again). Raises BlobNotLocal for a catalog entry's file not fetched yet."""
    limit = _limit(entry, budget)
    digest = plan_digest(entry, fmt, budget)
    if ViewerFile.objects.filter(pk=digest).update(used=timezone.now()):
        found = ViewerFile.objects.filter(pk=digest).first()
        if found is not None:
            return found
    try:
        r = convert.convert(entry.ref, entry.size, fmt, limit, digest)
        row = ViewerFile(digest=digest, sha256=entry.ref, format=fmt, key=r.key, size=r.size, num_rows=r.num_rows,
                         num_bytes=r.num_bytes, row_groups=r.row_groups, features=r.features, partial=r.partial)
    except convert.ConvertError as err:
        row = ViewerFile(digest=digest, sha256=entry.ref, format=fmt, error=str(err))
    try:
        row.save(force_insert=True)
    except IntegrityError:  # (read at the same time by another run: theirs is as good)
        row = ViewerFile.objects.get(pk=digest)
    return row


def _data_files(commit: Commit) -> dict[str, trees.Entry]:
    found: dict[str, trees.Entry] = {}
    for n, (path, entry) in enumerate(trees.walk(trees.NodeStore(), commit.tree)):
        if n >= MAX_ENTRIES:
            break
        if not entry.is_dir and (layout.format_of(path) or path == repos.README):
            found[path] = entry
    return found


def _card(entry: trees.Entry | None) -> dict:
    if entry is None or entry.size > repos.CARD_MAX_BYTES:
        return {}
    text = blobs.object_store().read_bytes(blobs.key_for(entry.ref)).decode("utf-8", "replace")
    return cards.split_card(text)[0]


def do_compute(run_id: int) -> str:
    """Computes the viewer of one run: claims it (a conditional update: a run another worker holds,
    or one computed already, is left alone), infers the splits, reads every data file not read
    before (the per-split budget HUB_VIEWER_MAX_BYTES: beyond it a split shows its first rows,
    partial). Files a catalog entry has not fetched yet leave the run waiting."""
    now = timezone.now()
    claimed = (ViewerRun.objects.filter(pk=run_id)
               .filter(Q(state__in=[ViewerRun.PENDING, ViewerRun.WAITING])
                       | Q(state=ViewerRun.RUNNING, started__lt=now - STALE))
               .update(state=ViewerRun.RUNNING, started=now, attempts=F("attempts") + 1))
    if not claimed:
        return "taken"
    run = ViewerRun.objects.select_related("commit").get(pk=run_id)
    try:
        state, splits, files, error = _compute(run_id, run.commit)
    except Exception as err:  # noqa: BLE001 - whatever broke, the page says so rather than "pending" forever
        log.exception("viewer of commit %s failed", run.commit.oid)
        state, splits, files, error = ViewerRun.FAILED, [], {}, _("The viewer could not read this dataset: %(error)s") % {
            "error": str(err)[:500] or type(err).__name__}
    ViewerRun.objects.filter(pk=run_id).update(state=state, splits=splits, files=files, error=error,
                                                finished=timezone.now())
    return state


def _compute(run_id: int, commit: Commit) -> tuple[str, list, dict, str]:
    found = _data_files(commit)
    card = _card(found.pop(repos.README, None))
    inferred = layout.infer(list(found), card)
    budget_total = settings.HUB_VIEWER_MAX_BYTES
    # The plan first: which reading of which file each split takes (keyed by bytes, format and
    # budget, all known from the tree). It is recorded on the run before any file is read, so
    # hub_gc counts those readings as used while this run makes or reuses them.
    plan: list[tuple[str, str, int]] = []  # (path, format, budget)
    splits = []
    for s in inferred:
        budget, partial, paths = budget_total, False, []
        for path in s.paths:
            if budget <= 0:
                partial = True
                break
            plan.append((path, layout.format_of(path), budget))
            paths.append(path)
            budget -= found[path].size
        splits.append({"config": s.config, "split": s.split, "paths": paths, "partial": partial})
    planned = {path for path, _f, _b in plan}
    plan += [(path, layout.format_of(path), budget_total) for path in found if path not in planned][:MAX_EXTRA_FILES]
    ViewerRun.objects.filter(pk=run_id).update(
        files={path: plan_digest(found[path], fmt, budget) for path, fmt, budget in plan})
    files: dict[str, str] = {}
    partial_files: set[str] = set()
    try:
        for path, fmt, budget in plan:
            vf = ensure_file(found[path], fmt, budget)
            files[path] = vf.digest
            if vf.partial:
                partial_files.add(path)
    except BlobNotLocal:
        return (ViewerRun.WAITING, [], {},
                _("The files of this dataset are not on this hub yet; the viewer is prepared once they are."))
    for s in splits:
        s["partial"] = s["partial"] or any(p in partial_files for p in s["paths"])
    return ViewerRun.READY, splits, files, ""


# --- reading ------------------------------------------------------------------------------------------

@dataclass
class SplitView:
    config: str
    split: str
    num_rows: int = 0
    num_bytes: int = 0
    partial: bool = False
    features: list[dict] = field(default_factory=list)
    parts: list[reading.Part] = field(default_factory=list)
    error: str = ""


def _view(config: str, split: str, paths: list[str], run: ViewerRun, by_digest: dict[str, ViewerFile],
          partial: bool) -> SplitView:
    view = SplitView(config, split, partial=partial)
    for path in paths:
        vf = by_digest.get(run.files.get(path, ""))
        if vf is None:
            continue
        if vf.error:
            view.error = f"{path}: {vf.error}"
            continue
        if not view.features:
            view.features = vf.features
        view.num_rows += vf.num_rows
        view.num_bytes += vf.num_bytes
        view.partial = view.partial or vf.partial
        if vf.num_rows:
            view.parts.append(reading.Part(vf.key, vf.size, vf.num_rows, vf.row_groups))
    return view


def splits(run: ViewerRun) -> list[SplitView]:
    """The splits of a ready run, with their schema and row counts (one query)."""
    if run.state != ViewerRun.READY:
        return []
    by_digest = ViewerFile.objects.in_bulk(list(set(run.files.values())))
    return [_view(s["config"], s["split"], s["paths"], run, by_digest, s["partial"]) for s in run.splits]


def file_view(run: ViewerRun, path: str) -> SplitView | None:
    """One data file of a ready run, as a split of its own (the file page's table)."""
    digest = run.files.get(path) if run.state == ViewerRun.READY else None
    if digest is None:
        return None
    return _view("default", "train", [path], run, ViewerFile.objects.in_bulk([digest]), False)


def find_split(views: list[SplitView], config: str | None, split: str | None) -> SplitView:
    for v in views:
        if v.config == config and v.split == split:
            return v
    raise NotFound(_("Not found: no config %(config)s with a split %(split)s.") % {"config": repr(config),
                                                                                   "split": repr(split)})


def rows(view: SplitView, offset: int, length: int, *, cell_max: int = CELL_MAX) -> list[dict]:
    """Upstream's rows [offset, offset + length) of a split (length at most MAX_LENGTH)."""
    table = reading.read_rows(view.parts, offset, min(length, MAX_LENGTH))
    return [] if table is None else reading.json_rows(table, offset, cell_max)


# --- garbage collection -------------------------------------------------------------------------------

def collect_copies(grace: timedelta, dry_run: bool = False) -> dict:
    """Part of hub_gc (hub.repos.gc runs it): copies no commit's viewer names any more (their commits
    were deleted with their repos) and no run has used for `grace` go — the row, then the object
    under viewer/ (a file read in place is a blob: the blob's own collection decides on it). Then
    objects under viewer/ that no row names (a task that died between writing and recording its
    copy), older than `grace` too. Returns what it removed.

    Against runs computing meanwhile: a run records the readings it plans before it reads, a
    reading it reuses is touched in the statement that finds it, and a row goes only if it is
    still untouched at its delete — so a copy is never taken from a run that names it. A run's new
    copy is written before its row: the sweep of unnamed objects leaves alone any made since the
    oldest live run began."""
    cutoff = timezone.now() - grace
    used: set[str] = set()
    for files in ViewerRun.objects.values_list("files", flat=True).iterator():
        used.update((files or {}).values())
    store = blobs.object_store()
    rows = objects = 0
    for digest, key in ViewerFile.objects.filter(used__lt=cutoff).values_list("digest", "key").iterator():
        if digest in used:
            continue
        if dry_run:
            rows += 1
            continue
        if not ViewerFile.objects.filter(pk=digest, used__lt=cutoff).delete()[0]:
            continue  # (a run touched it since)
        rows += 1
        if key.startswith(convert.PREFIX):
            store.delete(key)
            objects += 1
    live = (ViewerRun.objects.filter(state=ViewerRun.RUNNING, started__gte=timezone.now() - STALE)
            .aggregate(since=Min("started"))["since"])
    sweep_before = min(cutoff, live) if live is not None else cutoff
    named = set(ViewerFile.objects.filter(key__startswith=convert.PREFIX).values_list("key", flat=True))
    orphans = 0
    for key, _size, mtime in store.list(convert.PREFIX):
        if key not in named and mtime < sweep_before.timestamp():
            orphans += 1
            if not dry_run:
                store.delete(key)
    if rows or orphans:
        log.info("viewer gc: %d copies no commit uses, %d orphan objects", rows, orphans)
    return {"copies_deleted": rows, "objects_deleted": objects + orphans}
