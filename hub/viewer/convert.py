"""The task's side: a data file read once (streamed, never whole in memory) into a Parquet object
whose row groups are small enough for a page of rows to read one or two of them. A Parquet file
whose row groups are small already is used as it is (only its footer is read).

The object store is read through hub.content (whether the blob came by LFS or Xet, it is one
sha256-addressed object); copies go to viewer/<digest>.parquet."""
from __future__ import annotations

import io
import json
import os
import tempfile
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from hub.content import blobs
from hub.viewer import reading

GROUP_BYTES = 256 * 2**10  # uncompressed bytes of a row group the task writes (a page reads one or two)
GROUP_ROWS = 10_000
AS_IS_BYTES = 4 * 2**20  # a source whose row groups are all at most this big is read in place
AS_IS_ROWS = 50_000
BLOCK = 4 * 2**20  # CSV / JSON Lines blocks
JSON_ARRAY_MAX = 256 * 2**20  # a JSON array is parsed whole: bigger ones are not shown


class ConvertError(Exception):
    """The file cannot be read as its format says: the message is shown to users."""


@dataclass
class Result:
    key: str
    size: int
    num_rows: int
    num_bytes: int
    row_groups: list[int]
    features: list[dict]
    partial: bool


PREFIX = "viewer/"  # the copies' keys in the object store (hub_gc removes those no commit uses)


def copy_key(digest: str) -> str:
    return f"{PREFIX}{digest[:2]}/{digest}.parquet"


class _Prefix(io.RawIOBase):
    """The first `limit` bytes of an object as a stream; when that cuts the object short, it ends
    at the last line break before the cut (no half row)."""

    def __init__(self, key: str, size: int, limit: int) -> None:
        self.chunks = blobs.object_store().read(key, 0, min(size, limit))
        self.buf = b""
        self.done = False

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        while not self.buf and not self.done:
            chunk = next(self.chunks, None)
            if chunk is None:
                self.done = True
                break
            self.buf = chunk
        if not self.buf:
            return 0
        n = min(len(b), len(self.buf))
        b[:n], self.buf = self.buf[:n], self.buf[n:]
        return n


def _prefix_stream(key: str, size: int, limit: int) -> io.BufferedReader:
    if limit >= size:
        return io.BufferedReader(_Prefix(key, size, limit), BLOCK)
    # Cut short: find the last line break of the prefix (read backwards a block at a time).
    end = limit
    while end > 0:
        start = max(0, end - BLOCK)
        tail = b"".join(blobs.object_store().read(key, start, end))
        nl = tail.rfind(b"\n")
        if nl >= 0:
            end = start + nl + 1
            break
        end = start
    return io.BufferedReader(_Prefix(key, size, end), BLOCK)


