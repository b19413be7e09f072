"""Xet binary objects, as the stock client (hf_xet 1.8.0) sends them: hashes, xorbs, shards.

Pure Python (stdlib + ``blake3`` + ``lz4``), no Django: the CAS views call it to check what a client
uploads before anything is stored. Everything here was checked against bytes the real client sent
(see tests/test_xet_format.py); where the public spec and the client disagree, this follows the client.

Hashes are 32 raw bytes throughout. Xet prints them oddly: the 32 bytes are four little-endian u64
words, each printed as 16 hex digits (``hash_hex``); URL paths and JSON use that form.

Xorb (``POST /v1/xorbs/default/{hash}``): a run of chunks, each an 8-byte header — version (0),
compressed length (u24 LE), scheme (0 none, 1 LZ4 frame, 2 byte-grouping-4 + LZ4 frame), unpacked
length (u24 LE) — then the compressed bytes. hf_xet 1.8.0 sends no footer (checked); a body that
ends with the reference client's ``XETBLOB`` footer is still accepted (the footer is skipped after a
length check, never trusted). The xorb hash is the Merkle root of (chunk hash, unpacked size).

Shard (``POST /v2/shards`` or ``/v1/shards``): 48-byte header, file-info section, CAS-info section,
both closed by a bookend (32 x 0xFF + 16 x 0). Every entry is 48 bytes. hf_xet 1.8.0 sends no
footer (``footer_size`` = 0); a 200-byte footer is accepted if its offsets agree.

Dedup shard (the reply to ``GET /v1/chunks/{prefix}/{chunk hash}``): a whole shard the client stores
in its shard cache — no files, the CAS-info blocks of the xorbs offered, then three sorted lookup
tables (files: (u64, u32); xorbs: (u64, u32); chunks: (u64, u32, u32)), keyed by each hash's first
little-endian u64 word, and the 200-byte footer. Its chunk hashes are blake3-keyed with a key the
footer carries (``keyed_hash``): the client finds a chunk it holds by keying its own hash, but learns
no raw chunk hash it did not have — and a shard's verification entries need the raw ones.
"""
from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import blake3
import lz4.frame

__all__ = [
    "FormatError", "MAX_XORB_BYTES", "MAX_XORB_CHUNKS", "MAX_CHUNK_BYTES", "MAX_COMPRESSED_CHUNK_BYTES",
    "MAX_SHARD_BYTES", "CHUNK_HEADER_BYTES", "SCHEME_NONE", "SCHEME_LZ4", "SCHEME_BG4_LZ4",
    "DATA_KEY", "INTERNAL_NODE_KEY", "VERIFICATION_KEY", "ZERO_KEY", "ZERO_HASH",
    "hash_hex", "hash_from_hex", "chunk_hash", "merkle_root", "xorb_hash", "file_hash", "verification_hash",
    "XorbChunk", "iter_xorb", "verify_xorb", "decode_chunks", "encode_chunk", "decompress_chunk",
    "Term", "ShardFile", "ShardXorb", "Shard", "parse_shard", "encode_shard", "verify_shard_file",
    "GLOBAL_DEDUP_MODULUS", "dedup_eligible", "keyed_hash", "encode_dedup_shard",
]


class FormatError(ValueError):
    """The bytes are not a valid Xet object; the message says why, for the client's developer."""


# ---------------------------------------------------------------------------------------------- limits

MAX_XORB_BYTES = 64 * 1024 * 1024          # chunk data of one xorb (unpacked; headers come on top)
MAX_XORB_CHUNKS = 8 * 1024                 # chunks in one xorb
MAX_CHUNK_BYTES = 128 * 1024               # unpacked size of one chunk (strict in xet-core too)
# xet-core's reader accepts a compressed length up to twice the chunk limit (LZ4 can expand random
# data a little; the stock writer falls back to scheme 0 then, so it never gets near this).
MAX_COMPRESSED_CHUNK_BYTES = 2 * MAX_CHUNK_BYTES
MAX_SHARD_BYTES = 64 * 1024 * 1024         # the spec asks clients to split shards above this
CHUNK_HEADER_BYTES = 8

SCHEME_NONE, SCHEME_LZ4, SCHEME_BG4_LZ4 = 0, 1, 2
_SCHEME_NAMES = {SCHEME_NONE: "none", SCHEME_LZ4: "LZ4", SCHEME_BG4_LZ4: "byte-grouping-4 + LZ4"}

# ---------------------------------------------------------------------------------------------- hashes

DATA_KEY = bytes([102, 151, 245, 119, 91, 149, 80, 222, 49, 53, 203, 172, 165, 151, 24, 28, 157, 228, 33, 16,
                  155, 235, 43, 88, 180, 208, 176, 75, 147, 173, 242, 41])
