"""hub.xet.format against the bytes the real Xet client sends.

A tiny capture server (``CaptureCAS`` below) plays CAS just enough for hf_xet 1.8.0 — the client
huggingface_hub 2.4.0 uses — to upload a few seeded files: it records every request and answers with
the replies the client expects. It only records what the real client sends, so the parser is tested
against real bytes; the hub's own CAS (hub/xet/cas.py) is tested elsewhere. The same server then
serves reconstructions built from the parsed shards, and hf_xet downloads the files back through
them, which pins down the reconstruction JSON the client reads.

No Django, no database: run alone with
    .venv/bin/python -m pytest tests/test_xet_format.py -q -p no:cacheprovider
"""
from __future__ import annotations

import array
import hashlib
import io
import json
import math
import os
import random
import re
import struct
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import lz4.frame
import pytest

from hub.xet import format as xf

SEED = 20240611
TOKEN = "xet-capture-token"


# ------------------------------------------------------------------------------------ capture server

@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class CaptureCAS(ThreadingHTTPServer):
    """Just enough CAS for hf_xet to upload and download; records every request it gets.

    Upload: upload grants (``POST /v1/xorb-grants``) answer 404, so the client uses the plain
    ``POST /v1/xorbs/default/{hash}``; ``POST /v2/shards`` answers NDJSON progress events, or 404
    while ``v2_shards`` is off (then the client falls back to ``POST /v1/shards``); global-dedup
    queries answer 404; telemetry 204. Download: ``/v2/reconstructions`` (or, with ``v2_recon``
    off, ``/v1/reconstructions``) from ``files`` and ``xorbs``, which the tests fill in from what
    they parsed; the fetch URLs point back here, at ``/xorb/{hash}``.
    """

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        self.v2_shards = True
        self.v2_recon = True
        self.files: dict[str, xf.ShardFile] = {}                      # file hash hex -> parsed shard file
        self.xorbs: dict[str, tuple[bytes, list[xf.XorbChunk]]] = {}   # xorb hash hex -> (body, index)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def reconstruction(self, f: xf.ShardFile, first: int, last: int, v2: bool) -> dict:
        """Terms covering file bytes [first, last] (inclusive, as the Range header says), cut at
        chunk boundaries; one fetch entry per term with the chunks' stored byte range."""
        terms, fetch, pos, skip = [], {}, 0, None
        for t in f.terms:
            body, index = self.xorbs[xf.hash_hex(t.xorb)]
            picked = []
            for i in range(t.chunk_start, t.chunk_end):
                if pos <= last and pos + index[i].size > first:
                    if skip is None:
                        skip = first - pos
                    picked.append(i)
                pos += index[i].size
            if not picked:
                continue
            start, end = picked[0], picked[-1] + 1
            h = xf.hash_hex(t.xorb)
            terms.append({"hash": h, "unpacked_length": sum(index[i].size for i in picked),
                          "range": {"start": start, "end": end}})
            byte_range = {"start": index[start].start, "end": index[end - 1].end - 1}   # inclusive end
            url = f"{self.url}/xorb/{h}"
            if v2:
                fetch.setdefault(h, []).append({"url": url, "ranges": [{"chunks": {"start": start, "end": end},
                                                                          "bytes": byte_range}]})
            else:
                fetch.setdefault(h, []).append({"range": {"start": start, "end": end}, "url": url,
                                                "url_range": byte_range})
        return {"offset_into_first_range": skip or 0, "terms": terms, ("xorbs" if v2 else "fetch_info"): fetch}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: CaptureCAS

    def log_message(self, *args):
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = bytearray()
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                out += self.rfile.read(size)
                self.rfile.readline()
            self.rfile.readline()
            return bytes(out)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _reply(self, status: int, body: bytes = b"", ctype: str = "application/json", headers=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _handle(self):
        body = self._body()
        srv, path = self.server, self.path
        with srv.lock:
            srv.requests.append(Request(self.command, path, {k.lower(): v for k, v in self.headers.items()}, body))
        post = self.command == "POST"
        if post and path.startswith("/v1/xorb-grants/"):
            return self._reply(404)                       # "no grants here": use POST /v1/xorbs
        if post and path.startswith("/v1/xorbs/"):
            return self._reply(200, b'{"was_inserted": true}')
        if post and path == "/v2/shards":
            if not srv.v2_shards:
                return self._reply(404)
            events = [{"type": "validating", "verified": 0, "total": 1}, {"type": "validating", "verified": 1, "total": 1},
                      {"type": "committing", "stage": "uploading"}, {"type": "committing", "stage": "syncing"},
                      {"type": "result", "result": 1}]
            return self._reply(200, "".join(json.dumps(e) + "\n" for e in events).encode(), "application/x-ndjson")
        if post and path == "/v1/shards":
            return self._reply(200, b'{"result": 1}')
        if post and path == "/v1/telemetry":
            return self._reply(204)
        m = re.fullmatch(r"/(v1|v2)/reconstructions/([0-9a-f]{64})", path)
        if self.command == "GET" and m:
            if (m.group(1) == "v2") != srv.v2_recon or m.group(2) not in srv.files:
                return self._reply(404)
            f = srv.files[m.group(2)]
            first, last = 0, f.size - 1
            if rng := re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", "")):
                first = int(rng.group(1))
                last = min(int(rng.group(2)), f.size - 1) if rng.group(2) else f.size - 1
            if first >= f.size:
                return self._reply(416)
            return self._reply(200, json.dumps(srv.reconstruction(f, first, last, m.group(1) == "v2")).encode())
        m = re.fullmatch(r"/xorb/([0-9a-f]{64})", path)
        if self.command == "GET" and m and m.group(1) in srv.xorbs:
            data = srv.xorbs[m.group(1)][0]
            a, b = map(int, re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers["Range"]).groups())
            return self._reply(206, data[a:b + 1], "application/octet-stream",
                               [("Content-Range", f"bytes {a}-{b}/{len(data)}")])
        return self._reply(404)                           # incl. GET /v1/chunks/... (global dedup): not found

    do_GET = do_POST = do_PUT = do_HEAD = _handle


