"""Content-addressed directory trees that stay cheap with millions of files.

A directory is a sorted sequence of entries cut into chunks by content: a chunk ends after every
entry whose name hashes to 0 mod CHUNK_AVERAGE (and at the end of the directory). Because the cut
points depend only on the names, the same directory always has the same chunks, whatever history
built it, and a change touches only the chunk(s) around the changed names.

  * A directory with one chunk is a single leaf node: {"k": "L", "e": [entry, ...]}.
  * A larger one is an index node over its leaves: {"k": "I", "c": [[first_name, leaf_digest,
    n_entries, bytes, files, ends_at_natural_cut], ...]}.

Entries are JSON lists:
  file: [name, "f", size, sha256, git_oid, is_lfs]
  dir:  [name, "d", bytes_below, child_digest, files_below]

So resolving a path costs at most two node reads per directory level, listing a directory page costs
its index plus the leaves it shows, and a commit that changes one file in a directory of a million
entries writes one leaf, one index and one node per ancestor directory. Nodes are immutable, so a
process-wide cache serves repeated reads without the database.
"""
from __future__ import annotations

import bisect
import hashlib
import json
import threading
import zlib
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

from hub.errors import Conflict, EntryNotFound

CHUNK_AVERAGE = 256
# A leaf is also cut at this many entries, so names chosen never to hash to a cut point cannot build
# one giant leaf. Such cuts depend on where the previous natural cut was, so an update re-chunks
# forward until it reaches an untouched leaf that ends at a natural cut.
CHUNK_MAX = 1024
FILE, DIR = "f", "d"


@dataclass(frozen=True)
class Entry:
    name: str
    type: str  # FILE or DIR
    size: int
    ref: str  # sha256 for files, child digest for directories
    git_oid: str = ""
    lfs: bool = False
    files: int = 0

    @property
    def is_dir(self) -> bool:
        return self.type == DIR

    def to_json(self) -> list:
        if self.type == FILE:
            return [self.name, FILE, self.size, self.ref, self.git_oid, int(self.lfs)]
        return [self.name, DIR, self.size, self.ref, self.files]

    @classmethod
    def from_json(cls, raw: list) -> Entry:
        if raw[1] == FILE:
            return cls(raw[0], FILE, raw[2], raw[3], raw[4], bool(raw[5]), 1)
        return cls(raw[0], DIR, raw[2], raw[3], files=raw[4])


def _is_cut(name: str) -> bool:
    h = hashlib.blake2b(name.encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") % CHUNK_AVERAGE == 0


def _encode(node: dict) -> tuple[str, bytes]:
    raw = json.dumps(node, separators=(",", ":"), ensure_ascii=False).encode()
    return hashlib.sha1(raw).hexdigest(), raw


class _Cache:
    """Process-wide LRU of decoded nodes. Safe because a digest always names the same content."""

    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
        self.items: OrderedDict[str, dict] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, digest: str) -> dict | None:
        with self.lock:
            node = self.items.get(digest)
            if node is not None:
                self.items.move_to_end(digest)
            return node

    def put(self, digest: str, node: dict) -> None:
        with self.lock:
            self.items[digest] = node
            self.items.move_to_end(digest)
            while len(self.items) > self.capacity:
                self.items.popitem(last=False)


CACHE = _Cache()
EMPTY_LEAF: dict = {"k": "L", "e": []}
EMPTY_DIGEST = _encode(EMPTY_LEAF)[0]