INTERNAL_NODE_KEY = bytes([1, 126, 197, 199, 165, 71, 41, 150, 253, 148, 102, 102, 180, 138, 2, 230, 93, 221, 83,
                           111, 55, 199, 109, 210, 248, 99, 82, 230, 74, 83, 113, 63])
VERIFICATION_KEY = bytes([127, 24, 87, 214, 206, 86, 237, 102, 18, 127, 249, 19, 231, 165, 195, 243, 164, 205, 38,
                          213, 181, 219, 73, 230, 65, 36, 152, 127, 40, 251, 148, 195])
ZERO_KEY = bytes(32)      # the file-hash "salt" step: a keyed hash with 32 zero bytes as the key
ZERO_HASH = bytes(32)     # xorb/file hash of nothing (the stock client names an empty file with it)
_BOOKEND_HASH = b"\xff" * 32

_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def hash_hex(h: bytes) -> str:
    """Xet's text form of a 32-byte hash: each 8-byte word byte-reversed (a LE u64), then hex."""
    if len(h) != 32:
        raise FormatError(f"a Xet hash is 32 bytes, got {len(h)}")
    return (h[7::-1] + h[15:7:-1] + h[23:15:-1] + h[31:23:-1]).hex()


def hash_from_hex(s: str) -> bytes:
    """Inverse of ``hash_hex``; FormatError unless ``s`` is exactly 64 hex digits."""
    if not isinstance(s, str):
        raise FormatError(f"a Xet hash is a string of 64 hex digits, got {type(s).__name__}")
    if len(s) != 64 or not _HEX_DIGITS.issuperset(s):
        shown = s if len(s) <= 80 else s[:77] + "..."
        raise FormatError(f"a Xet hash is 64 hex digits, got {len(s)} characters: {shown!r}")
    b = bytes.fromhex(s)
    return b[7::-1] + b[15:7:-1] + b[23:15:-1] + b[31:23:-1]


def chunk_hash(data: bytes) -> bytes:
    """blake3 keyed with DATA_KEY over the chunk's unpacked bytes."""
    return blake3.blake3(data, key=DATA_KEY).digest()


def _merge(entries: list[tuple[bytes, int]]) -> tuple[bytes, int]:
    text = "".join(f"{hash_hex(h)} : {n}\n" for h, n in entries)
    return blake3.blake3(text.encode("ascii"), key=INTERNAL_NODE_KEY).digest(), sum(n for _, n in entries)


def _next_cut(level: list[tuple[bytes, int]], start: int) -> int:
    """End (exclusive) of the group starting at ``start``: xet-core's aggregated-hash cut rule.

    A group holds 2 to 9 nodes. It ends after the first node, from the third on, whose hash is 0 mod 4
    (the hash's last LE u64 word mod 4, i.e. byte 24 & 3), or after 9 nodes, or at the end of the level;
    a level with 2 nodes or fewer left is one group."""
    left = len(level) - start
    if left <= 2:
        return len(level)
    end = min(9, left)
    for i in range(2, end):
        if level[start + i][0][24] & 3 == 0:
            return start + i + 1
    return start + end


def merkle_root(entries: list[tuple[bytes, int]]) -> bytes:
    """Root of Xet's variable fan-out Merkle tree over (hash, size) pairs; ZERO_HASH for none.

    One entry is its own root. Each level is cut into groups (``_next_cut``); a group's node hashes
    the text ``"{hash_hex} : {size}\\n"`` of its members, keyed with INTERNAL_NODE_KEY, and carries
    the sum of their sizes."""
    level = [(bytes(h), int(n)) for h, n in entries]
    if not level:
        return ZERO_HASH
    for h, _ in level:
        if len(h) != 32:
            raise FormatError(f"a Xet hash is 32 bytes, got {len(h)}")
    while len(level) > 1:
        nxt, i = [], 0
        while i < len(level):
            cut = _next_cut(level, i)
            nxt.append(_merge(level[i:cut]))
            i = cut
        level = nxt
    return level[0][0]


def xorb_hash(entries: list[tuple[bytes, int]]) -> bytes:
    """A xorb's name: the Merkle root of its (chunk hash, unpacked size) pairs."""
    return merkle_root(entries)


def file_hash(entries: list[tuple[bytes, int]]) -> bytes:
    """A file's Xet hash: the Merkle root of its chunks, hashed again with blake3 keyed by 32 zero
    bytes. An empty file is ZERO_HASH (no salt step), as xet-core and hf_xet 1.8.0 do."""
    if not entries:
        return ZERO_HASH
    return blake3.blake3(merkle_root(entries), key=ZERO_KEY).digest()


