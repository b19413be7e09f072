"""The Xet door's domain: xorbs in, shards checked, files rebuilt into blobs, reconstructions out.

How bytes arrive (the client chunks, dedups against what it knows and sends):

1. **Xorbs** (`store_xorb`): quota for the bytes is reserved before they are read; every chunk is
   parsed with bounds, decompressed and hashed, and the Merkle root must equal the xorb's name. Only
   then is it stored (`xorbs/<ab>/<hash>`) and indexed. The reservation waits HUB_COMMIT_WINDOW for
   the shard and commit that use it.
2. **A shard** (`accept_shard`) lists files as terms over xorbs. Nothing in it is taken on trust:
   every xorb it names is stored here, every range is in bounds, the sizes add up, every verification
   entry equals the hash of the hub's own chunk hashes (so nobody can point at another tenant's
   chunks by knowing their hashes), the file hash matches. Then each new file is rebuilt from the
   stored chunks, hashed with sha256 and stored as a blob (hub.content.blobs.ingest_stream): the
   sha256 the client claims is bound to it only if the bytes hash to it. The blob's quota is
   reserved for the commit to come (as an LFS upload's is), and the xorbs' reservations are released.
3. The commit names the blob by sha256 as any LFS file: nothing else in the hub changes. Other doors
   serve the blob; Xet downloads read the xorbs (`reconstruction`).

Xorbs stay HUB_XET_RETENTION after a shard last named them (`collect`): a client's shard cache lets it
reuse xorbs it uploaded for about three weeks without sending them again.
"""
from __future__ import annotations

import io
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from hub.content import blobs, serving
from hub.content.models import Blob
from hub.errors import BadRequest, HubError
from hub.quotas import services as quotas
from hub.quotas.models import Reservation
from hub.xet import format as xf
from hub.xet import staging
from hub.xet.models import INDEX_ENTRY, XORB_PURPOSE, XetChunk, XetFile, Xorb, xorb_key

log = logging.getLogger("hub.xet")

MAX_SHARD_BYTES = 64 * 2**20
BODY_BLOCK = 2**20  # how much of a request body a xorb upload reads at a time


class XetFormatError(BadRequest):
    code = "XetFormatError"


def check_hash(value: str, what: str = "hash") -> str:
    try:
        xf.hash_from_hex(value)
    except xf.FormatError:
        raise XetFormatError(f"invalid {what} {value[:80]!r}: expected 64 hexadecimal characters") from None
    return value.lower()


# --- xorbs ---------------------------------------------------------------------------------------


def store_xorb(hash_hex: str, read: Callable[[int], bytes], length: int, *, user, ns) -> bool:
    """Receives a xorb of `length` bytes from `read`. Returns False if it was stored already (its bytes
    are read and dropped). Raises QuotaExceeded before reading, XetFormatError for bytes that are not
    the xorb they claim to be (nothing is stored then)."""
    hash_hex = check_hash(hash_hex, "xorb hash")
    if length > xf.MAX_XORB_BYTES + 2**20:  # (chunks, plus the footer a client may append)
        raise XetFormatError(f"a xorb holds at most {xf.MAX_XORB_BYTES} bytes; this one claims {length}")
    if Xorb.objects.filter(pk=hash_hex).update(touched=timezone.now()):  # stored already
        _drain(read, length)
        return False
    reservation = quotas.reserve(ns, length, user=user, sha256=hash_hex, purpose=XORB_PURPOSE,
                                 ttl=timedelta(seconds=settings.HUB_COMMIT_WINDOW))
    t0 = time.monotonic()
    try:
        with tempfile.NamedTemporaryFile(dir=staging.cache_dir(), prefix=".incoming-") as spool:

            def blocks() -> Iterator[bytes]:
                # The body in large reads (the parser asks for 8-byte headers and ~64 KiB payloads:
                # read one by one from the server's body reader, each small read cost a copy of its
                # buffer), each written to the spool as it arrives.
                left = length
                while left > 0:
                    data = read(min(left, BODY_BLOCK))
                    if not data:
                        return
                    left -= len(data)
                    spool.write(data)
                    yield data

            try:
                chunks = xf.verify_xorb(_Reader(blocks()).read, hash_hex, limit=length)
            except xf.FormatError as err:
                log.warning("xet xorb %s refused: %s", hash_hex, err)
                raise XetFormatError(f"xorb {hash_hex}: {err}") from None
            end = chunks[-1].end if chunks else 0
            t1 = time.monotonic()
            spool.truncate(end)  # (a footer a client may append is not kept)
            spool.flush()
            # Kept on this disk: staged, to be written to the store a little later, off the upload's
            # path (hub.xet.staging), or cached for the shard that follows, which rebuilds its files
            # from local disk rather than reading the xorbs back from the store.
            behind = staging.keep(spool.name, hash_hex)
            if not behind:
                spool.seek(0)
                blobs.object_store().put_stream(xorb_key(hash_hex), spool, end)
        index = b"".join(INDEX_ENTRY.pack(c.hash, c.end, c.size) for c in chunks)
        try:
            with transaction.atomic():
                Xorb.objects.create(hash=hash_hex, size=end, unpacked=sum(c.size for c in chunks),
                                    chunk_count=len(chunks), index=index, key=xorb_key(hash_hex),
                                    uploaded_by=user if getattr(user, "pk", None) else None,
                                    in_store=not behind, staged_on=staging.NODE if behind else "")
        except IntegrityError:  # the same xorb from a concurrent upload: same bytes, same key
            return False
        if behind:
            staging.wake()
        log.info("xet xorb %s: %d chunks, %d bytes received and checked in %.2f s, %s in %.2f s", hash_hex,
                 len(chunks), end, t1 - t0, "staged" if behind else "stored", time.monotonic() - t1)
    except BaseException:
        quotas.release(reservation)
        raise
    return True


