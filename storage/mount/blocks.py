"""A large file read through a mount: fetched block by block as reads need it, into the cache.

A StreamingBlob is one file (one sha256) of one mount process, shared by every handle open on it.
Reads ask for the blocks (BLOCK bytes) they span: a missing block is fetched by the reading thread
itself, and while the reads go forward the next READ_AHEAD blocks are fetched in a pool, up to RUN
consecutive blocks per request (a store's per-request cost is tens of milliseconds).

Bytes arrive in page-aligned buffers taken from a small pool (BufferPool), are hashed as they come
when they follow what is hashed, are served to readers from the buffer, and are written to a part
file in the cache's tmp/ with O_DIRECT by the fetcher's writer threads (the request goes on
receiving meanwhile). Measured on this kind of VM, filling fresh page cache costs ~2 s of CPU per
GiB, 7× what receiving the bytes does: O_DIRECT writes from reused buffers skip it (the kernel's own
cache of the mounted file is filled once, by FUSE). When no buffer is free, or the filesystem
refuses O_DIRECT, a block goes through the page cache like any write.

When the whole file is hashed and on disk and its sha256 matches, the part file is linked into the
cache. Bytes are served before that check (they come from the hub over the connection a download
uses); a file that fails it is dropped, and its readers get EIO from then on. A StreamingBlob that
cannot take the blob's lock (another process is filling the cache with the same file) serves its
readers all the same, from a part file it then leaves out of the cache.
"""
from __future__ import annotations

import ctypes
import errno
import logging
import mmap
import os
import threading
from typing import TYPE_CHECKING

from storage.client import IntegrityError, TransportError

if TYPE_CHECKING:
    from storage.mount.fetch import Fetcher, Source

log = logging.getLogger("hub.mount")

MiB = 1 << 20
BLOCK = 8 * MiB
READ_AHEAD = 8  # blocks fetched ahead of a sequential reader...
RUN = 4  # ...up to this many in one request
HASH_WINDOW = READ_AHEAD + RUN  # blocks past the hash whose buffers wait for it
BUFFERS = 24  # page-aligned block buffers per mount process (192 MiB at most, reused)
ALIGN = 4096  # O_DIRECT offsets, lengths and addresses

MISSING, FETCHING, PRESENT = 0, 1, 2


class BufferPool:
    """Up to `count` anonymous, page-aligned buffers of BLOCK bytes, made on demand and reused."""

    def __init__(self, count: int = BUFFERS) -> None:
        self.count = count
        self.free: list[mmap.mmap] = []
        self.made = 0
        self.lock = threading.Lock()

    def get(self) -> mmap.mmap | None:
        with self.lock:
            if self.free:
                return self.free.pop()
            if self.made < self.count:
                self.made += 1
                return mmap.mmap(-1, BLOCK)
        return None

    def spare(self) -> int:
        """How many buffers get() could give now."""
        with self.lock:
            return len(self.free) + self.count - self.made

    def put(self, buf: mmap.mmap) -> None:
        with self.lock:
            self.free.append(buf)