def verification_hash(chunk_hashes: list[bytes]) -> bytes:
    """A shard term's verification entry: blake3 keyed with VERIFICATION_KEY over the raw 32-byte
    hashes of the term's chunks, concatenated in order."""
    return blake3.blake3(b"".join(chunk_hashes), key=VERIFICATION_KEY).digest()


# ---------------------------------------------------------------------------------------------- xorbs

_XORB_FOOTER_IDENT = b"XETBLOB"   # the reference format's footer starts with this where a header would be


@dataclass
class XorbChunk:
    """One chunk of a xorb as stored: ``[start, end)`` are the byte offsets of its 8-byte header and of
    the end of its compressed data in the xorb as uploaded, i.e. what a client must fetch for it."""
    hash: bytes
    size: int          # unpacked bytes
    start: int
    end: int
    scheme: int = SCHEME_NONE


def _read_exact(read: Callable[[int], bytes], n: int) -> bytes:
    """Read up to ``n`` bytes, fewer only at end of stream. Never asks ``read`` for more than ``n``."""
    parts, got = [], 0
    while got < n:
        b = read(n - got)
        if not b:
            break
        if len(b) > n - got:
            raise FormatError("the body reader returned more bytes than asked for")
        parts.append(b)
        got += len(b)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _bg4_regroup(g: bytes) -> bytes:
    """Undo byte grouping: the data was split into 4 groups (byte i % 4 of every 4-byte word), stored
    one after the other; when the length is not a multiple of 4 the first (length % 4) groups are one
    byte longer."""
    n = len(g)
    q, r = divmod(n, 4)
    out = bytearray(n)
    pos = 0
    for i in range(4):
        size = q + (1 if i < r else 0)
        out[i::4] = g[pos:pos + size]
        pos += size
    return bytes(out)


def _lz4_frame_decompress(data: bytes, expected: int, where: str) -> bytes:
    d = lz4.frame.LZ4FrameDecompressor()
    try:
        out = d.decompress(data, max_length=expected + 1)
    except Exception as err:  # lz4 raises RuntimeError on corrupt frames
        raise FormatError(f"{where}: LZ4 frame does not decode ({err})") from None
    if len(out) > expected:
        raise FormatError(f"{where}: decompresses to more than the {expected} bytes its header claims")
    if not d.eof:
        raise FormatError(f"{where}: LZ4 frame is truncated (decoded {len(out)} of {expected} bytes, frame not closed)")
    if d.unused_data:
        raise FormatError(f"{where}: {len(d.unused_data)} bytes follow the LZ4 frame inside the chunk")
    return out


def decompress_chunk(scheme: int, payload: bytes, size: int, where: str = "chunk") -> bytes:
    """Unpack one chunk's payload; FormatError unless it yields exactly ``size`` bytes."""
    if scheme == SCHEME_NONE:
        out = payload
    elif scheme == SCHEME_LZ4:
        out = _lz4_frame_decompress(payload, size, where)
    elif scheme == SCHEME_BG4_LZ4:
        out = _bg4_regroup(_lz4_frame_decompress(payload, size, where))
    else:
        raise FormatError(f"{where}: unknown compression scheme {scheme} (known: 0 none, 1 LZ4, 2 byte-grouping-4 + LZ4)")
    if len(out) != size:
        raise FormatError(f"{where}: decompresses to {len(out)} bytes, header claims {size}")
    return bytes(out)


def _skip_footer(read: Callable[[int], bytes], first: bytes, offset: int, limit: int, n_chunks: int) -> None:
    """The rest of the body is a reference-format xorb footer (``XETBLOB`` ... u32 info_length). Check
    its size and trailing length field, and that nothing else follows; its contents are not used (the
    hub builds its own index). The footer holds ~40 bytes per chunk, so it is read with that bound."""
    cap = min(limit - offset, 1024 + 48 * n_chunks)
    rest = _read_exact(read, max(cap - len(first), 0) + 1)
    tail = first + rest
    if len(tail) > cap:
        raise FormatError(f"xorb footer after chunk {n_chunks - 1} is longer than {cap} bytes "
                          "(or the xorb exceeds its size limit)")
    info_length = struct.unpack_from("<I", tail, len(tail) - 4)[0] if len(tail) >= 12 else -1
    if info_length != len(tail) - 4:
        raise FormatError(f"xorb footer is malformed: it ends with length {info_length} but {len(tail) - 4} bytes "
                          "precede that field")