class NodeStore:
    """Reads nodes (cache first, then one query for all missing ones) and collects new nodes, which
    `flush()` writes in one bulk insert. Rows that already exist are not written again."""

    def __init__(self) -> None:
        self.pending: dict[str, bytes] = {}
        self.rows_written = 0

    def get_many(self, digests: list[str]) -> dict[str, dict]:
        from hub.repos.models import TreeNode

        found: dict[str, dict] = {}
        missing = []
        for d in digests:
            node = CACHE.get(d)
            if node is None and d in self.pending:
                node = json.loads(self.pending[d])
            if node is None and d == EMPTY_DIGEST:
                node = EMPTY_LEAF
            if node is None:
                missing.append(d)
            else:
                found[d] = node
        if missing:
            for digest, data in TreeNode.objects.filter(digest__in=missing).values_list("digest", "data"):
                node = json.loads(zlib.decompress(bytes(data)))
                CACHE.put(digest, node)
                found[digest] = node
        lost = [d for d in digests if d not in found]
        if lost:
            raise RuntimeError(f"tree nodes missing from the database: {lost[:3]}")
        return found

    def get(self, digest: str) -> dict:
        return self.get_many([digest])[digest]

    def put(self, node: dict) -> str:
        digest, raw = _encode(node)
        # Queued even when cached: a cached node may come from a transaction that rolled back, so
        # only flush()'s check against the database may decide that a row already exists.
        self.pending[digest] = raw
        return digest

    def flush(self) -> int:
        """Writes the new nodes; returns how many rows were inserted."""
        from hub.repos.models import TreeNode

        if not self.pending:
            return 0
        existing = set()
        keys = list(self.pending)
        for i in range(0, len(keys), 500):
            existing.update(TreeNode.objects.filter(digest__in=keys[i:i + 500]).values_list("digest", flat=True))
        rows = [TreeNode(digest=d, data=zlib.compress(raw, 6)) for d, raw in self.pending.items()
                if d not in existing]
        TreeNode.objects.bulk_create(rows, batch_size=500, ignore_conflicts=True)
        for d, raw in self.pending.items():
            CACHE.put(d, json.loads(raw))
        self.pending.clear()
        self.rows_written += len(rows)
        return len(rows)


# --- reading ----------------------------------------------------------------------------------------

def _leaf_entries(node: dict) -> list[list]:
    return node["e"]


def lookup(store: NodeStore, dir_digest: str, name: str) -> Entry | None:
    node = store.get(dir_digest)
    if node["k"] == "I":
        firsts = [c[0] for c in node["c"]]
        i = max(0, bisect.bisect_right(firsts, name) - 1)
        node = store.get(node["c"][i][1])
    entries = _leaf_entries(node)
    names = [e[0] for e in entries]
    i = bisect.bisect_left(names, name)
    if i < len(entries) and entries[i][0] == name:
        return Entry.from_json(entries[i])
    return None


def root_entry(store: NodeStore, root_digest: str) -> Entry:
    size, files = dir_totals(store, root_digest)
    return Entry("", DIR, size, root_digest, files=files)


def dir_totals(store: NodeStore, digest: str) -> tuple[int, int]:
    node = store.get(digest)
    if node["k"] == "I":
        return sum(c[3] for c in node["c"]), sum(c[4] for c in node["c"])
    size = files = 0
    for raw in node["e"]:
        e = Entry.from_json(raw)
        size += e.size
        files += e.files
    return size, files


def resolve(store: NodeStore, root_digest: str, path: str) -> Entry | None:
    """The entry at `path` ('' is the root), or None. Costs O(depth) node reads."""
    if not path:
        return root_entry(store, root_digest)
    digest = root_digest
    parts = path.split("/")
    for i, part in enumerate(parts):
        entry = lookup(store, digest, part)
        if entry is None:
            return None
        if i == len(parts) - 1:
            return entry
        if not entry.is_dir:
            return None
        digest = entry.ref
    return None


