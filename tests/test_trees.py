"""The content-addressed directory trees (hub/repos/trees.py), in process against the test database.

Every tree built here is checked against a plain dict {path: file entry}: what resolve, list_dir,
walk and dir_totals return, that the same content always has the same root digest whatever history
built it, and that reads and one-file commits touch O(depth) rows even in a directory with tens of
thousands of entries. Large directories get several leaf chunks through real names, never by
shrinking CHUNK_AVERAGE."""
from __future__ import annotations

import hashlib
import itertools
import random

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from hub.errors import Conflict, EntryNotFound
from hub.repos import trees
from hub.repos.models import TreeNode
from hub.repos.trees import DELETE, DELETE_TREE, FILE, PUT, Entry, NodeStore

pytestmark = pytest.mark.django_db

BIG = "big"
BIG_NAMES = [f"img_{i:05d}.jpg" for i in range(4000)]
# Names chosen so that plain string order and per-component order disagree ("a.txt" < "a/x" but the
# directory "a" sorts before "a.txt"), plus non-ASCII names.
TOP = ["a", "a.txt", "a-b", "b", "z", "é", "日本"]
MID = ["x", "x.y", "y", "0"]
LEAF = ["f.bin", "g.txt", "x", "README.md", "ü.json"]


def clear_cache() -> None:
    with trees.CACHE.lock:
        trees.CACHE.items.clear()


def file_entry(path: str, version: int = 0) -> Entry:
    seed = f"{path}@{version}".encode()
    size = int.from_bytes(hashlib.blake2b(seed, digest_size=3).digest(), "big")
    return Entry(path.rsplit("/", 1)[-1], FILE, size, hashlib.sha256(seed).hexdigest(),
                 hashlib.sha1(seed).hexdigest(), lfs=version % 2 == 1)


def commit(root: str | None, ops: list[tuple[str, str, Entry | None]]) -> tuple[str, int]:
    """Applies one batch the way do_commit does; returns (new root, TreeNode rows written)."""
    store = NodeStore()
    new_root, _, _ = trees.update_dir(store, root, trees.plan_changes(ops), keep_empty=True)
    store.flush()
    return new_root, store.rows_written


def build(files: dict[str, Entry]) -> str:
    return commit(None, [(PUT, p, e) for p, e in files.items()])[0]


def walk_key(path: str) -> list[str]:
    # Pre-order with each directory's children sorted by name is the order of the component lists.
    return path.split("/")


class Model:
    """The reference: files by path; a directory exists while some file is below it."""

    def __init__(self) -> None:
        self.files: dict[str, Entry] = {}

    def dirs(self) -> set[str]:
        out = set()
        for path in self.files:
            parts = path.split("/")
            for i in range(1, len(parts)):
                out.add("/".join(parts[:i]))
        return out

    def is_valid(self, op: str, path: str) -> bool:
        parts = path.split("/")
        if op == PUT:
            prefixes = ("/".join(parts[:i]) for i in range(1, len(parts)))
            return not any(p in self.files for p in prefixes) and path not in self.dirs()
        if op == DELETE:
            return path in self.files
        return path in self.dirs()

    def apply(self, ops: list[tuple[str, str, Entry | None]]) -> None:
        for op, path, entry in ops:
            if op == PUT:
                self.files[path] = entry
            elif op == DELETE:
                del self.files[path]
            else:
                for p in [p for p in self.files if p.startswith(path + "/")]:
                    del self.files[p]

    def totals(self, prefix: str) -> tuple[int, int]:
        below = [e for p, e in self.files.items() if not prefix or p.startswith(prefix + "/")]
        return sum(e.size for e in below), len(below)

    def children(self, prefix: str) -> list[str]:
        depth = prefix.count("/") + 1 if prefix else 0
        names = {p.split("/")[depth] for p in list(self.files) + list(self.dirs())
                 if (not prefix or p.startswith(prefix + "/")) and p.count("/") == depth}
        return sorted(names)