def iter_xorb(read: Callable[[int], bytes], *, limit: int = MAX_XORB_BYTES,
              hash_chunks: bool = True) -> Iterator[tuple[XorbChunk, bytes]]:
    """Stream-parse a xorb body (``read(n)`` returns up to n bytes, b"" at the end) and yield, per
    chunk, its index entry and its unpacked bytes.

    Bounds: each header is checked (version, scheme, sizes, chunk count, total length against
    ``limit``) before its payload is read, so at most one chunk's payload (<= 256 KiB) is ever held
    and ``read`` is never asked for more than that. With ``hash_chunks=False`` the entries' hash is
    b"" (for decoding stored ranges). A trailing reference-format footer is accepted and skipped.
    """
    offset = index = 0
    while True:
        header = _read_exact(read, CHUNK_HEADER_BYTES)
        if not header:
            return
        where = f"xorb chunk {index} (byte {offset})"
        if len(header) < CHUNK_HEADER_BYTES:
            raise FormatError(f"{where}: truncated header, {len(header)} of 8 bytes")
        version, scheme = header[0], header[4]
        clen = int.from_bytes(header[1:4], "little")
        size = int.from_bytes(header[5:8], "little")
        if header[:7] == _XORB_FOOTER_IDENT:   # a chunk header starts with version 0, never b"X"
            if index == 0:
                raise FormatError("xorb has a footer but no chunks")
            _skip_footer(read, header, offset, limit, index)
            return
        if version != 0:
            raise FormatError(f"{where}: header version {version}, only 0 is known")
        if scheme not in _SCHEME_NAMES:
            raise FormatError(f"{where}: unknown compression scheme {scheme} (known: 0 none, 1 LZ4, 2 byte-grouping-4 + LZ4)")
        if size == 0 or size > MAX_CHUNK_BYTES:
            raise FormatError(f"{where}: header claims {size} unpacked bytes; a chunk holds 1 to {MAX_CHUNK_BYTES}")
        if clen > MAX_COMPRESSED_CHUNK_BYTES:
            raise FormatError(f"{where}: header claims {clen} compressed bytes, above the {MAX_COMPRESSED_CHUNK_BYTES}-byte limit")
        if clen == 0:
            raise FormatError(f"{where}: header claims 0 compressed bytes")
        if scheme == SCHEME_NONE and clen != size:
            raise FormatError(f"{where}: uncompressed chunk with {clen} stored bytes but {size} unpacked bytes")
        if index >= MAX_XORB_CHUNKS:
            raise FormatError(f"xorb has more than {MAX_XORB_CHUNKS} chunks")
        end = offset + CHUNK_HEADER_BYTES + clen
        if end > limit:
            raise FormatError(f"{where}: chunk ends at byte {end}, beyond the {limit}-byte limit of this xorb")
        payload = _read_exact(read, clen)
        if len(payload) < clen:
            raise FormatError(f"{where}: truncated, {len(payload)} of {clen} compressed bytes present")
        data = decompress_chunk(scheme, payload, size, where)
        yield XorbChunk(chunk_hash(data) if hash_chunks else b"", size, offset, end, scheme), data
        offset = end
        index += 1


def verify_xorb(read: Callable[[int], bytes], expected_hash_hex: str, *,
                limit: int = MAX_XORB_BYTES) -> list[XorbChunk]:
    """Parse a whole xorb upload, recompute every chunk hash and the Merkle root, and compare it with
    the hash the client named it by. Returns the hub's index of the xorb (one entry per chunk)."""
    expected = hash_from_hex(expected_hash_hex)
    limit = min(limit, MAX_XORB_BYTES + MAX_XORB_CHUNKS * 64 + 1024)  # room for a reference footer
    chunks = [c for c, _ in iter_xorb(read, limit=limit)]
    if not chunks:
        raise FormatError("xorb is empty: it holds no chunks")
    # The client cuts a xorb at MAX_XORB_BYTES of chunk data (unpacked); headers come on top.
    unpacked = sum(c.size for c in chunks)
    if unpacked > MAX_XORB_BYTES:
        raise FormatError(f"xorb chunks hold {unpacked} bytes, above the {MAX_XORB_BYTES}-byte limit")
    if chunks[-1].end > MAX_XORB_BYTES + len(chunks) * CHUNK_HEADER_BYTES:
        raise FormatError(f"xorb chunks take {chunks[-1].end} bytes stored, more than their {unpacked} bytes "
                          "and their headers")
    got = xorb_hash([(c.hash, c.size) for c in chunks])
    if got != expected:
        raise FormatError(f"xorb hash mismatch: uploaded as {hash_hex(expected)} but its {len(chunks)} chunks "
                          f"hash to {hash_hex(got)}")
    return chunks


class _BytesReader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes):
        self.data, self.pos = memoryview(data), 0

    def read(self, n: int) -> bytes:
        b = bytes(self.data[self.pos:self.pos + n])
        self.pos += len(b)
        return b