def _cached_range(hash_hex: str, start: int, end: int) -> Iterator[bytes] | None:
    """Bytes [start, end) of a xorb from the local cache, or None if it holds none. (A short copy
    shows up as a truncated xorb when it is parsed.)"""
    try:
        fh = open(staging.cache_dir() / hash_hex, "rb")
    except FileNotFoundError:
        try:  # (staged: not in the store yet)
            fh = open(staging.staged_dir() / hash_hex, "rb")
        except FileNotFoundError:
            return None
    fh.seek(start)
    return serving.file_range(fh, end - start)


def _drain(read: Callable[[int], bytes], length: int) -> None:
    left = length
    while left > 0:
        data = read(min(left, 1 << 20))
        if not data:
            return
        left -= len(data)


# --- shards --------------------------------------------------------------------------------------


@dataclass
class Checked:
    """A file of a shard, checked against the hub's index: its chunks, in order."""

    file: xf.ShardFile
    hash_hex: str
    size: int
    terms: list[tuple[str, int, int]]  # (xorb hash, first chunk, end chunk)


def check_shard(data: bytes) -> list[Checked]:
    """Parses a shard and checks every file in it against the stored xorbs and the hub's index.
    XetFormatError says what is wrong."""
    if len(data) > MAX_SHARD_BYTES:
        raise XetFormatError(f"a shard may hold at most {MAX_SHARD_BYTES} bytes; this one has {len(data)}")
    try:
        shard = xf.parse_shard(data)
    except xf.FormatError as err:
        raise XetFormatError(f"shard: {err}") from None
    named = {xf.hash_hex(t.xorb) for f in shard.files for t in f.terms}
    stored = {x.hash: x for x in Xorb.objects.filter(pk__in=named)}
    missing = sorted(named - set(stored))
    if missing:
        raise XetFormatError(f"shard names {len(missing)} xorb(s) this hub does not hold (first: {missing[0]}); "
                             "upload them before the shard")
    index = {h: x.chunks() for h, x in stored.items()}
    out = []
    for f in shard.files:
        # ranges in bounds, sizes adding up, every verification entry equal to the hash of the hub's
        # own chunk hashes, the file hash: raises with the first thing that is not so
        try:
            entries = xf.verify_shard_file(f, lambda h: [(c[0], c[3]) for c in index[xf.hash_hex(h)]])
        except xf.FormatError as err:
            raise XetFormatError(str(err)) from None
        terms = [(xf.hash_hex(t.xorb), t.chunk_start, t.chunk_end) for t in f.terms]
        out.append(Checked(f, xf.hash_hex(f.hash), sum(s for _, s in entries), terms))
    return out


