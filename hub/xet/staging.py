"""Write-behind of xorbs: an upload waits for one write of its bytes to the store, not two.

On an S3 store every file that arrives through Xet is stored twice: as the xorbs the client sent
(Xet downloads and later uploads' dedup read them) and as the sha256 blob the hub rebuilds from them
(every other door serves it, and the commit names it). A xorb that passed its checks is kept on the
disk of the server that received it (HUB_DATA_DIR/xet-staged, its row `in_store=False`,
`staged_on=NODE`) and written to the store HUB_XET_WRITE_BEHIND seconds later by a thread of that
server, so the upload (xorbs, shard, commit) waits only for the blob. Nothing is lost meanwhile:

* the shard rebuilds its files from the staged copies (they were verified on arrival);
* a Xet download of a file reading staged xorbs writes them first (`ensure_in_store`), on this server,
  or flags them `wanted` and waits for the server holding them, whose writer looks for such flags
  twice a second; until then HEAD/tree entries advertise Xet only on the server that holds them
  (`elsewhere`), and every other client reads the blob over HTTP;
* a server that died with xorbs staged: `recover` (hub_gc) writes them from its disk if it is that
  server, else rebuilds each xorb from the blobs of the files that read it (a xorb's hash depends
  on its chunks, not their compression: the chunks go in uncompressed) and drops the xorbs no
  recorded file reads (chunks of an upload that never finished: the client sends them again).

The local backend (objects on this disk already) writes xorbs straight away: there is no second
network write to save. Written xorbs stay an hour in HUB_DATA_DIR/xet-cache (`cache_dir`): a shard
rebuilds its files from this disk rather than reading the xorbs back from the store.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import socket
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

from hub.content import blobs
from hub.errors import StorageUnavailable
from hub.quotas import services as quotas
from hub.quotas.models import Reservation
from hub.xet import format as xf
from hub.xet.models import INDEX_ENTRY, XORB_PURPOSE, XetFile, Xorb, xorb_key

log = logging.getLogger("hub.xet")

# This server, as far as staged xorbs go: its host and its data directory (two hubs on one machine
# keep separate disks).
NODE = f"{socket.gethostname()[:60]}:{hashlib.sha256(str(settings.HUB_DATA_DIR).encode()).hexdigest()[:16]}"
WAIT_SECONDS = 60  # how long a request waits for xorbs another server is writing


CACHE_SECONDS = 3600  # how long a xorb stays in the local cache after it arrived
_pruned = [0.0]


def cache_dir() -> Path:
    """Xorbs received lately, on this machine's disk (HUB_DATA_DIR/xet-cache), for the rebuild of the
    files their shard names: the shard normally follows its xorbs within seconds. Entries go after
    CACHE_SECONDS; a shard that finds none (another machine got the xorbs, or they are old) reads
    from the store."""
    path = Path(settings.HUB_DATA_DIR) / "xet-cache"
    path.mkdir(exist_ok=True)
    if time.monotonic() - _pruned[0] > 60:
        _pruned[0] = time.monotonic()
        cutoff = time.time() - CACHE_SECONDS
        for entry in os.scandir(path):
            try:
                if entry.stat().st_mtime < cutoff:
                    os.unlink(entry.path)
            except FileNotFoundError:
                pass
    return path


def staged_dir() -> Path:
    path = Path(settings.HUB_DATA_DIR) / "xet-staged"
    path.mkdir(exist_ok=True)
    return path


def keep(spool_path: str, hash_hex: str) -> bool:
    """Keeps a verified xorb's bytes (the file at spool_path) on this disk when the store is remote:
    staged for the writer (HUB_XET_WRITE_BEHIND > 0; the caller records the row with
    in_store=False, staged_on=NODE, then calls `wake`) or in the cache, for the rebuild of the
    shard that follows. (Linked, not moved: the caller may still send the spool; boto3 closes the
    file it sends, which deletes a temporary file.) Returns whether it was staged."""
    if blobs.object_store().local_path(xorb_key(hash_hex)) is not None:
        return False  # (the local backend: the object is on this disk already)
    staged = settings.HUB_XET_WRITE_BEHIND > 0
    with contextlib.suppress(FileExistsError):  # (the same xorb, received twice at once)
        os.link(spool_path, (staged_dir() if staged else cache_dir()) / hash_hex)
    return staged


def write(hash_hex: str) -> bool:
    """Writes a xorb staged on this server to the store and records it there. False if this server
    holds no copy (another server does, or it was lost: `recover`)."""
    path = staged_dir() / hash_hex
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        return False
    store = blobs.object_store()
    with fh:
        store.put_stream(xorb_key(hash_hex), fh, os.fstat(fh.fileno()).st_size)
    if not Xorb.objects.filter(pk=hash_hex, in_store=False).update(in_store=True, staged_on=""):
        if not Xorb.objects.filter(pk=hash_hex).exists():  # collected meanwhile: no object without a row
            store.delete(xorb_key(hash_hex))
    with contextlib.suppress(FileNotFoundError):  # now a plain cache entry (pruned within the hour)
        os.replace(path, cache_dir() / hash_hex)
    return True


def elsewhere() -> set[str]:
    """Xorbs staged on other servers, not yet in the store (normally none)."""
    return set(Xorb.objects.filter(in_store=False).exclude(staged_on=NODE).values_list("hash", flat=True))


def ensure_in_store(hashes: set[str]) -> None:
    """Every one of these xorbs in the store: the ones staged here are written now, the ones staged
    on another server are waited for (WAIT_SECONDS, then StorageUnavailable: retry)."""
    pending = dict(Xorb.objects.filter(pk__in=hashes, in_store=False).values_list("hash", "staged_on"))
    for h, node in pending.items():
        if node == NODE:
            write(h)
    away = [h for h, n in pending.items() if n != NODE]
    if away:  # (their server's writer looks for these twice a second)
        Xorb.objects.filter(pk__in=away, in_store=False).update(wanted=True)
    deadline = time.monotonic() + WAIT_SECONDS
    while away and Xorb.objects.filter(pk__in=away, in_store=False).exists():
        if time.monotonic() > deadline:
            raise StorageUnavailable("some chunks of this file are still being written to the store by the "
                                     "server that received them; retry in a minute (or download it over HTTP)")
        time.sleep(0.5)


# --- the writer thread ---------------------------------------------------------------------------

_lock = threading.Lock()
_thread: list[threading.Thread | None] = [None]


def wake() -> None:
    """Makes sure this process's writer runs (it stops when nothing is staged here)."""
    with _lock:
        if _thread[0] is None or not _thread[0].is_alive():
            _thread[0] = threading.Thread(target=_writer, name="xet-write-behind", daemon=True)
            _thread[0].start()