def check(root: str, model: Model, rng: random.Random, *, cold: bool, every_file: bool = True) -> None:
    """Every read of the tree at `root` agrees with the model (resolving a sample of the files
    unless `every_file`, to keep the test fast)."""
    if cold:
        clear_cache()
    store = NodeStore()
    dirs = model.dirs()
    paths = sorted(list(model.files) + list(dirs), key=walk_key)

    walked = list(trees.walk(store, root))
    assert [p for p, _ in walked] == paths
    for path, entry in walked:
        if path in model.files:
            assert entry.to_json() == model.files[path].to_json(), path
        else:
            assert entry.is_dir and (entry.size, entry.files) == model.totals(path), path

    assert trees.dir_totals(store, root) == model.totals("")
    top = trees.resolve(store, root, "")
    assert top.is_dir and (top.size, top.files) == model.totals("")

    some = model.files if every_file else rng.sample(sorted(model.files), min(300, len(model.files)))
    for path in some:
        got = trees.resolve(store, root, path)
        assert got is not None and got.to_json() == model.files[path].to_json(), path
    for path in rng.sample(sorted(model.files), min(200, len(model.files))):
        assert trees.resolve(store, root, path + "/child") is None
        assert trees.resolve(store, root, path + "~") is None or path + "~" in model.files
    for path in dirs:
        got = trees.resolve(store, root, path)
        assert got is not None and got.is_dir and (got.size, got.files) == model.totals(path), path
        assert trees.dir_totals(store, got.ref) == model.totals(path)
    assert trees.resolve(store, root, "no-such-dir/f.bin") is None

    for prefix in [""] + sorted(dirs):
        digest = root if not prefix else trees.resolve(store, root, prefix).ref
        names = model.children(prefix)
        assert [e.name for e in trees.list_dir(store, digest)] == names, prefix
        cursor = rng.choice(names)
        assert [e.name for e in trees.list_dir(store, digest, after=cursor)] == [n for n in names if n > cursor]


def random_path(rng: random.Random, model: Model) -> str:
    kind = rng.random()
    if kind < 0.4:
        return f"{BIG}/{rng.choice(BIG_NAMES)}"
    if kind < 0.45:
        return f"{BIG}/{rng.choice(BIG_NAMES)[:-4]}.d/{rng.choice(LEAF)}"
    if kind < 0.55 and model.files:
        return rng.choice(sorted(model.files))
    depth = rng.choice([1, 2, 2, 3, 3])
    parts = [rng.choice(TOP)] + [rng.choice(MID) for _ in range(depth - 2)] + [rng.choice(LEAF + TOP)]
    return "/".join(parts[:depth])


def random_batch(rng: random.Random, model: Model, version: int) -> list[tuple[str, str, Entry | None]]:
    """Valid, non-overlapping operations: no path in the batch is another one or inside it."""
    ops: list[tuple[str, str, Entry | None]] = []
    used: list[str] = []
    dirs = sorted(model.dirs())
    big_files = sorted(p for p in model.files if p.startswith(BIG + "/"))
    for _ in range(rng.randint(1, 40)):
        roll = rng.random()
        if roll < 0.45:
            op, path = PUT, random_path(rng, model)
        elif roll < 0.6 and big_files:
            # Deleting a name that ends a chunk merges two leaves: the interesting case.
            cuts = [p for p in big_files if trees._is_cut(p.rsplit("/", 1)[1])]
            op, path = DELETE, rng.choice(cuts if cuts and rng.random() < 0.5 else big_files)
        elif roll < 0.9 and model.files:
            op, path = DELETE, rng.choice(sorted(model.files))
        elif [d for d in dirs if d != BIG]:
            op, path = DELETE_TREE, rng.choice([d for d in dirs if d != BIG])
        else:
            continue
        if any(path == u or path.startswith(u + "/") or u.startswith(path + "/") for u in used):
            continue
        if not model.is_valid(op, path):
            continue
        used.append(path)
        ops.append((op, path, file_entry(path, version) if op == PUT else None))
    return ops


def test_it_matches_a_dict_model_over_random_histories():
    rng = random.Random(20240611)
    model = Model()
    initial = [(PUT, f"{BIG}/{n}", file_entry(f"{BIG}/{n}")) for n in BIG_NAMES[:3000]]
    # Subdirectories among the big directory's files, so entries and files below differ per chunk.
    initial += [(PUT, p, file_entry(p)) for p in (f"{BIG}/img_{i:05d}.d/{j}.bin" for i in range(0, 3000, 150)
                                                   for j in range(3))]
    initial += [(PUT, "a/x/f.bin", file_entry("a/x/f.bin")), (PUT, "a.txt", file_entry("a.txt"))]
    root, _ = commit(None, initial)
    model.apply(initial)
    check(root, model, rng, cold=True)
    big = trees.resolve(NodeStore(), root, BIG)
    assert NodeStore().get(big.ref)["k"] == "I" and len(NodeStore().get(big.ref)["c"]) >= 5

    for step in range(60):
        if step == 30:
            # A whole multi-leaf directory goes, then comes back in pieces over the next batches.
            ops = [(DELETE_TREE, BIG, None)]
        elif 30 < step < 34:
            chunk = BIG_NAMES[(step - 31) * 1200:(step - 30) * 1200]
            ops = [(PUT, f"{BIG}/{n}", file_entry(f"{BIG}/{n}", step)) for n in chunk]
        else:
            ops = random_batch(rng, model, step)
        if not ops:
            continue
        root, _ = commit(root, ops)
        model.apply(ops)
        check(root, model, rng, cold=step % 5 == 0, every_file=step % 4 == 0)
        if step % 10 == 9:
            assert build(model.files) == root, f"step {step}: the incremental tree is not canonical"
    assert build(model.files) == root
    assert len(model.files) > 3000


