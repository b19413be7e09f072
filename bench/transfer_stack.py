"""Which HTTP stack should `hub pull` use? One file over loopback, one stream, to /dev/null, to a
fresh file, and to a fresh file with sha256 (inline, or overlapped in a second thread).

The server is a tiny sendfile(2) server so that the client is the bottleneck, as with nginx or S3
on a fast network. Medians of --runs runs; compare ratios within one run (the machine is shared).

    .venv/bin/python bench/transfer_stack.py --size 1GiB --runs 3
"""
from __future__ import annotations

import argparse
import hashlib
import http.client
import os
import queue
import statistics
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CHUNK = 1 << 20


def serve(path: str) -> ThreadingHTTPServer:
    size = os.path.getsize(path)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            start, end = 0, size
            rng = self.headers.get("Range")
            if rng:
                a, _, b = rng[6:].partition("-")
                start, end = int(a), (int(b) + 1 if b else size)
            self.send_response(206 if rng else 200)
            self.send_header("Content-Length", str(end - start))
            self.end_headers()
            with open(path, "rb") as fh:
                self.connection.sendfile(fh, start, end - start)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def sink_null(chunks) -> None:
    for _ in chunks:
        pass


def sink_file(chunks, out: str) -> None:
    with open(out, "wb") as fh:
        for c in chunks:
            fh.write(c)


def sink_file_hash_inline(chunks, out: str) -> str:
    h = hashlib.sha256()
    with open(out, "wb") as fh:
        for c in chunks:
            fh.write(c)
            h.update(c)
    return h.hexdigest()


def sink_file_hash_thread(chunks, out: str) -> str:
    """Writes in this thread, hashes in another: hashlib releases the GIL on large buffers."""
    q: queue.Queue = queue.Queue(maxsize=16)
    h = hashlib.sha256()

    def hasher() -> None:
        while (c := q.get()) is not None:
            h.update(c)

    t = threading.Thread(target=hasher)
    t.start()
    with open(out, "wb") as fh:
        for c in chunks:
            fh.write(c)
            q.put(c)
    q.put(None)
    t.join()
    return h.hexdigest()


def chunks_urllib3(url: str):
    import urllib3

    pool = urllib3.PoolManager()
    resp = pool.request("GET", url, preload_content=False)
    while c := resp.read(CHUNK):
        yield c
    resp.release_conn()


def chunks_requests(url: str):
    import requests

    with requests.get(url, stream=True) as resp:
        yield from resp.iter_content(CHUNK)


def chunks_httpx(url: str):
    import httpx2 as httpx

    with httpx.Client() as client, client.stream("GET", url) as resp:
        yield from resp.iter_bytes(CHUNK)


def chunks_httpclient(url: str):
    from urllib.parse import urlsplit

    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port)
    conn.request("GET", u.path)
    resp = conn.getresponse()
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    while n := resp.readinto(buf):
        yield bytes(view[:n])
    conn.close()


STACKS = {"urllib3": chunks_urllib3, "requests": chunks_requests, "httpx2": chunks_httpx,
          "http.client": chunks_httpclient}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="512MiB")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--url", help="measure against this URL instead of the local sendfile server")
    args = ap.parse_args()
    units = {"MIB": 2**20, "GIB": 2**30}
    num = args.size.upper().rstrip("IB").rstrip("MG")
    size = int(num) * units[args.size.upper()[len(num):]]
    tmpdir = tempfile.mkdtemp(prefix="transfer-bench-")
    src = os.path.join(tmpdir, "src.bin")
    with open(src, "wb") as fh:
        for _ in range(size // CHUNK):
            fh.write(os.urandom(CHUNK))
    server = None
    url = args.url
    if not url:
        server = serve(src)
        url = f"http://127.0.0.1:{server.server_address[1]}/src.bin"
    out = os.path.join(tmpdir, "out.bin")
    cases = [("null", lambda ch: sink_null(ch)), ("file", lambda ch: sink_file(ch, out)),
             ("file+sha256 inline", lambda ch: sink_file_hash_inline(ch, out)),
             ("file+sha256 thread", lambda ch: sink_file_hash_thread(ch, out))]
    print(f"{size / 2**20:.0f} MiB, median of {args.runs} runs, MiB/s")
    print(f"{'stack':12} " + " ".join(f"{name:>20}" for name, _ in cases))
    for stack, fn in STACKS.items():
        row = []
        for _name, sink in cases:
            rates = []
            for _ in range(args.runs):
                if os.path.exists(out):
                    os.unlink(out)
                t = time.perf_counter()
                sink(fn(url))
                rates.append(size / 2**20 / (time.perf_counter() - t))
            row.append(statistics.median(rates))
        print(f"{stack:12} " + " ".join(f"{r:20.0f}" for r in row), flush=True)
    t = time.perf_counter()
    with open(src, "rb") as fh:
        h = hashlib.sha256()
        while c := fh.read(CHUNK):
            h.update(c)
    print(f"sha256 alone (page cache): {size / 2**20 / (time.perf_counter() - t):.0f} MiB/s")
    if server:
        server.shutdown()
    os.unlink(src)
    if os.path.exists(out):
        os.unlink(out)
    os.rmdir(tmpdir)


if __name__ == "__main__":
    main()