def list_dir(store: NodeStore, dir_digest: str, after: str | None = None) -> Iterator[Entry]:
    """Entries of one directory in name order, starting after `after`; reads leaves lazily."""
    node = store.get(dir_digest)
    if node["k"] == "L":
        leaves = [node]
        start_leaf = 0
    else:
        children = node["c"]
        firsts = [c[0] for c in children]
        start_leaf = max(0, bisect.bisect_right(firsts, after) - 1) if after is not None else 0
        leaves = None
    if leaves is not None:
        entries = _leaf_entries(node)
        names = [e[0] for e in entries]
        i = bisect.bisect_right(names, after) if after is not None else 0
        for raw in entries[i:]:
            yield Entry.from_json(raw)
        return
    for li in range(start_leaf, len(children)):
        # Fetch a few leaves per query when scanning: one round trip per leaf is the slow part.
        if (li - start_leaf) % 8 == 0:
            store.get_many([c[1] for c in children[li:li + 8]])
        entries = _leaf_entries(store.get(children[li][1]))
        names = [e[0] for e in entries]
        i = bisect.bisect_right(names, after) if after is not None else 0
        for raw in entries[i:]:
            yield Entry.from_json(raw)


def walk(store: NodeStore, dir_digest: str, prefix: str = "", after: list[str] | None = None
         ) -> Iterator[tuple[str, Entry]]:
    """Pre-order walk (a directory, then its contents) in name order, yielding (path, entry).
    `after` is the split path of the last entry already returned: the walk resumes right after it
    at O(depth) cost, which is what keeps deep pagination of huge listings cheap."""
    start = None
    if after:
        start = after[0]
        entry = lookup(store, dir_digest, start)
        if entry is not None and entry.is_dir:
            yield from walk(store, entry.ref, f"{prefix}{start}/", after[1:] or None)
    for entry in list_dir(store, dir_digest, after=start):
        path = prefix + entry.name
        yield path, entry
        if entry.is_dir:
            yield from walk(store, entry.ref, path + "/")


# --- writing ----------------------------------------------------------------------------------------

PUT, DELETE, DELETE_TREE, SUB = "put", "del", "deltree", "sub"


def plan_changes(operations: list[tuple[str, str, Entry | None]]) -> dict:
    """Turns [(op, path, entry)] into a nested {name: (op, payload)} plan, refusing contradictions
    such as writing both `a` and `a/b` in one commit."""
    plan: dict = {}
    for op, path, entry in operations:
        parts = path.split("/")
        level = plan
        for depth, part in enumerate(parts[:-1]):
            existing = level.get(part)
            if existing is None:
                existing = level[part] = (SUB, {})
            elif existing[0] != SUB:
                raise Conflict(f"the commit both changes {'/'.join(parts[:depth + 1])!r} and writes inside it")
            level = existing[1]
        last = parts[-1]
        if last in level and (level[last][0] == SUB) != (op == SUB):
            raise Conflict(f"the commit both changes {path!r} and writes inside it")
        level[last] = (op, entry)
    return plan


def _chunk(entries: list[list]) -> list[list[list]]:
    chunks, current = [], []
    for raw in entries:
        current.append(raw)
        if _is_cut(raw[0]) or len(current) >= CHUNK_MAX:
            chunks.append(current)
            current = []
    if current:
        chunks.append(current)
    return chunks


def _ends_naturally(meta: list) -> bool:
    return bool(meta[5]) if len(meta) > 5 else True


def _summary(entries: list[list]) -> tuple[int, int]:
    size = files = 0
    for raw in entries:
        size += raw[2]
        files += 1 if raw[1] == FILE else raw[4]
    return size, files


