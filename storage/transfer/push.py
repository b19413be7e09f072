"""`hub push`: a local folder committed to a repo in one commit.

Small files travel inside the commit (as the hub's preupload says, up to INLINE_BUDGET in all); the
rest are LFS objects sent where the LFS batch says — multipart sessions the hub keeps for the same
user and sha256, so a killed push resumes from the parts already stored. Hashing (sha256, one pass
per file) runs in its own threads and feeds uploads as soon as each file is hashed. Files whose
content the branch already has at the same path are left out; nothing changed means no commit.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import queue
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from storage.client import (
    DATASET,
    RUN_AGAIN,
    HubClient,
    HubClientError,
    NotFoundError,
    QuotaExceededError,
    UsageError,
)
from storage.client.settings import user_size
from storage.paths import path_problem
from storage.sizes import format_size
from storage.transfer.engine import Context, Scheduler, Stats, UnhashedUploadJob, UploadJob, _hash_file
from storage.transfer.progress import Progress, plural
from storage.transfer.ratelimit import RateLimiter

INLINE_BUDGET = 64 * 2**20  # bytes of small files sent inside the commit; beyond, they go as LFS objects
PREUPLOAD_CHUNK = 256
BATCH = 500  # objects per LFS batch request (the hub takes 1,000): its checked PUTs are verified per batch prefix
BATCH_BYTES = 64 * 2**20
UNHASHED_MIN = "128MiB"  # a new file this big starts uploading while it is hashed (HUB_PUSH_UNHASHED_MIN)
IGNORED_DIRS = {".git", ".hg", ".svn"}


@dataclass
class LocalFile:
    path: str  # in the repo, '/'-separated
    abspath: Path
    size: int
    sha256: str = ""
    data: bytes | None = None  # content of files sent inline


@dataclass
class PushResult:
    commit: str | None  # None when nothing changed
    commit_url: str | None
    created_repo: bool
    files: int
    changed: int
    stats: Stats


def scan(folder: Path) -> list[LocalFile]:
    """Every regular file under `folder`, skipping VCS folders and huggingface_hub's .cache/huggingface.
    A symlink to a file is followed only if its target is inside `folder`: one leading out of it
    (to /etc/hostname, to ~/.ssh...) is skipped with a warning, never uploaded. Links to directories
    are not followed (as huggingface_hub's upload_folder does not follow them), and named in a
    warning: a `data -> /mnt/disk/data` left out silently would make an incomplete dataset."""
    if not folder.is_dir():
        raise UsageError(f"{folder} is not a directory", code="NotADirectory")
    root = folder.resolve()
    out, outside, linked = [], [], []
    for dirpath, dirnames, filenames in os.walk(folder):
        rel_dir = Path(dirpath).relative_to(folder)
        dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_DIRS
                             and not (rel_dir == Path(".cache") and d == "huggingface"))
        linked += [f"{(rel_dir / d).as_posix()} -> {os.readlink(Path(dirpath) / d)}" for d in dirnames
                   if (Path(dirpath) / d).is_symlink()]  # os.walk does not descend into them
        for name in sorted(filenames):
            p = Path(dirpath) / name
            if p.is_symlink() and not p.resolve().is_relative_to(root):
                outside.append(f"{(rel_dir / name).as_posix()} -> {os.readlink(p)}")
                continue
            if not p.is_file():
                continue
            out.append(LocalFile((rel_dir / name).as_posix(), p, p.stat().st_size))
    warn_skipped(outside, "symlink", f"leading outside {folder}")
    warn_skipped(linked, "link", "to a directory (push does not follow them; push the directory itself, "
                  "or copy it in)")
    return out


def warn_skipped(items: list[str], noun: str, why: str) -> None:
    """One warning line naming what a walk of a local folder (push's scan(), `hub cp -r`) left out:
    the first ten, then how many more."""
    if items:
        more = f" and {len(items) - 10} more" if len(items) > 10 else ""
        print(f"warning: skipped {plural(len(items), noun)} {why}: {', '.join(items[:10])}{more}", file=sys.stderr)


def _git_blob_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()


def push(client: HubClient, folder: str | Path, repo_type: str, repo_id: str, *, revision: str | None = None,
         message: str | None = None, private: bool = False, workers: int = 8, limit_rate: float | None = None,
         progress: bool = True) -> PushResult:
    """Commits the files of `folder` to `repo_id` on branch `revision` (default main), creating the
    repo (and the branch, from the default branch) if needed. File paths and the quota are checked
    before the repo is created; if the push fails anyway, a repo it created is deleted again while
    it holds nothing but its initial commit, and so is a branch it created on an existing repo while
    nothing was committed to it. Raises HubClientError on failure."""
    folder = Path(folder)
    files = scan(folder)
    if not files:
        raise UsageError(f"{folder} has no files to push", code="EmptyFolder")
    check_paths(folder, files)
    created = False
    if not _exists(client, repo_type, repo_id):
        check_quota(client, repo_id.split("/", 1)[0], files)
        created = client.create_repo(repo_type, repo_id, private=private, exist_ok=True)
    new_branch = None  # the commit a branch this push made on an existing repo starts at
    try:
        new_branch = _ensure_branch(client, repo_type, repo_id, revision, created)
        return _push(client, files, repo_type, repo_id, created, revision=revision, message=message,
                     workers=workers, limit_rate=limit_rate, progress=progress)
    except (Exception, KeyboardInterrupt) as err:
        note = None
        if created:
            note = _remove_if_empty(client, repo_type, repo_id)
        elif new_branch and revision:
            note = _remove_branch_if_unused(client, repo_type, repo_id, revision, new_branch)
        if note and isinstance(err, HubClientError):
            err.message = f"{err.message.rstrip('.')}; {note}"
        elif note:
            print(note, file=sys.stderr)
        raise


def check_paths(folder: Path, files: list[LocalFile]) -> None:
    """Refuses a file whose path the hub would refuse (storage.paths), before anything is sent."""
    for f in files:
        problem = path_problem(f.path)
        if problem:
            raise UsageError(f"cannot push {folder}: {problem}", code="InvalidPath")


def check_quota(client: HubClient, namespace: str, files: list[LocalFile]) -> None:
    """Refuses, before a repo is created for them, files that cannot fit in the account's quota.

    The hub charges only content the account does not hold yet, and it holds at most used +
    reserved bytes of it; so the upload costs at least its content's size minus those, and when
    even that is more than is available it cannot fit. Files of different sizes are different
    content: the distinct sizes add up to a lower bound of the content's size without reading a
    byte. Closer calls are the hub's to make as the bytes arrive (push then deletes the repo it
    created)."""
    try:
        q = client.quota(namespace)
    except HubClientError:
        return  # not the caller's account nor one of their organisations: creating the repo will say why
    used = q["used"] + q["reserved"]
    need = sum({f.size for f in files}) - used
    if need <= q["available"]:
        return
    extra = f" ({format_size(q['reserved'])} of it reserved by uploads in progress)" if q["reserved"] else ""
    raise QuotaExceededError(
        f"quota exceeded for {q['namespace']}: {format_size(used)} of {format_size(q['limit'])} used{extra}, "
        f"this upload needs at least {format_size(need)}. Delete files or repos, or ask for a larger quota.",
        code="QuotaExceeded", status=413)


def _exists(client: HubClient, repo_type: str, repo_id: str) -> bool:
    try:
        client.repo_info(repo_type, repo_id)
        return True
    except NotFoundError as err:
        if err.code != "RepoNotFound":
            raise
        return False


def _remove_if_empty(client: HubClient, repo_type: str, repo_id: str) -> str:
    """Deletes a repo this push created, if nothing but its initial commit is in it (no other
    commit, branch head or tag: someone may have pushed to it meanwhile). Says what it did."""
    label = f"{'dataset' if repo_type == DATASET else 'model'} {repo_id}"
    try:
        refs = client.list_refs(repo_type, repo_id)
        heads = {b["targetCommit"] for b in refs.get("branches") or []}
        if refs.get("tags") or len(heads) != 1 or len(client.list_commits(repo_type, repo_id, heads.pop(),
                                                                          limit=2)) != 1:
            return f"the {label} this push created has commits now, so it stays"
        client.delete_repo(repo_type, repo_id)
    except HubClientError as err:
        return f"could not delete the empty {label} this push created ({err.message})"
    return f"deleted the empty {label} this push had created"


def _ensure_branch(client: HubClient, repo_type: str, repo_id: str, revision: str | None,
                   created: bool) -> str | None:
    """Makes branch `revision` from the head of the default branch where the repo lacks it. Returns
    the commit it starts at when this made it on a repo that was already there (the repo's own
    cleanup covers a repo the push created), else None."""
    if not revision:
        return None
    if not created:
        try:
            client.repo_info(repo_type, repo_id, revision)
            return None
        except NotFoundError as err:
            if err.code != "RevisionNotFound":
                raise
    start = client.resolve_commit(repo_type, repo_id)
    client.create_branch(repo_type, repo_id, revision, start)
    return None if created else start


def _remove_branch_if_unused(client: HubClient, repo_type: str, repo_id: str, branch: str, start: str) -> str:
    """Deletes a branch this push created, if it still points where it started (nobody committed
    to it meanwhile). Says what it did."""
    try:
        heads = {b["name"]: b["targetCommit"] for b in client.list_refs(repo_type, repo_id).get("branches") or []}
        if branch not in heads:
            return f"the branch {branch} this push created is gone"
        if heads[branch] != start:
            return f"the branch {branch} this push created has commits now, so it stays"
        client.delete_branch(repo_type, repo_id, branch)
    except HubClientError as err:
        return f"could not delete the branch {branch} this push created ({err.message})"
    return f"deleted the branch {branch} this push had created"


def _push(client: HubClient, files: list[LocalFile], repo_type: str, repo_id: str, created: bool, *,
          revision: str | None, message: str | None, workers: int, limit_rate: float | None,
          progress: bool) -> PushResult:
    branch = revision or "main"
    modes = _preupload(client, repo_type, repo_id, branch, files)
    inline, lfs = [], []
    budget = INLINE_BUDGET
    for f in files:
        mode, _ignore, _oid = modes[f.path]
        if mode == "regular" and f.size <= budget:
            budget -= f.size
            inline.append(f)
        else:
            lfs.append(f)

    changed: list[tuple[str, LocalFile]] = []
    for f in inline:
        f.data = f.abspath.read_bytes()
        if len(f.data) != f.size:
            raise UsageError(f"{f.abspath} changed while it was being pushed: {RUN_AGAIN}", code="FileChanged")
        if _git_blob_oid(f.data) != modes[f.path][2]:
            changed.append(("file", f))
        else:
            f.data = None

    label = f"{'datasets/' if repo_type == DATASET else ''}{repo_id}"
    ctx = Context(client, limiter=RateLimiter(limit_rate), progress=Progress(f"push {label}", show=progress))
    sched = Scheduler(ctx, workers)
    verifier = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hub-verify")
    checked: list[CheckedBatch] = []  # each batch's checked PUTs, verified as soon as the last is in
    try:
        changed += _upload_lfs(ctx, sched, client, repo_type, repo_id, branch, lfs, modes, checked, verifier)
        sched.close()
        _verify(checked, {f.sha256: f for _kind, f in changed})
    except BaseException:
        sched.abort()  # a failure while planning, or Ctrl-C: stop the workers at their next chunk
        raise
    finally:
        verifier.shutdown(wait=True, cancel_futures=True)
        ctx.progress.close()
    if not changed:
        return PushResult(None, None, created, len(files), 0, ctx.stats)
    summary = message or f"Upload {plural(len(changed), 'file')} with hub push"
    lines = [{"key": "header", "value": {"summary": summary, "description": ""}}]
    for kind, f in sorted(changed, key=lambda c: c[1].path):
        if kind == "file":
            lines.append({"key": "file", "value": {"path": f.path, "encoding": "base64",
                                                   "content": base64.b64encode(f.data or b"").decode()}})
        else:
            lines.append({"key": "lfsFile", "value": {"path": f.path, "algo": "sha256", "oid": f.sha256,
                                                      "size": f.size}})
    payload = b"\n".join(json.dumps(line).encode() for line in lines) + b"\n"
    out = client.commit(repo_type, repo_id, branch, payload)
    ctx.stats.add(bytes_up=sum(f.size for k, f in changed if k == "file"))
    return PushResult(out.get("commitOid"), out.get("commitUrl"), created, len(files), len(changed), ctx.stats)


def _preupload(client: HubClient, repo_type: str, repo_id: str, branch: str,
               files: list[LocalFile]) -> dict[str, tuple[str, bool, str | None]]:
    """{path: (uploadMode, shouldIgnore, oid of what the branch has there)}."""
    out = {}
    for i in range(0, len(files), PREUPLOAD_CHUNK):
        chunk = files[i:i + PREUPLOAD_CHUNK]
        items = []
        for f in chunk:
            with open(f.abspath, "rb") as fh:
                sample = fh.read(512)
            items.append({"path": f.path, "size": f.size, "sample": base64.b64encode(sample).decode()})
        answer = client.preupload(repo_type, repo_id, branch, items)
        for item in answer["files"]:
            out[item["path"]] = (item["uploadMode"], bool(item.get("shouldIgnore")), item.get("oid"))
    missing = [f.path for f in files if f.path not in out]
    if missing:
        raise HubClientError(f"the hub did not answer the preupload for {missing[0]!r}", code="BadResponse")
    return out


class CheckedBatch:
    """The checked PUTs of one LFS batch answer: once the last of them is in, they are verified in
    one request (the hub's bulk verify lists the batch's prefix once), on the verifier thread while
    the next batches still upload — not all at the end, in series with nothing else to do."""

    def __init__(self, client: HubClient, expected: int, verifier: ThreadPoolExecutor) -> None:
        self.client, self.expected, self.verifier = client, expected, verifier
        self.items: list[tuple[str, str, int]] = []  # (verify href, oid, size)
        self.lock = threading.Lock()
        self.answer: Future | None = None

    def append(self, item: tuple[str, str, int]) -> None:
        with self.lock:
            self.items.append(item)
            full = len(self.items) == self.expected
        if full:
            self.answer = self.verifier.submit(self.client.lfs_verify_many, list(self.items))


def _verify(batches: list[CheckedBatch], by_sha: dict[str, LocalFile]) -> None:
    """The checked PUTs became blobs on the hub before the commit names them (or say why not)."""
    for batch in batches:
        if batch.expected and batch.answer is None:  # (every upload ended, so this cannot be)
            raise HubClientError("a batch of uploads was never verified", code="LFSVerifyFailed")
        for obj in batch.answer.result() if batch.answer is not None else []:
            if obj.get("error"):
                f = by_sha.get(obj.get("oid"))
                raise HubClientError(f"{f.path if f else obj.get('oid')}: {obj['error'].get('message', 'not stored')}",
                                     code="LFSVerifyFailed")


def _upload_lfs(ctx: Context, sched: Scheduler, client: HubClient, repo_type: str, repo_id: str, branch: str,
                files: list[LocalFile], modes: dict, checked: list[CheckedBatch],
                verifier: ThreadPoolExecutor) -> list[tuple[str, LocalFile]]:
    """Hashes the files (two threads) and, batch by batch as hashes come in, asks the LFS batch
    where to send them and schedules the uploads. Returns the files that change the branch."""
    changed: list[tuple[str, LocalFile]] = []
    if not files:
        return changed
    # A large file at a path the branch does not have yet (so it cannot be unchanged) goes up while
    # it is hashed: its session is opened first, its parts checked one by one by the store.
    early: set[int] = set()
    least = user_size(os.environ.get("HUB_PUSH_UNHASHED_MIN") or UNHASHED_MIN)
    for f in sorted((f for f in files if modes[f.path][2] is None and f.size >= least),
                    key=lambda f: -f.size):
        session = client.start_unhashed_upload(repo_type, repo_id, f.path, f.size)
        if session is None:
            continue  # (this hub's store cannot check parts, or an earlier upload resumes through the batch)
        ctx.progress.add_total(f.size)
        sched.submit(UnhashedUploadJob(ctx, f.abspath, f.size, session,
                                       on_hash=lambda sha, f=f: setattr(f, "sha256", sha)))
        changed.append(("lfsFile", f))
        early.add(id(f))
    files = [f for f in files if id(f) not in early]
    if not files:
        return changed
    hasher = ThreadPoolExecutor(max_workers=2, thread_name_prefix="hub-hash")
    hashed: queue.Queue = queue.Queue()  # (file, error) as each is hashed: O(1) a file, whatever their number

    def digest(f: LocalFile) -> None:
        try:
            f.sha256 = _hash_file(f.abspath).hexdigest()
            if f.abspath.stat().st_size != f.size:
                raise UsageError(f"{f.abspath} changed while it was being pushed: {RUN_AGAIN}", code="FileChanged")
            hashed.put((f, None))
        except BaseException as err:  # noqa: BLE001 - handed to the loop below, which raises it
            hashed.put((f, err))

    for f in files:
        hasher.submit(digest, f)
    left = len(files)
    # The batch requests run in a thread of their own: the next batch's answer is on its way while
    # the uploads of this one run (with thousands of small files, the round trips would else leave
    # the transfer threads idle between batches).
    planner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hub-plan")
    planned: list[Future] = []
    ready: list[LocalFile] = []
    ready_bytes = 0
    try:
        while left or ready:
            if left:
                got = []
                try:
                    got.append(hashed.get(timeout=0.5))
                    while True:
                        got.append(hashed.get_nowait())
                except queue.Empty:
                    pass
                for f, err in got:
                    left -= 1
                    if err is not None:
                        raise err
                    if f.sha256 != modes[f.path][2]:
                        ready.append(f)
                        ready_bytes += f.size
            # A batch goes as soon as it is worth a round trip: big files start uploading while
            # the next ones are still being hashed.
            if ready and (len(ready) >= BATCH or ready_bytes >= BATCH_BYTES or not left):
                batch, ready = ready[:BATCH], ready[BATCH:]
                ready_bytes = sum(f.size for f in ready)
                planned.append(planner.submit(_schedule, ctx, sched, client, repo_type, repo_id, branch, batch,
                                              checked, verifier))
                changed += [("lfsFile", f) for f in batch]
            if sched.failed or any(p.done() and p.exception() for p in planned):
                break
        for p in planned:
            p.result()  # (a batch the hub refused: its error)
    finally:
        hasher.shutdown(wait=True, cancel_futures=True)
        planner.shutdown(wait=True, cancel_futures=True)
    return changed


def _schedule(ctx: Context, sched: Scheduler, client: HubClient, repo_type: str, repo_id: str, branch: str,
              batch: list[LocalFile], checked: list[CheckedBatch], verifier: ThreadPoolExecutor) -> None:
    # One object per distinct content: two paths with the same bytes upload once.
    unique = {f.sha256: f for f in batch}
    answer = client.lfs_batch(repo_type, repo_id, [{"oid": f.sha256, "size": f.size} for f in unique.values()],
                              ref=branch)
    objects = [obj for obj in answer.get("objects", []) if obj.get("oid") in unique]
    for obj in objects:
        if obj.get("error"):
            f = unique[obj["oid"]]
            raise HubClientError(f"{f.path}: {obj['error'].get('message', 'refused by the hub')}",
                                 code=f"LFS{obj['error'].get('code', '')}")
    puts = CheckedBatch(client, sum(1 for obj in objects if _checked_put(obj)), verifier)
    checked.append(puts)
    for obj in objects:
        f = unique[obj["oid"]]
        action = (obj.get("actions") or {}).get("upload")
        if action:
            ctx.progress.add_total(f.size)
            sched.submit(UploadJob(ctx, f.abspath, f.sha256, f.size, action, obj["actions"].get("verify"), puts))


def _checked_put(obj: dict) -> bool:
    """A checked PUT (UploadJob hands it to its batch's verify when it is in)."""
    actions = obj.get("actions") or {}
    return "x-amz-content-sha256" in ((actions.get("upload") or {}).get("header") or {}) and bool(actions.get("verify"))
