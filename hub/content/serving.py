"""Serving stored bytes to clients: a presigned redirect where the store can sign URLs (bytes then
bypass the hub), otherwise a stream from the local directory with single-range support. Never gzip:
Range offsets refer to the raw bytes."""
from __future__ import annotations

from urllib.parse import quote

from django.conf import settings
from django.http import FileResponse, HttpRequest, HttpResponse, StreamingHttpResponse

from hub.content import blobs
from hub.errors import NotFound, RangeNotSatisfiable


def blob_response(request: HttpRequest, key: str, size: int, headers: dict, filename: str) -> HttpResponse:
    """GET of stored bytes at `key`, with `headers` (ETag, metadata) on whatever answers."""
    store = blobs.object_store()
    store.check_reachable()
    url = store.presign_get(key, expires=settings.HUB_PRESIGN_SECONDS, filename=filename)
    if url:
        # S3/RGW answer an unsatisfiable range with 416 but no `Content-Range: bytes */size`: refuse it here.
        parse_range(request.META.get("HTTP_RANGE", ""), size)
        resp = HttpResponse(status=302)
        resp["Location"] = url
        for k, v in headers.items():
            resp[k] = v
        resp["Cache-Control"] = "no-store"
        return resp
    return serve_local(request, store.local_path(key), size, headers, filename)


def parse_range(header: str, size: int) -> tuple[int, int] | None:
    """Single byte range → (start, end exclusive); None means 'serve the whole file'."""
    if not header or not header.startswith("bytes=") or "," in header:
        return None
    spec = header[6:].strip()
    first, _, last = spec.partition("-")
    try:
        if first == "":
            n = int(last)
            if n <= 0:
                return None
            return max(0, size - n), size
        start = int(first)
        end = int(last) + 1 if last else size
    except ValueError:
        return None
    if start >= size:
        raise RangeNotSatisfiable(f"range start {start} is beyond the file size {size}",
                                  headers={"Content-Range": f"bytes */{size}"})
    if end <= start:
        return None
    return start, min(end, size)


def serve_local(request: HttpRequest, path: str, size: int, headers: dict, filename: str) -> HttpResponse:
    rng = parse_range(request.META.get("HTTP_RANGE", ""), size)
    start, end = rng if rng else (0, size)
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        raise NotFound("the bytes of this file are missing from the object store; tell the operator") from None
    if end == size:
        # To the end of the file: FileResponse lets gunicorn use sendfile.
        fh.seek(start)
        resp = FileResponse(fh, content_type="application/octet-stream")
    else:
        fh.seek(start)
        resp = StreamingHttpResponse(file_range(fh, end - start), content_type="application/octet-stream")
    return ranged(resp, rng, size, headers, filename)


def ranged(resp: HttpResponse, rng: tuple[int, int] | None, size: int, headers: dict, filename: str
           ) -> HttpResponse:
    """`resp`, whose body is bytes `rng` of the file (None: all of it), with its status and headers."""
    start, end = rng if rng else (0, size)
    resp.status_code = 206 if rng else 200
    for k, v in headers.items():
        resp[k] = v
    resp["Content-Length"] = str(end - start)
    if rng:
        resp["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
    resp["Content-Disposition"] = f'inline; filename="{quote(filename)}"'
    return resp


def file_range(fh, remaining: int):
    """The next `remaining` bytes of an open file, in pieces of up to 1 MiB (fewer if it ends first);
    closes it at the end."""
    with fh:
        while remaining > 0:
            chunk = fh.read(min(1 << 20, remaining))
            if not chunk:
                return
            remaining -= len(chunk)
            yield chunk