def decode_chunks(data: bytes, *, expected_count: int | None = None) -> list[bytes]:
    """Unpack a run of consecutive stored chunks (e.g. a byte range ``[first.start, last.end)`` read
    back from a stored xorb); returns each chunk's unpacked bytes in order."""
    out = [d for _, d in iter_xorb(_BytesReader(data).read, limit=len(data), hash_chunks=False)]
    if expected_count is not None and len(out) != expected_count:
        raise FormatError(f"expected {expected_count} chunks in this range, found {len(out)}")
    return out


def encode_chunk(data: bytes, scheme: int = SCHEME_LZ4) -> bytes:
    """Serialize one chunk (header + payload) the way the stock client does, falling back to scheme 0
    when compression does not help. For tests and for building xorbs server-side."""
    if not 0 < len(data) <= MAX_CHUNK_BYTES:
        raise FormatError(f"a chunk holds 1 to {MAX_CHUNK_BYTES} bytes, got {len(data)}")
    payload = bytes(data)
    if scheme == SCHEME_BG4_LZ4:
        payload = b"".join(bytes(data[i::4]) for i in range(4))
    if scheme in (SCHEME_LZ4, SCHEME_BG4_LZ4):
        payload = lz4.frame.compress(payload)
        if len(payload) >= len(data):
            scheme, payload = SCHEME_NONE, bytes(data)
    elif scheme != SCHEME_NONE:
        raise FormatError(f"unknown compression scheme {scheme}")
    return (bytes([0]) + len(payload).to_bytes(3, "little") + bytes([scheme]) + len(data).to_bytes(3, "little")
            + payload)


# ---------------------------------------------------------------------------------------------- shards

SHARD_HEADER_TAG = bytes([72, 70, 82, 101, 112, 111, 77, 101, 116, 97, 68, 97, 116, 97, 0, 85, 105, 103, 69, 106,
                          123, 129, 87, 131, 165, 189, 217, 92, 205, 209, 74, 169])   # b"HFRepoMetaData\0..."
SHARD_HEADER_VERSION = 2
SHARD_FOOTER_VERSION = 1
SHARD_FOOTER_BYTES = 200
SHARD_ENTRY_BYTES = 48
FILE_FLAG_WITH_VERIFICATION = 1 << 31
FILE_FLAG_WITH_METADATA_EXT = 1 << 30
CHUNK_FLAG_GLOBAL_DEDUP = 1 << 31     # CAS-info chunk entry: eligible for global dedup queries

_HEADER = struct.Struct("<32sQQ")
_FILE_HEADER = struct.Struct("<32sIIQ")      # file hash, flags, number of terms, unused
_TERM = struct.Struct("<32sIIII")            # xorb hash, xorb flags, unpacked bytes, chunk start, chunk end
_HASH_ENTRY = struct.Struct("<32s16s")       # verification entry / metadata extension: hash, unused
_XORB_HEADER = struct.Struct("<32sIIII")     # xorb hash, flags, chunk count, unpacked bytes, bytes on disk
_CHUNK = struct.Struct("<32sIIII")           # chunk hash, unpacked offset in xorb, unpacked size, flags, unused
_FOOTER = struct.Struct("<9Q32sQQ6QQQQQ")


def _swap_words(h: bytes) -> bytes:
    """The client stores the sha256 as four u64 words parsed big-endian and written little-endian."""
    return h[7::-1] + h[15:7:-1] + h[23:15:-1] + h[31:23:-1]


@dataclass
class Term:
    """One piece of a file: chunks ``[chunk_start, chunk_end)`` of a xorb, ``size`` unpacked bytes."""
    xorb: bytes
    chunk_start: int
    chunk_end: int
    size: int


@dataclass
class ShardFile:
    hash: bytes
    terms: list[Term]
    verification: list[bytes] | None     # one per term, when the verification flag is set
    sha256: bytes | None                 # normal byte order; hf_xet sends 32 zero bytes for an empty file
    flags: int = 0

    @property
    def size(self) -> int:
        return sum(t.size for t in self.terms)


@dataclass
class ShardXorb:
    """A CAS-info block: a xorb the client created. ``chunks`` are (chunk hash, offset of the chunk in
    the xorb's *unpacked* bytes, unpacked size)."""
    hash: bytes
    chunks: list[tuple[bytes, int, int]]
    unpacked_bytes: int                  # sum of the chunk sizes
    bytes_on_disk: int = 0               # serialized length; hf_xet 1.8.0 sends 0
    flags: int = 0
    chunk_flags: list[int] = field(default_factory=list)   # bit 31: global-dedup eligible


@dataclass
class Shard:
    files: list[ShardFile]
    xorbs: list[ShardXorb]


