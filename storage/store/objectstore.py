"""One object-store interface, two implementations: S3 (boto3; MinIO, Ceph RGW, AWS) and a local
directory. Nothing above this module knows which one runs.

Keys are '/'-separated relative names. Writes are atomic: a reader sees the whole object or none.
Large bytes never pass through memory whole: reads are iterators of chunks, writes take streams.
Where the backend can sign URLs (S3), clients move bytes straight to and from the store; where it
cannot (local), `presign_*` return None and the hub serves the bytes itself.
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import queue
import shutil
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import BinaryIO
from urllib.parse import unquote, urlparse

import blake3

CHUNK = 8 * 1024 * 1024


class StoreUnavailableError(OSError):
    """The object store cannot be reached or answered with a server error; retry later."""


class StoreFullError(StoreUnavailableError):
    """The object store has no room for the bytes (a full disk or volume): nothing a client can fix
    by retrying at once; an operator has to free space or add more."""


class StoreRefusedError(OSError):
    """The object store refused an operation for a reason other than an outage (e.g. it would not
    assemble a multipart upload from its parts)."""


class ObjectMissingError(FileNotFoundError):
    pass


class ObjectStore(ABC):
    @abstractmethod
    def size(self, key: str) -> int | None:
        """Size of the object, or None if it does not exist."""

    @abstractmethod
    def put_stream(self, key: str, stream: BinaryIO, size: int | None = None) -> None:
        """Stores everything `stream` yields under `key`, atomically."""

    def put_bytes(self, key: str, data: bytes) -> None:
        import io

        self.put_stream(key, io.BytesIO(data), len(data))

    @abstractmethod
    def read(self, key: str, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        """Chunks of bytes [start, end) of the object (end None = to the end)."""

    def read_bytes(self, key: str) -> bytes:
        return b"".join(self.read(key))

    @abstractmethod
    def delete(self, key: str) -> None: ...

    def presign_get(self, key: str, *, expires: int, filename: str | None = None) -> str | None:
        return None

    def presign_get_many(self, keys: list[str], *, expires: int) -> list[str] | None:
        """Presigned GET URLs for many keys, signed in one go; None where the store cannot sign."""
        urls = []
        for key in keys:
            url = self.presign_get(key, expires=expires)
            if url is None:
                return None
            urls.append(url)
        return urls

    def presign_put_checked(self, items: list[tuple[str, str]], *, expires: int) -> list[str] | None:
        """PUT URLs for (key, sha256) items that the store itself checks: a request must carry
        `x-amz-content-sha256: <sha256>` (signed into the URL) and a body that hashes to it, else
        nothing is stored. None where the store cannot (the local directory; the hub receives those
        bytes itself and hashes them)."""
        return None

    def presign_parts_checked(self, key: str, upload_id: str, parts: list[tuple[int, str]], *,
                              expires: int) -> list[str] | None:
        """Part URLs of a multipart upload, one per (part number, sha256), each checked by the store
        as presign_put_checked's are. None where the store cannot."""
        return None

    @abstractmethod
    def create_multipart(self, key: str) -> str: ...

    def presign_part(self, key: str, upload_id: str, part_number: int, *, expires: int) -> str | None:
        return None

    @abstractmethod
    def put_part(self, key: str, upload_id: str, part_number: int, stream: BinaryIO, size: int) -> str:
        """Stores one part; returns its ETag."""

    @abstractmethod
    def list_parts(self, key: str, upload_id: str) -> dict[int, tuple[str, int]]:
        """{part number: (etag, size)} of the parts stored so far."""

    @abstractmethod
    def complete_multipart(self, key: str, upload_id: str, parts: list[tuple[int, str]]) -> None: ...

    @abstractmethod
    def abort_multipart(self, key: str, upload_id: str) -> None: ...

    @abstractmethod
    def list(self, prefix: str) -> Iterator[tuple[str, int, float]]:
        """(key, size, mtime as a Unix time) of every object whose key starts with `prefix`."""

    def list_uploads(self, prefix: str) -> Iterator[tuple[str, str, float]]:
        """(key, upload id, started as a Unix time) of multipart uploads in progress under `prefix`."""
        return iter(())

    def local_path(self, key: str) -> str | None:
        return None

    def check_reachable(self) -> None:
        """Raises StoreUnavailableError if the store cannot be reached. Called before handing out
        presigned URLs, which a dead store would otherwise turn into a client's failed connection
        to it instead of the hub's 503. A local directory is always there."""
        return None

    def promote(self, src: str, dst: str) -> str:
        """Makes the verified object at `src` durable as a blob; returns the key it now lives under.
        Object stores without cheap renames keep it where it is (copying gigabytes buys nothing)."""
        return src

    def sha256(self, key: str) -> tuple[str, int]:
        """Reads the object back: (sha256 hex, size)."""
        sha, _b3, n = self.digests(key)
        return sha, n

    def digests(self, key: str) -> tuple[str, str, int]:
        """Reads the object back: (sha256 hex, blake3 hex, size) of the same bytes. blake3 costs a
        fifth of sha256 per byte; recorded beside a checked sha256, it lets clients verify a
        download at that cost (Blob.blake3). The hashing runs in a thread of its own, so that
        fetching the next chunk overlaps hashing this one (both release the GIL): the read costs
        about the slower of the two rather than their sum."""
        h, b3 = hashlib.sha256(), blake3.blake3(max_threads=1)
        chunks: queue.Queue = queue.Queue(maxsize=4)

        def hash_chunks() -> None:
            while (chunk := chunks.get()) is not None:
                h.update(chunk)
                b3.update(chunk)

        hasher = threading.Thread(target=hash_chunks, name="sha256-readback", daemon=True)
        hasher.start()
        n = 0
        try:
            for chunk in self.read(key):
                chunks.put(chunk)
                n += len(chunk)
        finally:
            chunks.put(None)
            hasher.join()
        return h.hexdigest(), b3.hexdigest(), n


