"""Tree scale: does a repo of a million files stay cheap to read and to change?

Builds a dataset repo with an ImageNet-like layout (train/<class>/<file>, val/<class>/<file> and one
flat test/ directory holding a fifth of the files) through the real services, metadata only: Blob
rows are bulk-inserted (no bytes), then do_commit() adds the files in batches of --batch files, each
batch a CommitOps of add_file() calls. Then it measures, against a naive flat table of the same
snapshot (path → blob, unique index on (snapshot, path)) in the same database:

  * resolve(path): latency and queries, cold (tree node cache cleared before each) and warm;
  * listing a directory page of 1000 entries (first page, the last page of the huge directory,
    a recursive page deep in train/), cold and warm;
  * rows written by a one-file commit (all tables counted before and after) against the flat
    table's copy of every row;
  * build time and database size;
  * beside it in the same database, the real seed catalog (hub/catalog/seed/catalog.yaml: every
    dataset and model entry, loaded by the seed command's do_seed, metadata only): list, filter and
    search latencies of the catalog service (what a list page queries), and the database size with it.

"Cold" clears only the hub's process-wide node cache; the database's own caches are warm for both.

    .venv/bin/python bench/tree_scale.py [--files 1000000] [--database-url URL]

With a PostgreSQL URL the script creates that database, refuses one that already exists, and drops
it at the end. Results go to stdout, progress to stderr.
"""
from __future__ import annotations