def accept_shard(checked: list[Checked], *, user, ns,
                 progress: Callable[[int, int], None] | None = None) -> list[XetFile]:
    """Rebuilds every file of a checked shard (check_shard) that the hub does not know yet into a
    verified blob, and records the Xet files. `progress(done, total)` is told the bytes rebuilt.
    Raises QuotaExceeded, or UnprocessableEntity when a file's bytes do not hash to the sha256 the
    client claims."""
    t0 = time.monotonic()
    known = {f.hash: f for f in XetFile.objects.filter(pk__in=[c.hash_hex for c in checked],
                                                       blob__verified=True, blob__corrupt_at=None)
             .select_related("blob")}
    todo = [c for c in checked if c.hash_hex not in known]
    total = sum(c.size for c in todo)
    done = 0
    out = []
    xorbs = {x for c in checked for x, _, _ in c.terms}
    Xorb.objects.filter(pk__in=xorbs).update(touched=timezone.now())
    # The xorbs' reservations have done their part: from here the files' blobs are reserved instead.
    for r in Reservation.objects.filter(namespace=ns, purpose=XORB_PURPOSE, sha256__in=list(xorbs)):
        quotas.release(r)
    with quotas.Hold() as hold:
        # The blobs' bytes count against the account from now, awaiting the commit (as LFS uploads'):
        # reserved before the rebuild, converted by the commit that names them.
        claims = {c.file.sha256.hex(): c.size for c in todo if c.file.sha256 is not None and c.size}
        if claims:
            hold.reserve_many(ns, claims, user=user, purpose="xet")
        for c in checked:
            if c.hash_hex in known:
                blobs.reuse(known[c.hash_hex].blob_id, user)  # proof: the uploader named its chunks
                out.append(known[c.hash_hex])
                continue
            claimed = c.file.sha256.hex() if c.file.sha256 is not None and c.size else None

            def told(n: int, before: int = done) -> None:
                if progress is not None:
                    progress(before + n, total)

            blob = blobs.ingest_stream(_Rebuild(c.terms, told), c.size, sha256=claimed, user=user)
            done += c.size
            out.append(_record_file(c, blob))
        hold.keep_until(timezone.now() + timedelta(seconds=settings.HUB_COMMIT_WINDOW))
    log.info("xet shard: %d file(s), %d rebuilt (%d bytes) in %.2f s, %d known already", len(checked), len(todo),
             total, time.monotonic() - t0, len(checked) - len(todo))
    return out


def _record_file(c: Checked, blob: Blob) -> XetFile:
    with transaction.atomic():
        f, created = XetFile.objects.get_or_create(hash=c.hash_hex, defaults={
            "blob": blob, "size": c.size, "terms": [list(t) for t in c.terms]})
        if not created and f.blob_id != blob.sha256:  # (its old blob was corrupt or gone)
            XetFile.objects.filter(pk=f.pk).update(blob=blob, size=c.size, terms=[list(t) for t in c.terms])
        f.xorbs.set(sorted({x for x, _, _ in c.terms}))
    _register_dedup(c)
    return f


def _register_dedup(c: Checked) -> None:
    """Makes a recorded file findable by the global dedup: its first chunk, and the eligible chunks of
    every xorb it reads from (each xorb scanned once)."""
    if not c.terms:
        return
    names = {x for x, _, _ in c.terms}
    done = set(XetChunk.objects.filter(xorb_id__in=names).values_list("xorb_id", flat=True).distinct())
    first_xorb, first_chunk, _ = c.terms[0]
    rows = []
    for x in Xorb.objects.filter(pk__in=names):
        chunks = x.chunks()
        if x.hash == first_xorb:
            rows.append(XetChunk(hash=xf.hash_hex(chunks[first_chunk][0]), xorb=x, index=first_chunk))
        if x.hash not in done:
            rows += [XetChunk(hash=xf.hash_hex(h), xorb=x, index=i)
                     for i, (h, _, _, _) in enumerate(chunks) if xf.dedup_eligible(h)]
    XetChunk.objects.bulk_create(rows, ignore_conflicts=True)


DEDUP_MAX_XORBS = 256  # at most this many xorbs (≈ 16 GiB of chunks) in one dedup answer