# ------------------------------------------------------------------------------------ the capture

def _files() -> dict[str, bytes]:
    rng = random.Random(SEED)
    floats = array.array("f", (math.sin(i / 100.0) * 1000.0 for i in range(400_000)))
    if sys.byteorder != "little":
        floats.byteswap()
    base = rng.randbytes(2 * 1024 * 1024)
    return {
        "random.bin": rng.randbytes(3 * 1024 * 1024),        # incompressible: scheme 0
        "floats.bin": floats.tobytes(),                       # float32: byte grouping + LZ4
        "text.txt": "".join(f"row {i}: the quick brown fox jumps over the lazy dog\n"
                            for i in range(40_000)).encode(),  # LZ4
        "empty.bin": b"",
        "base.bin": base,
        "edited.bin": base[:1_000_000] + b"inserted!" * 12 + base[1_000_000:],   # dedups against base.bin
    }


@dataclass
class Capture:
    server: CaptureCAS
    files: dict[str, bytes]
    client: dict[str, tuple[str, int, str]]           # name -> (xet hash, size, sha256) as hf_xet reports them
    commits: list[list[str]]                          # the file names of each commit, in order
    uploads: list[Request] = field(default_factory=list)     # every request of the upload phase
    xorbs: dict[str, bytes] = field(default_factory=dict)    # path hash -> body
    shards: list[tuple[str, bytes]] = field(default_factory=list)   # (endpoint, body) of each accepted shard


@pytest.fixture(scope="module")
def capture(tmp_path_factory) -> Iterator[Capture]:
    hf_xet = pytest.importorskip("hf_xet")
    home = tmp_path_factory.mktemp("xet-home")
    data_dir = tmp_path_factory.mktemp("xet-files")
    files = _files()
    for name, content in files.items():
        (data_dir / name).write_bytes(content)
    server = CaptureCAS()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    commits = [["random.bin", "floats.bin", "text.txt", "empty.bin"], ["base.bin"], ["edited.bin"]]
    client = {}
    with pytest.MonkeyPatch.context() as mp:
        # A private shard cache: the client dedups against what it uploaded before, for weeks.
        mp.setenv("HF_HOME", str(home))
        mp.setenv("HF_XET_CACHE", str(home / "xet"))
        session = hf_xet.XetSession()
        for i, names in enumerate(commits):
            server.v2_shards = i < 2          # the last commit sees a CAS without /v2/shards
            with session.new_upload_commit(endpoint=server.url, token=TOKEN,
                                           token_expiry_unix_secs=int(time.time()) + 86400,
                                           custom_headers={"User-Agent": "xet-format-test"}) as commit:
                handles = {n: commit.start_upload_file(str(data_dir / n)) for n in names}
            for n, h in handles.items():
                info = h.result().xet_info
                client[n] = (info.hash, info.file_size, info.sha256)
    server.v2_shards = True
    cap = Capture(server, files, client, commits, list(server.requests))
    for r in server.requests:
        if r.method == "POST" and (m := re.fullmatch(r"/v1/xorbs/default/([0-9a-f]{64})", r.path)):
            cap.xorbs[m.group(1)] = r.body
    accepted = [r for r in server.requests if r.method == "POST" and r.path in ("/v1/shards", "/v2/shards")]
    cap.shards = [(r.path, r.body) for r in accepted if not (r.path == "/v2/shards" and any(
        q.path == "/v1/shards" and q.body == r.body for q in accepted))]
    yield cap
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def parsed(capture):
    """(xorb hash hex -> index, list of parsed shards), parsed once."""
    index = {h: xf.verify_xorb(io.BytesIO(body).read, h, limit=len(body)) for h, body in capture.xorbs.items()}
    return index, [xf.parse_shard(body) for _, body in capture.shards]


