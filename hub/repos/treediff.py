"""What changed between two trees, file by file, at a cost that follows the changes.

Trees are content-addressed (trees.py): a directory whose digest is the same on both sides is the
same directory and is skipped, and within a large directory only the leaf chunks that differ are
read — identical leaves have identical digests, because chunk boundaries depend on names alone. So
diffing two commits of a million-file repo that differ in one file reads a handful of nodes."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from hub.repos import trees

ADDED, MODIFIED, DELETED = "added", "modified", "deleted"


@dataclass(frozen=True)
class Change:
    path: str
    old: trees.Entry | None  # the file before (None: added)
    new: trees.Entry | None  # the file after (None: deleted)

    @property
    def status(self) -> str:
        return ADDED if self.old is None else DELETED if self.new is None else MODIFIED

    @property
    def entry(self) -> trees.Entry:
        """The file as it is after the change (as it was, for a deletion)."""
        return self.new or self.old


def same_file(a: trees.Entry | None, b: trees.Entry | None) -> bool:
    """Whether two file entries (or absences) hold the same thing: the same bytes, stored the same way."""
    if a is None or b is None:
        return a is b
    return (a.ref, a.lfs, a.git_oid) == (b.ref, b.lfs, b.git_oid)


def _leaves(store: trees.NodeStore, digest: str | None) -> set[str]:
    """The digests of a directory's leaf chunks (a one-chunk directory is its own leaf)."""
    if digest is None:
        return set()
    node = store.get(digest)
    return {digest} if node["k"] == "L" else {c[1] for c in node["c"]}


def _leaf_entries(store: trees.NodeStore, leaves: set[str]) -> dict[str, list]:
    out: dict[str, list] = {}
    if leaves:
        for node in store.get_many(sorted(leaves)).values():
            for raw in node["e"]:
                out[raw[0]] = raw
    return out


def _files_below(store: trees.NodeStore, entry: trees.Entry, path: str) -> Iterator[tuple[str, trees.Entry]]:
    if not entry.is_dir:
        yield path, entry
        return
    for p, e in trees.walk(store, entry.ref, path + "/"):
        if not e.is_dir:
            yield p, e


def diff(store: trees.NodeStore, old: str | None, new: str | None, prefix: str = "") -> Iterator[Change]:
    """The files that differ between the directory trees `old` and `new` (digests; None is an empty
    tree), in path order."""
    if old == new:
        return
    old_leaves, new_leaves = _leaves(store, old), _leaves(store, new)
    shared = old_leaves & new_leaves  # the same chunk on both sides holds the same entries: skipped
    old_raw = _leaf_entries(store, old_leaves - shared)
    new_raw = _leaf_entries(store, new_leaves - shared)
    for name in sorted(set(old_raw) | set(new_raw)):
        a = trees.Entry.from_json(old_raw[name]) if name in old_raw else None
        b = trees.Entry.from_json(new_raw[name]) if name in new_raw else None
        path = prefix + name
        if a is not None and b is not None and a.is_dir and b.is_dir:
            yield from diff(store, a.ref, b.ref, path + "/")
            continue
        if a is not None and b is not None and not a.is_dir and not b.is_dir:
            if not same_file(a, b):
                yield Change(path, a, b)
            continue
        # added, deleted, or a file that became a directory (or back): every file on each side
        gone = list(_files_below(store, a, path)) if a is not None else []
        came = list(_files_below(store, b, path)) if b is not None else []
        yield from sorted([Change(p, e, None) for p, e in gone] + [Change(p, None, e) for p, e in came],
                          key=lambda c: (c.path, c.new is not None))