def dedup_shard(chunk_hex: str, *, user) -> bytes | None:
    """The global dedup: a shard offering the xorbs of the files that hold this chunk — only files
    `user` may read (a repo they can read, their volume, bytes they uploaded), so an answer never
    tells anyone that someone else stores some bytes. None if there are none. The chunk hashes in it
    are keyed (format.encode_dedup_shard): the client recognises chunks it holds and learns nothing
    else. The xorbs offered are kept a full retention from now."""
    chunk_hex = check_hash(chunk_hex, "chunk hash")
    if user is None or not getattr(user, "pk", None):
        return None
    holders = list(XetChunk.objects.filter(hash=chunk_hex).values_list("xorb_id", flat=True)[:64])
    if not holders:
        return None
    files = dict(XetFile.objects.filter(xorbs__in=holders).values_list("hash", "blob_id")[:1000])
    sha256s = set(files.values())
    readable = blobs.can_reference(user, list(sha256s))
    readable_files = [h for h, b in files.items() if b in readable]
    if not readable_files:
        return None
    names = set(XetFile.xorbs.through.objects.filter(xetfile_id__in=readable_files)
                .values_list("xorb_id", flat=True).distinct()[:DEDUP_MAX_XORBS])
    now = timezone.now()
    Xorb.objects.filter(pk__in=names).update(touched=now)
    offered = []
    for x in Xorb.objects.filter(pk__in=names):
        chunks, pos = [], 0
        for h, _, _, size in x.chunks():
            chunks.append((h, pos, size))
            pos += size
        offered.append(xf.ShardXorb(xf.hash_from_hex(x.hash), chunks, x.unpacked, x.size))
    # Valid for the client half the retention: every xorb it names outlives that, and one it uses is
    # touched again by the shard that uses it.
    created = int(now.timestamp())
    return xf.encode_dedup_shard(offered, key=os.urandom(32), created=created,
                                 expiry=created + settings.HUB_XET_RETENTION // 2)


class _Rebuild(io.RawIOBase):
    """The bytes of a file, decoded from its stored xorbs chunk by chunk (each chunk's hash checked
    against the index again: a xorb damaged in the store is not turned into a blob)."""

    def __init__(self, terms: list[tuple[str, int, int]], told: Callable[[int], None]) -> None:
        self.pieces = self._pieces(terms)
        self.buf = b""
        self.count = 0
        self.told = told

    def _pieces(self, terms) -> Iterator[bytes]:
        store = blobs.object_store()
        xorbs = {x.hash: x for x in Xorb.objects.filter(pk__in={t[0] for t in terms})}
        for xh, first, end in terms:
            chunks = xorbs[xh].chunks()[first:end]
            start, end = chunks[0][1], chunks[-1][2]
            cached = _cached_range(xh, start, end)  # (verified moments ago: its chunks are not hashed again)
            if cached is None and not xorbs[xh].in_store:  # staged on another server: wait for its write
                staging.ensure_in_store({xh})
            stream = _Reader(cached or store.read(xorb_key(xh), start, end))
            try:
                for i, (chunk, data) in enumerate(xf.iter_xorb(stream.read, limit=end - start,
                                                               hash_chunks=cached is None)):
                    if i >= len(chunks) or (cached is None and chunk.hash != chunks[i][0]) or (
                            len(data) != chunks[i][3]):
                        raise HubError(f"stored xorb {xh} does not match its index; upload the file again")
                    yield data
            except xf.FormatError as err:
                raise HubError(f"stored xorb {xh} is damaged ({err}); upload the file again") from None

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        parts, have = [self.buf] if self.buf else [], len(self.buf)
        while n < 0 or have < n:
            piece = next(self.pieces, None)
            if piece is None:
                break
            parts.append(piece)
            have += len(piece)
        data = b"".join(parts)  # (one copy: pieces are ~64 KiB, reads are MiBs)
        if 0 <= n < len(data):
            data, self.buf = data[:n], data[n:]
        else:
            self.buf = b""
        self.count += len(data)
        self.told(self.count)
        return data

    def readinto(self, b) -> int:
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)


class _Reader:
    """read(n) over an iterator of byte strings, copying each byte once (the caller's reads are
    often much smaller than the pieces: 8-byte chunk headers out of 1 MiB blocks)."""

    def __init__(self, pieces: Iterator[bytes]) -> None:
        self.pieces = iter(pieces)
        self.buf = b""
        self.pos = 0

    def read(self, n: int) -> bytes:
        buf, pos = self.buf, self.pos
        if len(buf) - pos >= n:
            self.pos = pos + n
            return buf[pos:pos + n]
        parts, have = ([buf[pos:]] if pos < len(buf) else []), len(buf) - pos
        self.buf, self.pos = b"", 0
        while have < n:
            piece = next(self.pieces, None)
            if piece is None:
                break
            if have + len(piece) > n:  # keep the rest for the next read
                self.buf, self.pos = piece, n - have
                parts.append(piece[:n - have])
                break
            parts.append(piece)
            have += len(piece)
        return parts[0] if len(parts) == 1 else b"".join(parts)