def test_it_gives_the_same_root_for_the_same_content_whatever_the_history():
    rng = random.Random(7)
    files = {f"{BIG}/{n}": file_entry(f"{BIG}/{n}") for n in BIG_NAMES[:3000]}
    files |= {f"{t}/{m}/{leaf}": file_entry(f"{t}/{m}/{leaf}") for t in TOP[:4] for m in MID for leaf in LEAF}
    files |= {t: file_entry(t) for t in TOP[4:]}
    expected = build(files)

    # Shuffled, in batches of random size.
    items = list(files.items())
    rng.shuffle(items)
    root = None
    while items:
        n = rng.randint(1, 700)
        root, _ = commit(root, [(PUT, p, e) for p, e in items[:n]])
        items = items[n:]
    assert root == expected

    # Through extra files, an old version of every file, a removed folder and removed chunk ends.
    extra = {f"{BIG}/{n}": file_entry(f"{BIG}/{n}") for n in BIG_NAMES[3000:]}
    extra |= {f"tmp/{i}/f.bin": file_entry(f"tmp/{i}/f.bin") for i in range(300)}
    root = build({p: file_entry(p, 1) for p in files} | extra)
    assert root != expected
    batches = [
        [(PUT, p, e) for p, e in files.items() if p.startswith(BIG)],
        [(DELETE_TREE, "tmp", None)] + [(PUT, p, e) for p, e in files.items() if not p.startswith(BIG)],
    ]
    big_extra = sorted(p for p in extra if p.startswith(BIG))
    cut_first = sorted(big_extra, key=lambda p: not trees._is_cut(p.rsplit("/", 1)[1]))
    batches += [[(DELETE, p, None) for p in cut_first[i:i + 97]] for i in range(0, len(cut_first), 97)]
    for ops in batches:
        root, _ = commit(root, ops)
    assert root == expected

    # Emptied one file at a time from the end, then rebuilt in reverse order: still the same.
    small = dict(itertools.islice(sorted(files.items()), 40))
    root = build(small)
    for path in sorted(small, reverse=True):
        root, _ = commit(root, [(DELETE, path, None)])
    assert root == trees.EMPTY_DIGEST
    for path in sorted(small, reverse=True):
        root, _ = commit(root, [(PUT, path, small[path])])
    assert root == build(small)


def test_it_resumes_a_walk_after_any_path():
    rng = random.Random(3)
    files = {f"{BIG}/{n}": file_entry(f"{BIG}/{n}") for n in BIG_NAMES[:2500]}
    files |= {f"{t}/{m}/{leaf}": file_entry(f"{t}/{m}/{leaf}") for t in TOP for m in MID[:3] for leaf in LEAF[:3]}
    files |= {"a-b.txt": file_entry("a-b.txt"), "zz/deep/er/still/f.bin": file_entry(
        "zz/deep/er/still/f.bin")}
    root = build(files)
    clear_cache()
    store = NodeStore()
    full = list(trees.walk(store, root))
    keys = [walk_key(p) for p, _ in full]
    assert keys == sorted(keys) and len(full) > 2500

    # After every entry (a page boundary anywhere), including directories themselves.
    indices = sorted(set(rng.sample(range(len(full)), 200)) | {0, len(full) - 1}
                     | {i for i, (_, e) in enumerate(full) if e.is_dir})
    for i in indices:
        assert list(trees.walk(store, root, after=keys[i])) == full[i + 1:], full[i][0]

    # After paths that are not in the tree (deleted since the previous page): what sorts after them.
    for cursor in ["", "0", "a/x/zzz", "a/x.y/f.bin/deeper", "big/img_01000", "big/zzz", "m/n", "~"]:
        key = walk_key(cursor)
        assert list(trees.walk(store, root, after=key)) == [(p, e) for p, e in full if walk_key(p) > key], cursor

    # Inside a subdirectory, with the cursor relative to it, as the paginated tree API uses it.
    big = trees.resolve(store, root, BIG)
    inside = [(p, e) for p, e in full if p.startswith(BIG + "/")]
    for i in rng.sample(range(len(inside)), 50):
        after = inside[i][0][len(BIG) + 1:].split("/")
        assert list(trees.walk(store, big.ref, BIG + "/", after)) == inside[i + 1:]