import argparse
import hashlib
import itertools
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parent.parent
FLAT = "bench_flat_entry"
CARD = b"---\nlicense: other\ntask_categories:\n- image-classification\n---\n# ImageNet-like, metadata only\n"
PAGE = 1000


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- the repo's layout ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Layout:
    """ImageNet's shape scaled to `files`: 1000 classes (fewer for small runs), a fifth of the files
    in the flat test/ directory, a twentieth in val/, the rest in train/."""

    files: int

    @property
    def classes(self) -> list[str]:
        n = 1000 if self.files >= 100_000 else max(10, self.files // 100)
        return [f"n{1440764 + c * 9973:08d}" for c in range(n)]

    @property
    def test_count(self) -> int:
        return self.files // 5

    def paths(self) -> Iterator[str]:
        classes = self.classes
        val = self.files // 20
        train = self.files - self.test_count - val - 2
        yield "README.md"
        yield "LOC_synset_mapping.txt"
        yield from self._spread("test", self.test_count, [""], "ILSVRC2012_test_{:08d}.JPEG")
        yield from self._spread("train", train, classes, "{cls}_{:d}.JPEG")
        yield from self._spread("val", val, classes, "ILSVRC2012_val_{:08d}.JPEG")

    @staticmethod
    def _spread(top: str, count: int, dirs: list[str], pattern: str) -> Iterator[str]:
        per, extra = divmod(count, len(dirs))
        for i, d in enumerate(dirs):
            base = f"{top}/{d}/" if d else f"{top}/"
            for j in range(per + (i < extra)):
                yield base + pattern.format(j + 1, cls=d)

    def test_names(self) -> list[str]:
        return [f"ILSVRC2012_test_{j + 1:08d}.JPEG" for j in range(self.test_count)]


def blob_for(path: str, version: int = 0) -> tuple[str, int]:
    digest = hashlib.sha256(f"{path}@{version}".encode()).digest()
    return digest.hex(), 20_000 + int.from_bytes(digest[:3], "big") % 200_000  # ImageNet JPEGs: ~110 kB


# --- measuring --------------------------------------------------------------------------------------

class QueryCounter:
    """Counts the statements Django sends (ORM and raw cursors alike) at negligible cost."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, execute, sql, params, many, context):
        self.count += 1
        return execute(sql, params, many, context)


@dataclass
class Sample:
    seconds: list[float] = field(default_factory=list)
    queries: list[int] = field(default_factory=list)

    def p(self, q: float) -> float:
        ordered = sorted(self.seconds)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    @property
    def p50(self) -> float:
        return statistics.median(self.seconds)

    @property
    def q(self) -> str:
        lo, hi = min(self.queries), max(self.queries)
        return str(lo) if lo == hi else f"{lo}-{hi}"


def measure(fn: Callable[[object], object], args: list, *, before: Callable[[], None] | None = None) -> Sample:
    from django.db import connection

    sample = Sample()
    counter = QueryCounter()
    with connection.execute_wrapper(counter):
        for arg in args:
            if before is not None:
                before()
            counter.count = 0
            t = time.perf_counter()
            fn(arg)
            sample.seconds.append(time.perf_counter() - t)
            sample.queries.append(counter.count)
    return sample


def clear_node_cache() -> None:
    from hub.repos import trees

    with trees.CACHE.lock:
        trees.CACHE.items.clear()


# --- the hub side -----------------------------------------------------------------------------------

def build_repo(layout: Layout, batch: int) -> tuple:
    """Creates the repo through the services; returns (actor, repo, seconds spent inserting Blob
    rows, seconds spent in CommitOps + do_commit, number of commits)."""
    from hub.accounts.services import do_ensure_user
    from hub.content.models import Blob
    from hub.repos.models import Repo
    from hub.repos.services import Actor, CommitOps, do_commit, do_create_repo

    actor = Actor(do_ensure_user("bench"))
    repo = do_create_repo(actor, None, "imagenet-like", Repo.DATASET)
    blob_seconds = commit_seconds = 0.0
    commits = 0
    paths = layout.paths()
    while chunk := list(itertools.islice(paths, batch)):
        t = time.perf_counter()
        blobs = []
        for path in chunk:
            sha, size = blob_for(path)
            blobs.append(Blob(sha256=sha, size=size, verified=True))
        Blob.objects.bulk_create(blobs, batch_size=5000)
        blob_seconds += time.perf_counter() - t
        t = time.perf_counter()
        ops = CommitOps(user=actor.user)
        for path, blob in zip(chunk, blobs, strict=True):
            if path == "README.md":  # real bytes: a commit reads the README's card from the store
                ops.add_inline(path, CARD)
            else:
                ops.add_file(path, blob, lfs=True)
        do_commit(actor, repo, repo.default_branch, ops, title=f"Add {len(chunk)} files")
        commit_seconds += time.perf_counter() - t
        commits += 1
        log(f"  commit {commits}: {commits * batch if len(chunk) == batch else 'all'} files "
            f"(blob rows {blob_seconds:.0f} s, commits {commit_seconds:.0f} s)")
    repo.refresh_from_db()
    return actor, repo, blob_seconds, commit_seconds, commits


def head_tree(repo) -> str:
    from hub.repos.models import Commit

    return Commit.objects.get(oid=repo.head_sha).tree


def ours_resolve(tree: str) -> Callable[[str], object]:
    from hub.repos import trees

    def run(path: str) -> object:
        entry = trees.resolve(trees.NodeStore(), tree, path)
        assert entry is not None, path
        return entry
    return run


def ours_list(tree: str) -> Callable[[tuple[str, str | None]], list]:
    """A page as the tree API makes it: resolve the directory, then PAGE entries after the cursor."""
    from hub.repos import trees

    def run(arg: tuple[str, str | None]) -> list:
        path, after = arg
        store = trees.NodeStore()
        entry = trees.resolve(store, tree, path)
        base = path + "/"
        page = [(base + e.name, e) for e in itertools.islice(trees.list_dir(store, entry.ref, after=after), PAGE)]
        assert page, arg
        return page
    return run


def ours_walk_page(tree: str) -> Callable[[tuple[str, str]], list]:
    from hub.repos import trees

    def run(arg: tuple[str, str]) -> list:
        path, after = arg
        store = trees.NodeStore()
        entry = trees.resolve(store, tree, path)
        page = list(itertools.islice(trees.walk(store, entry.ref, path + "/", after.split("/")), PAGE))
        assert len(page) == PAGE, arg
        return page
    return run


# --- the baseline: one flat table per snapshot ------------------------------------------------------

def create_flat_table(vendor: str) -> None:
    from django.db import connection

    # Byte order ("C" collation) so that 'dir/' <= path < 'dir0' is exactly the paths below dir/.
    text = 'text COLLATE "C"' if vendor == "postgresql" else "text"
    with connection.cursor() as cur:
        cur.execute(f"CREATE TABLE {FLAT} (snapshot bigint NOT NULL, path {text} NOT NULL, "
                    f"sha256 varchar(64) NOT NULL, size bigint NOT NULL)")
        cur.execute(f"CREATE UNIQUE INDEX {FLAT}_snapshot_path ON {FLAT} (snapshot, path)")


def fill_flat_table(layout: Layout, vendor: str) -> None:
    from django.db import connection, transaction

    rows = ((1, p, *blob_for(p)) for p in itertools.chain([".gitattributes"], layout.paths()))
    with transaction.atomic(), connection.cursor() as cur:
        if vendor == "postgresql":
            with cur.cursor.copy(f"COPY {FLAT} (snapshot, path, sha256, size) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        else:
            while chunk := list(itertools.islice(rows, 50_000)):
                cur.executemany(f"INSERT INTO {FLAT} (snapshot, path, sha256, size) VALUES (%s, %s, %s, %s)", chunk)


def flat_resolve(path: str) -> object:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(f"SELECT sha256, size FROM {FLAT} WHERE snapshot = %s AND path = %s", [1, path])
        row = cur.fetchone()
    assert row is not None, path
    return row


def flat_list(arg: tuple[str, str | None]) -> list:
    """A page of the paths below `dir` after the cursor: an index range scan. (Immediate children
    only coincide with this when the directory holds no subdirectories, as for the ones measured.)"""
    from django.db import connection

    path, after = arg
    low = f"{path}/{after}" if after is not None else f"{path}/"
    with connection.cursor() as cur:
        cur.execute(f"SELECT path, sha256, size FROM {FLAT} WHERE snapshot = %s AND path > %s AND path < %s "
                    f"ORDER BY path LIMIT {PAGE}", [1, low, f"{path}0"])
        return cur.fetchall()


def flat_commit(path: str, sha: str, size: int) -> int:
    """A one-file commit in the flat design: the new snapshot copies every row."""
    from django.db import connection, transaction

    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(f"INSERT INTO {FLAT} (snapshot, path, sha256, size) "
                    f"SELECT 2, path, CASE WHEN path = %s THEN %s ELSE sha256 END, "
                    f"CASE WHEN path = %s THEN %s ELSE size END FROM {FLAT} WHERE snapshot = 1",
                    [path, sha, path, size])
        return cur.rowcount


# --- database housekeeping --------------------------------------------------------------------------

def table_rows(exclude: set[str]) -> dict[str, int]:
    from django.db import connection

    with connection.cursor() as cur:
        out = {}
        for table in connection.introspection.table_names(cur):
            if table not in exclude:
                cur.execute(f'SELECT COUNT(*) FROM "{table}"')
                out[table] = cur.fetchone()[0]
    return out


def sizes(vendor: str, tables: list[str]) -> tuple[int, dict[str, int]]:
    """(whole database, {table: bytes including its indexes})."""
    from django.db import connection

    with connection.cursor() as cur:
        if vendor == "postgresql":
            cur.execute("SELECT pg_database_size(current_database())")
            total = cur.fetchone()[0]
            per = {}
            for t in tables:
                cur.execute("SELECT pg_total_relation_size(%s)", [t])
                per[t] = cur.fetchone()[0]
            return total, per
        cur.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        cur.execute("PRAGMA page_count")
        pages = cur.fetchone()[0]
        cur.execute("PRAGMA page_size")
        total = pages * cur.fetchone()[0]
        per = {}
        try:
            cur.execute("SELECT m.tbl_name, SUM(s.pgsize) FROM dbstat s JOIN sqlite_master m ON m.name = s.name "
                        "GROUP BY m.tbl_name")
            found = dict(cur.fetchall())
            per = {t: found.get(t, 0) for t in tables}
        except Exception:  # SQLite built without the dbstat table
            pass
        return total, per


def analyze() -> None:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("ANALYZE")


def pg_admin(url: str) -> tuple[str, str]:
    parsed = urlparse(url)
    name = parsed.path.lstrip("/")
    if not name:
        raise SystemExit("--database-url needs a database name, e.g. postgresql://postgres@127.0.0.1:5432/tree_bench")
    return urlunparse(parsed._replace(path="/postgres")), name


def create_database(url: str) -> None:
    import psycopg

    admin, name = pg_admin(url)
    with psycopg.connect(admin, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            raise SystemExit(f"database {name!r} already exists; this benchmark only uses a database it creates")
        conn.execute(f'CREATE DATABASE "{name}"')


def drop_database(url: str) -> None:
    import psycopg

    admin, name = pg_admin(url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# --- the run ----------------------------------------------------------------------------------------

def db_version(vendor: str) -> str:
    from django.db import connection

    if vendor == "postgresql":
        return f"PostgreSQL {connection.pg_version // 10000}.{connection.pg_version % 10000}"
    return f"SQLite {connection.Database.sqlite_version}"


def fmt_ms(seconds: float) -> str:
    ms = seconds * 1000
    return f"{ms:.2f}" if ms < 10 else f"{ms:.1f}" if ms < 100 else f"{ms:.0f}"


def fmt_bytes(n: int) -> str:
    for unit, factor in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= factor:
            return f"{n / factor:.1f} {unit}"
    return f"{n} B"


def run(args: argparse.Namespace, vendor: str) -> None:
    import django
    import psutil
    from django.core.management import call_command
    from django.db import connection

    django.setup()
    from hub.content.models import Blob
    from hub.repos import trees
    from hub.repos.models import RepoBlob, TreeNode
    from hub.repos.services import CommitOps, do_commit

    proc = psutil.Process()
    layout = Layout(args.files)
    call_command("migrate", verbosity=0)
    log(f"building {args.files:,} files on {vendor} in commits of {args.batch:,}")
    t0 = time.perf_counter()
    actor, repo, blob_s, commit_s, commits = build_repo(layout, args.batch)
    build_s = time.perf_counter() - t0
    tree = head_tree(repo)
    assert repo.file_count == args.files + 1, (repo.file_count, args.files)
    log("building the flat baseline table")
    t = time.perf_counter()
    create_flat_table(vendor)
    fill_flat_table(layout, vendor)
    flat_build_s = time.perf_counter() - t
    analyze()
    node_table = TreeNode._meta.db_table
    size_tables = [node_table, Blob._meta.db_table, RepoBlob._meta.db_table, FLAT]
    db_size, table_size = sizes(vendor, size_tables)
    tree_nodes = TreeNode.objects.count()

    rng = random.Random(1)
    all_paths = list(layout.paths())
    deep = rng.sample([p for p in all_paths if p.startswith("train/")], args.samples)
    flat_dir = rng.sample([p for p in all_paths if p.startswith("test/")], args.samples)
    test_names = layout.test_names()
    class_dir = f"train/{layout.classes[len(layout.classes) // 2]}"
    last_pages = [("test", test_names[len(test_names) - PAGE - 1 - rng.randrange(PAGE)]) for _ in range(args.pages)]
    train_paths = [p for p in all_paths if p.startswith("train/")]
    walk_cursors = [("train", train_paths[rng.randrange(len(train_paths) // 2, len(train_paths) - 2 * PAGE)]
                     [len("train/"):]) for _ in range(args.pages)]
    del all_paths, train_paths

    cases: list[tuple[str, Callable, list, Callable]] = [
        ("resolve train/<class>/<file>", ours_resolve(tree), deep, flat_resolve),
        (f"resolve test/<file> ({layout.test_count:,} entries)", ours_resolve(tree), flat_dir, flat_resolve),
        ("list test/ first page", ours_list(tree), [("test", None)] * args.pages, flat_list),
        ("list test/ last page", ours_list(tree), last_pages, flat_list),
        # A class directory holds no subdirectories, so the flat table's range scan lists it too.
        (f"list {class_dir}/", ours_list(tree), [(class_dir, None)] * args.pages, flat_list),
        ("recursive page deep in train/", ours_walk_page(tree), walk_cursors, flat_list),
    ]
    results = []
    for name, fn, arg_list, flat_fn in cases:
        log(f"measuring {name}")
        cold = measure(fn, arg_list, before=clear_node_cache)
        measure(fn, arg_list)  # fills the cache with exactly these nodes
        warm = measure(fn, arg_list)
        measure(flat_fn, arg_list)
        flat = measure(flat_fn, arg_list)
        results.append((name, cold, warm, flat))

    log("walking the whole tree once (what a full recursive listing costs)")
    clear_node_cache()
    rss_before = proc.memory_info().rss
    walk_all = measure(lambda _: sum(1 for _ in trees.walk(trees.NodeStore(), tree)), [None])
    rss_after = proc.memory_info().rss
    walk_flat = measure(lambda _: sum(1 for _ in _flat_scan()), [None])

    log("one-file commits")
    skip = {FLAT}
    commit_rows = []
    for label, path in [("train/<class>/<file>", deep[0]), ("test/<file>", flat_dir[0])]:
        sha, size = blob_for(path, 1)
        blob = Blob(sha256=sha, size=size, verified=True)
        Blob.objects.bulk_create([blob])
        before_rows = table_rows(skip)
        before_nodes = set(TreeNode.objects.values_list("digest", flat=True))
        clear_node_cache()
        ops = CommitOps()
        ops.add_file(path, blob, lfs=True)
        counter = QueryCounter()
        t = time.perf_counter()
        with connection.execute_wrapper(counter):
            do_commit(actor, repo, repo.default_branch, ops, title=f"Update {path}")
        ours_s = time.perf_counter() - t
        after_rows = table_rows(skip)
        new_nodes = TreeNode.objects.exclude(digest__in=before_nodes).values_list("data", flat=True)
        node_bytes = sum(len(bytes(d)) for d in new_nodes)
        changed = {k: after_rows[k] - before_rows.get(k, 0) for k in after_rows if after_rows[k] != before_rows.get(k)}
        commit_rows.append((label, path, changed, node_bytes, ours_s, counter.count))
    catalog_seeded, catalog_results = measure_catalog(args.pages)
    t = time.perf_counter()
    flat_rows = flat_commit(commit_rows[0][1], *blob_for(commit_rows[0][1], 1))
    flat_commit_s = time.perf_counter() - t
    analyze()
    db_size_after, table_size_after = sizes(vendor, size_tables)

    # --- report -----------------------------------------------------------------------------------
    out = []
    out.append(f"Tree scale: {args.files:,} files + .gitattributes, "
               f"{db_version(vendor)}, "
               f"{os.cpu_count()} CPUs, CHUNK_AVERAGE={trees.CHUNK_AVERAGE}, node cache {trees.CACHE.capacity} nodes")
    out.append(f"build: {build_s:.0f} s = Blob rows {blob_s:.0f} s + {commits} do_commit() of ≤{args.batch:,} "
               f"add_file() {commit_s:.0f} s (plus create repo); flat table {flat_build_s:.0f} s; "
               f"{tree_nodes:,} TreeNode rows")
    out.append(f"database: {fmt_bytes(db_size)} after the build"
               + (" (" + ", ".join(f"{t} {fmt_bytes(s)}" for t, s in table_size.items()) + ")" if table_size else "")
               + f"; {fmt_bytes(db_size_after)} after the one-file commits and the seed catalog")
    out.append("")
    head = (f"{'operation (n samples)':44} {'cold p50':>9} {'p99':>8} {'q':>4} | {'warm p50':>9} {'p99':>8} {'q':>4}"
            f" | {'flat p50':>9} {'p99':>8} {'q':>2} | {'cold/flat':>9} {'warm/flat':>9}")
    out.append(head)
    out.append("-" * len(head))
    for name, cold, warm, flat in results:
        out.append(f"{name + f' ({len(cold.seconds)})':44} {fmt_ms(cold.p50):>9} {fmt_ms(cold.p(0.99)):>8} "
                   f"{cold.q:>4} | {fmt_ms(warm.p50):>9} {fmt_ms(warm.p(0.99)):>8} {warm.q:>4} | "
                   f"{fmt_ms(flat.p50):>9} {fmt_ms(flat.p(0.99)):>8} {flat.q:>2} | "
                   f"{cold.p50 / flat.p50:>8.1f}x {warm.p50 / flat.p50:>8.1f}x")
    out.append("(milliseconds; q = queries per operation; cold = node cache cleared before each)")
    out.append("")
    out.append(f"full walk of {args.files:,} entries: ours {walk_all.seconds[0]:.1f} s in {walk_all.queries[0]:,} "
               f"queries (RSS +{fmt_bytes(max(0, rss_after - rss_before))}), flat table scan "
               f"{walk_flat.seconds[0]:.1f} s in {walk_flat.queries[0]} query")
    out.append("")
    out.append(f"{'one-file commit':28} {'TreeNode rows':>13} {'node bytes':>10} {'other rows':>10} {'time':>8} "
               f"{'q':>3} | {'flat rows':>9} {'time':>7} | {'rows ours/flat':>14}")
    for label, _path, changed, node_bytes, ours_s, queries in commit_rows:
        nodes = changed.get(node_table, 0)
        other = {k: v for k, v in changed.items() if k != node_table}
        total = nodes + sum(other.values())
        out.append(f"{label:28} {nodes:>13} {fmt_bytes(node_bytes):>10} {sum(other.values()):>10} "
                   f"{fmt_ms(ours_s):>6}ms {queries:>3} | {flat_rows:>9,} {flat_commit_s:>6.1f}s | {total / flat_rows:>14.1e}")
    other_tables = sorted({k for _, _, changed, *_ in commit_rows for k in changed if k != node_table})
    out.append(f"(other rows: {', '.join(other_tables)}; the flat commit copies the snapshot in one "
               f"INSERT … SELECT)")
    out.append("")
    out.append(f"catalog beside it: {catalog_seeded}")
    out.append(f"{'catalog operation (n samples)':44} {'p50':>9} {'p95':>8} {'q':>4}")
    for name, sample in catalog_results:
        out.append(f"{name + f' ({len(sample.seconds)})':44} {fmt_ms(sample.p50):>9} {fmt_ms(sample.p(0.95)):>8} "
                   f"{sample.q:>4}")
    out.append("(milliseconds: one page of 30 cards with its total, as a list page asks the catalog service)")
    print("\n".join(out), flush=True)
    sys.path.insert(0, str(ROOT))
    from bench.result import report

    for name, cold, warm, flat in results:  # each operation's latencies, for the table bench/run writes
        report("tree_scale", f"{args.files:,} files ({vendor}): {name}, warm / flat table (p50)",
               ratio=flat.p50 / warm.p50, target=None,
               detail=f"cold p50 {fmt_ms(cold.p50)} ms ({cold.q} queries), warm p50 {fmt_ms(warm.p50)} ms, "
                      f"flat {fmt_ms(flat.p50)} ms")
    for name, sample in catalog_results:
        report("tree_scale", f"{args.files:,} files ({vendor}) + seed catalog: {name}", ratio=None, target=None,
               detail=f"p50 {fmt_ms(sample.p50)} ms, p95 {fmt_ms(sample.p(0.95))} ms ({sample.q} queries); "
                      f"{catalog_seeded}")
    worst_warm = max(warm.p50 / flat.p50 for _, _, warm, flat in results)
    report("tree_scale", f"{args.files:,} files ({vendor}): slowest warm operation vs flat table",
           ratio=1 / worst_warm, target=None,
           detail=f"one-file commit writes {commit_rows[0][2].get(node_table, 0)} TreeNode rows vs "
                  f"{flat_rows:,} copied; database {fmt_bytes(db_size)}")


def measure_catalog(samples: int) -> tuple[str, list[tuple[str, Sample]]]:
    """Seeds the real catalog into this database and times a list page's catalog queries."""
    from hub.catalog import seed, services
    from hub.repos.models import Repo

    log("seeding the catalog beside the big repo")
    t = time.perf_counter()
    items = seed.load()
    result = seed.do_seed(items)
    seeded_s = time.perf_counter() - t
    analyze()
    datasets = sum(1 for i in items if i.type == Repo.DATASET)
    queries = [
        ("datasets, first page (most downloaded)", services.Query(type=Repo.DATASET)),
        ("models sorted by name, page 2", services.Query(type=Repo.MODEL, sort="name", page=2)),
        ("datasets sorted by size", services.Query(type=Repo.DATASET, sort="size")),
        ("datasets, task + language filters", services.Query(type=Repo.DATASET, task="text-generation", language="zh")),
        ("search datasets 'chinese dialogue'", services.Query(type=Repo.DATASET, q="chinese dialogue")),
        ("search models 'qwen'", services.Query(type=Repo.MODEL, q="qwen")),
    ]
    out = []
    for name, query in queries:
        services.search(None, query)  # warm: compiled card statement, database caches
        out.append((name, measure(lambda q: services.search(None, q), [query] * samples)))
    summary = (f"{datasets} datasets and {len(items) - datasets} models ({result.repos_created} repos created) "
               f"seeded in {seeded_s:.0f} s")
    return summary, out


def _flat_scan() -> Iterator[tuple]:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(f"SELECT path, sha256, size FROM {FLAT} WHERE snapshot = %s ORDER BY path", [1])
        while rows := cur.fetchmany(10_000):
            yield from rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=1_000_000)
    parser.add_argument("--database-url", help="postgresql://…/<new db> (created and dropped); default SQLite")
    parser.add_argument("--batch", type=int, default=50_000, help="files per build commit")
    parser.add_argument("--samples", type=int, default=300, help="paths per resolve measurement")
    parser.add_argument("--pages", type=int, default=50, help="pages per listing measurement")
    args = parser.parse_args()
    if args.files < 10_000:
        parser.error("--files must be at least 10000 (the layout needs pages of 1000 in several places)")

    data_dir = tempfile.mkdtemp(prefix="tree-scale-")
    for name in ("DATABASE_URL", "HUB_STORAGE_URL", "CELERY_BROKER_URL", "DEBUG"):
        os.environ.pop(name, None)
    os.environ["DJANGO_SETTINGS_MODULE"] = "hub.settings"
    os.environ["HUB_DATA_DIR"] = data_dir
    # A million ImageNet-sized files exceed the default quota; quotas are not what this measures.
    os.environ["HUB_DEFAULT_QUOTA"] = "1PB"
    vendor = "sqlite"
    if args.database_url:
        if not args.database_url.startswith(("postgres://", "postgresql://")):
            parser.error("--database-url must be a PostgreSQL URL (the default is SQLite in a temporary directory)")
        create_database(args.database_url)
        os.environ["DATABASE_URL"] = args.database_url
        vendor = "postgresql"
    sys.path.insert(0, str(ROOT))
    try:
        run(args, vendor)
    finally:
        from django.db import connections

        connections.close_all()
        if args.database_url:
            drop_database(args.database_url)
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