def file_of_blob(sha256: str) -> XetFile | None:
    """The Xet file whose chunks the hub holds for this blob, if any (downloads through Xet; an empty
    file has no chunks to fetch and is always served over HTTP)."""
    files = list(XetFile.objects.filter(blob_id=sha256, size__gt=0).order_by("-created")[:8])
    away = staging.elsewhere() if files else set()  # (xorbs another server has yet to store)
    return next((f for f in files if not away.intersection(t[0] for t in f.terms)), None)


def files_of_blobs(sha256s: list[str]) -> dict[str, str]:
    """{sha256: Xet file hash} for those of these blobs the hub holds as Xet files."""
    found: list[tuple[str, str, list]] = []
    for i in range(0, len(sha256s), 1000):
        found += XetFile.objects.filter(blob_id__in=sha256s[i:i + 1000], size__gt=0).values_list(
            "hash", "blob_id", "terms")
    away = staging.elsewhere() if found else set()  # (xorbs another server has yet to store)
    return {sha: h for h, sha, terms in found if not away.intersection(t[0] for t in terms)}


@dataclass
class Piece:
    """A run of consecutive chunks of one xorb that a reconstruction reads."""

    xorb: str
    first: int  # chunk index
    end: int  # chunk index (exclusive)
    start_byte: int  # within the stored xorb
    end_byte: int  # exclusive
    unpacked: int  # bytes once decoded


def reconstruction(f: XetFile, start: int, end: int) -> tuple[int, list[Piece]]:
    """The pieces that hold bytes [start, end) of the file, and how many bytes of the first piece's
    decoded data come before `start`."""
    xorbs = {x.hash: x for x in Xorb.objects.filter(pk__in={t[0] for t in f.terms})}
    if len(xorbs) != len({t[0] for t in f.terms}):
        raise HubError("some chunks of this file are no longer held for Xet; download it over HTTP")
    staged = {h for h, x in xorbs.items() if not x.in_store}
    if staged:  # (write-behind: the client fetches them from the store)
        staging.ensure_in_store(staged)
    pos = 0
    skip = 0
    out: list[Piece] = []
    for xh, first, last in f.terms:
        chunks = xorbs[xh].chunks()
        run: list[int] = []
        for i in range(first, last):
            size = chunks[i][3]
            if pos + size > start and pos < end:
                if not out and not run:
                    skip = start - pos
                run.append(i)
            pos += size
        if run:
            out.append(Piece(xh, run[0], run[-1] + 1, chunks[run[0]][1], chunks[run[-1]][2],
                             sum(chunks[i][3] for i in run)))
        if pos >= end:
            break
    return skip, out


# --- retention -----------------------------------------------------------------------------------


def collect(older_than: timedelta, *, dry_run: bool = False) -> int:
    """Deletes xorbs no shard has named for `older_than` (and the Xet files that read from them: their
    blobs stay, served over HTTP), and objects under xorbs/ that no xorb row names (a hub that died
    between storing one and recording it). Returns how many xorbs went."""
    cutoff = timezone.now() - older_than
    store = blobs.object_store()
    n = 0
    while True:
        doomed = list(Xorb.objects.filter(touched__lt=cutoff).values_list("hash", flat=True)[:500])
        if dry_run:
            return Xorb.objects.filter(touched__lt=cutoff).count()
        if not doomed:
            break
        XetFile.objects.filter(xorbs__in=doomed).delete()
        for h in doomed:
            with transaction.atomic():
                # (a shard may have named it since the list was read)
                if Xorb.objects.filter(pk=h, touched__lt=cutoff).delete()[0]:
                    transaction.on_commit(lambda h=h: store.delete(xorb_key(h)))
                    n += 1
    batch: list[str] = []

    def flush() -> None:
        known = set(Xorb.objects.filter(pk__in=[k.rsplit("/", 1)[-1] for k in batch]).values_list("hash", flat=True))
        for key in batch:
            if key.rsplit("/", 1)[-1] not in known:
                store.delete(key)
        batch.clear()

    for key, _size, mtime in store.list("xorbs/"):
        if mtime < cutoff.timestamp():
            batch.append(key)
            if len(batch) >= 500:
                flush()
    flush()
    if n:
        log.info("xet: %d xorb(s) past their retention deleted", n)
    return n