def test_it_reads_and_commits_in_a_huge_directory_at_o_depth_cost():
    names = [f"n{i:06d}.jpg" for i in range(25_000)]
    files = {f"data/train/huge/{n}": file_entry(f"data/train/huge/{n}") for n in names}
    files |= {"README.md": file_entry("README.md"), "data/train/labels.csv": file_entry("data/train/labels.csv")}
    root = build(files)
    huge = trees.NodeStore().get(trees.resolve(NodeStore(), root, "data/train/huge").ref)
    assert huge["k"] == "I" and len(huge["c"]) >= 50

    for path in ["data/train/huge/n000000.jpg", "data/train/huge/n012345.jpg", "data/train/huge/n024999.jpg",
                 "data/train/huge/missing.jpg"]:
        clear_cache()
        with CaptureQueriesContext(connection) as ctx:
            entry = trees.resolve(NodeStore(), root, path)
        assert (entry is None) == (path not in files)
        assert len(ctx.captured_queries) <= 2 * path.count("/") + 2, path

    for after in [None, names[12_000], names[-1000]]:
        clear_cache()
        store = NodeStore()
        with CaptureQueriesContext(connection) as ctx:
            entry = trees.resolve(store, root, "data/train/huge")
            page = list(itertools.islice(trees.list_dir(store, entry.ref, after=after), 1000))
        start = 0 if after is None else names.index(after) + 1
        assert [e.name for e in page] == names[start:start + 1000]
        assert len(ctx.captured_queries) <= 2 * 4, after  # three directory levels, then the listing

    clear_cache()
    with CaptureQueriesContext(connection) as ctx:
        walked = list(itertools.islice(trees.walk(NodeStore(), root, after="data/train/huge/n020000.jpg".split("/")),
                                       1000))
    assert walked[0][0] == "data/train/huge/n020001.jpg" and len(walked) == 1000
    assert len(ctx.captured_queries) <= 2 * 4

    # One changed file, one new file, one deleted file: each writes a leaf, the index and one node
    # per ancestor directory, not the 25,000 entries around it.
    rows = TreeNode.objects.count()
    for ops in [
        [(PUT, "data/train/huge/n012345.jpg", file_entry("data/train/huge/n012345.jpg", 1))],
        [(PUT, "data/train/huge/n012345.5.jpg", file_entry("data/train/huge/n012345.5.jpg"))],
        [(DELETE, "data/train/huge/n000007.jpg", None)],
    ]:
        clear_cache()
        root, written = commit(root, ops)
        assert written <= 4 + 3, ops
        assert 1 <= TreeNode.objects.count() - rows == written
        rows = TreeNode.objects.count()
    assert trees.resolve(NodeStore(), root, "data/train/huge/n012345.5.jpg") is not None


def test_it_writes_nodes_again_after_a_rolled_back_commit():
    # A commit whose transaction rolls back (a lost race for the branch head) must not leave the
    # process believing its nodes are stored: the retry would point at rows that do not exist.
    files = {f"d/{i}.bin": file_entry(f"d/{i}.bin") for i in range(600)}
    with pytest.raises(Conflict):
        with transaction.atomic():
            build(files)
            raise Conflict("another commit landed first")
    assert TreeNode.objects.count() == 0
    root = build(files)
    clear_cache()
    assert trees.resolve(NodeStore(), root, "d/599.bin").ref == files["d/599.bin"].ref
    assert len(list(trees.walk(NodeStore(), root))) == 601


def test_it_refuses_to_delete_a_missing_file():
    root = build({"a/b.txt": file_entry("a/b.txt")})
    for path in ["a/c.txt", "nope/b.txt"]:
        with pytest.raises(EntryNotFound) as err:
            commit(root, [(DELETE, path, None)])
        assert "A file with this name doesn't exist" in err.value.message
    with pytest.raises(EntryNotFound):
        commit(root, [(DELETE_TREE, "a/missing", None)])


def test_deleting_a_folder_by_its_name_deletes_all_of_it():
    """As upstream: CommitOperationDelete("a") of a folder sends a file deletion of "a"."""
    root = build({"a/b.txt": file_entry("a/b.txt"), "a/c/d.txt": file_entry("a/c/d.txt"), "ab": file_entry("ab")})
    new, _ = commit(root, [(DELETE, "a", None)])
    assert [p for p, _ in trees.walk(NodeStore(), new)] == ["ab"]