class _Cursor:
    def __init__(self, data: bytes, end: int):
        self.data, self.pos, self.end = data, 0, end

    def take(self, st: struct.Struct, what: str) -> tuple:
        if self.pos + st.size > self.end:
            raise FormatError(f"shard is truncated: {what} at byte {self.pos} needs {st.size} bytes, "
                              f"{max(self.end - self.pos, 0)} left")
        v = st.unpack_from(self.data, self.pos)
        self.pos += st.size
        return v

    def need(self, count: int, what: str) -> None:
        """Refuse a count before looping over it: ``count`` entries must fit in what is left."""
        if count * SHARD_ENTRY_BYTES > self.end - self.pos:
            raise FormatError(f"shard is truncated: {what} needs {count} entries ({count * SHARD_ENTRY_BYTES} bytes) "
                              f"at byte {self.pos}, only {self.end - self.pos} bytes left")


def parse_shard(data: bytes, *, limit: int = MAX_SHARD_BYTES) -> Shard:
    """Bounds-checked parse of an uploaded shard. Checks structure and internal consistency only
    (sizes, ranges, bookends, flags); ``verify_shard_file`` checks a file against stored xorbs."""
    data = bytes(data)
    if len(data) > limit:
        raise FormatError(f"shard is {len(data)} bytes, above the {limit}-byte limit")
    if len(data) < _HEADER.size:
        raise FormatError(f"shard is truncated: {len(data)} bytes, the header alone is {_HEADER.size}")
    tag, version, footer_size = _HEADER.unpack_from(data, 0)
    if tag != SHARD_HEADER_TAG:
        raise FormatError("not a shard: the first 32 bytes are not the MDB shard tag")
    if version != SHARD_HEADER_VERSION:
        raise FormatError(f"shard header version {version}, only {SHARD_HEADER_VERSION} is known")
    if footer_size not in (0, SHARD_FOOTER_BYTES):
        raise FormatError(f"shard header claims a {footer_size}-byte footer; it is 0 (none) or {SHARD_FOOTER_BYTES}")
    if footer_size > len(data) - _HEADER.size:
        raise FormatError(f"shard header claims a {footer_size}-byte footer but only {len(data) - _HEADER.size} bytes follow")
    cur = _Cursor(data, len(data) - footer_size)
    cur.pos = _HEADER.size

    files: list[ShardFile] = []
    with_verification: bool | None = None
    while True:
        fh, flags, n_terms, _unused = cur.take(_FILE_HEADER, f"file {len(files)} header")
        if fh == _BOOKEND_HASH:
            break
        where = f"shard file {len(files)} ({hash_hex(fh)})"
        unknown = flags & ~(FILE_FLAG_WITH_VERIFICATION | FILE_FLAG_WITH_METADATA_EXT)
        if unknown:
            raise FormatError(f"{where}: unknown file flags 0x{unknown:08x}")
        verif = bool(flags & FILE_FLAG_WITH_VERIFICATION)
        meta = bool(flags & FILE_FLAG_WITH_METADATA_EXT)
        if with_verification is None:
            with_verification = verif
        elif with_verification != verif:
            raise FormatError(f"{where}: verification entries must be present for every file or for none")
        cur.need(n_terms * (2 if verif else 1) + (1 if meta else 0), f"{where} with {n_terms} terms")
        terms = []
        for i in range(n_terms):
            xh, _xflags, size, start, end = cur.take(_TERM, f"{where} term {i}")
            if xh == _BOOKEND_HASH:
                raise FormatError(f"{where} term {i}: names the bookend hash as its xorb")
            if end <= start:
                raise FormatError(f"{where} term {i}: empty or reversed chunk range [{start}, {end})")
            if end > MAX_XORB_CHUNKS:
                raise FormatError(f"{where} term {i}: chunk range [{start}, {end}) beyond the {MAX_XORB_CHUNKS}-chunk limit")
            if not 0 < size <= (end - start) * MAX_CHUNK_BYTES:
                raise FormatError(f"{where} term {i}: {size} unpacked bytes cannot come from {end - start} chunks")
            terms.append(Term(xh, start, end, size))
        verification = [cur.take(_HASH_ENTRY, f"{where} verification {i}")[0] for i in range(n_terms)] if verif else None
        sha256 = _swap_words(cur.take(_HASH_ENTRY, f"{where} metadata extension")[0]) if meta else None
        if not terms and fh != ZERO_HASH:
            raise FormatError(f"{where}: a file without terms is the empty file, whose hash is all zeros")
        files.append(ShardFile(fh, terms, verification, sha256, flags))

    xorbs: list[ShardXorb] = []
    seen: set[bytes] = set()
    cas_start = cur.pos
    while True:
        xh, xflags, n_chunks, unpacked, on_disk = cur.take(_XORB_HEADER, f"CAS-info block {len(xorbs)} header")
        if xh == _BOOKEND_HASH:
            break
        where = f"shard CAS-info for xorb {hash_hex(xh)}"
        if xh in seen:
            raise FormatError(f"{where}: listed twice")
        seen.add(xh)
        if n_chunks == 0 or n_chunks > MAX_XORB_CHUNKS:
            raise FormatError(f"{where}: {n_chunks} chunks; a xorb holds 1 to {MAX_XORB_CHUNKS}")
        cur.need(n_chunks, f"{where} with {n_chunks} chunks")
        chunks, chunk_flags, pos = [], [], 0
        for i in range(n_chunks):
            ch, offset, size, cflags, _ = cur.take(_CHUNK, f"{where} chunk {i}")
            if not 0 < size <= MAX_CHUNK_BYTES:
                raise FormatError(f"{where} chunk {i}: {size} bytes; a chunk holds 1 to {MAX_CHUNK_BYTES}")
            if offset != pos:
                raise FormatError(f"{where} chunk {i}: starts at unpacked byte {offset}, expected {pos} "
                                  f"(the sum of the sizes before it)")
            pos += size
            chunks.append((ch, offset, size))
            chunk_flags.append(cflags)
        if unpacked != pos:
            raise FormatError(f"{where}: header says {unpacked} unpacked bytes, its chunks add up to {pos}")
        xorbs.append(ShardXorb(xh, chunks, unpacked, on_disk, xflags, chunk_flags))

    if footer_size:
        foot = _FOOTER.unpack_from(data, len(data) - SHARD_FOOTER_BYTES)
        f_version, file_info_offset, xorb_info_offset = foot[0], foot[1], foot[2]
        footer_offset = foot[-1]
        if f_version != SHARD_FOOTER_VERSION:
            raise FormatError(f"shard footer version {f_version}, only {SHARD_FOOTER_VERSION} is known")
        if (file_info_offset, xorb_info_offset, footer_offset) != (_HEADER.size, cas_start, len(data) - SHARD_FOOTER_BYTES):
            raise FormatError("shard footer offsets do not match the sections found")
    elif cur.pos != len(data):
        raise FormatError(f"shard has {len(data) - cur.pos} bytes after the CAS-info bookend")
    return Shard(files, xorbs)


