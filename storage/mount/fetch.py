"""Bytes for the mounts: whole small files into the shared cache, large files in blocks.

* A file below WHOLE_FILE is fetched in one GET when it is opened (or prefetched when its directory
  is listed), verified by sha256 and put in the cache; reads are then pread(2) on the cached blob.
  When the cache's disk refuses it (full — after the least recently used blobs made room, if they
  could —, read-only, failing) the open file is served from memory instead and not kept.
* A larger file is a StreamingBlob (storage.mount.blocks): fetched block by block as reads need
  it, with read-ahead for sequential readers, verified, then added to the cache.
* Two processes never fetch the same blob at once: the fetcher holds the blob's lock (see
  storage.transfer.blobcache).

Every request goes through the mount's client (bounded retries with backoff); nothing waits forever.
"""
from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import urllib3

from storage.client import RETRYABLE_ERRORS, HubClient, IntegrityError, TransportError, body_chunks, digests
from storage.mount.blocks import BLOCK, BufferPool, StreamingBlob, _pwrite_all
from storage.mount.common import MOUNT_RETRY
from storage.transfer.blobcache import BlobCache

log = logging.getLogger("hub.mount")

WHOLE_FILE = 2 * BLOCK  # below this a file is fetched whole, at open
IDLE_STREAMS = 4  # large files kept with their part files after their last close
LOCK_WAIT = 120.0  # seconds to wait for another process fetching the same blob, then fetch anyway
URL_REUSE = 300.0  # seconds a redirect target (a presigned store URL) is reused without asking again
WRITERS = 2  # threads writing large files' blocks to the cache (O_DIRECT: the interpreter is free meanwhile)
PREFETCH_QUIET = 0.02  # seconds without a metadata request before the prefetch starts another file
PREFETCH_PATIENCE = 2.0  # ...or after this long waiting for such a gap
REFUSED_PAUSE = 30.0  # seconds the prefetch stops after the cache's disk refused a file


@dataclass
class Source:
    """Where one file's bytes come from. `url` is the hub's URL for it (the manifest's presigned URL
    while it is fresh, else one the hub redirects to the store); `fresh_url`, if given, asks the hub
    for a new one after the store refused the old (an expired presigned URL)."""

    sha256: str
    size: int
    label: str  # the path, for log lines
    url: str
    fresh_url: Callable[[], str] | None = None
    direct: tuple[str, float] | None = field(default=None, repr=False)  # (redirect target, when learnt)
    blake3: str = ""  # recorded by the hub beside a checked sha256: the bytes are checked against it

    def hasher(self):
        return digests.hasher(self.blake3)

    def check(self, digest: str) -> None:
        """Raises IntegrityError unless `digest` (of `hasher()`) is that of the right bytes."""
        digests.check(self.label, digest, self.sha256, self.blake3)


@dataclass
class Counters:
    files_fetched: int = 0
    bytes_fetched: int = 0
    cache_hits: int = 0
    prefetched: int = 0
    unbuffered_blocks: int = 0  # large files' blocks that found no free buffer: written through the page cache
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, **counts: int) -> None:
        with self.lock:
            for k, v in counts.items():
                setattr(self, k, getattr(self, k) + v)

    def as_dict(self) -> dict:
        with self.lock:
            return {"files_fetched": self.files_fetched, "bytes_fetched": self.bytes_fetched,
                    "cache_hits": self.cache_hits, "prefetched": self.prefetched,
                    "unbuffered_blocks": self.unbuffered_blocks}