@contextlib.contextmanager
def _writing(root: str):
    """Turns a local write failure the hub cannot fix into the store's own errors: no room
    (StoreFullError), a read-only or failing disk (StoreUnavailableError). Callers then keep what a
    client has sent so far, as for an outage."""
    try:
        yield
    except OSError as err:
        if err.errno in (errno.ENOSPC, errno.EDQUOT):
            raise StoreFullError(f"the object directory {root} is full: {err.strerror}") from err
        if err.errno in (errno.EROFS, errno.EIO):
            raise StoreUnavailableError(f"the object directory {root} cannot be written: {err.strerror}") from err
        raise


class LocalStore(ObjectStore):
    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        os.makedirs(os.path.join(self.root, ".tmp"), exist_ok=True)
        os.makedirs(os.path.join(self.root, ".uploads"), exist_ok=True)

    def _path(self, key: str) -> str:
        path = os.path.normpath(os.path.join(self.root, key))
        if not path.startswith(self.root + os.sep) or key.startswith("."):
            raise ValueError(f"bad object key {key!r}")
        return path

    def size(self, key: str) -> int | None:
        try:
            return os.stat(self._path(key)).st_size
        except FileNotFoundError:
            return None

    def _tmp(self) -> str:
        return os.path.join(self.root, ".tmp", uuid.uuid4().hex)

    def _install(self, tmp: str, key: str) -> None:
        dest = self._path(key)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        os.replace(tmp, dest)

    def put_stream(self, key: str, stream: BinaryIO, size: int | None = None) -> None:
        tmp = self._tmp()
        try:
            with _writing(self.root), open(tmp, "wb") as out:
                shutil.copyfileobj(stream, out, CHUNK)
                out.flush()
                os.fsync(out.fileno())
            self._install(tmp, key)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def read(self, key: str, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        try:
            fh = open(self._path(key), "rb")
        except FileNotFoundError:
            raise ObjectMissingError(key) from None
        with fh:
            fh.seek(start)
            remaining = None if end is None else end - start
            while remaining is None or remaining > 0:
                chunk = fh.read(CHUNK if remaining is None else min(CHUNK, remaining))
                if not chunk:
                    break
                if remaining is not None:
                    remaining -= len(chunk)
                yield chunk

    def delete(self, key: str) -> None:
        try:
            os.unlink(self._path(key))
        except FileNotFoundError:
            pass

    def local_path(self, key: str) -> str | None:
        return self._path(key)

    def promote(self, src: str, dst: str) -> str:
        self._install(self._path(src), dst)
        return dst

    def _upload_dir(self, upload_id: str) -> str:
        if not upload_id.isalnum():
            raise ValueError("bad upload id")
        return os.path.join(self.root, ".uploads", upload_id)

    def create_multipart(self, key: str) -> str:
        upload_id = uuid.uuid4().hex
        with _writing(self.root):
            os.makedirs(self._upload_dir(upload_id))
        return upload_id

    def put_part(self, key: str, upload_id: str, part_number: int, stream: BinaryIO, size: int) -> str:
        directory = self._upload_dir(upload_id)
        if not os.path.isdir(directory):
            raise ObjectMissingError(f"upload {upload_id}")
        tmp = self._tmp()
        md5 = hashlib.md5()
        written = 0
        try:
            with _writing(self.root), open(tmp, "wb") as out:
                while written < size:
                    chunk = stream.read(min(CHUNK, size - written))
                    if not chunk:
                        break
                    md5.update(chunk)
                    out.write(chunk)
                    written += len(chunk)
            if written != size:
                raise ValueError(f"part {part_number}: expected {size} bytes, got {written}")
            os.replace(tmp, os.path.join(directory, f"{part_number:05d}"))
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return f'"{md5.hexdigest()}"'

    def list_parts(self, key: str, upload_id: str) -> dict[int, tuple[str, int]]:
        directory = self._upload_dir(upload_id)
        if not os.path.isdir(directory):
            raise ObjectMissingError(f"upload {upload_id}")
        return {int(name): ("", os.stat(os.path.join(directory, name)).st_size) for name in os.listdir(directory)}

    def complete_multipart(self, key: str, upload_id: str, parts: list[tuple[int, str]]) -> None:
        directory = self._upload_dir(upload_id)
        if not os.path.isdir(directory):
            raise ObjectMissingError(f"upload {upload_id}")
        tmp = self._tmp()
        try:
            with _writing(self.root), open(tmp, "wb") as out:
                for number, _etag in sorted(parts):
                    try:
                        src = open(os.path.join(directory, f"{number:05d}"), "rb")
                    except FileNotFoundError:
                        raise StoreRefusedError(f"part {number} of upload {upload_id} is not stored") from None
                    with src:
                        shutil.copyfileobj(src, out, CHUNK)
                out.flush()
                os.fsync(out.fileno())
            self._install(tmp, key)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        shutil.rmtree(directory, ignore_errors=True)

    def abort_multipart(self, key: str, upload_id: str) -> None:
        shutil.rmtree(self._upload_dir(upload_id), ignore_errors=True)

    def list(self, prefix: str) -> Iterator[tuple[str, int, float]]:
        base = os.path.join(self.root, os.path.dirname(prefix)) if "/" in prefix else self.root
        for dirpath, dirnames, filenames in os.walk(base):
            if dirpath == self.root:
                dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for name in filenames:
                full = os.path.join(dirpath, name)
                key = os.path.relpath(full, self.root).replace(os.sep, "/")
                if key.startswith(prefix):
                    try:
                        st = os.stat(full)
                    except FileNotFoundError:
                        continue
                    yield key, st.st_size, st.st_mtime

    def list_uploads(self, prefix: str) -> Iterator[tuple[str, str, float]]:
        """Local multipart uploads do not remember their key: every one is listed (key '')."""
        uploads = os.path.join(self.root, ".uploads")
        for name in os.listdir(uploads):
            try:
                yield "", name, os.stat(os.path.join(uploads, name)).st_mtime
            except FileNotFoundError:
                continue


class S3Store(ObjectStore):
    # How long a server process trusts its last look at the store (one HEAD of the bucket at most
    # this often while presigned URLs are handed out).
    PROBE_SECONDS = 2.0

    def __init__(self, bucket: str, prefix: str = "", endpoint_url: str | None = None) -> None:
        import boto3
        from botocore.config import Config

        self.bucket = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        # Every byte the hub PUTs is hashed by the hub itself (sha256 of a blob, blake3 of a xorb's
        # chunks) and checked again when read, so botocore's own passes over the body are dropped:
        # over plain http it would sha256 every body to sign it and, by default, CRC32 it too — two
        # extra reads of each byte in Python, most of the hub's CPU on a proxied upload (bench/README,
        # Xet section). The signature still covers the request; the body goes as UNSIGNED-PAYLOAD,
        # as every presigned PUT does.
        config = Config(
            signature_version="s3v4",
            s3={"addressing_style": os.environ.get("HUB_S3_ADDRESSING", "path"), "payload_signing_enabled": False},
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
            retries={"max_attempts": 3, "mode": "standard"},
            connect_timeout=5,
            read_timeout=60,
            max_pool_connections=32,
        )
        self.client = boto3.client("s3", endpoint_url=endpoint_url or os.environ.get("AWS_ENDPOINT_URL"),
                                   region_name=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"), config=config)
        # The probe fails fast: one attempt, short timeouts, so a dead store delays a request by seconds at most.
        self._probe_client = boto3.client(
            "s3", endpoint_url=endpoint_url or os.environ.get("AWS_ENDPOINT_URL"),
            region_name=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
            config=config.merge(Config(retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=1,
                                       read_timeout=2)))
        self._probe: tuple[float, bool] = (-1e9, True)  # (monotonic time, reachable)

    def _key(self, key: str) -> str:
        return self.prefix + key

    def _call(self, fn, **kwargs):
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return fn(**kwargs)
        except ClientError as err:
            code = err.response.get("Error", {}).get("Code", "")
            status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            if code in ("NoSuchKey", "404", "NotFound", "NoSuchUpload"):
                raise ObjectMissingError(kwargs.get("Key", "")) from err
            if status == 507 or code in ("XMinioStorageFull", "InsufficientStorage"):  # (reads still work)
                raise StoreFullError(f"object store full ({code}): {err}") from err
            if status >= 500 or code in ("SlowDown", "ServiceUnavailable", "RequestTimeout"):
                self._probe = (time.monotonic(), False)
                raise StoreUnavailableError(f"object store error {code}: {err}") from err
            raise
        except BotoCoreError as err:  # connection refused, timeouts, DNS
            self._probe = (time.monotonic(), False)
            raise StoreUnavailableError(f"object store unreachable: {err}") from err

    def check_reachable(self) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        at, ok = self._probe
        now = time.monotonic()
        if now - at >= self.PROBE_SECONDS:
            try:
                self._probe_client.head_bucket(Bucket=self.bucket)
                ok = True
            except ClientError as err:  # it answered: reachable unless it answered with a server error
                ok = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) < 500
            except BotoCoreError:
                ok = False
            self._probe = (now, ok)
        if not ok:
            raise StoreUnavailableError("object store unreachable (its last health check failed)")

    def ensure_bucket(self) -> None:
        from botocore.exceptions import ClientError

        try:
            self._call(self.client.head_bucket, Bucket=self.bucket)
        except (ClientError, ObjectMissingError):
            self._call(self.client.create_bucket, Bucket=self.bucket)

    def size(self, key: str) -> int | None:
        try:
            return self._call(self.client.head_object, Bucket=self.bucket, Key=self._key(key))["ContentLength"]
        except ObjectMissingError:
            return None

    def put_stream(self, key: str, stream: BinaryIO, size: int | None = None) -> None:
        from boto3.s3.transfer import TransferConfig
        from botocore.exceptions import BotoCoreError

        try:
            # Up to 80 MiB (a whole xorb) in one PUT: a multipart upload would cost two more round trips.
            self.client.upload_fileobj(stream, self.bucket, self._key(key),
                                       Config=TransferConfig(multipart_threshold=80 * 2**20,
                                                             multipart_chunksize=64 * 2**20, max_concurrency=4))
        except BotoCoreError as err:
            raise StoreUnavailableError(f"object store unreachable: {err}") from err

    def read(self, key: str, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        kwargs = {"Bucket": self.bucket, "Key": self._key(key)}
        if start or end is not None:
            kwargs["Range"] = f"bytes={start}-{'' if end is None else end - 1}"
        if end is not None and end <= start:
            return iter(())
        body = self._call(self.client.get_object, **kwargs)["Body"]
        return self._iter_body(body)

    @staticmethod
    def _iter_body(body) -> Iterator[bytes]:
        from botocore.exceptions import BotoCoreError
        from urllib3.exceptions import HTTPError

        try:
            with body:
                while chunk := body.read(CHUNK):
                    yield chunk
        except (BotoCoreError, HTTPError, ConnectionError) as err:  # the store went away mid-body
            raise StoreUnavailableError(f"object store connection lost during a read: {err}") from err

    def delete(self, key: str) -> None:
        self._call(self.client.delete_object, Bucket=self.bucket, Key=self._key(key))

    def presign_get(self, key: str, *, expires: int, filename: str | None = None) -> str | None:
        params = {"Bucket": self.bucket, "Key": self._key(key)}
        if filename:
            safe = filename.replace('"', "").replace("\\", "")
            params["ResponseContentDisposition"] = f'inline; filename="{safe}"'
        return self.client.generate_presigned_url("get_object", Params=params, ExpiresIn=expires)

    def presign_get_many(self, keys: list[str], *, expires: int) -> list[str] | None:
        urls = self._presign("GET", [(k, None) for k in keys], expires)
        return super().presign_get_many(keys, expires=expires) if urls is None else urls

    def presign_put_checked(self, items: list[tuple[str, str]], *, expires: int) -> list[str] | None:
        return self._presign("PUT", items, expires)

    def presign_parts_checked(self, key: str, upload_id: str, parts: list[tuple[int, str]], *,
                              expires: int) -> list[str] | None:
        return self._presign("PUT", [(key, sha) for _n, sha in parts], expires,
                             [{"partNumber": str(n), "uploadId": upload_id} for n, _sha in parts])

    def _presign(self, method: str, items: list[tuple[str, str | None]], expires: int,
                 params: list[dict[str, str]] | None = None) -> list[str] | None:
        """storage.store.sigv4's URLs, or None where it cannot sign (virtual-hosted addressing,
        botocore's credentials moved)."""
        from storage.store.sigv4 import presign_urls

        try:
            if self.client.meta.config.s3.get("addressing_style") != "path":
                raise ValueError("virtual-hosted addressing")
            creds = self.client._request_signer._credentials.get_frozen_credentials()
        except (AttributeError, ValueError):
            return None
        return presign_urls(method, self.client.meta.endpoint_url, self.bucket,
                            [(self._key(k), sha) for k, sha in items], access_key=creds.access_key,
                            secret_key=creds.secret_key, region=self.client.meta.region_name, expires=expires,
                            session_token=creds.token, params=params)

    def create_multipart(self, key: str) -> str:
        return self._call(self.client.create_multipart_upload, Bucket=self.bucket, Key=self._key(key))["UploadId"]

    def presign_part(self, key: str, upload_id: str, part_number: int, *, expires: int) -> str | None:
        return self.client.generate_presigned_url(
            "upload_part", ExpiresIn=expires,
            Params={"Bucket": self.bucket, "Key": self._key(key), "UploadId": upload_id, "PartNumber": part_number})

    def put_part(self, key: str, upload_id: str, part_number: int, stream: BinaryIO, size: int) -> str:
        resp = self._call(self.client.upload_part, Bucket=self.bucket, Key=self._key(key), UploadId=upload_id,
                          PartNumber=part_number, Body=stream, ContentLength=size)
        return resp["ETag"]

    def list_parts(self, key: str, upload_id: str) -> dict[int, tuple[str, int]]:
        parts: dict[int, tuple[str, int]] = {}
        marker = 0
        while True:
            resp = self._call(self.client.list_parts, Bucket=self.bucket, Key=self._key(key), UploadId=upload_id,
                              PartNumberMarker=marker)
            for p in resp.get("Parts", []):
                parts[p["PartNumber"]] = (p["ETag"], p["Size"])
            if not resp.get("IsTruncated"):
                return parts
            marker = resp["NextPartNumberMarker"]

    def complete_multipart(self, key: str, upload_id: str, parts: list[tuple[int, str]]) -> None:
        from botocore.exceptions import ClientError

        try:
            self._call(self.client.complete_multipart_upload, Bucket=self.bucket, Key=self._key(key),
                       UploadId=upload_id,
                       MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in sorted(parts)]})
        except ClientError as err:  # (outages and a missing upload are mapped by _call)
            error = err.response.get("Error", {})
            raise StoreRefusedError(f"{error.get('Code', 'error')}: {error.get('Message', err)}") from err

    def abort_multipart(self, key: str, upload_id: str) -> None:
        try:
            self._call(self.client.abort_multipart_upload, Bucket=self.bucket, Key=self._key(key),
                       UploadId=upload_id)
        except ObjectMissingError:
            pass

    def list(self, prefix: str) -> Iterator[tuple[str, int, float]]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self._key(prefix))
        try:
            for page in pages:
                for obj in page.get("Contents", []):
                    yield obj["Key"][len(self.prefix):], obj["Size"], obj["LastModified"].timestamp()
        except Exception as err:  # noqa: BLE001 — botocore raises several unrelated types
            raise StoreUnavailableError(f"cannot list the object store: {err}") from err

    def list_uploads(self, prefix: str) -> Iterator[tuple[str, str, float]]:
        pages = self.client.get_paginator("list_multipart_uploads").paginate(Bucket=self.bucket,
                                                                             Prefix=self._key(prefix))
        for page in pages:
            for up in page.get("Uploads", []):
                yield up["Key"][len(self.prefix):], up["UploadId"], up["Initiated"].timestamp()


def from_url(url: str) -> ObjectStore:
    """`file:///dir` or `s3://bucket[/prefix]` (credentials and endpoint from the AWS_* variables)."""
    parsed = urlparse(url)
    if parsed.scheme == "file":
        return LocalStore(unquote(parsed.path))
    if parsed.scheme == "s3":
        if not parsed.netloc:
            raise ValueError(f"no bucket in {url!r}")
        return S3Store(parsed.netloc, parsed.path)
    raise ValueError(f"unsupported storage URL {url!r}: use file:///dir or s3://bucket[/prefix]")