def test_it_refuses_to_write_inside_a_file():
    root = build({"a/b.txt": file_entry("a/b.txt")})
    with pytest.raises(Conflict):
        commit(root, [(PUT, "a/b.txt/c.txt", file_entry("a/b.txt/c.txt"))])
    with pytest.raises(Conflict):
        commit(root, [(PUT, "a", file_entry("a"))])  # a directory is there
    with pytest.raises(Conflict):
        trees.plan_changes([(PUT, "x", file_entry("x")), (PUT, "x/y", file_entry("x/y"))])
    assert trees.resolve(NodeStore(), root, "a/b.txt") is not None


def test_it_caps_leaves_when_names_never_hash_to_a_cut_point():
    """Names picked so none is a natural cut point must still give bounded leaves, and updates must
    still land on the same tree a from-scratch build gives."""
    names = [n for n in (f"evil_{i:06d}" for i in range(20_000)) if not trees._is_cut(n)][:5000]
    files = {f"d/{n}": file_entry(f"d/{n}") for n in names}
    root = build(files)
    store = NodeStore()
    directory = trees.resolve(store, root, "d")
    index = store.get(directory.ref)
    assert index["k"] == "I"
    assert max(c[2] for c in index["c"]) <= trees.CHUNK_MAX
    rng = random.Random(7)
    for step in range(12):
        victim = rng.choice(sorted(files))
        if step % 3 == 0:
            added = f"d/evil_new_{step}"
            files[added] = file_entry(added)
            root, _ = commit(root, [(DELETE, victim, None), (PUT, added, files[added])])
        else:
            root, _ = commit(root, [(DELETE, victim, None)])
        del files[victim]
        assert root == build(files), f"step {step}: incremental tree differs from a fresh build"


def test_a_diff_reads_what_changed_not_the_directory_around_it():
    """hub.repos.treediff, which a pull request's changes, conflicts and merge read: two trees of a
    25,000-entry directory that differ in three files are compared in a handful of node reads, and
    what it reports is exactly the difference of the two {path: file} maps."""
    from hub.repos import treediff

    names = [f"n{i:06d}.jpg" for i in range(25_000)]
    before = {f"data/huge/{n}": file_entry(f"data/huge/{n}") for n in names}
    before |= {"README.md": file_entry("README.md"), "docs/a.md": file_entry("docs/a.md"), "x": file_entry("x")}
    after = dict(before)
    after["data/huge/n012345.jpg"] = file_entry("data/huge/n012345.jpg", 1)
    del after["data/huge/n000007.jpg"]
    after["data/huge/new.jpg"] = file_entry("data/huge/new.jpg")
    del after["x"]  # a file that becomes a directory
    after["x/inside.txt"] = file_entry("x/inside.txt")
    old, new = build(before), build(after)

    class Counting(NodeStore):
        def __init__(self) -> None:
            super().__init__()
            self.read: set[str] = set()

        def get_many(self, digests: list[str]) -> dict[str, dict]:
            self.read.update(digests)
            return super().get_many(digests)

    huge = NodeStore().get(trees.resolve(NodeStore(), old, "data/huge").ref)
    assert huge["k"] == "I" and len(huge["c"]) >= 50
    clear_cache()
    store = Counting()
    with CaptureQueriesContext(connection) as ctx:
        changes = list(treediff.diff(store, old, new))
    assert [(c.path, c.status) for c in changes] == [
        ("data/huge/n000007.jpg", treediff.DELETED), ("data/huge/n012345.jpg", treediff.MODIFIED),
        ("data/huge/new.jpg", treediff.ADDED), ("x", treediff.DELETED), ("x/inside.txt", treediff.ADDED)]
    assert all(treediff.same_file(c.old, before.get(c.path)) and treediff.same_file(c.new, after.get(c.path))
               for c in changes)
    # two roots, two "data", two indexes of "huge", the leaves around the three names on each side, "x/"
    assert len(store.read) <= 16, len(store.read)
    assert len(ctx.captured_queries) <= 10, len(ctx.captured_queries)
    # the same tree: nothing, without a read; an empty side: every file of the other
    with CaptureQueriesContext(connection) as ctx:
        assert list(treediff.diff(NodeStore(), new, new)) == []
    assert len(ctx.captured_queries) == 0
    small = build({"a/b.txt": file_entry("a/b.txt"), "c.txt": file_entry("c.txt")})
    assert [(c.path, c.status) for c in treediff.diff(NodeStore(), None, small)] == [
        ("a/b.txt", treediff.ADDED), ("c.txt", treediff.ADDED)]