class _Writer:
    """Batches to a Parquet file in row groups of about GROUP_BYTES."""

    def __init__(self, path: str) -> None:
        self.path, self.writer, self.rows, self.bytes, self.starts = path, None, 0, 0, []
        self.group_rows = 0

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        if self.writer is None:
            self.writer = pq.ParquetWriter(self.path, batch.schema, compression="zstd", write_statistics=False)
            per_row = max(1, batch.nbytes // batch.num_rows)
            self.group_rows = max(1, min(GROUP_ROWS, GROUP_BYTES // per_row))
        elif batch.schema != self.writer.schema:
            batch = batch.cast(self.writer.schema)
        for off in range(0, batch.num_rows, self.group_rows):
            part = batch.slice(off, self.group_rows)
            self.starts.append(self.rows)
            self.writer.write_batch(part, row_group_size=self.group_rows)
            self.rows += part.num_rows
            self.bytes += part.nbytes

    def close(self) -> pa.Schema | None:
        if self.writer is None:
            return None
        schema = self.writer.schema
        self.writer.close()
        return schema


def _tmpdir() -> str:
    from django.conf import settings

    path = os.path.join(settings.HUB_DATA_DIR, "viewer-tmp")
    os.makedirs(path, exist_ok=True)
    return path


def _stored(rg: pq.RowGroupMetaData) -> int:
    return sum(rg.column(j).total_compressed_size for j in range(rg.num_columns))


def convert(sha256: str, size: int, fmt: str, limit: int | None, digest: str) -> Result:
    """Reads blob `sha256` (`size` bytes, format `fmt`), only its first `limit` bytes' worth of rows
    when it is bigger; writes the copy a page reads, unless the source can be read in place."""
    key = blobs.key_for(sha256)  # (BlobNotLocal for a catalog file not fetched yet)
    limit = size if limit is None else min(limit, size)
    partial = size > limit
    if fmt == "parquet":
        meta = reading.metadata(key, size)
        groups, used = [], 0
        for i in range(meta.num_row_groups):
            rg = meta.row_group(i)
            if groups and partial and used + _stored(rg) > limit:
                break
            groups.append(i)
            used += _stored(rg)
        partial = len(groups) < meta.num_row_groups
        small = all(meta.row_group(i).total_byte_size <= AS_IS_BYTES and meta.row_group(i).num_rows <= AS_IS_ROWS
                    for i in groups)
        if small:
            starts, rows, nbytes = [], 0, 0
            for i in groups:
                starts.append(rows)
                rows += meta.row_group(i).num_rows
                nbytes += meta.row_group(i).total_byte_size
            return Result(key, size, rows, nbytes, starts, reading.features(meta.schema.to_arrow_schema()), partial)

    with tempfile.NamedTemporaryFile(dir=_tmpdir(), suffix=".parquet") as tmp:
        writer = _Writer(tmp.name)
        try:
            if fmt == "parquet":
                # (buffered: pages are read as they are decoded, not a whole column chunk at once)
                pf = pq.ParquetFile(reading.source(key, size), buffer_size=BLOCK, pre_buffer=False)
                per_row = max(1, meta.row_group(0).total_byte_size // max(1, meta.row_group(0).num_rows))
                batch = max(1, min(GROUP_ROWS, GROUP_BYTES // per_row))
                for b in pf.iter_batches(batch_size=batch, row_groups=groups):
                    writer.write(b)
            elif fmt in ("csv", "tsv"):
                _csv(key, size, limit, fmt, writer)
            elif _json(key, size, limit, fmt, writer):
                partial = False  # (a JSON array is read whole)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, ValueError,
                UnicodeDecodeError) as err:
            if writer.writer is not None:
                writer.writer.close()
            raise ConvertError(f"could not read this {fmt.upper()} file: {str(err).splitlines()[0][:300]}") from err
        schema = writer.close()
        if schema is None:
            return Result("", 0, 0, 0, [], [], partial)
        out = copy_key(digest)
        with open(tmp.name, "rb") as fh:
            written = os.fstat(fh.fileno()).st_size
            blobs.object_store().put_stream(out, fh, written)
    return Result(out, written, writer.rows, writer.bytes, writer.starts, reading.features(schema), partial)


def _csv(key: str, size: int, limit: int, fmt: str, writer: _Writer) -> None:
    parse = pacsv.ParseOptions(delimiter="\t" if fmt == "tsv" else ",", newlines_in_values=True)
    read = pacsv.ReadOptions(block_size=BLOCK)
    try:
        for b in pacsv.open_csv(_prefix_stream(key, size, limit), read_options=read, parse_options=parse):
            writer.write(b)
        return
    except pa.ArrowInvalid:
        if writer.writer is None:
            raise
    # A later block did not fit the types the first one suggested: read every column as text.
    names = list(writer.writer.schema.names)
    writer.writer.close()
    writer.__init__(writer.path)
    convert_opts = pacsv.ConvertOptions(column_types={n: pa.string() for n in names})
    for b in pacsv.open_csv(_prefix_stream(key, size, limit), read_options=read, parse_options=parse,
                            convert_options=convert_opts):
        writer.write(b)


def _json(key: str, size: int, limit: int, fmt: str, writer: _Writer) -> bool:
    """Writes the rows of a JSON Lines file, or of a JSON array; True if it read the whole file."""
    head = b"".join(blobs.object_store().read(key, 0, min(size, 4096))).lstrip()
    if fmt == "json" and head.startswith(b"["):
        if size > JSON_ARRAY_MAX:
            raise ConvertError(f"this JSON array is too large to show ({size} bytes; the limit is "
                               f"{JSON_ARRAY_MAX}): JSON Lines files of any size are")
        data = json.loads(b"".join(blobs.object_store().read(key)))
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise ConvertError("this JSON file is not a list of objects (rows)")
        table = pa.Table.from_pylist(data)
        for b in table.to_batches(max_chunksize=GROUP_ROWS):
            writer.write(b)
        return True
    read = pajson.ReadOptions(block_size=BLOCK)
    for b in pajson.open_json(_prefix_stream(key, size, limit), read_options=read):
        writer.write(b)
    return False