class Fetcher:
    """Fetches files of one mount into `cache`. Thread-safe."""

    def __init__(self, client: HubClient, cache: BlobCache, *, workers: int = 4, prefetch_workers: int = 16) -> None:
        self.client = client
        self.cache = cache
        self.counters = Counters()
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hub-block")
        self.writer = ThreadPoolExecutor(max_workers=WRITERS, thread_name_prefix="hub-write")  # blocks to the cache
        self.buffers = BufferPool()
        self.prefetch_pool = ThreadPoolExecutor(max_workers=prefetch_workers, thread_name_prefix="hub-prefetch")
        self._prefetch_slots = threading.BoundedSemaphore(prefetch_workers * 4)
        self._mu = threading.Lock()
        self._inflight: dict[str, Future] = {}
        self._streams: dict[str, StreamingBlob] = {}
        self._idle: OrderedDict[str, StreamingBlob] = OrderedDict()
        self._batches: deque = deque()
        self._feeder: threading.Thread | None = None
        self._quiet_from = 0.0  # monotonic time the prefetch may start files again
        self._refused_at: float | None = None  # monotonic time the cache's disk last refused a file
        self.closed = False

    # --- HTTP ---------------------------------------------------------------------------------------

    def _open(self, src: Source, start: int, end: int) -> urllib3.BaseHTTPResponse:
        """A streaming response for bytes [start, end): from the remembered redirect target while it
        is young, else from the hub (whose redirect, if any, is remembered)."""
        headers = {"Range": f"bytes={start}-{end - 1}"}
        if src.direct and time.monotonic() - src.direct[1] < URL_REUSE:
            try:
                return self._ranged(src.direct[0], headers, src)
            except TransportError as err:
                if err.status not in (400, 401, 403, 404):
                    raise
            src.direct = None  # expired or refused: ask the hub again
        url = src.url
        for attempt in (0, 1):
            resp = self.client.request("GET", url, headers=headers, preload=False, follow=False,
                                       timeout=urllib3.Timeout(connect=5, read=60))
            if resp.status in (301, 302, 303, 307, 308):
                location = resp.headers.get("Location")
                resp.drain_conn()
                resp.release_conn()
                if not location:
                    raise TransportError(f"{src.label}: the hub redirected nowhere", code="BadRedirect")
                from urllib.parse import urljoin

                location = urljoin(url, location)
                try:
                    resp = self._ranged(location, headers, src)
                except TransportError as err:
                    if attempt == 0 and err.status in (400, 401, 403) and src.fresh_url is not None:
                        url = src.url = src.fresh_url()  # the manifest's presigned URL expired
                        continue
                    raise
                src.direct = (location, time.monotonic())
                return resp
            return self._check_range(resp, src)
        raise TransportError(f"{src.label}: no working download URL", code="NoURL")

    def _ranged(self, url: str, headers: dict, src: Source) -> urllib3.BaseHTTPResponse:
        resp = self.client.request("GET", url, headers=headers, preload=False,
                                   timeout=urllib3.Timeout(connect=5, read=60))
        return self._check_range(resp, src)

    @staticmethod
    def _check_range(resp: urllib3.BaseHTTPResponse, src: Source) -> urllib3.BaseHTTPResponse:
        if resp.status != 206 and not (resp.status == 200 and src.size <= int(resp.headers.get("Content-Length", -1))):
            resp.drain_conn()
            resp.release_conn()
            raise TransportError(f"{src.label}: the server answered HTTP {resp.status} to a ranged read",
                                 code="RangeIgnored", status=resp.status)
        return resp

    def read_range(self, src: Source, start: int, end: int, sink: Callable[[int, bytes], None],
                   dest: Callable[[int, int], memoryview | None] | None = None) -> None:
        """Calls sink(offset, chunk) for the bytes [start, end) — a chunk is valid during the call
        only — reconnecting after a failure from the last byte received (MOUNT_RETRY.attempts failures in a row give up).
        `dest(offset, n)`, if given, may name the memory the next bytes (up to n) are received into
        (the chunk is then a view of it), or None for a buffer of this thread's."""
        pos = start
        failures = 0

        def into(n: int) -> memoryview | None:
            return dest(pos, n)  # (where the bytes from `pos` on go, as the loop below has advanced it)

        while pos < end:
            try:
                resp = self._open(src, pos, end)
                try:
                    if resp.status == 200 and pos:  # a server that ignored the range
                        for _skipped in body_chunks(resp, pos):
                            pass
                    for chunk in body_chunks(resp, end - pos, None if dest is None else into):
                        sink(pos, chunk)
                        pos += len(chunk)
                        failures = 0
                finally:
                    if resp.status == 200 and pos < src.size:
                        resp.close()  # the rest of a whole file we did not ask for: not worth reading
                    resp.release_conn()
                if pos < end:
                    raise urllib3.exceptions.ProtocolError(f"connection closed at byte {pos} of {end}")
            except RETRYABLE_ERRORS as err:
                failures += 1
                if failures >= MOUNT_RETRY.attempts or self.closed:
                    raise TransportError(f"reading {src.label} kept failing: {err}", code="ConnectionError") from err
                wait = MOUNT_RETRY.delay(failures - 1)
                log.info("reading %s bytes %d-%d failed (%s); again from byte %d in %.1f s",
                         src.label, start, end - 1, err, pos, wait)
                time.sleep(wait)
        self.counters.add(bytes_fetched=end - start)

    # --- whole files ----------------------------------------------------------------------------------

    def ensure_cached(self, src: Source, *, prefetch: bool = False) -> bytearray | None:
        """Makes sure the cache holds the whole file, verified, and returns None — or, when the
        cache's disk refused it, returns its verified bytes. Concurrent calls for the same bytes
        (other threads, other processes) wait for the one fetch."""
        if self.cache.get(src.sha256, src.size) is not None:
            if not prefetch:
                self.counters.add(cache_hits=1)
            return None
        with self._mu:
            fut = self._inflight.get(src.sha256)
            mine = fut is None
            if mine:
                fut = self._inflight[src.sha256] = Future()
        if not mine:
            return fut.result()
        try:
            left = self._fetch_whole(src, prefetch)
            fut.set_result(left)
            return left
        except BaseException as err:
            fut.set_exception(err)
            raise
        finally:
            with self._mu:
                self._inflight.pop(src.sha256, None)

    def _fetch_whole(self, src: Source, prefetch: bool) -> bytearray | None:
        lock = self.cache.lock(src.sha256)
        deadline = time.monotonic() + LOCK_WAIT
        while True:  # another process fetches it: wait, but not forever
            try:
                if lock.acquire(blocking=False) or time.monotonic() > deadline:
                    break
            except OSError as err:  # (the lock file cannot be created: the cache's disk is full)
                log.debug("no lock for %s: %s", src.label, err)
                break
            time.sleep(0.02)
        try:
            if self.cache.get(src.sha256, src.size) is not None:
                self.counters.add(cache_hits=0 if prefetch else 1)
                return None
            buf = bytearray()
            h = src.hasher()

            def sink(_offset: int, chunk: bytes) -> None:
                buf.extend(chunk)
                h.update(chunk)

            if src.size:
                self.read_range(src, 0, src.size, sink)
            if len(buf) != src.size:
                raise IntegrityError(f"{src.label}: {len(buf)} bytes received, not {src.size}", code="ChecksumMismatch")
            src.check(h.hexdigest())
            self.counters.add(files_fetched=1, prefetched=1 if prefetch else 0)
            return None if self._keep(src, buf) else buf
        finally:
            lock.release()

    def _keep(self, src: Source, buf: bytearray) -> bool:
        """Puts verified bytes in the cache; on a full disk, after the least recently used blobs
        made room for them. False (and a warning, once a while) if the disk refuses them anyway, or
        if they would push out more than half the cache (as BlobCache.adopt: a file bigger than the
        limit was evicted as soon as it was added, and opening it failed)."""
        if len(buf) > self.cache.limit // 2:
            log.debug("%s is served from memory: %d bytes, the cache holds %d", src.label, len(buf), self.cache.limit)
            return False
        for attempt in (0, 1):
            try:
                self.cache.put_bytes(src.sha256, buf, verified=True)
                return True
            except OSError as err:
                full = err.errno in (errno.ENOSPC, errno.EDQUOT)
                if attempt == 0 and full and self.cache.evict(max(0, self.cache.usage() - 2 * len(buf))):
                    continue
                with self._mu:
                    quiet = self._refusing()
                    self._refused_at = time.monotonic()
                if not quiet:
                    log.warning("could not write %s to the cache (%s): files are served from memory and not kept "
                                "until it can take them%s", src.label, err,
                                " — free some space on its disk" if full else "")
                return False
        return False

    def _refusing(self) -> bool:
        """Whether the cache's disk refused a file within the last REFUSED_PAUSE seconds."""
        return self._refused_at is not None and time.monotonic() - self._refused_at < REFUSED_PAUSE

    def open_whole(self, src: Source) -> int:
        """A descriptor of the cached file, fetching it first if needed."""
        for _ in range(3):
            fd = self.cache.open(src.sha256, src.size)
            if fd is not None:
                return fd
            left = self.ensure_cached(src)
            if left is not None:
                return _in_memory(src, left)
            fd = self.cache.open(src.sha256, src.size)
            if fd is not None:
                return fd  # (evicted between the two calls: rare, try again)
        raise TransportError(f"{src.label}: the cache keeps losing this file; is HUB_CACHE_SIZE too small?",
                             code="CacheTooSmall")

    def download_to(self, src: Source, fd: int) -> None:
        """Writes the whole file, verified, to the (empty) descriptor `fd`: a copy of the cached
        blob, else fetched (small files through the cache, large ones straight into `fd`)."""
        cached = self.cache.open(src.sha256, src.size)
        if cached is None and src.size < WHOLE_FILE:
            left = self.ensure_cached(src)
            if left is not None:  # (the cache's disk refused it)
                _pwrite_all(fd, left, 0)
                return
            cached = self.open_whole(src)
        if cached is not None:
            try:
                offset = 0
                while offset < src.size:
                    n = os.copy_file_range(cached, fd, src.size - offset, offset, offset)
                    if n == 0:
                        raise IntegrityError(f"{src.label}: the cached copy is short", code="ShortCache")
                    offset += n
            finally:
                os.close(cached)
            return
        h = src.hasher()

        def sink(offset: int, chunk: bytes) -> None:
            _pwrite_all(fd, chunk, offset)
            h.update(chunk)

        self.read_range(src, 0, src.size, sink)
        src.check(h.hexdigest())
        self.counters.add(files_fetched=1)

    def prefetch(self, sources: Iterable[Source], *, max_files: int, max_bytes: int) -> None:
        """Fetches small files in the background, a bounded number at a time, in the order given
        (the caller returns at once; batches queue behind each other). Failures are left for the
        read that needs the file to report."""
        with self._mu:
            self._batches.append((iter(sources), max_files, max_bytes))
            if self._feeder is None or not self._feeder.is_alive():
                self._feeder = threading.Thread(target=self._feed, name="hub-prefetch-feed", daemon=True)
                self._feeder.start()

    def _feed(self) -> None:
        while not self.closed:
            with self._mu:
                if not self._batches:
                    self._feeder = None
                    return
                sources, max_files, max_bytes = self._batches.popleft()
            files = total = 0
            for src in sources:
                if self.closed or files >= max_files or total + src.size > max_bytes:
                    break
                if self.cache.get(src.sha256, src.size) is not None:
                    continue
                files += 1
                total += src.size
                self._prefetch_slots.acquire()
                try:
                    self.prefetch_pool.submit(self._prefetch_one, src)
                except RuntimeError:  # shutting down
                    self._prefetch_slots.release()
                    return

    def metadata_request(self) -> None:
        """A FUSE request that only asks about names and attributes has come in: the prefetch lets
        a burst of them (`ls -lR`, `find`, `du`: thousands back to back, each a round trip through
        this process) go first. Its files are guesses; each costs the interpreter and the CPU
        (shared with the store on a small machine) what the burst's requests wait for — `ls -lR`
        of 5,000 files took 5.5 s beside it, 0.4 s without. Reads do not pause it."""
        self._quiet_from = time.monotonic() + PREFETCH_QUIET

    def _wait_quiet(self) -> None:
        """Until metadata requests leave a gap — or PREFETCH_PATIENCE has passed: requests that
        never stop (a program polling attributes) must not stop the prefetch for good."""
        give_up = time.monotonic() + PREFETCH_PATIENCE
        while not self.closed:
            wait = min(self._quiet_from, give_up) - time.monotonic()
            if wait <= 0:
                return
            time.sleep(wait)

    def _prefetch_one(self, src: Source) -> None:
        try:
            self._wait_quiet()
            if not self.closed and not self._refusing():  # (fetched for nothing while the cache's disk refuses them)
                self.ensure_cached(src, prefetch=True)
        except Exception as err:  # noqa: BLE001 - the read that needs the file reports it
            log.debug("prefetch of %s failed: %s", src.label, err)
        finally:
            self._prefetch_slots.release()

    # --- large files --------------------------------------------------------------------------------

    def stream(self, src: Source) -> StreamingBlob:
        """The StreamingBlob of this file, shared by every open handle of it; call release() once
        per call."""
        with self._mu:
            blob = self._streams.get(src.sha256)
            if blob is None or blob.bad:
                blob = self._idle.pop(src.sha256, None)
                if blob is None or blob.bad:
                    blob = StreamingBlob(self, src)
                self._streams[src.sha256] = blob
            self._idle.pop(src.sha256, None)
            blob.users += 1
            return blob

    def release(self, blob: StreamingBlob) -> None:
        drop: list[StreamingBlob] = []
        with self._mu:
            blob.users -= 1
            if blob.users > 0:
                return
            if self._streams.get(blob.src.sha256) is blob:
                del self._streams[blob.src.sha256]
            if blob.bad or blob.committed:
                drop.append(blob)
            else:
                blob.shrink()
                self._idle[blob.src.sha256] = blob
                while len(self._idle) > IDLE_STREAMS:
                    drop.append(self._idle.popitem(last=False)[1])
        for b in drop:
            b.close()

    def close(self) -> None:
        self.closed = True
        with self._mu:
            blobs = list(self._streams.values()) + list(self._idle.values())
            self._streams.clear()
            self._idle.clear()
        for b in blobs:
            b.close()
        self.prefetch_pool.shutdown(wait=False, cancel_futures=True)
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.writer.shutdown(wait=False)  # (queued writes of closed blobs return at once and let their files go)


def _in_memory(src: Source, data: bytearray) -> int:
    """A descriptor of `data` in memory (memfd), for reads of a file the cache could not keep; its
    memory goes with the last descriptor."""
    fd = os.memfd_create(f"hub-{src.sha256[:12]}", os.MFD_CLOEXEC)
    try:
        _pwrite_all(fd, data, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd
