"""Reading a page of rows on the request path: only the row group(s) that hold them, each with one
ranged read of the object store (a local store's file is opened directly), the Parquet footer kept
per process (objects never change under a key: a source blob is content-addressed, a copy is
named by what it was made from). And the rows as upstream's viewer writes them in JSON."""
from __future__ import annotations

import base64
import datetime
import decimal
import io
import json
import math
import threading
from collections import OrderedDict
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from hub.content import blobs

READ_AHEAD = 4 * 2**20  # a sequential reader (the task's) fetches at least this much per request
_META: OrderedDict[str, pq.FileMetaData] = OrderedDict()
_META_MAX = 512
_LOCK = threading.Lock()


class RangedFile(io.RawIOBase):
    """A read-only, seekable file over an object of the store, read by ranges: `window` (start,
    bytes) is a range already fetched; other reads fetch at least `ahead` bytes from where they start."""

    def __init__(self, key: str, size: int, *, window: tuple[int, bytes] | None = None, ahead: int = 0) -> None:
        self.key, self.size, self.pos, self.ahead = key, size, 0, ahead
        self.window = window or (0, b"")

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = {0: offset, 1: self.pos + offset, 2: self.size + offset}[whence]
        return self.pos

    def read(self, n: int = -1) -> bytes:
        end = self.size if n is None or n < 0 else min(self.size, self.pos + n)
        if end <= self.pos:
            return b""
        start, data = self.window
        if not (start <= self.pos and end <= start + len(data)):
            fetch_end = min(self.size, max(end, self.pos + self.ahead))
            data = b"".join(blobs.object_store().read(self.key, self.pos, fetch_end))
            start = self.pos
            self.window = (start, data)
        out = data[self.pos - start:end - start]
        self.pos += len(out)
        return out

    def readinto(self, b) -> int:
        out = self.read(len(b))
        b[:len(out)] = out
        return len(out)


def source(key: str, size: int, *, ahead: int = READ_AHEAD):
    """What pyarrow reads the object from: its local path where the store has one, else ranges."""
    path = blobs.object_store().local_path(key)
    return path if path is not None else RangedFile(key, size, ahead=ahead)


def metadata(key: str, size: int) -> pq.FileMetaData:
    with _LOCK:
        meta = _META.get(key)
        if meta is not None:
            _META.move_to_end(key)
            return meta
    # (the footer is the file's last bytes: one read of its tail usually holds all of it)
    meta = pq.ParquetFile(source(key, size, ahead=256 * 1024) if size > 256 * 1024 else source(key, size)).metadata
    with _LOCK:
        _META[key] = meta
        while len(_META) > _META_MAX:
            _META.popitem(last=False)
    return meta


def _group_range(meta: pq.FileMetaData, i: int) -> tuple[int, int]:
    rg = meta.row_group(i)
    start, end = None, 0
    for j in range(rg.num_columns):
        col = rg.column(j)
        first = col.data_page_offset
        if col.has_dictionary_page and col.dictionary_page_offset is not None and col.dictionary_page_offset > 0:
            first = min(first, col.dictionary_page_offset)
        start = first if start is None else min(start, first)
        end = max(end, first + col.total_compressed_size)
    return start or 0, end


def read_group(key: str, size: int, i: int) -> pa.Table:
    meta = metadata(key, size)
    path = blobs.object_store().local_path(key)
    if path is not None:
        return pq.ParquetFile(path, metadata=meta, pre_buffer=False).read_row_group(i)
    start, end = _group_range(meta, i)
    data = b"".join(blobs.object_store().read(key, start, end))
    f = RangedFile(key, size, window=(start, data))
    return pq.ParquetFile(f, metadata=meta, pre_buffer=False).read_row_group(i)


@dataclass
class Part:
    """One file of a split: the Parquet object, its rows, where its row groups start."""

    key: str
    size: int
    num_rows: int
    row_groups: list[int]


def read_rows(parts: list[Part], offset: int, length: int) -> pa.Table | None:
    """Rows [offset, offset + length) of the parts in order, reading only the row groups that hold
    them; None when there are no such rows."""
    tables, base = [], 0
    want_end = offset + length
    for part in parts:
        if base >= want_end:
            break
        lo, hi = max(offset, base) - base, min(want_end, base + part.num_rows) - base
        if lo < hi:
            starts = part.row_groups + [part.num_rows]
            for g in range(len(part.row_groups)):
                g_lo, g_hi = starts[g], starts[g + 1]
                if g_hi <= lo or g_lo >= hi:
                    continue
                t = read_group(part.key, part.size, g)
                tables.append(t.slice(max(lo, g_lo) - g_lo, min(hi, g_hi) - max(lo, g_lo)))
        base += part.num_rows
    if not tables:
        return None
    if len(tables) > 1:
        tables = [t.cast(tables[0].schema) if t.schema != tables[0].schema else t for t in tables]
    return pa.concat_tables(tables)


# --- upstream's JSON --------------------------------------------------------------------------------

def feature_type(t: pa.DataType) -> dict:
    """An Arrow type as a `datasets` feature (its `_type` and `dtype`, as upstream's API writes them)."""
    if pa.types.is_struct(t):
        return {t.field(i).name: feature_type(t.field(i).type) for i in range(t.num_fields)}
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        out = {"feature": feature_type(t.value_type), "_type": "List"}
        if pa.types.is_fixed_size_list(t):
            out["length"] = t.list_size
        return out
    if pa.types.is_dictionary(t):
        return feature_type(t.value_type)
    if pa.types.is_map(t):
        return {"feature": {"key": feature_type(t.key_type), "value": feature_type(t.item_type)}, "_type": "List"}
    names = {pa.string(): "string", pa.large_string(): "large_string", pa.bool_(): "bool",
             pa.float16(): "float16", pa.float32(): "float32", pa.float64(): "float64",
             pa.binary(): "binary", pa.large_binary(): "large_binary", pa.null(): "null",
             pa.date32(): "date32", pa.date64(): "date64"}
    dtype = names.get(t) or str(t)
    if pa.types.is_string_view(t):
        dtype = "string"
    return {"dtype": dtype, "_type": "Value"}


def features(schema: pa.Schema) -> list[dict]:
    return [{"feature_idx": i, "name": f.name, "type": feature_type(f.type)} for i, f in enumerate(schema)]


def _plain(v):
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    if isinstance(v, bytes):
        try:
            return v.decode("utf-8")
        except UnicodeDecodeError:
            return base64.b64encode(v).decode()
    if isinstance(v, datetime.datetime | datetime.date | datetime.time):
        return v.isoformat()
    if isinstance(v, datetime.timedelta):
        return v.total_seconds()
    if isinstance(v, decimal.Decimal):
        return str(v)
    return v


def json_rows(table: pa.Table, first_row: int, cell_max: int) -> list[dict]:
    """Upstream's rows: [{"row_idx", "row", "truncated_cells"}]. A cell whose JSON is longer than
    `cell_max` characters is cut to that (as a string, upstream's way) and named in truncated_cells."""
    out = []
    for i, row in enumerate(table.to_pylist()):
        cells, truncated = {}, []
        for name, value in row.items():
            value = _plain(value)
            if isinstance(value, str):
                if len(value) > cell_max:
                    value, _ = value[:cell_max], truncated.append(name)
            elif isinstance(value, dict | list):
                text = json.dumps(value, ensure_ascii=False)
                if len(text) > cell_max:
                    value, _ = text[:cell_max], truncated.append(name)
            cells[name] = value
        out.append({"row_idx": first_row + i, "row": cells, "truncated_cells": truncated})
    return out