def _rebuild(capture: Capture, index, f: xf.ShardFile) -> tuple[bytes, list[tuple[bytes, int]]]:
    out, entries = [], []
    for t in f.terms:
        h = xf.hash_hex(t.xorb)
        chunks = index[h][t.chunk_start:t.chunk_end]
        data = xf.decode_chunks(capture.xorbs[h][chunks[0].start:chunks[-1].end], expected_count=len(chunks))
        assert sum(map(len, data)) == t.size
        out += data
        entries += [(c.hash, c.size) for c in chunks]
    return b"".join(out), entries


# ------------------------------------------------------------------------------------ what the client sends

def test_what_the_client_sends(capture):
    def recorded(method: str, pattern: str) -> list[Request]:
        return [r for r in capture.uploads if r.method == method and re.fullmatch(pattern, r.path)]

    # Every xorb first asks for an upload grant (JSON: serialized length + CRC-64/NVME as a decimal
    # string); the 404 sends it to POST /v1/xorbs/default/{hash}, body = chunks, no Content-Type.
    grants = recorded("POST", r"/v1/xorb-grants/default/[0-9a-f]{64}")
    assert {r.path.rsplit("/", 1)[1] for r in grants} == set(capture.xorbs)
    for r in grants:
        body = json.loads(r.body)
        assert r.headers["content-type"] == "application/json"
        assert body["length"] == len(capture.xorbs[r.path.rsplit("/", 1)[1]])
        assert body["checksum"]["algo"] == "crc64nvme" and body["checksum"]["value"].isdigit()
    posts = recorded("POST", r"/v1/xorbs/default/[0-9a-f]{64}")
    assert len(posts) == len(capture.xorbs) >= len(capture.commits)      # one xorb per commit here
    for r in posts + recorded("POST", r"/v[12]/shards"):
        assert r.headers["authorization"] == f"Bearer {TOKEN}"
        assert "content-type" not in r.headers
        assert int(r.headers["content-length"]) == len(r.body)
        assert "hf_xet/1.8" in r.headers["user-agent"] and "xet-format-test" in r.headers["user-agent"]
        assert r.headers.get("x-xet-session-id")
    # Global dedup queries use the prefix "default" (the spec says "default-merkledb").
    dedup = [r for r in capture.uploads if r.path.startswith("/v1/chunks/")]
    assert dedup and all(re.fullmatch(r"/v1/chunks/default/[0-9a-f]{64}", r.path) and r.method == "GET" for r in dedup)
    # Shards: /v2 first; on 404 the same bytes go to /v1. Every commit sends one shard (the empty file too).
    v2 = recorded("POST", "/v2/shards")
    v1 = recorded("POST", "/v1/shards")
    assert len(v2) == len(capture.commits) and len(v1) == 1 and v1[0].body == v2[-1].body
    assert [p for p, _ in capture.shards] == ["/v2/shards", "/v2/shards", "/v1/shards"]
    # Nothing else was asked of the upload side.
    others = {(r.method, r.path.split("/")[2] if r.path.count("/") > 1 else r.path) for r in capture.uploads} - {
        ("POST", "xorb-grants"), ("POST", "xorbs"), ("POST", "shards"), ("GET", "chunks"), ("POST", "telemetry")}
    assert not others, others


def test_hex_form_matches_the_client(capture, parsed):
    _, shards = parsed
    named = {xf.hash_hex(f.hash) for sh in shards for f in sh.files}
    assert {h for h, _, _ in capture.client.values()} == named
    for h in named:
        assert xf.hash_hex(xf.hash_from_hex(h)) == h
    # The spec's example (api.md): bytes 0..31 print as four byte-reversed 8-byte words. (The spec's
    # string drops the "10" of the third word: it is 62 characters long.)
    assert xf.hash_hex(bytes(range(32))) == "07060504030201000f0e0d0c0b0a09081716151413121110" "1f1e1d1c1b1a1918"
    # xet-core's own test vector (merklehash/data_hash.rs).
    raw = bytes([22, 175, 58, 132, 4, 75, 131, 214, 190, 153, 138, 66, 226, 3, 153, 242, 204, 86, 80, 234, 249, 153,
                 80, 99, 159, 80, 65, 138, 236, 231, 149, 78])
    assert xf.hash_hex(raw) == "d6834b04843aaf16f29903e2428a99be635099f9ea5056cc4e95e7ec8a41509f"


@pytest.mark.parametrize("bad", ["", "0" * 63, "0" * 65, "g" * 64, " " + "0" * 63, "0" * 32 + "-" * 32, None, b"0" * 64])
def test_hash_from_hex_refuses(bad):
    with pytest.raises(xf.FormatError):
        xf.hash_from_hex(bad)


# ------------------------------------------------------------------------------------ xorbs

def test_every_xorb_verifies_against_its_name(capture, parsed):
    index, _ = parsed
    schemes = {}
    for h, body in capture.xorbs.items():
        chunks = index[h]
        assert chunks[0].start == 0 and chunks[-1].end == len(body)      # no footer: hf_xet sends chunks only
        assert all(a.end == b.start for a, b in zip(chunks, chunks[1:], strict=False))
        assert xf.hash_hex(xf.xorb_hash([(c.hash, c.size) for c in chunks])) == h
        for c in chunks:
            schemes.setdefault(c.scheme, []).append(c.size)
        # Short reads (a socket hands out what it has) give the same index.
        body_io = io.BytesIO(body)
        assert xf.verify_xorb(lambda n, b=body_io: b.read(min(n, 1000)), h, limit=len(body)) == chunks
    assert set(schemes) == {xf.SCHEME_NONE, xf.SCHEME_LZ4, xf.SCHEME_BG4_LZ4}
    # Byte grouping is undone right when a chunk's length is not a multiple of 4 (hashes would not match).
    assert any(n % 4 for n in schemes[xf.SCHEME_BG4_LZ4])


def test_shard_cas_info_matches_the_xorbs(capture, parsed):
    index, shards = parsed
    listed = {}
    for (_, body), sh in zip(capture.shards, shards, strict=True):
        assert xf.encode_shard(sh) == body           # nothing in the shard escapes the parser
        for x in sh.xorbs:
            h = xf.hash_hex(x.hash)
            listed[h] = x
            assert [(c.hash, c.size) for c in index[h]] == [(ch, n) for ch, _, n in x.chunks]
            assert [off for _, off, _ in x.chunks] == [sum(c.size for c in index[h][:i]) for i in range(len(index[h]))]
            assert x.unpacked_bytes == sum(c.size for c in index[h])
            assert x.bytes_on_disk in (0, len(capture.xorbs[h]))       # hf_xet 1.8.0 sends 0
            assert all(fl & ~xf.CHUNK_FLAG_GLOBAL_DEDUP == 0 for fl in x.chunk_flags)
    assert set(listed) == set(capture.xorbs)         # every uploaded xorb is listed, once


def test_shard_files_rebuild_the_uploaded_bytes(capture, parsed):
    index, shards = parsed
    by_hash = {h: name for name, (h, _, _) in capture.client.items()}
    seen = set()
    for commit, sh in zip(capture.commits, shards, strict=True):
        assert sorted(by_hash[xf.hash_hex(f.hash)] for f in sh.files) == sorted(commit)
        own = {x.hash for x in sh.xorbs}
        for f in sh.files:
            name = by_hash[xf.hash_hex(f.hash)]
            seen.add(name)
            original = capture.files[name]
            data, entries = _rebuild(capture, index, f)
            assert data == original, name
            assert f.size == len(original) == capture.client[name][1]
            assert xf.file_hash(entries) == f.hash
            assert f.verification is not None and len(f.verification) == len(f.terms)
            for t, v in zip(f.terms, f.verification, strict=True):
                assert xf.verification_hash([c.hash for c in index[xf.hash_hex(t.xorb)][t.chunk_start:t.chunk_end]]) == v
            assert xf.verify_shard_file(f, lambda h: [(c.hash, c.size) for c in index.get(xf.hash_hex(h), [])] or None) == entries
            if original:
                assert f.sha256 == hashlib.sha256(original).digest()
                assert f.sha256.hex() == capture.client[name][2]
            else:
                # The empty file: all-zero Xet hash, no terms, and an all-zero "sha256" (not e3b0c442...).
                assert f.hash == xf.ZERO_HASH == xf.file_hash([]) and f.terms == []
                assert f.sha256 == bytes(32) and capture.client[name][2] == "0" * 64
            if name == "edited.bin":
                # Dedup across commits: most of it comes from the xorb uploaded with base.bin.
                reused = sum(t.size for t in f.terms if t.xorb not in own)
                assert len(f.terms) > 1 and reused > len(original) // 2
    assert seen == set(capture.files)


# ------------------------------------------------------------------------------------ download back