def encode_shard(shard: Shard) -> bytes:
    """Serialize a shard the way the client uploads it (no footer). ``encode_shard(parse_shard(b))``
    gives back ``b`` for anything hf_xet sends."""
    out = [_HEADER.pack(SHARD_HEADER_TAG, SHARD_HEADER_VERSION, 0)]
    for f in shard.files:
        flags = (f.flags & ~(FILE_FLAG_WITH_VERIFICATION | FILE_FLAG_WITH_METADATA_EXT)
                 | (FILE_FLAG_WITH_VERIFICATION if f.verification is not None else 0)
                 | (FILE_FLAG_WITH_METADATA_EXT if f.sha256 is not None else 0))
        out.append(_FILE_HEADER.pack(f.hash, flags, len(f.terms), 0))
        out += [_TERM.pack(t.xorb, 0, t.size, t.chunk_start, t.chunk_end) for t in f.terms]
        if f.verification is not None:
            out += [_HASH_ENTRY.pack(v, bytes(16)) for v in f.verification]
        if f.sha256 is not None:
            out.append(_HASH_ENTRY.pack(_swap_words(f.sha256), bytes(16)))
    out.append(_FILE_HEADER.pack(_BOOKEND_HASH, 0, 0, 0))
    for x in shard.xorbs:
        out.append(_XORB_HEADER.pack(x.hash, x.flags, len(x.chunks), x.unpacked_bytes, x.bytes_on_disk))
        flags = x.chunk_flags or [0] * len(x.chunks)
        out += [_CHUNK.pack(h, off, size, fl, 0) for (h, off, size), fl in zip(x.chunks, flags, strict=True)]
    out.append(_XORB_HEADER.pack(_BOOKEND_HASH, 0, 0, 0, 0))
    return b"".join(out)