def _writer() -> None:
    """Writes this server's staged xorbs once they are HUB_XET_WRITE_BEHIND seconds old, oldest first.
    One process of the server writes at a time (a lock file); the others wait their turn, so a
    worker that dies leaves its xorbs to the next."""
    delay = timedelta(seconds=settings.HUB_XET_WRITE_BEHIND)
    lock = open(staged_dir() / ".writer.lock", "a")
    try:
        while True:
            close_old_connections()
            rows = list(Xorb.objects.filter(in_store=False, staged_on=NODE).order_by("-wanted", "created")
                        .values_list("hash", "created", "wanted")[:100])
            if not rows:
                with _lock:
                    _thread[0] = None
                return
            if not rows[0][2] and timezone.now() < rows[0][1] + delay:
                # (awake twice a second: another server may want one of these now)
                time.sleep(min(0.5, max(0.05, (rows[0][1] + delay - timezone.now()).total_seconds())))
                continue
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                time.sleep(1.0)
                continue
            try:
                for h, created, wanted in rows:
                    if not wanted and timezone.now() < created + delay:
                        break
                    try:
                        if not write(h):
                            log.warning("xet: staged xorb %s has no copy on this server; hub_gc rebuilds it", h)
                            Xorb.objects.filter(pk=h, in_store=False, staged_on=NODE).update(staged_on="(lost)")
                    except Exception:  # noqa: BLE001 — the store is down: try again in a while
                        log.exception("xet: writing staged xorb %s to the store failed; retrying", h)
                        time.sleep(5.0)
                        break
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
    except Exception:  # noqa: BLE001 — the database is down: the next upload or start wakes a writer
        log.exception("xet: the write-behind thread stopped")
        with _lock:
            _thread[0] = None
    finally:
        lock.close()
        connection.close()