class StreamingBlob:
    """One large file being filled block by block (see the module docstring). Thread-safe."""

    def __init__(self, fetcher: Fetcher, src: Source) -> None:
        self.fetcher = fetcher
        self.src = src
        self.size = src.size
        self.nblocks = (src.size + BLOCK - 1) // BLOCK
        self.state = bytearray(self.nblocks)
        self.on_disk = bytearray(self.nblocks)  # written to the part file (readable through fd)
        self.on_disk_count = 0
        self.resident: dict[int, mmap.mmap] = {}  # PRESENT blocks held in a buffer
        self.filling: dict[int, mmap.mmap] = {}  # buffers of blocks being received
        self.pinned: set[int] = set()  # resident blocks being hashed: their buffers stay
        self.writing: set[int] = set()  # resident blocks handed to the writers: their buffers stay too
        self.errors: dict[int, BaseException] = {}
        self.cond = threading.Condition()
        self.users = 0
        self.bad = False
        self.verified = False
        self.committed = False
        self.closing = False
        self.busy = 0  # threads that may still use the descriptors
        cache = fetcher.cache
        self.lock = cache.lock(src.sha256)
        self.owner = self.lock.acquire(blocking=False)  # else another process fills the cache with it
        self.partial = cache.tmp_path(src.sha256)
        self.fd = os.open(self.partial, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        os.ftruncate(self.fd, self.size)
        try:
            self.dfd = os.open(self.partial, os.O_WRONLY | os.O_DIRECT)
        except (OSError, AttributeError):
            self.dfd = -1
        self.dfd_opened = self.dfd
        self.hash = src.hasher()
        self.hashed = 0  # bytes from the start that are hashed
        self.finishing = False  # the whole file is hashed: one thread checks it
        self.hash_lock = threading.Lock()
        self.frontier = 0  # where the reads that go forward have got to
        self.write_failed = False  # a block could not be written to the part file

    # --- reading ------------------------------------------------------------------------------------

    def read(self, offset: int, size: int) -> bytes:
        """Bytes [offset, offset+size) (fewer at the end of the file)."""
        while True:
            n = self.ensure(offset, size)
            if not n:
                return b""
            with self.cond:
                if self._held(offset, offset + n):
                    return b"".join(bytes(part) for part in self._parts(offset, offset + n))

    def read_into(self, offset: int, size: int, alloc) -> tuple[int, int]:
        """As read, into memory that `alloc(n)` returns the address of: (address, n), for a reply
        libfuse frees. One copy, from the block buffers or the part file."""
        while True:
            n = self.ensure(offset, size)
            with self.cond:
                if n and not self._held(offset, offset + n):
                    continue
                addr = alloc(max(n, 1))
                at = addr
                for part in self._parts(offset, offset + n):
                    src = part if isinstance(part, bytes) else ctypes.addressof(ctypes.c_char.from_buffer(part))
                    ctypes.memmove(at, src, len(part))
                    at += len(part)
                return addr, n

    def _held(self, start: int, end: int) -> bool:
        """(With cond held.) Whether [start, end) is still all present: a file the cache's disk
        refused keeps its blocks in memory only, and may have let one go since ensure()."""
        return all(self.state[i] == PRESENT for i in range(start // BLOCK, (end - 1) // BLOCK + 1))

    def _parts(self, start: int, end: int):
        """(With cond held.) [start, end) in pieces: views of the block buffers that hold them,
        else bytes read from the part file."""
        pos = start
        while pos < end:
            i = pos // BLOCK
            stop = min(end, (i + 1) * BLOCK)
            buf = self.resident.get(i) or self.filling.get(i)
            if buf is not None:
                yield memoryview(buf)[pos - i * BLOCK:stop - i * BLOCK]
            else:
                yield os.pread(self.fd, stop - pos, pos)
            pos = stop

    def shrink(self) -> None:
        """Gives back the buffers of every block already on disk — of every block, when the
        cache's disk refused the file (the file is not being read)."""
        with self.cond:
            for i in [i for i in self.resident if (self.on_disk[i] or self.write_failed) and i not in self.pinned
                      and i not in self.writing]:
                self._let_go(i)

    def _let_go(self, i: int) -> None:
        """(With cond held; never while a writer holds the buffer: it would write another block's
        bytes in its place.) Block i's buffer back to the pool; the block is read again if it is
        wanted and not on disk."""
        self.fetcher.buffers.put(self.resident.pop(i))
        if not self.on_disk[i]:
            self.state[i] = MISSING

    def ensure(self, offset: int, size: int) -> int:
        """Makes bytes [offset, offset+size) present and returns how many there are (fewer at the
        end of the file). Fetches the missing blocks they span in this thread, and — when the reads
        go forward (the kernel sends a sequential reader's requests several at a time, not quite
        in order) — the next ones in the pool."""
        end = min(offset + size, self.size)
        if offset >= end:
            return 0
        first, last = offset // BLOCK, (end - 1) // BLOCK
        with self.cond:
            sequential = offset == 0 or self.frontier - 2 * BLOCK <= offset <= self.frontier + 2 * BLOCK
            self.frontier = max(self.frontier, end) if sequential else end
            self._release_behind()
        if sequential:
            self._ahead(last + 1, min(self.nblocks, last + 1 + READ_AHEAD + RUN))
        for i in range(first, last + 1):
            self._need(i)
        return end - offset

    def _need(self, i: int, again: bool = False) -> None:
        with self.cond:
            while True:
                if self.bad:
                    raise IntegrityError(f"{self.src.label}: the bytes received do not match its sha256",
                                         code="ChecksumMismatch")
                if self.state[i] == PRESENT:
                    return
                if self.state[i] == MISSING:
                    self.state[i] = FETCHING
                    self.busy += 1
                    break
                if not self.cond.wait(timeout=5.0) and self.closing:
                    raise TransportError(f"{self.src.label}: closed while reading", code="Closed")
        try:
            self._fetch(i, 1, raise_errors=True)
        except OSError:  # (the page cache's write of a block found the disk full: now it goes to memory)
            if again or not self.write_failed:
                raise
            self._need(i, again=True)

    def _release_behind(self) -> None:
        """(With cond held.) Gives back the buffers of blocks on disk that reads have left behind
        and that the hash has passed — or will not reach soon: a block given back before it is
        hashed is read back from the part file, i.e. from the disk, as O_DIRECT kept it out of the
        page cache. (Parallel runs finish out of order, so the hash often lags the reads by a few
        blocks.)"""
        if self.write_failed:  # in memory only: keep what the reads are about to want, let the rest go
            lo, hi = self.frontier // BLOCK - 2, self.frontier // BLOCK + READ_AHEAD + RUN
            drop = [i for i in self.resident if not lo <= i <= hi and i not in self.pinned and i not in self.writing
                    and not self._hash_soon(i)]
        else:
            drop = [i for i in self.resident if self.on_disk[i] and (i + 2) * BLOCK <= self.frontier
                    and i not in self.pinned and not self._hash_soon(i)]
        for i in drop:
            self._let_go(i)

    def _hash_soon(self, i: int) -> bool:
        """Block i is not hashed yet, is within HASH_WINDOW blocks of where the hash is, and its
        buffer is not needed: a block that finds no buffer goes through the page cache, which
        costs more than reading one back."""
        return (self.hashed < (i + 1) * BLOCK and i * BLOCK < self.hashed + HASH_WINDOW * BLOCK
                and self.fetcher.buffers.spare() >= RUN)

    # --- fetching -----------------------------------------------------------------------------------

    def _ahead(self, start: int, stop: int) -> None:
        """Fetches the missing blocks in [start, stop) in the pool — once RUN of them are missing
        (or the file ends there) — consecutive ones up to RUN at a time in one request."""
        runs: list[list[int]] = []
        with self.cond:
            missing = sum(1 for i in range(start, stop) if self.state[i] == MISSING)
            if missing < RUN and stop < self.nblocks:
                return  # top up RUN blocks at a time, not one per read
            run: list[int] = []
            for i in range(start, stop):
                if self.state[i] == MISSING and not self.closing:
                    if run and (i != run[-1] + 1 or len(run) == RUN):
                        runs.append(run)
                        run = []
                    self.state[i] = FETCHING
                    run.append(i)
            if run:
                runs.append(run)
            self.busy += len(runs)
        for run in runs:
            try:
                self.fetcher.pool.submit(self._fetch, run[0], len(run), False)
            except RuntimeError:
                with self.cond:
                    for i in run:
                        self.state[i] = MISSING
                    self._unbusy()

    def _fetch(self, first: int, count: int, raise_errors: bool) -> None:
        """Fetches blocks first … first+count-1 (marked FETCHING, and counted once in busy, by the
        caller) in one request; each is PRESENT as soon as its last byte is in."""
        start = first * BLOCK
        end = min((first + count) * BLOCK, self.size)
        done = first  # the blocks before this one are in
        no_buffer: set[int] = set()

        def buffer(i: int) -> mmap.mmap | None:
            """Block i's buffer (taken from the pool at its first byte), None if none was free."""
            buf = self.filling.get(i)
            if buf is None and i not in no_buffer:
                buf = self.fetcher.buffers.get() if self.dfd >= 0 or self.write_failed else None
                if buf is None and self.write_failed:  # nowhere else to keep it (the pool grows by it)
                    buf = mmap.mmap(-1, BLOCK)
                if buf is None:
                    no_buffer.add(i)
                    self.fetcher.counters.add(unbuffered_blocks=1)
                else:
                    with self.cond:
                        self.filling[i] = buf
            return buf

        def dest(offset: int, n: int) -> memoryview | None:
            """Where the socket should put the next (up to) n bytes: their place in the block's buffer
            (no copy through a buffer of the connection's), never past the block's end."""
            i = offset // BLOCK
            buf = buffer(i)
            if buf is None:
                return None
            at = offset - i * BLOCK
            return memoryview(buf)[at:min(at + n, BLOCK)]

        def sink(offset: int, chunk) -> None:
            nonlocal done
            self._hash_in_line(start, offset, chunk)
            pos = 0
            while pos < len(chunk):  # (a chunk may end past a block's end)
                i = (offset + pos) // BLOCK
                take = min(len(chunk) - pos, (i + 1) * BLOCK - (offset + pos))
                buf = buffer(i)
                if buf is not None:
                    if not (isinstance(chunk, memoryview) and chunk.obj is buf):  # (else received in place)
                        at = offset + pos - i * BLOCK
                        buf[at:at + take] = chunk[pos:pos + take]
                else:
                    try:
                        _pwrite_all(self.fd, chunk[pos:pos + take], offset + pos)
                    except OSError as err:
                        self._refused(err)
                        raise
                pos += take
            while done < first + count and min((done + 1) * BLOCK, self.size) <= offset + len(chunk):
                self._complete(done)
                done += 1

        try:
            if self.closing:
                raise TransportError("closed", code="Closed")
            self.fetcher.read_range(self.src, start, end, sink, dest=dest)
        except BaseException as err:
            with self.cond:
                for i in range(done, first + count):
                    self.state[i] = MISSING
                    self.errors[i] = err
                    buf = self.filling.pop(i, None)
                    if buf is not None:
                        self.fetcher.buffers.put(buf)
                self._unbusy()
                self.cond.notify_all()
            if raise_errors:
                raise
            log.debug("read-ahead of %s blocks %d-%d failed: %s", self.src.label, first, first + count - 1, err)
            return
        with self.cond:
            self._unbusy()

    def _complete(self, i: int) -> None:
        """Block i is in: readers may have it, then it goes to the part file."""
        with self.cond:
            buf = self.filling.pop(i, None)
            if buf is not None:
                self.resident[i] = buf
            self.state[i] = PRESENT
            self.errors.pop(i, None)
            self.cond.notify_all()
        if buf is not None:
            self._write_behind(i, buf)
        else:
            self._on_disk(i)
        self._advance_hash()

    def _write_behind(self, i: int, buf: mmap.mmap) -> None:
        """Hands block i to the fetcher's writer threads: the request that received it goes on
        receiving (a write in line held the connection idle, and bound a cold read to the disk's
        speed: 489 MB/s through a disk throttled to 500 MB/s, 654 MB/s unthrottled). The buffer
        stays resident, serving reads, until the block is on disk; while the writes fall behind,
        new blocks find no free buffer and go through the page cache instead."""
        with self.cond:
            self.busy += 1  # the descriptors stay open until it is written
            self.writing.add(i)
        try:
            self.fetcher.writer.submit(self._write_queued, i, buf)
        except RuntimeError:  # shutting down
            with self.cond:
                self.writing.discard(i)
                self._unbusy()

    def _write_queued(self, i: int, buf: mmap.mmap) -> None:
        try:
            if not self.closing and not self.write_failed:
                self._write(i, buf)
        except OSError as err:  # (a full disk, say) the block stays in its buffer; the file never enters the cache
            self._refused(err)
        finally:
            with self.cond:
                self.writing.discard(i)
                if self.write_failed:
                    self._release_behind()
                self._unbusy()

    def _refused(self, err: OSError) -> None:
        """The cache's disk refused a write: from now on the file is served from memory, block
        buffers let go of what the reads have left behind, and it never enters the cache."""
        with self.cond:
            first, self.write_failed = not self.write_failed, True
        if first:
            log.warning("could not write %s to the cache (%s): it is served from memory, not kept", self.src.label,
                        err)

    def _write(self, i: int, buf: mmap.mmap) -> None:
        start = i * BLOCK
        n = min(BLOCK, self.size - start)
        dfd = self.dfd  # (-1 once a write was refused: blocks queued before that go through the page cache)
        aligned = n - n % ALIGN if dfd >= 0 else 0
        view = memoryview(buf)
        try:
            if aligned:
                _pwrite_all(dfd, view[:aligned], start)
        except OSError as err:  # a filesystem that takes O_DIRECT at open but not at write
            if err.errno != errno.EINVAL:
                raise  # (a full disk: not a reason to stop writing directly)
            log.debug("O_DIRECT write refused (%s); writing through the page cache", err)
            self.dfd = -1  # (the descriptor is closed with the others: another thread may hold it)
            aligned = 0
        if n > aligned:
            _pwrite_all(self.fd, view[aligned:n], start + aligned)
        self._on_disk(i)

    def _on_disk(self, i: int) -> None:
        with self.cond:
            self.on_disk[i] = 1
            self.on_disk_count += 1
            self._release_behind()
        self._maybe_commit()

    def _unbusy(self) -> None:
        """(With cond held.) One user of the descriptors less; the last one out closes them if asked."""
        self.busy -= 1
        if self.closing and self.busy == 0:
            self._close_fds()

    # --- hashing, and into the cache ------------------------------------------------------------------

    def _advance_hash(self) -> None:
        """Hashes what is present after what is hashed; one thread at a time, others return."""
        if not self.hash_lock.acquire(blocking=False):
            return
        try:
            while True:
                with self.cond:
                    pos = self.hashed
                    i = pos // BLOCK
                    if pos >= self.size or self.state[i] != PRESENT or self.closing:
                        break
                    stop = min((i + 1) * BLOCK, self.size)
                    buf = self.resident.get(i)
                    if buf is not None:
                        self.pinned.add(i)
                    self.busy += 1  # the descriptors stay open meanwhile
                try:  # (hashing 8 MiB takes milliseconds: not with the lock held)
                    if buf is not None:
                        self.hash.update(memoryview(buf)[pos - i * BLOCK:stop - i * BLOCK])
                    else:
                        self.hash.update(os.pread(self.fd, stop - pos, pos))
                finally:
                    with self.cond:
                        self.pinned.discard(i)
                        self._unbusy()
                self.hashed = stop
                with self.cond:
                    self._release_behind()  # (the buffers that waited for the hash)
            done = self.hashed >= self.size and not self.finishing
            self.finishing = self.finishing or done
        finally:
            self.hash_lock.release()
        if done:
            self._finish()
        elif self.hashed < self.size:
            # A block may have arrived while we held the lock and its thread returned: look again.
            with self.cond:
                again = self.state[self.hashed // BLOCK] == PRESENT and not self.closing
            if again:
                self._advance_hash()

    def _hash_in_line(self, start: int, offset: int, chunk) -> None:
        """Called by a request that has received [start, offset + len(chunk)): when what is hashed
        ends inside that span, hash on from there (most of a sequential read is hashed this way,
        as it arrives)."""
        end = offset + len(chunk)
        if not start <= self.hashed < end or not self.hash_lock.acquire(blocking=False):
            return
        try:
            pos = self.hashed
            if not start <= pos < end:
                return
            if pos < offset:  # received by this request a moment ago
                with self.cond:
                    for part in self._parts(pos, offset):
                        self.hash.update(part)
                pos = offset
            self.hash.update(chunk[pos - offset:])
            self.hashed = end
            if end // BLOCK != pos // BLOCK:
                with self.cond:
                    self._release_behind()
            done = end >= self.size and not self.finishing
            self.finishing = self.finishing or done
        finally:
            self.hash_lock.release()
        if done:
            self._finish()

    def _finish(self) -> None:
        try:
            self.src.check(self.hash.hexdigest())
        except IntegrityError as err:
            log.error("%s; dropped, reads fail with EIO", err)
            with self.cond:
                self.bad = True
                self.cond.notify_all()
            return
        self.fetcher.counters.add(files_fetched=1)
        with self.cond:
            self.verified = True
        self._maybe_commit()

    def _maybe_commit(self) -> None:
        """Links the part file into the cache once it is verified and all on disk (one thread)."""
        with self.cond:
            if (not self.verified or self.on_disk_count < self.nblocks or self.committed or self.closing
                    or self.write_failed):
                return
            self.committed = True
            self.busy += 1
        try:
            if not self.owner:
                self.owner = self.lock.acquire(blocking=False)
            cache = self.fetcher.cache
            if self.owner and cache.get(self.src.sha256, self.size) is None:
                tmp = cache.tmp_path(self.src.sha256)
                try:
                    os.link(self.partial, tmp)
                    cache.commit(tmp, self.src.sha256, verified=True)
                    self.partial.unlink(missing_ok=True)  # (its descriptors still read it)
                except OSError as err:
                    tmp.unlink(missing_ok=True)
                    log.warning("could not add %s to the cache: %s", self.src.label, err)
        finally:
            self.lock.release()
            with self.cond:
                self._unbusy()

    # --- the end ------------------------------------------------------------------------------------

    def close(self) -> None:
        with self.cond:
            if self.closing:
                return
            self.closing = True
            self.cond.notify_all()
            if self.busy == 0:
                self._close_fds()
        self.lock.release()

    def _close_fds(self) -> None:
        """(With cond held, nobody busy.)"""
        for buf in list(self.resident.values()) + list(self.filling.values()):
            self.fetcher.buffers.put(buf)
        self.resident.clear()
        self.filling.clear()
        for fd in (self.dfd_opened, self.fd):
            if fd >= 0:
                os.close(fd)
        self.fd = self.dfd = self.dfd_opened = -1
        self.partial.unlink(missing_ok=True)


def _pwrite_all(fd: int, chunk, offset: int) -> None:
    view = memoryview(chunk)
    while view:
        n = os.pwrite(fd, view, offset)
        view = view[n:]
        offset += n
