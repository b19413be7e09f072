"""Moving bytes for `hub pull`, `hub push`, `hub cp` and `hub://`: resumable downloads verified by
sha256, resumable multipart uploads, and the small thread-pool scheduler they share.

Downloads
  * A file is fetched into a partial file next to its destination and renamed into place only
    after its sha256 matched; nothing unverified ever sits at a final path.
  * Small files stream in one GET; the hash is computed on the way. A file of 2 segments or more
    is fetched as parallel byte ranges written with pwrite; a hasher thread follows the contiguous
    prefix on disk (page cache), so hashing overlaps the transfer instead of following it.
  * Resume after any interruption, SIGKILL included: a single-stream partial file is valid up to
    its length (bytes are written in order); a segmented one has a journal of the byte ranges
    already written, appended only after the bytes themselves. A re-run asks only for the rest.
Uploads
  * LFS objects go where the hub's LFS batch says: one PUT, or multipart parts. A multipart
    session is reused by the hub for the same user and sha256, and GET /api/v1/uploads/{id}
    tells which parts it already holds, so a killed push sends only the missing parts.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import mmap
import os
import select
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import urllib3

from storage.client import (
    COMPLETE_RETRY,
    RETRY,
    RETRYABLE_ERRORS,
    RUN_AGAIN,
    FileSpan,
    HubClient,
    HubClientError,
    IntegrityError,
    TransportError,
    digests,
    file_changed,
)
from storage.client.settings import user_size
from storage.sizes import format_size
from storage.transfer.locks import FileLock
from storage.transfer.progress import Progress
from storage.transfer.ratelimit import RateLimiter

CHUNK = 1 << 20
JOURNAL_EVERY = 4 << 20
MiB = 1 << 20


def default_segment_size() -> int:
    """Byte-range size of parallel downloads (HUB_SEGMENT_SIZE, e.g. 32MiB; files of 2 segments or
    more are fetched in ranges)."""
    raw = os.environ.get("HUB_SEGMENT_SIZE")
    return user_size(raw) if raw else 32 * MiB


class Cancelled(Exception):
    pass


@dataclass
class Stats:
    """What a transfer did. `bytes_down`/`bytes_up` count bytes that crossed the network."""

    files_down: int = 0
    bytes_down: int = 0
    files_up: int = 0
    bytes_up: int = 0
    files_present: int = 0
    bytes_present: int = 0
    files_resumed: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, **counts: int) -> None:
        with self.lock:
            for k, v in counts.items():
                setattr(self, k, getattr(self, k) + v)


@dataclass
class Context:
    """What every transfer task shares: the client, limits, progress, counters, cancellation."""

    client: HubClient
    limiter: RateLimiter = field(default_factory=lambda: RateLimiter(None))
    progress: Progress = field(default_factory=lambda: Progress("", show=False))
    stats: Stats = field(default_factory=Stats)
    segment_size: int = field(default_factory=default_segment_size)
    cancelled: threading.Event = field(default_factory=threading.Event)

    def check(self) -> None:
        if self.cancelled.is_set():
            raise Cancelled()

    def moved_down(self, n: int) -> None:
        self.limiter.take(n)
        self.stats.add(bytes_down=n)
        self.progress.update(n)


@dataclass
class RemoteFile:
    path: str
    size: int
    sha256: str
    etag: str
    url: str
    fallback_url: str  # the hub's /resolve/<commit>/ URL: it redirects to a fresh presigned URL
    # blake3 of the same bytes, where the hub hashed them to both: a download is checked against it
    # (a fifth of sha256's CPU per byte; a match proves the bytes are those of the sha256)
    blake3: str = ""

    @classmethod
    def from_manifest(cls, client: HubClient, repo_type: str, repo_id: str, commit: str, item: dict) -> RemoteFile:
        return cls(item["path"], item["size"], item["sha256"], item["etag"], item["url"],
                   client.resolve_url(repo_type, repo_id, commit, item["path"]), item.get("blake3") or "")

    def hasher(self):
        """A new hash of what a download of this file is checked with (`check` takes its digest)."""
        return digests.hasher(self.blake3)

    def matches(self, digest: str) -> bool:
        return digests.matches(digest, self.sha256, self.blake3)

    def check(self, digest: str, then: str = "run the command again") -> None:
        """Raises IntegrityError (ChecksumMismatch) unless `digest` is that of the right bytes."""
        digests.check(self.path, digest, self.sha256, self.blake3, then=then)


# --- scheduling -------------------------------------------------------------------------------------

class Job:
    """A unit of work made of tasks that may run in parallel; `complete()` runs once, in the thread
    that finished the last task, if none failed."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pending = 0
        self.error: BaseException | None = None
        self.done = False

    def tasks(self) -> list[Callable[[], None]]:
        raise NotImplementedError

    def complete(self) -> None:
        pass


QUICK_SIZE = 1 << 20  # a job of one request for at most this many bytes waits on latency, not bandwidth
QUICK_FACTOR = 4  # ...so such jobs get this many times the workers, in a lane of their own


class Scheduler:
    """A fixed pool of worker threads. Submitting blocks while `workers * 4` tasks wait, so a
    listing of millions of files never turns into millions of queued futures. After the first
    failure nothing new is started; `close()` waits for what runs and raises that failure.

    Jobs that are one small request (`job.quick`: a small file's GET or PUT) run in a lane of
    `workers * QUICK_FACTOR` threads of their own: their time is the store's latency (on Ceph RGW
    ~40 ms a small object, its reply meeting the client's delayed ACK), which more requests in
    flight hide, while big transfers keep `workers` streams."""

    def __init__(self, ctx: Context, workers: int) -> None:
        self.ctx = ctx
        self.workers = max(1, workers)
        self.pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="hub-transfer")
        self.slots = threading.BoundedSemaphore(self.workers * 4)
        self.quick_pool: ThreadPoolExecutor | None = None
        self.quick_slots = threading.BoundedSemaphore(self.workers * QUICK_FACTOR * 2)
        self.errors: list[tuple[Job, BaseException]] = []
        self.lock = threading.Lock()

    @property
    def failed(self) -> bool:
        return bool(self.errors)

    def submit(self, job: Job) -> None:
        if self.failed:
            return
        tasks = job.tasks()
        job.pending = len(tasks)
        if not tasks:
            self._finish(job)
            return
        quick = len(tasks) == 1 and getattr(job, "quick", False)
        slots = self.quick_slots if quick else self.slots
        if quick and self.quick_pool is None:
            self.quick_pool = ThreadPoolExecutor(max_workers=self.workers * QUICK_FACTOR,
                                                 thread_name_prefix="hub-quick")
        for task in tasks:
            while not slots.acquire(timeout=0.5):
                self.ctx.check()
            (self.quick_pool if quick else self.pool).submit(self._run, job, task, slots)

    def _run(self, job: Job, task: Callable[[], None], slots: threading.BoundedSemaphore) -> None:
        try:
            if job.error is None and not self.ctx.cancelled.is_set():
                task()
        except BaseException as err:  # noqa: BLE001 - recorded, raised by close()
            with job.lock:
                job.error = job.error or err
        finally:
            slots.release()
            with job.lock:
                job.pending -= 1
                last = job.pending == 0
            if last:
                self._finish(job)

    def _finish(self, job: Job) -> None:
        try:
            if job.error is not None:
                raise job.error
            if self.ctx.cancelled.is_set():
                raise Cancelled()
            job.complete()
        except BaseException as err:  # noqa: BLE001
            with self.lock:
                self.errors.append((job, err))
        finally:
            with job.lock:
                job.done = True

    def abort(self) -> None:
        """Cancels what has not started and stops running tasks at their next chunk."""
        self.ctx.cancelled.set()
        for pool in (self.pool, self.quick_pool):
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)

    def close(self) -> None:
        """Waits for every task; raises the first failure (a cancellation only if nothing else)."""
        self.pool.shutdown(wait=True)
        if self.quick_pool is not None:
            self.quick_pool.shutdown(wait=True)
        if self.errors:
            errors = [e for _, e in self.errors if not isinstance(e, Cancelled)] or [self.errors[0][1]]
            raise errors[0]


# --- downloads --------------------------------------------------------------------------------------

def _open_range(ctx: Context, rf: RemoteFile, start: int, end: int) -> urllib3.BaseHTTPResponse:
    """A streaming response for bytes [start, end) of the file. An expired or refused presigned URL
    is replaced by the hub's resolve URL (which redirects to a fresh one)."""
    headers = {"Range": f"bytes={start}-{end - 1}"} if (start, end) != (0, rf.size) else {}
    try:
        resp = ctx.client.request("GET", rf.url, headers=headers, preload=False,
                                  timeout=urllib3.Timeout(connect=10, read=120))
    except TransportError as err:
        if err.status not in (400, 403) or rf.url == rf.fallback_url:
            raise
        rf.url = rf.fallback_url
        resp = ctx.client.request("GET", rf.url, headers=headers, preload=False,
                                  timeout=urllib3.Timeout(connect=10, read=120))
    if headers and resp.status != 206:
        resp.drain_conn()
        resp.release_conn()
        raise TransportError(f"the server ignored the byte range of {rf.path} (HTTP {resp.status})",
                             code="RangeIgnored")
    return resp


def _stream_range(ctx: Context, rf: RemoteFile, start: int, end: int, sink: Callable[[int, bytes], None],
                  into: tuple[int, Callable[[int, int], None]] | None = None) -> None:
    """Calls sink(offset, bytes) for [start, end), reconnecting from the last byte received after a
    transport error (RETRY.attempts tries in a row without progress). With `into` = (fd, landed),
    a plain-HTTP body is spliced from the socket straight into fd at its offsets instead (no copy
    through this process) and landed(offset, n) is called for each piece on disk."""
    pos = start
    failures = 0

    def landed(offset: int, n: int) -> None:
        nonlocal pos, failures
        into[1](offset, n)
        pos = offset + n
        ctx.moved_down(n)
        failures = 0
        ctx.check()

    while pos < end:
        ctx.check()
        try:
            resp = _open_range(ctx, rf, pos, end)
            try:
                raw = _raw_body(resp, end - pos) if into is not None else None
                if raw is not None:
                    try:
                        _splice_body(*raw, into[0], pos, end, landed)
                    except BaseException:
                        resp.close()  # (mid-body: the connection cannot be used again)
                        raise
                    continue
                # Never ask for more than is left: http.client allocates (and the kernel zeroes) a
                # buffer of the size asked for, which for thousands of small files costs more than
                # their bytes. (Reading into one reused buffer instead, as the mount does, measured
                # slower here: 3.5 s against 2.3 s for a GiB.)
                while pos < end and (chunk := resp.read(min(CHUNK, end - pos))):
                    ctx.check()
                    sink(pos, chunk)
                    pos += len(chunk)
                    ctx.moved_down(len(chunk))
                    failures = 0
                if pos >= end and resp.read(1):
                    raise TransportError(f"the server sent more bytes than {rf.path} has", code="TooLong")
            finally:
                resp.release_conn()
            if pos < end:
                raise urllib3.exceptions.ProtocolError(f"connection closed at byte {pos} of {end}")
        except RETRYABLE_ERRORS as err:
            failures += 1
            if failures >= RETRY.attempts:
                raise TransportError(f"download of {rf.path} kept failing: {err}", code="ConnectionError") from err
            time.sleep(RETRY.delay(failures - 1))
        except TransportError as err:
            failures += 1
            if err.status not in RETRY.statuses or failures >= RETRY.attempts:
                raise
            time.sleep(RETRY.delay(failures - 1))


# --- splicing a body into a file ------------------------------------------------------------------
# A segment of a large download goes from the socket into the partial file through a pipe
# (splice(2)): the kernel moves the pages, this process never copies them — half the CPU of
# reading into Python bytes and writing them out again. Plain HTTP only (TLS has to be read).

_SPLICE = hasattr(os, "splice") and hasattr(fcntl, "F_SETPIPE_SZ")
PIPE_SIZE = 1 << 20
FLUSH_AT = 256 << 10  # bytes gathered in the pipe before they are written out and counted


def _raw_body(resp: urllib3.BaseHTTPResponse, length: int):
    """(http.client response, its buffered reader, the socket) of a body that can be spliced: plain
    TCP, exactly `length` bytes as Content-Length, no content or transfer coding. Else None."""
    if not _SPLICE or resp.headers.get("Content-Encoding", "identity") != "identity":
        return None
    hresp = getattr(resp, "_fp", None)
    fp = getattr(hresp, "fp", None)
    sock = getattr(getattr(resp, "connection", None), "sock", None)
    if (fp is None or type(sock) is not socket.socket or getattr(hresp, "chunked", True)
            or getattr(hresp, "length", None) != length or getattr(resp, "_fp_bytes_read", 0)):
        return None
    return hresp, fp, sock


def _splice_body(hresp, fp, sock: socket.socket, fd: int, pos: int, end: int,
                 landed: Callable[[int, int], None]) -> None:
    global _SPLICE
    # What http.client's reader already took off the socket (part of the body, with the headers).
    head = fp.peek(1)[:end - pos] if pos < end else b""
    if head:
        fp.read(len(head))
        os.pwrite(fd, head, pos)
        landed(pos, len(head))
        pos += len(head)
    r, w = os.pipe()
    try:
        try:
            fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        except OSError:
            pass  # (over /proc/sys/fs/pipe-max-size for this user: the default 64 KiB works too)
        timeout = sock.gettimeout()
        poller = select.poll()
        poller.register(sock.fileno(), select.POLLIN)
        pending = 0  # bytes in the pipe: they go to the file (and are counted) a batch at a time

        def flush() -> None:
            nonlocal pos, pending
            done = 0
            while done < pending:
                done += os.splice(r, fd, pending - done, offset_dst=pos + done)
            landed(pos, pending)
            pos, pending = pos + pending, 0

        while pos + pending < end:
            try:
                got = os.splice(sock.fileno(), w, min(PIPE_SIZE - pending, end - pos - pending),
                                flags=os.SPLICE_F_MOVE | os.SPLICE_F_NONBLOCK)
            except BlockingIOError:  # nothing on the socket yet, or the pipe is full
                if pending:
                    flush()
                elif not poller.poll(None if timeout is None else timeout * 1000):
                    raise TimeoutError(f"no bytes for {timeout} s") from None
                continue
            except OSError as err:
                if err.errno in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                    _SPLICE = False  # (a kernel or socket that cannot: read the next ones)
                raise urllib3.exceptions.ProtocolError(f"splice: {err}") from err
            if got == 0:
                if pending:
                    flush()
                raise urllib3.exceptions.ProtocolError(f"connection closed at byte {pos} of {end}")
            pending += got
            if pending >= FLUSH_AT or pos + pending == end:
                flush()
    finally:
        os.close(r)
        os.close(w)
    # The body is read: http.client (and so the connection's next request) must see it that way.
    hresp.length = 0
    hresp._close_conn()


def _hash_file(path: Path, upto: int | None = None, h=None, start: int = 0):
    h = h or hashlib.sha256()
    with open(path, "rb") as fh:
        fh.seek(start)
        remaining = upto
        while remaining is None or remaining > 0:
            chunk = fh.read(4 * CHUNK if remaining is None else min(4 * CHUNK, remaining))
            if not chunk:
                break
            h.update(chunk)
            if remaining is not None:
                remaining -= len(chunk)
    return h


HASH_READ = 256 << 10  # what a hash reads at a time (fits the CPU's cache, unlike 1 MiB or more)
PART_HASHERS = 2  # threads that hash parts ahead of the senders (what two cores can keep busy)


class PartHashes:
    """The sha256 of each part of a file sent in parts of `part_size` bytes (`parts`: the numbers to
    send) and, if `whole`, of the whole file, computed on threads of their own ahead of the workers
    sending the parts (a worker waits only for the part it is about to send, instead of hashing it
    between two PUTs while its stream idles); `on_whole(sha256)` is told the whole file's as soon as
    it is done. `part(n)` waits for part n; `whole()` for the whole file (checked not to have changed
    size meanwhile). A failure (the file changed, Ctrl-C: ctx.cancelled) is raised to every waiter.

    PART_HASHERS threads hash the parts, in order; the whole file's hash, when wanted, runs on one
    more thread. Each reads the file for itself (preadv from the page cache: a copy; an mmap would
    spare it, but a file truncated under a mapping kills the process with SIGBUS). One thread feeding
    every piece to both hashes read the file once, but made each part wait for two hashes on one core:
    on two cores shared with the store the last parts' PUTs waited for it (1 GiB `hub cp`: 4.85 s
    against 4.14 with the hashes apart, boto3 4.48 — bench/README.md). (A reader handing its buffers
    to a second hashing thread, which would keep one read, measured slower than either: 5.2 s.)

    Two reads could see two versions of a file rewritten in place: parts the store accepts under a
    whole-file sha256 the assembled object does not have. So `whole()` also requires the file's size
    and modification time to be what they were before the first read (file_changed otherwise)."""

    def __init__(self, ctx: Context, path: Path, size: int, part_size: int, parts: Iterable[int],
                 whole: bool = False, on_whole: Callable[[str], None] | None = None) -> None:
        self.ctx, self.path, self.size, self.part_size = ctx, path, size, part_size
        self.wanted = sorted(parts)
        self.todo = iter(self.wanted)
        self.want_whole, self.on_whole = whole, on_whole
        self.digests: dict[int, str] = {}
        self.whole_digest: str | None = None
        self.error: BaseException | None = None
        self.running = 0
        self.cond = threading.Condition()
        self.before = _version(path) if whole else None  # (size, mtime) before any hash read a byte
        self.threads = [threading.Thread(target=self._guard, args=(self._parts,), name=f"hub-part-hash-{i}",
                                         daemon=True) for i in range(PART_HASHERS if self.wanted else 0)]
        if whole:
            self.threads.append(threading.Thread(target=self._guard, args=(self._whole,), name="hub-whole-hash",
                                                 daemon=True))

    def start(self) -> PartHashes:
        self.running = len(self.threads)
        for t in self.threads:
            t.start()
        return self

    def _guard(self, work: Callable[[int], None]) -> None:
        try:
            with open(self.path, "rb", buffering=0) as fh:
                work(fh.fileno())
        except BaseException as err:  # noqa: BLE001 - raised to whoever waits for a digest
            with self.cond:
                self.error = self.error or err
        finally:
            with self.cond:
                self.running -= 1
                self.cond.notify_all()

    def _hash(self, fd: int, start: int, length: int, h) -> None:
        buf = bytearray(HASH_READ)
        view = memoryview(buf)
        while length > 0:
            self.ctx.check()
            if self.error is not None:
                raise self.error  # (another hash failed: what this one hashed so far is no digest to hand out)
            got = os.preadv(fd, [view[:min(HASH_READ, length)]], start)
            if not got:
                raise file_changed(self.path, "shrank")
            h.update(view[:got])
            start, length = start + got, length - got

    def _parts(self, fd: int) -> None:
        while True:
            with self.cond:
                n = next(self.todo, None)
            if n is None:
                return
            start = (n - 1) * self.part_size
            h = hashlib.sha256()
            self._hash(fd, start, min(self.part_size, self.size - start), h)
            with self.cond:
                self.digests[n] = h.hexdigest()
                self.cond.notify_all()

    def _whole(self, fd: int) -> None:
        h = hashlib.sha256()
        self._hash(fd, 0, self.size, h)
        if os.fstat(fd).st_size != self.size:
            raise file_changed(self.path)
        if self.error is None:
            self.whole_digest = h.hexdigest()
            if self.on_whole is not None:
                self.on_whole(self.whole_digest)

    def part(self, n: int) -> str:
        with self.cond:
            while n not in self.digests and self.error is None and self.running:
                self.cond.wait()
            if n in self.digests:
                return self.digests[n]
        raise self.error or IntegrityError(f"{self.path}: part {n} was not hashed", code="HashFailed")

    def ready(self) -> dict[int, str]:
        """The parts hashed so far."""
        with self.cond:
            return dict(self.digests)

    def whole(self) -> str:
        self.join()
        if self.error is not None:
            raise self.error
        assert self.whole_digest is not None
        if self.before is None or _version(self.path) != self.before:  # (two versions may have been hashed)
            raise file_changed(self.path)
        return self.whole_digest

    def join(self) -> None:
        for t in self.threads:
            t.join()


def _version(path: Path) -> tuple[int, int] | None:
    """(size, mtime) of a local file; None when it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


class PartSigner:
    """Part URLs signed with each part's sha256 (from `hashes`): `sign({n: sha256})` returns
    {n: URL}. A part's URL is asked for together with every other part hashed by then and not yet
    handed out, so the parts the hash has run ahead to cost one request, not one each."""

    def __init__(self, hashes: PartHashes, sign: Callable[[dict[int, str]], dict[int, str]]) -> None:
        self.hashes, self.sign = hashes, sign
        self.lock = threading.Lock()
        self.signed: dict[int, str] = {}  # asked for ahead of their workers
        self.handed: set[int] = set()

    def url(self, n: int) -> tuple[str, str]:
        """(sha256, signed URL) of part n, once it is hashed."""
        sha = self.hashes.part(n)
        with self.lock:
            url = self.signed.pop(n, None)
            if url is None:
                ask = {m: d for m, d in self.hashes.ready().items() if m not in self.signed and m not in self.handed}
                ask[n] = sha
            self.handed.add(n)
        if url is None:
            got = self.sign(ask)
            with self.lock:
                self.signed.update({m: u for m, u in got.items() if m not in self.handed})
            url = got[n]
        return sha, url


def _verify(rf: RemoteFile, digest: str, partial: Path) -> None:
    if not rf.matches(digest):
        # Nothing of it can be trusted any more: start over next time.
        for p in (partial, _journal(partial)):
            p.unlink(missing_ok=True)
        rf.check(digest, then="they were discarded — run the command again")


def _journal(partial: Path) -> Path:
    return partial.with_name(partial.name + ".journal")


def _read_journal(journal: Path, size: int) -> list[list[int]] | None:
    """The merged byte ranges a journal records (None without a journal). Lines are appended
    after their bytes were written; a torn last line is skipped."""
    try:
        text = journal.read_text()
    except FileNotFoundError:
        return None
    spans = []
    for line in text.splitlines():
        bits = line.split()
        if len(bits) == 2 and bits[0].isdigit() and bits[1].isdigit():
            a, b = int(bits[0]), int(bits[1])
            if 0 <= a < b <= size:
                spans.append([a, b])
    merged: list[list[int]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return merged


class SingleDownload:
    """One GET, hashed on the way; resumes from the partial file's length."""

    def __init__(self, ctx: Context, rf: RemoteFile, partial: Path) -> None:
        self.ctx, self.rf, self.partial = ctx, rf, partial
        self.resumed = False

    def run(self) -> None:
        try:
            self._run()
        except IntegrityError:
            if not self.resumed:
                raise
            self._run()  # the bytes kept from an earlier run were bad (and are gone now): once more, afresh

    def _run(self) -> None:
        """(The partial's directory must exist.)"""
        rf, partial = self.rf, self.partial
        try:
            have = partial.stat().st_size
        except FileNotFoundError:
            have = 0
        if have:
            journal = _journal(partial)
            ranges = _read_journal(journal, rf.size)
            if ranges is not None:  # left by a segmented attempt: only its prefix from 0 counts
                have = ranges[0][1] if ranges and ranges[0][0] == 0 else 0
                journal.unlink()
        if have > rf.size:
            have = 0
        self.resumed = have > 0
        h = _hash_file(partial, have, rf.hasher()) if have else rf.hasher()
        if have:
            self.ctx.stats.add(files_resumed=1)
            self.ctx.progress.update(have)
        # A raw descriptor: no buffer object, no isatty probe — thousands of small files add up.
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | (0 if have else os.O_TRUNC), 0o644)
        try:
            if have:
                os.ftruncate(fd, have)
                os.lseek(fd, have, os.SEEK_SET)

            def sink(_offset: int, chunk: bytes) -> None:
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view):]
                h.update(chunk)

            _stream_range(self.ctx, rf, have, rf.size, sink)
        finally:
            os.close(fd)
        _verify(rf, h.hexdigest(), partial)