def verify_shard_file(f: ShardFile, xorb_chunks: Callable[[bytes], list[tuple[bytes, int]] | None]) -> list[tuple[bytes, int]]:
    """Check one shard file against the xorbs it names. ``xorb_chunks(xorb_hash)`` returns the stored
    xorb's [(chunk hash, unpacked size)] (from the server's own index) or None if it is unknown.
    Checks ranges, term sizes, every verification entry and the file hash; returns the file's chunks."""
    fh = hash_hex(f.hash)
    if f.verification is None and f.terms:
        raise FormatError(f"shard file {fh}: no verification entries; they are required on upload")
    entries: list[tuple[bytes, int]] = []
    for i, t in enumerate(f.terms):
        chunks = xorb_chunks(t.xorb)
        if chunks is None:
            raise FormatError(f"shard file {fh} term {i}: xorb {hash_hex(t.xorb)} is not stored")
        if t.chunk_end > len(chunks):
            raise FormatError(f"shard file {fh} term {i}: chunks [{t.chunk_start}, {t.chunk_end}) but xorb "
                              f"{hash_hex(t.xorb)} has {len(chunks)}")
        run = chunks[t.chunk_start:t.chunk_end]
        size = sum(n for _, n in run)
        if size != t.size:
            raise FormatError(f"shard file {fh} term {i}: says {t.size} bytes, its chunks hold {size}")
        if f.verification is not None and verification_hash([h for h, _ in run]) != f.verification[i]:
            raise FormatError(f"shard file {fh} term {i}: verification entry does not match xorb {hash_hex(t.xorb)} "
                              f"chunks [{t.chunk_start}, {t.chunk_end})")
        entries.extend(run)
    got = file_hash(entries)
    if got != f.hash:
        raise FormatError(f"shard file {fh}: its chunks hash to {hash_hex(got)}")
    return entries


# ------------------------------------------------------------------------------------ global dedup

GLOBAL_DEDUP_MODULUS = 1024   # a chunk is worth a global query when its last u64 word is a multiple of this


def _word(h: bytes, i: int) -> int:
    return int.from_bytes(h[8 * i:8 * i + 8], "little")


def dedup_eligible(h: bytes) -> bool:
    """Whether the client asks the global dedup about this chunk (besides the first chunk of a file)."""
    return _word(h, 3) % GLOBAL_DEDUP_MODULUS == 0


def keyed_hash(h: bytes, key: bytes) -> bytes:
    """A chunk hash as a dedup shard with this footer key lists it."""
    return blake3.blake3(h, key=key).digest()


def encode_dedup_shard(xorbs: list[ShardXorb], *, key: bytes, created: int, expiry: int) -> bytes:
    """A full shard (footer, lookup tables) offering these xorbs for deduplication, their chunk hashes
    keyed with ``key``; the client ignores it after ``expiry`` (seconds since the epoch)."""
    if len(key) != 32 or key == ZERO_KEY:
        raise ValueError("a dedup shard's key is 32 bytes, not all zero")
    xorbs = sorted(xorbs, key=lambda x: (_word(x.hash, 0), x.hash))
    out = [_HEADER.pack(SHARD_HEADER_TAG, SHARD_HEADER_VERSION, SHARD_FOOTER_BYTES),
           _FILE_HEADER.pack(_BOOKEND_HASH, 0, 0, 0)]
    xorb_info_offset = _HEADER.size + _FILE_HEADER.size
    xorb_lookup, chunk_lookup = [], []
    index = 0   # in 48-byte entries from the start of the CAS-info section
    for x in xorbs:
        xorb_lookup.append((_word(x.hash, 0), index))
        out.append(_XORB_HEADER.pack(x.hash, x.flags, len(x.chunks), x.unpacked_bytes, x.bytes_on_disk))
        for i, (h, offset, size) in enumerate(x.chunks):
            k = keyed_hash(h, key)
            chunk_lookup.append((_word(k, 0), index, i))
            out.append(_CHUNK.pack(k, offset, size, 0, 0))
        index += 1 + len(x.chunks)
    out.append(_XORB_HEADER.pack(_BOOKEND_HASH, 0, 0, 0, 0))
    pos = sum(len(b) for b in out)
    file_lookup_offset = xorb_lookup_offset = pos   # (no files)
    out += [struct.pack("<QI", k, i) for k, i in xorb_lookup]
    chunk_lookup_offset = xorb_lookup_offset + 12 * len(xorb_lookup)
    chunk_lookup.sort(key=lambda e: e[0])
    out += [struct.pack("<QII", k, i, j) for k, i, j in chunk_lookup]
    footer_offset = chunk_lookup_offset + 16 * len(chunk_lookup)
    out.append(_FOOTER.pack(SHARD_FOOTER_VERSION, _HEADER.size, xorb_info_offset,
                            file_lookup_offset, 0, xorb_lookup_offset, len(xorb_lookup),
                            chunk_lookup_offset, len(chunk_lookup), key, created, expiry,
                            0, 0, 0, 0, 0, 0,
                            sum(x.bytes_on_disk for x in xorbs), 0, sum(x.unpacked_bytes for x in xorbs),
                            footer_offset))
    return b"".join(out)