def update_dir(store: NodeStore, digest: str | None, plan: dict, prefix: str = "",
               keep_empty: bool = False) -> tuple[str | None, int, int]:
    """Applies `plan` to the directory `digest` (None = new empty directory). Returns the new
    digest (None if the directory became empty and `keep_empty` is false), bytes and file count.
    Reads and rewrites only the leaves that hold changed names (plus one neighbour each, so chunk
    cut points stay canonical)."""
    if not plan:
        return (digest, *dir_totals(store, digest)) if digest else (None, 0, 0)
    node = store.get(digest) if digest else EMPTY_LEAF
    if node["k"] == "L":
        chunk_meta = [[node["e"][0][0] if node["e"] else "", None]]
        leaves = {0: node["e"]}
    else:
        chunk_meta = node["c"]
        leaves = {}
    firsts = [c[0] for c in chunk_meta]
    n = len(chunk_meta)

    by_leaf: dict[int, list[str]] = {}
    for name in plan:
        i = max(0, bisect.bisect_right(firsts, name) - 1) if n > 1 else 0
        by_leaf.setdefault(i, []).append(name)
    touched: set[int] = set()
    for i in by_leaf:
        touched.add(i)
        j = i
        while j + 1 < n:  # re-chunk up to an untouched leaf whose end is a natural cut
            j += 1
            touched.add(j)
            if j not in by_leaf and _ends_naturally(chunk_meta[j]):
                break
    missing = [chunk_meta[i][1] for i in touched if i not in leaves]
    if missing:
        fetched = store.get_many(missing)
        for i in touched:
            if i not in leaves:
                leaves[i] = fetched[chunk_meta[i][1]]["e"]

    runs: list[list[int]] = []
    for i in sorted(touched):
        if runs and runs[-1][-1] == i - 1:
            runs[-1].append(i)
        else:
            runs.append([i])

    new_chunks: list[list] = []  # [first, digest, n, size, files] per leaf, in order
    run_starts = {run[0]: run for run in runs}
    i = 0
    while i < n:
        run = run_starts.get(i)
        if run is None:
            new_chunks.append(list(chunk_meta[i]))
            i += 1
            continue
        entries = {raw[0]: raw for li in run for raw in leaves[li]}
        for li in run:
            for name in by_leaf.get(li, ()):
                _apply(store, entries, name, plan[name], prefix)
        for chunk in _chunk([entries[k] for k in sorted(entries)]):
            new_chunks.append([chunk[0][0], chunk, len(chunk), *_summary(chunk), int(_is_cut(chunk[-1][0]))])
        i = run[-1] + 1

    if not new_chunks:
        if not keep_empty:
            return None, 0, 0
        return store.put(EMPTY_LEAF), 0, 0
    size = sum(c[3] for c in new_chunks)
    files = sum(c[4] for c in new_chunks)
    if len(new_chunks) == 1:
        only = new_chunks[0][1]
        if isinstance(only, str):  # an untouched leaf that is now the whole directory
            only = store.get(only)["e"]
        return store.put({"k": "L", "e": only}), size, files
    for c in new_chunks:
        if not isinstance(c[1], str):
            c[1] = store.put({"k": "L", "e": c[1]})
    return store.put({"k": "I", "c": new_chunks}), size, files


def _apply(store: NodeStore, entries: dict[str, list], name: str, change: tuple, prefix: str) -> None:
    op, payload = change
    path = prefix + name
    current = entries.get(name)
    if op == PUT:
        if current is not None and current[1] == DIR:
            raise Conflict(f"cannot write file {path!r}: a directory with that name exists")
        entries[name] = payload.to_json()
    elif op == DELETE:
        # A folder named without its trailing '/' goes too, as upstream does: huggingface_hub's
        # CommitOperationDelete("sub") sends a file deletion when it cannot tell "sub" is a folder.
        if current is None:
            raise EntryNotFound(f"A file with this name doesn't exist: {path!r}")
        del entries[name]
    elif op == DELETE_TREE:
        if current is None:
            raise EntryNotFound(f"A folder with this name doesn't exist: {path!r}")
        del entries[name]
    elif op == SUB:
        if current is not None and current[1] == FILE:
            raise Conflict(f"cannot write inside {path!r}: it is a file")
        child = current[3] if current is not None else None
        digest, size, files = update_dir(store, child, payload, path + "/")
        if digest is None:
            entries.pop(name, None)
        else:
            entries[name] = [name, DIR, size, digest, files]