SMALL_FILE = 8 * MiB  # below this a file is fetched into memory, verified, and written once


def fetch_small(ctx: Context, rf: RemoteFile, tmp: Path) -> None:
    """A small file: fetched into memory, verified, then written to `tmp` (a name unique to this
    thread) in one go. No lock and no partial to resume: refetching a few MiB costs less than the
    directory operations that resumption needs, times thousands of files."""
    buf = bytearray()
    _stream_range(ctx, rf, 0, rf.size, lambda _offset, chunk: buf.extend(chunk))
    h = rf.hasher()
    h.update(buf)
    rf.check(h.hexdigest())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(buf)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


TAPER = 8  # the last TAPER segments' worth of a file goes in quarter-size pieces (see _segments)


def _segments(missing: list[tuple[int, int]], seg: int) -> list[tuple[int, int]]:
    """The byte ranges to fetch, in file order: `seg` bytes each, but the last TAPER * seg bytes of
    the file go in pieces of a quarter of that (at least 4 MiB), and no piece is left shorter than
    half of its size. The hash follows the contiguous prefix, so whatever is in flight past it when
    the last byte lands is hashed after it: with the taper that tail is about TAPER small pieces
    (~0.05 s of sha256 at 32 MiB segments) rather than TAPER whole segments (~0.17 s), and every
    stream stays busy to the end."""
    small = max(4 * MiB, seg // 4)
    tail_from = missing[-1][1] - TAPER * seg if missing else 0
    out = []
    for a, b in missing:
        s = a
        while s < b:
            step = small if s >= tail_from else seg
            e = min(s + step, b)
            if s < tail_from < e:
                e = tail_from
            if b - e < step // 2:
                e = b  # (no request for a few bytes at the end: the last piece takes them)
            out.append((s, e))
            s = e
    return out


_FALLOCATE = None  # libc's fallocate(2), once looked up (False: not available here)


def _preallocate(fd: int, size: int, path: Path, name: str) -> None:
    """Claims the disk blocks of a file about to be written in parallel ranges (fallocate(2), mode
    0: no byte changes). A disk too small says so now, before anything is fetched, instead of after
    most of it; and the filesystem skips its per-page delayed-allocation work as the ranges land
    (~0.08 CPU s of the client a GiB on ext4 here). A filesystem that cannot (FUSE — a hub volume
    mount —, some network filesystems) keeps the sparse file: never glibc's posix_fallocate, whose
    fallback writes a byte into every block."""
    global _FALLOCATE
    if _FALLOCATE is None:
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            _FALLOCATE = libc.fallocate
            _FALLOCATE.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
            _FALLOCATE.restype = ctypes.c_int
        except (ImportError, OSError, AttributeError):
            _FALLOCATE = False
    if not _FALLOCATE:
        return
    before = os.fstat(fd).st_size
    if _FALLOCATE(fd, 0, 0, size) == 0:
        return
    import ctypes

    err = ctypes.get_errno()
    if err in (errno.ENOSPC, errno.EDQUOT):
        os.ftruncate(fd, before)  # (ext4 keeps what it got, and the length it reached: give both back)
        raise HubClientError(f"no space left on the disk for {name} ({format_size(size)}, in {path.parent}): free "
                             "some space (or write elsewhere), then run the same command again", code="NoSpace")
    # EOPNOTSUPP, ENOSYS, EINVAL...: the filesystem cannot; written sparse, as any writer would


class SegmentedDownload:
    """Parallel byte ranges into one preallocated file, a journal of the ranges written, and a
    hasher thread that follows the contiguous prefix."""

    def __init__(self, ctx: Context, rf: RemoteFile, partial: Path) -> None:
        self.ctx, self.rf, self.partial = ctx, rf, partial
        self.journal_path = _journal(partial)
        self.cond = threading.Condition()
        self.done: list[list[int]] = []  # sorted, disjoint [start, end) ranges on disk
        self.hashed = 0
        self.failed = False
        self.digest: str | None = None
        self.fd = -1
        self.journal_fd = -1
        self.hasher: threading.Thread | None = None
        self.resumed = False

    def plan(self) -> list[tuple[int, int]]:
        """Opens the partial file and returns the byte ranges still to fetch, in segments."""
        size = self.rf.size
        try:
            on_disk = self.partial.stat().st_size
        except FileNotFoundError:
            on_disk = 0
        ranges = _read_journal(self.journal_path, size) if on_disk else None
        if ranges is not None:
            ranges = [[a, min(b, on_disk)] for a, b in ranges if a < on_disk]
        if ranges is None and 0 < on_disk <= size:
            ranges = [[0, on_disk]]  # left by a one-stream attempt: its length is what it holds
            self.journal_path.write_text(f"0 {on_disk}\n")
        if not ranges or on_disk > size:
            ranges = []
            self.journal_path.unlink(missing_ok=True)
            with open(self.partial, "wb"):
                pass
        self.done = ranges
        self.fd = os.open(self.partial, os.O_RDWR)
        _preallocate(self.fd, size, self.partial, self.rf.path)
        os.ftruncate(self.fd, size)  # (what fallocate could not claim: holes until written)
        try:
            self.mapped = mmap.mmap(self.fd, size, prot=mmap.PROT_READ)  # (the hasher's, which closes it)
            self.mapped.madvise(mmap.MADV_SEQUENTIAL)
        except OSError:
            self.mapped = None  # (a filesystem that cannot map files: the hasher reads them)
        self.journal_fd = os.open(self.journal_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        have = sum(b - a for a, b in self.done)
        self.resumed = have > 0
        if have:
            self.ctx.stats.add(files_resumed=1)
            self.ctx.progress.update(have)
        missing, pos = [], 0
        for a, b in self.done + [[size, size]]:
            if a > pos:
                missing.append((pos, a))
            pos = max(pos, b)
        segments = _segments(missing, self.ctx.segment_size)
        self.hasher = threading.Thread(target=self._hash_loop, name=f"hub-hash-{self.rf.path[-20:]}", daemon=True)
        self.hasher.start()
        return segments

    def _mark(self, a: int, b: int) -> None:
        """Adds [a, b) to the ranges on disk (call with the condition held, or before threads run)."""
        merged = []
        for x, y in self.done:
            if y < a or x > b:
                merged.append([x, y])
            else:
                a, b = min(a, x), max(b, y)
        merged.append([a, b])
        merged.sort()
        self.done = merged

    def _frontier(self) -> int:
        return self.done[0][1] if self.done and self.done[0][0] == 0 else 0

    def fetch(self, start: int, end: int) -> None:
        journaled = start

        def landed(offset: int, n: int) -> None:
            nonlocal journaled
            stop = offset + n
            with self.cond:
                self._mark(offset, stop)
                self.cond.notify_all()
            if stop - journaled >= JOURNAL_EVERY or stop == end:
                # after the bytes: a range in the journal is always on disk
                os.write(self.journal_fd, f"{journaled} {stop}\n".encode())
                journaled = stop

        def sink(offset: int, chunk: bytes) -> None:
            os.pwrite(self.fd, chunk, offset)
            landed(offset, len(chunk))

        try:
            _stream_range(self.ctx, self.rf, start, end, sink, into=(self.fd, landed))
        except BaseException:
            with self.cond:
                self.failed = True
                self.cond.notify_all()
            raise

    def _hash_loop(self) -> None:
        """Hashes the contiguous prefix as it grows, through a read-only map of the partial file:
        the pages are hashed where they lie in the page cache, not copied out first."""
        h = self.rf.hasher()
        size = self.rf.size
        view = memoryview(self.mapped) if self.mapped is not None else None
        data = None
        try:
            while self.hashed < size:
                with self.cond:
                    while self._frontier() <= self.hashed and not self.failed:
                        self.cond.wait(1.0)
                    if self.failed:
                        return
                    upto = self._frontier()
                while self.hashed < upto:
                    step = min(8 * CHUNK, upto - self.hashed)
                    data = view[self.hashed:self.hashed + step] if view is not None else os.pread(
                        self.fd, step, self.hashed)
                    if not data:
                        return
                    h.update(data)
                    self.hashed += len(data)
        finally:
            if view is not None:
                del data  # (the last slice: the map cannot close while one is alive)
                view.release()
                self.mapped.close()
        self.digest = h.hexdigest()

    def finish(self) -> None:
        """Waits for the hash of the whole file and checks it (call after every segment is in)."""
        assert self.hasher is not None
        self.hasher.join()
        self.close()
        if self.digest is None:
            raise TransportError(f"download of {self.rf.path} is incomplete", code="Incomplete")
        _verify(self.rf, self.digest, self.partial)
        self.journal_path.unlink(missing_ok=True)

    def close(self) -> None:
        with self.cond:
            if self.digest is None:
                self.failed = True
            self.cond.notify_all()
        for fd in (self.fd, self.journal_fd):
            if fd >= 0:
                os.close(fd)
        self.fd = self.journal_fd = -1


class DownloadJob(Job):
    """Fetch one file into `partial` (resuming), verify it, then `place(partial)` puts it at its final
    path(s). `lock` guards against another process fetching the same bytes at the same time."""

    def __init__(self, ctx: Context, rf: RemoteFile, partial: Path, place: Callable[[Path], None],
                 lock_path: Path | None = None) -> None:
        super().__init__()
        self.ctx, self.rf, self.partial, self.place, self.lock_path = ctx, rf, partial, place, lock_path
        self.then: list[Callable[[], None]] = []  # run after place(): more paths with the same bytes
        self.segmented: SegmentedDownload | None = None
        self.quick = rf.size <= QUICK_SIZE
        self._filelock = None

    def tasks(self) -> list[Callable[[], None]]:
        self._acquire()
        if self.rf.size >= 2 * self.ctx.segment_size:
            self.segmented = SegmentedDownload(self.ctx, self.rf, self.partial)
            try:
                segments = self.segmented.plan()
            except BaseException:
                self.segmented.close()
                self._release()
                raise
            if not segments:
                return [lambda: None]
            return [lambda a=a, b=b: self.segmented.fetch(a, b) for a, b in segments]
        return [SingleDownload(self.ctx, self.rf, self.partial).run]

    def complete(self) -> None:
        try:
            if self.segmented is not None:
                try:
                    self.segmented.finish()
                except IntegrityError:
                    if not self.segmented.resumed:
                        raise
                    # bytes kept from an earlier run were bad (and are gone now): once more, afresh
                    SingleDownload(self.ctx, self.rf, self.partial).run()
            self.place(self.partial)
            self.ctx.stats.add(files_down=1)
        finally:
            self._release()
        for fn in self.then:
            fn()

    def _acquire(self) -> None:
        if self.lock_path is not None:
            self._filelock = FileLock(self.lock_path)
            self._filelock.acquire()

    def _release(self) -> None:
        if self.segmented is not None:
            self.segmented.close()
        if self._filelock is not None:
            self._filelock.release()
            self._filelock = None


class Downloads(Scheduler):
    """A scheduler whose jobs are downloads: a failed job still releases its lock and file handles."""

    def _finish(self, job: Job) -> None:
        if isinstance(job, DownloadJob) and (job.error is not None or self.ctx.cancelled.is_set()):
            job._release()
        super()._finish(job)


# --- uploads ----------------------------------------------------------------------------------------

def _file_body(ctx: Context, path: Path, start: int, length: int, *, spans: bool = False) -> Iterator:
    """Bytes [start, start + length) of the file, 1 MiB at a time: as bytes, or (`spans`) as
    FileSpans the client's connection sends with sendfile(2), never copied through this process."""
    with open(path, "rb") as fh:
        fh.seek(start)
        pos, end = start, start + length
        while pos < end:
            ctx.check()
            if spans:
                piece = FileSpan(fh, pos, min(CHUNK, end - pos))
                n = piece.count
            else:
                piece = fh.read(min(CHUNK, end - pos))
                if not piece:
                    raise file_changed(path, "shrank")
                n = len(piece)
            ctx.limiter.take(n)
            yield piece
            pos += n
            ctx.stats.add(bytes_up=n)
            ctx.progress.update(n)


SMALL_BODY = 256 * 1024  # sent as one buffer: the request goes out in one write, not headers then body


def _put(ctx: Context, url: str, path: Path, start: int, length: int, headers: dict | None = None) -> str:
    """PUTs bytes [start, start+length) of `path` to a self-authorising URL (with `headers`, such as
    the sha256 a checked PUT was signed with); returns the ETag. A failed attempt is sent again
    whole (a part is the unit of resumption)."""
    failures = 0
    while True:
        ctx.check()
        body = (b"".join(_file_body(ctx, path, start, length)) if length <= SMALL_BODY
                else _file_body(ctx, path, start, length, spans=True))
        try:
            resp = ctx.client.request("PUT", url, body=body,
                                      headers={"Content-Length": str(length), **(headers or {})}, retry=_ONCE,
                                      timeout=urllib3.Timeout(connect=10, read=300))
            return resp.headers.get("ETag", "")
        except TransportError as err:
            failures += 1
            retryable = err.code == "ConnectionError" or (err.status or 0) in RETRY.statuses
            signed = (headers or {}).get("x-amz-content-sha256")
            if signed and err.code in ("XAmzContentSHA256Mismatch", "BadDigest"):
                # The store refused bytes that do not hash to what the URL was signed with: the file
                # changed since it was hashed, or the bytes were damaged on the way (then: again).
                if _hash_file(path, length, start=start).hexdigest() != signed:
                    raise _changed(path, start, length) from None
                retryable = True
            if not retryable or failures >= RETRY.attempts:
                raise
            time.sleep(RETRY.delay(failures - 1))


def _changed(path: Path, start: int, length: int) -> IntegrityError:
    return IntegrityError(f"{path} changed while it was being uploaded (bytes {start:,} to {start + length:,} "
                          f"differ from when they were hashed): {RUN_AGAIN}", code="FileChanged")


def explain_refusal(err: HubClientError, path: Path, size: int, sha256: str) -> HubClientError:
    """What to raise when the hub refused an upload's bytes as not hashing to `sha256` (422): that the
    local file changed since it was hashed — the usual cause, and one the user can act on — if it no
    longer has that size and hash; otherwise the hub's own error."""
    if err.status != 422 or not sha256:
        return err
    try:
        same = os.stat(path).st_size == size and _hash_file(path).hexdigest() == sha256
    except OSError:
        same = False
    return err if same else _changed(path, 0, size)


_ONCE = type(RETRY)(attempts=1)


class UploadJob(Job):
    """Uploads one LFS object as the batch `action` says. Multipart parts run as parallel tasks;
    parts the session already holds (GET /api/v1/uploads/{upload_id}) are skipped. A checked PUT
    (one request the store checks against the sha256 it was signed with) ends with its verify
    href in `checked`, for the caller to verify with the rest of its batch (HubClient.lfs_verify_many)."""

    def __init__(self, ctx: Context, path: Path, sha256: str, size: int, action: dict,
                 verify: dict | None = None, checked: list | None = None) -> None:
        super().__init__()
        self.ctx, self.path, self.sha256, self.size, self.action = ctx, path, sha256, size, action
        self.verify, self.checked = verify, checked
        self.quick = size <= QUICK_SIZE and "chunk_size" not in (action.get("header") or {})
        self.etags: dict[int, str] = {}
        self.complete_url = action["href"]
        self.hashes: PartHashes | None = None  # (checked parts)
        self.signer: PartSigner | None = None
        self.ended = False  # (its session ended by this client: the file changed)
        self.whole_wanted = False  # (UnhashedUploadJob: PartHashes hashes the whole file too)
        self.on_whole: Callable[[str], None] | None = None
        self.fresh = False  # (a session opened just now: it holds no parts, nothing to ask about)

    def tasks(self) -> list[Callable[[], None]]:
        header = self.action.get("header") or {}
        if "chunk_size" not in header:
            sent = {k: v for k, v in header.items() if k.lower().startswith("x-amz-")}
            return [lambda: self._explained(_put, self.ctx, self.action["href"], self.path, 0, self.size, sent)]
        chunk = int(header["chunk_size"])
        # A checked session hands out no plain part URLs: each part's comes signed with its sha256.
        checked = header.get("checked") == "sha256"
        urls = {int(k): v for k, v in header.items() if k.isdigit()}
        if header.get("upload_id") and not self.fresh:
            try:
                status = self.ctx.client.upload_status(header["upload_id"])
            except HubClientError:
                status = None  # an older hub: send every part
            if status and status.get("state") == "open":
                for part in status["parts"]:
                    self.etags[part["part_number"]] = part["etag"]
                urls.update({int(k): v for k, v in status.get("part_urls", {}).items()})
                self.complete_url = status.get("complete_url") or self.complete_url
                held = sum(min(chunk, self.size - (n - 1) * chunk) for n in self.etags)
                if held:
                    self.ctx.progress.update(held)
                    self.ctx.stats.add(files_resumed=1)
        numbers = [n for n in (range(1, max(1, -(-self.size // chunk)) + 1) if checked else sorted(urls))
                   if n not in self.etags]
        if checked and (numbers or self.whole_wanted):
            self.hashes = PartHashes(self.ctx, self.path, self.size, chunk, numbers, whole=self.whole_wanted,
                                     on_whole=self.on_whole).start()
            upload_id = header["upload_id"]
            self.signer = PartSigner(self.hashes, lambda hashes: self.ctx.client.checked_part_urls(upload_id, hashes))
        tasks = []
        for n in numbers:
            start = (n - 1) * chunk
            length = min(chunk, self.size - start)
            if checked:
                tasks.append(lambda n=n, start=start, length=length: self._ended_if_changed(
                    self._checked_part, n, start, length))
            else:
                tasks.append(lambda n=n, start=start, length=length: self._ended_if_changed(
                    self._part, n, urls[n], start, length))
        return tasks or [lambda: None]

    def _ended_if_changed(self, fn: Callable, *args) -> None:
        """Runs fn; if the file turned out to have changed under the upload, its session can never be
        completed or resumed (another file, another hash): ends it at once, so that its parts and what
        it reserved of the quota are given back now rather than when it expires."""
        try:
            fn(*args)
        except IntegrityError as err:
            upload_id = (self.action.get("header") or {}).get("upload_id")
            if err.code == "FileChanged" and upload_id and not self.ended:
                self.ended = True
                with contextlib.suppress(HubClientError):
                    self.ctx.client.abort_upload(upload_id)
            raise

    def _part(self, n: int, url: str, start: int, length: int, headers: dict | None = None) -> None:
        etag = _put(self.ctx, url, self.path, start, length, headers)
        with self.lock:
            self.etags[n] = etag

    def _checked_part(self, n: int, start: int, length: int) -> None:
        """Sends part n through a URL signed with its sha256: the store checks the bytes as they land,
        so the hub need not read the file back to trust them."""
        self.ctx.check()
        sha, url = self.signer.url(n)
        self._part(n, url, start, length, {"x-amz-content-sha256": sha})

    def complete(self) -> None:
        self._ended_if_changed(self._complete)

    def _complete(self) -> None:
        header = self.action.get("header") or {}
        if "x-amz-content-sha256" in header and self.verify and self.checked is not None:
            self.checked.append((self.verify["href"], self.sha256, self.size))
        if "chunk_size" in header:
            body = {"oid": self.sha256, "parts": [{"partNumber": n, "etag": e} for n, e in sorted(self.etags.items())]}
            lfs = "application/vnd.git-lfs+json"
            # The hub reads the assembled object back to verify its sha256: allow for that.
            read = 120 + self.size / (50 * MiB)
            self._explained(self.ctx.client.request, "POST", self.complete_url, body=json.dumps(body).encode(),
                            headers={"Content-Type": lfs, "Accept": lfs},
                            timeout=urllib3.Timeout(connect=10, read=read), retry=COMPLETE_RETRY)
        self.ctx.stats.add(files_up=1)

    def _explained(self, fn: Callable, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except HubClientError as err:
            raise explain_refusal(err, self.path, self.size, self.sha256) from None


class UnhashedUploadJob(UploadJob):
    """An upload whose session was opened before the file's sha256 was known (HubClient.
    start_unhashed_upload): PartHashes hashes the whole file on a thread of its own beside the parts'
    hashes, so hashing and sending overlap instead of following each other. The sha256 is named to the
    hub as soon as it is known (a killed push's next run then resumes the session through the LFS
    batch) and again by the completion; `on_hash(sha256)` tells the caller."""

    def __init__(self, ctx: Context, path: Path, size: int, session: dict,
                 on_hash: Callable[[str], None]) -> None:
        action = {"href": session["complete_url"], "header": {
            "chunk_size": str(session["part_size"]), "upload_id": session["upload_id"], "checked": "sha256"}}
        super().__init__(ctx, path, "", size, action)
        self.upload_id, self.on_hash = session["upload_id"], on_hash
        self.whole_wanted, self.on_whole = True, self._named
        self.fresh = True  # (POST /api/v1/uploads always opens a new session)

    def _named(self, sha: str) -> None:
        """The whole file's sha256, as soon as PartHashes has it."""
        self.sha256 = sha
        self.on_hash(sha)
        try:
            self.ctx.client.name_upload_sha256(self.upload_id, sha)
        except HubClientError:
            pass  # (the completion names it too; only a resume after a kill needs it earlier)

    def complete(self) -> None:
        assert self.hashes is not None
        self._ended_if_changed(self.hashes.whole)  # (raises what stopped it: the file changed, Ctrl-C)
        super().complete()