@pytest.mark.parametrize("version", ["v2", "v1"])
def test_hf_xet_downloads_through_our_reconstructions(capture, parsed, version, monkeypatch, tmp_path):
    """Pins the reconstruction JSON: chunk ranges end-exclusive, byte ranges end-inclusive,
    offset_into_first_range = bytes to skip in the first term; v1 is tried only after a v2 404."""
    import hf_xet

    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("HF_XET_CACHE", str(tmp_path / "xet"))
    index, shards = parsed
    s = capture.server
    s.xorbs = {h: (body, index[h]) for h, body in capture.xorbs.items()}
    s.files = {xf.hash_hex(f.hash): f for sh in shards for f in sh.files if f.terms}
    s.v2_recon = version == "v2"
    before = len(s.requests)
    group = hf_xet.XetSession().new_download_stream_group(endpoint=s.url, token=TOKEN,
                                                          token_expiry_unix_secs=int(time.time()) + 86400)
    for name in ("edited.bin", "floats.bin"):
        h, size, _ = capture.client[name]
        original = capture.files[name]
        info = hf_xet.XetFileInfo(h, size)
        assert b"".join(group.download_stream(info)) == original
        for a, b in [(1000, 200_000), (999_990, 1_000_130), (size - 1, size)]:
            assert b"".join(group.download_stream(info, start=a, end=b)) == original[a:b], (name, a, b)
    new = s.requests[before:]
    recon = [r for r in new if "/reconstructions/" in r.path]
    assert recon and all(r.headers["authorization"] == f"Bearer {TOKEN}" for r in recon)
    assert all(re.fullmatch(r"bytes=\d+-\d+", r.headers["range"]) for r in recon)          # inclusive end
    assert {r.path.split("/")[1] for r in recon} == ({"v2"} if version == "v2" else {"v1", "v2"})
    fetches = [r for r in new if r.path.startswith("/xorb/")]
    assert fetches and all("authorization" not in r.headers for r in fetches)             # presigned-style


# ------------------------------------------------------------------------------------ hostile xorbs

def _one_xorb(capture, parsed, scheme: int) -> tuple[str, bytes, list[xf.XorbChunk]]:
    index, _ = parsed
    for h, chunks in index.items():
        if any(c.scheme == scheme for c in chunks):
            return h, capture.xorbs[h], chunks
    raise AssertionError(f"no captured xorb uses scheme {scheme}")


class Reader:
    """A body reader that remembers what it was asked for."""

    def __init__(self, data: bytes):
        self.io, self.asked = io.BytesIO(data), []

    def read(self, n: int) -> bytes:
        self.asked.append(n)
        return self.io.read(n)