def resume() -> None:
    """At a server's start: writes what an earlier process of this server left staged."""
    try:
        if settings.HUB_XET_WRITE_BEHIND > 0 and Xorb.objects.filter(in_store=False, staged_on=NODE).exists():
            wake()
    except Exception:  # noqa: BLE001 — no database yet (migrations to come): nothing to resume
        log.debug("xet: no staged xorbs checked at start", exc_info=True)
    finally:
        connection.close()


# --- recovery ------------------------------------------------------------------------------------


def recover(older_than: timedelta) -> tuple[int, int]:
    """Xorbs staged longer than `older_than` whose server did not write them: written from this disk
    if it holds them, else rebuilt from the blobs of the files that read them; the ones no file
    reads are dropped. Returns (written or rebuilt, dropped)."""
    cutoff = timezone.now() - older_than
    done = dropped = 0
    for x in Xorb.objects.filter(in_store=False, created__lt=cutoff).order_by("created")[:1000]:
        if write(x.hash) or rebuild(x):  # (write: if this disk holds it)
            done += 1
        elif not x.files.exists():
            if Xorb.objects.filter(pk=x.hash, in_store=False).delete()[0]:
                for r in Reservation.objects.filter(purpose=XORB_PURPOSE, sha256=x.hash):
                    quotas.release(r)  # (its upload never finished: nothing of it is charged)
            dropped += 1
            log.warning("xet: staged xorb %s was lost before it was stored; no file reads it, dropped", x.hash)
        else:
            log.error("xet: staged xorb %s was lost and its files do not cover all its chunks", x.hash)
    # copies this server staged whose xorbs were written by another or collected meanwhile
    waiting = set(Xorb.objects.filter(in_store=False).values_list("hash", flat=True))
    for entry in os.scandir(staged_dir()):
        with contextlib.suppress(FileNotFoundError):
            if (not entry.name.startswith(".") and entry.name not in waiting
                    and entry.stat().st_mtime < cutoff.timestamp()):
                os.unlink(entry.path)
    return done, dropped


def rebuild(x: Xorb) -> bool:
    """Writes xorb `x` from the blobs of the files that read it (each chunk checked against the
    index, stored uncompressed) and records its new layout. False if they do not cover every chunk."""
    chunks = x.chunks()
    where: dict[int, tuple[str, int]] = {}  # chunk -> (blob key, offset in the blob)
    for f in XetFile.objects.filter(xorbs=x).select_related("blob"):
        others = {o.hash: o.chunks() for o in Xorb.objects.filter(pk__in={t[0] for t in f.terms})}
        pos = 0
        for xh, first, end in f.terms:
            for i in range(first, end):
                if xh == x.hash:
                    where.setdefault(i, (blobs.key_of(f.blob), pos))
                pos += others[xh][i][3]
        if len(where) == len(chunks):
            break
    if len(where) != len(chunks):
        return False
    store = blobs.object_store()
    index, end = [], 0
    with tempfile.TemporaryFile(dir=staged_dir()) as spool:
        for i, (h, _, _, size) in enumerate(chunks):
            key, offset = where[i]
            data = b"".join(store.read(key, offset, offset + size))
            if len(data) != size or xf.chunk_hash(data) != h:
                log.error("xet: rebuilding xorb %s: chunk %d does not match in blob %s", x.hash, i, key)
                return False
            piece = xf.encode_chunk(data, xf.SCHEME_NONE)
            spool.write(piece)
            end += len(piece)
            index.append(INDEX_ENTRY.pack(h, end, size))
        spool.flush()
        spool.seek(0)
        store.put_stream(xorb_key(x.hash), spool, end)
    Xorb.objects.filter(pk=x.hash, in_store=False).update(in_store=True, staged_on="", size=end,
                                                           index=b"".join(index))
    log.info("xet: xorb %s rebuilt from its files' blobs (%d chunks)", x.hash, len(chunks))
    return True