def test_flipped_byte_fails_the_hash(capture, parsed):
    h, body, chunks = _one_xorb(capture, parsed, xf.SCHEME_NONE)
    c = next(c for c in chunks if c.scheme == xf.SCHEME_NONE)
    bad = bytearray(body)
    bad[c.start + 8 + c.size // 2] ^= 0x01
    with pytest.raises(xf.FormatError, match="hash mismatch"):
        xf.verify_xorb(io.BytesIO(bytes(bad)).read, h, limit=len(bad))
    # In a compressed chunk a flip breaks the frame, the size, or the hash: always a FormatError.
    h, body, chunks = _one_xorb(capture, parsed, xf.SCHEME_LZ4)
    c = next(c for c in chunks if c.scheme == xf.SCHEME_LZ4)
    for pos in range(c.start + 8, c.end, max(1, (c.end - c.start) // 50)):
        bad = bytearray(body)
        bad[pos] ^= 0x40
        with pytest.raises(xf.FormatError):
            xf.verify_xorb(io.BytesIO(bytes(bad)).read, h, limit=len(bad))
    # And the name must be the one the chunks hash to.
    other = next(x for x in capture.xorbs if x != h)
    with pytest.raises(xf.FormatError, match="hash mismatch"):
        xf.verify_xorb(io.BytesIO(body).read, other, limit=len(body))
    with pytest.raises(xf.FormatError, match="64 hex digits"):
        xf.verify_xorb(io.BytesIO(body).read, h.upper()[:-1], limit=len(body))


def test_truncated_xorb(capture, parsed):
    h, body, chunks = _one_xorb(capture, parsed, xf.SCHEME_BG4_LZ4)
    c = chunks[len(chunks) // 2]
    for cut, words in [(c.start + 3, "truncated header"), (c.start + 8 + 5, "truncated"), (c.end - 1, "truncated")]:
        with pytest.raises(xf.FormatError, match=words):
            xf.verify_xorb(io.BytesIO(body[:cut]).read, h, limit=len(body))
    # Cut exactly between chunks: every chunk is sound, the hash is not.
    with pytest.raises(xf.FormatError, match="hash mismatch"):
        xf.verify_xorb(io.BytesIO(body[:c.start]).read, h, limit=len(body))
    with pytest.raises(xf.FormatError, match="empty"):
        xf.verify_xorb(io.BytesIO(b"").read, h)


def test_huge_claims_are_refused_before_reading(capture, parsed):
    h, body, chunks = _one_xorb(capture, parsed, xf.SCHEME_NONE)
    huge = bytes([0]) + (0xFFFFFF).to_bytes(3, "little") + bytes([1]) + (1000).to_bytes(3, "little")
    r = Reader(body[:chunks[1].start] + huge + bytes(64))
    t = time.perf_counter()
    with pytest.raises(xf.FormatError, match="16777215 compressed bytes, above the 262144-byte limit"):
        xf.verify_xorb(r.read, h, limit=xf.MAX_XORB_BYTES)
    assert time.perf_counter() - t < 0.5
    assert max(r.asked) <= xf.MAX_COMPRESSED_CHUNK_BYTES and max(r.asked) <= chunks[0].end
    # A claim within the chunk limit but past the xorb's limit: refused before its payload is read.
    r = Reader(body)
    with pytest.raises(xf.FormatError, match="beyond the"):
        list(xf.iter_xorb(r.read, limit=chunks[2].end - 1))
    assert sum(r.asked) <= chunks[2].start + 8
    # Unpacked size above 128 KiB.
    big = bytes([0]) + (100).to_bytes(3, "little") + bytes([1]) + (xf.MAX_CHUNK_BYTES + 1).to_bytes(3, "little")
    with pytest.raises(xf.FormatError, match="131073 unpacked bytes"):
        list(xf.iter_xorb(io.BytesIO(big + bytes(100)).read))
    # A frame that unpacks to far more than its header says stops at the claim (no bomb).
    bomb = lz4.frame.compress(b"\0" * (16 << 20))
    assert len(bomb) < xf.MAX_COMPRESSED_CHUNK_BYTES
    hdr = bytes([0]) + len(bomb).to_bytes(3, "little") + bytes([1]) + (1000).to_bytes(3, "little")
    with pytest.raises(xf.FormatError, match="more than the 1000 bytes"):
        list(xf.iter_xorb(io.BytesIO(hdr + bomb).read))


def test_unknown_scheme_version_and_size_mismatch(capture, parsed):
    h, body, chunks = _one_xorb(capture, parsed, xf.SCHEME_LZ4)
    c = next(c for c in chunks if c.scheme == xf.SCHEME_LZ4)
    for byte, value, words in [(4, 7, "unknown compression scheme 7"), (0, 1, "version 1"),
                               (5, None, "decompresses to")]:
        bad = bytearray(body)
        if value is None:       # claim one byte less than the frame holds
            bad[c.start + 5:c.start + 8] = (c.size - 1).to_bytes(3, "little")
        else:
            bad[c.start + byte] = value
        with pytest.raises(xf.FormatError, match=words):
            xf.verify_xorb(io.BytesIO(bytes(bad)).read, h, limit=len(bad))
    # Scheme 0 with stored length != unpacked length.
    odd = bytes([0]) + (10).to_bytes(3, "little") + bytes([0]) + (11).to_bytes(3, "little") + bytes(10)
    with pytest.raises(xf.FormatError, match="uncompressed chunk"):
        list(xf.iter_xorb(io.BytesIO(odd).read))


def test_too_many_chunks():
    one = xf.encode_chunk(b"x", xf.SCHEME_NONE)
    entries = [(xf.chunk_hash(b"x"), 1)] * (xf.MAX_XORB_CHUNKS + 1)
    body = one * (xf.MAX_XORB_CHUNKS + 1)
    with pytest.raises(xf.FormatError, match="more than 8192 chunks"):
        xf.verify_xorb(io.BytesIO(body).read, xf.hash_hex(xf.xorb_hash(entries)), limit=len(body))
    ok = one * xf.MAX_XORB_CHUNKS
    assert len(xf.verify_xorb(io.BytesIO(ok).read, xf.hash_hex(xf.xorb_hash(entries[:-1])))) == xf.MAX_XORB_CHUNKS


def test_a_full_xorb_of_incompressible_chunks_is_64_mib_of_data_plus_its_headers():
    """hf_xet cuts a xorb at 64 MiB of chunk data: stored, its headers take it a little past 64 MiB."""
    chunk = os.urandom(64 * 1024)
    n = xf.MAX_XORB_BYTES // len(chunk)
    body = xf.encode_chunk(chunk, xf.SCHEME_NONE) * n
    assert len(body) > xf.MAX_XORB_BYTES
    entries = [(xf.chunk_hash(chunk), len(chunk))] * n
    assert len(xf.verify_xorb(io.BytesIO(body).read, xf.hash_hex(xf.xorb_hash(entries)), limit=len(body))) == n
    more = body + xf.encode_chunk(b"x", xf.SCHEME_NONE)  # one byte of data too many
    with pytest.raises(xf.FormatError, match="above the"):
        xf.verify_xorb(io.BytesIO(more).read, xf.hash_hex(xf.xorb_hash(entries + [(xf.chunk_hash(b"x"), 1)])),
                       limit=len(more))


def test_byte_grouping_and_footer_rules():
    # 10 bytes: groups of 3, 3, 2, 2 (the first len % 4 groups take the extra bytes).
    data = bytes(range(10))
    grouped = bytes([0, 4, 8, 1, 5, 9, 2, 6, 3, 7])
    payload = lz4.frame.compress(grouped)
    chunk = bytes([0]) + len(payload).to_bytes(3, "little") + bytes([2]) + (10).to_bytes(3, "little") + payload
    assert xf.decode_chunks(chunk) == [data]
    for n in range(1, 64):
        d = random.Random(n).randbytes(n) * 40
        for scheme in (xf.SCHEME_NONE, xf.SCHEME_LZ4, xf.SCHEME_BG4_LZ4):
            assert xf.decode_chunks(xf.encode_chunk(d, scheme)) == [d]
    # A reference-format footer after the chunks is skipped (hf_xet does not send one).
    chunks = [xf.encode_chunk(bytes([i]) * 5000) for i in range(3)]
    name = xf.hash_hex(xf.xorb_hash([(xf.chunk_hash(bytes([i]) * 5000), 5000) for i in range(3)]))
    footer = b"XETBLOB\x01" + bytes(120)
    body = b"".join(chunks) + footer + struct.pack("<I", len(footer))
    assert len(xf.verify_xorb(io.BytesIO(body).read, name, limit=len(body))) == 3
    with pytest.raises(xf.FormatError, match="footer is malformed"):
        xf.verify_xorb(io.BytesIO(body[:-4] + struct.pack("<I", 5)).read, name, limit=len(body))
    with pytest.raises(xf.FormatError, match="footer"):
        xf.verify_xorb(io.BytesIO(b"".join(chunks) + footer + bytes(1 << 20)).read, name, limit=xf.MAX_XORB_BYTES)


# ------------------------------------------------------------------------------------ hostile shards

def _shard(capture, i=0) -> bytes:
    return capture.shards[i][1]


def test_shard_counts_beyond_the_end(capture, parsed):
    body = _shard(capture)
    _, shards = parsed
    # File 0's term count -> 2**32-1.
    bad = bytearray(body)
    bad[48 + 36:48 + 40] = struct.pack("<I", 0xFFFFFFFF)
    t = time.perf_counter()
    with pytest.raises(xf.FormatError, match="truncated"):
        xf.parse_shard(bytes(bad))
    assert time.perf_counter() - t < 0.1
    # The first CAS-info block's chunk count -> the limit, and -> just past the remaining bytes.
    cas = len(body) - 48 - sum(48 * (1 + len(x.chunks)) for x in shards[0].xorbs)
    for count, words in [(0xFFFFFFFF, "1 to 8192"), ((len(body) - cas - 48) // 48 + 1, "truncated")]:
        bad = bytearray(body)
        bad[cas + 36:cas + 40] = struct.pack("<I", count)
        with pytest.raises(xf.FormatError, match=words):
            xf.parse_shard(bytes(bad))
    # A footer the header claims but that is not there.
    bad = bytearray(body)
    bad[40:48] = struct.pack("<Q", 200)
    with pytest.raises(xf.FormatError):
        xf.parse_shard(bytes(bad))
    bad[40:48] = struct.pack("<Q", 1 << 62)
    with pytest.raises(xf.FormatError, match="footer"):
        xf.parse_shard(bytes(bad))


def test_truncated_shards(capture):
    for _, body in capture.shards:
        for cut in list(range(0, len(body), 47)) + [len(body) - 1]:
            with pytest.raises(xf.FormatError):
                xf.parse_shard(body[:cut])
        with pytest.raises(xf.FormatError, match="after the CAS-info bookend"):
            xf.parse_shard(body + bytes(48))


def test_inconsistent_shards(capture, parsed):
    _, shards = parsed
    body = _shard(capture)
    sh = shards[0]
    with pytest.raises(xf.FormatError, match="tag"):
        xf.parse_shard(b"X" + body[1:])
    with pytest.raises(xf.FormatError, match="version"):
        xf.parse_shard(body[:32] + struct.pack("<Q", 3) + body[40:])

    def variant(mutate) -> bytes:
        s = xf.parse_shard(body)
        mutate(s)
        return xf.encode_shard(s)

    x0 = sh.xorbs[0]
    k = next(i for i, f in enumerate(sh.files) if f.terms)
    cases = [
        (lambda s: s.xorbs[0].chunks.__setitem__(1, (x0.chunks[1][0], x0.chunks[1][1] + 1, x0.chunks[1][2])), "starts at unpacked byte"),
        (lambda s: setattr(s.xorbs[0], "unpacked_bytes", x0.unpacked_bytes + 1), "chunks add up"),
        (lambda s: s.xorbs.append(s.xorbs[0]), "listed twice"),
        (lambda s: setattr(s.files[k].terms[0], "chunk_end", s.files[k].terms[0].chunk_start), "empty or reversed"),
        (lambda s: setattr(s.files[k].terms[0], "size", 0), "unpacked bytes cannot come"),
        (lambda s: setattr(s.files[k], "verification", None), "every file or for none"),
    ]
    for mutate, words in cases:
        with pytest.raises(xf.FormatError, match=words):
            xf.parse_shard(variant(mutate))
    bad = bytearray(body)
    bad[48 + 32:48 + 36] = struct.pack("<I", 0xC0000001)
    with pytest.raises(xf.FormatError, match="unknown file flags"):
        xf.parse_shard(bytes(bad))


def test_verify_shard_file_catches_lies(capture, parsed):
    index, shards = parsed
    f = next(f for sh in shards for f in sh.files if len(f.terms) > 1)
    lookup = {xf.hash_from_hex(h): [(c.hash, c.size) for c in cs] for h, cs in index.items()}
    assert xf.verify_shard_file(f, lookup.get)
    tampered = xf.ShardFile(f.hash, f.terms, [bytes(32)] + f.verification[1:], f.sha256)
    with pytest.raises(xf.FormatError, match="verification entry does not match"):
        xf.verify_shard_file(tampered, lookup.get)
    with pytest.raises(xf.FormatError, match="is not stored"):
        xf.verify_shard_file(f, lambda h: None)
    t = f.terms[0]
    beyond = xf.Term(t.xorb, t.chunk_start, len(lookup[t.xorb]) + 1, t.size)
    with pytest.raises(xf.FormatError, match="has"):
        xf.verify_shard_file(xf.ShardFile(f.hash, [beyond] + f.terms[1:], f.verification, f.sha256), lookup.get)
    with pytest.raises(xf.FormatError, match="hash to"):
        xf.verify_shard_file(xf.ShardFile(bytes(31) + b"\1", f.terms, f.verification, f.sha256), lookup.get)


def test_a_dedup_shard_has_the_footer_and_sorted_lookup_tables_the_client_searches():
    rng = random.Random(7)
    xorbs = []
    for _ in range(3):
        chunks, pos = [], 0
        for _ in range(rng.randint(1, 40)):
            size = rng.randint(1, xf.MAX_CHUNK_BYTES)
            chunks.append((rng.randbytes(32), pos, size))
            pos += size
        xorbs.append(xf.ShardXorb(rng.randbytes(32), chunks, pos, pos + 8 * len(chunks)))
    key = rng.randbytes(32)
    data = xf.encode_dedup_shard(xorbs, key=key, created=1_700_000_000, expiry=1_800_000_000)
    sh = xf.parse_shard(data)  # the footer's offsets agree with the sections
    assert not sh.files and sorted(x.hash for x in sh.xorbs) == sorted(x.hash for x in xorbs)
    foot = struct.unpack_from("<9Q32sQQ6QQQQQ", data, len(data) - 200)
    (_, _, xorb_info, _, n_files, xorb_lookup, n_xorbs, chunk_lookup, n_chunks, fkey, created, expiry) = foot[:12]
    assert (n_files, n_xorbs, n_chunks) == (0, 3, sum(len(x.chunks) for x in xorbs))
    assert (fkey, created, expiry) == (key, 1_700_000_000, 1_800_000_000)
    assert foot[-1] == len(data) - 200 and foot[-2] == sum(x.unpacked_bytes for x in xorbs)

    def entry(i: int) -> bytes:  # the i-th 48-byte entry of the CAS-info section
        return data[xorb_info + 48 * i: xorb_info + 48 * i + 32]

    keys = [struct.unpack_from("<QI", data, xorb_lookup + 12 * i) for i in range(n_xorbs)]
    assert [k for k, _ in keys] == sorted(k for k, _ in keys)
    assert all(int.from_bytes(entry(i)[:8], "little") == k for k, i in keys)
    raw = {xf.keyed_hash(h, key): h for x in xorbs for h, _, _ in x.chunks}
    looked = [struct.unpack_from("<QII", data, chunk_lookup + 16 * i) for i in range(n_chunks)]
    assert [k for k, _, _ in looked] == sorted(k for k, _, _ in looked)
    for k, at, offset in looked:
        keyed = entry(at + 1 + offset)
        assert int.from_bytes(keyed[:8], "little") == k and keyed in raw
    with pytest.raises(ValueError):
        xf.encode_dedup_shard(xorbs, key=bytes(32), created=0, expiry=1)
