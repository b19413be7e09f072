"""Catalog pages with 10,000 repos: list and search server time (p50/p95) and throughput, against a
trivial Django view (/healthz: one `SELECT 1`) on the same live gunicorn server in the same run.

Builds a fresh hub (its own HUB_DATA_DIR; SQLite, or a PostgreSQL database it creates and drops with
--database-url) and bulk-inserts --repos repos with realistic metadata: every entry of the real seed
file (hub/catalog/seed/catalog.yaml) is repeated under numbered names and namespaces until there are
enough, keeping its title, summary, tasks, languages, license and sizes; about one repo in ten is
"mirrored" (files on the hub), downloads and update times are spread at random (fixed seed). Rows
go in with bulk_create — repos (with the listing keys the services keep: sort_name, upstream_size), catalog entries, facet rows, the tsvector on PostgreSQL — built by
the same services functions the seed command uses (search_text, facets_of, refresh_search).

Then it starts gunicorn as scripts/run.sh does (2 workers, gthread, 8 threads) with an access log
that records each request's duration (%(D)s, microseconds: server time), and for each scenario:
  * latency: --sequential requests one at a time (keep-alive) → server time p50/p95 from the log;
  * throughput: --clients client processes for --seconds seconds → requests per second;
once with the page cache the server runs with by default (anonymous home/list/search pages kept
HUB_PAGE_CACHE_SECONDS=15 s) and once with it off, so every page is rendered from the database.

    .venv/bin/python bench/catalog.py [--repos 10000] [--database-url postgresql://…/catalog_bench]

Results go to stdout, progress to stderr.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.result import report  # noqa: E402

SEED = 1234

SCENARIOS: list[tuple[str, list[str]]] = [
    ("trivial view /healthz", ["/healthz"]),
    ("list /datasets (first page)", ["/datasets"]),
    ("list: pages, sorts, filters", [
        "/datasets?p=7", "/datasets?sort=updated&p=40", "/models?sort=size", "/datasets?sort=name&p=120",
        "/datasets?task=text-generation&language=zh", "/models?license=apache-2.0&sort=updated",
        "/datasets?modality=image&mirrored=yes", "/datasets?size=unknown&p=3", "/models?p=50",
        "/datasets?language=en&task=question-answering&sort=name"]),
    ("search", [
        "/datasets?q=chinese", "/datasets?q=imagenet", "/models?q=qwen", "/datasets?q=dialogue",
        "/models?q=chat+7b", "/datasets?q=speech+recognition", "/models?q=baichuan", "/datasets?q=instruction",
        "/datasets?q=medical&language=en", "/models?q=llama&sort=updated",
        # Chinese words (pairs of characters on PostgreSQL, substrings on SQLite) and relevance order
        "/datasets?q=%E5%AF%B9%E8%AF%9D", "/models?q=%E9%80%9A%E4%B9%89%E5%8D%83%E9%97%AE",
        "/datasets?q=%E4%B8%AD%E6%96%87", "/models?q=%E7%99%BE%E5%B7%9D"]),
]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- building the data ------------------------------------------------------------------------------

def build(n: int) -> None:
    import django

    django.setup()
    from django.db import connection, transaction
    from django.utils import timezone

    from hub.accounts.models import Namespace
    from hub.catalog import seed, services
    from hub.catalog.models import CatalogEntry, CatalogFacet
    from hub.repos.models import Repo, sort_name
    from hub.repos.services import GITATTRIBUTES

    rng = random.Random(SEED)
    items = seed.load()
    datasets = [i for i in items if i.type == Repo.DATASET]
    models = [i for i in items if i.type == Repo.MODEL]
    n_datasets = round(n * len(datasets) / len(items))
    plan = [(datasets[k % len(datasets)], k // len(datasets)) for k in range(n_datasets)]
    plan += [(models[k % len(models)], k // len(models)) for k in range(n - n_datasets)]

    def ns_name(item, copy: int) -> str:
        return item.namespace if copy == 0 else f"{item.namespace}-{copy}"

    names = sorted({ns_name(i, c) for i, c in plan})
    started = time.perf_counter()
    now = timezone.now()
    with transaction.atomic():
        Namespace.objects.bulk_create([Namespace(name=x, kind=Namespace.ORG) for x in names], batch_size=1000)
        ns = dict(Namespace.objects.values_list("name", "pk"))
        repos = []
        for item, copy in plan:
            mirrored = rng.random() < 0.1
            size = (item.data.upstream_size or rng.randint(10**6, 10**11)) if mirrored else len(GITATTRIBUTES)
            repos.append(Repo(namespace_id=ns[ns_name(item, copy)], name=item.name, type=item.type,
                              downloads=int(rng.lognormvariate(5, 2.5)),
                              last_modified=now - timedelta(seconds=rng.randint(0, 365 * 86400)),
                              head_sha=f"{rng.getrandbits(160):040x}",
                              file_count=rng.randint(2, 5000) if mirrored else 1, total_size=size,
                              sort_name=sort_name(ns_name(item, copy), item.name),
                              upstream_size=item.data.upstream_size))
        Repo.objects.bulk_create(repos, batch_size=1000)
        by_key = {(r.type, r.namespace_id, r.name): r for r in Repo.objects.select_related("namespace")}
        entries, facets = [], []
        for (item, copy), r in zip(plan, repos, strict=True):
            repo = by_key[(r.type, r.namespace_id, r.name)]
            data = item.data
            e = CatalogEntry(repo=repo, title=data.title if copy == 0 else f"{data.title} ({copy})",
                             summary=data.summary, license=data.license, tasks=data.tasks, modality=data.modality,
                             languages=data.languages, upstream_size=data.upstream_size,
                             upstream_files=data.upstream_files, homepage=data.homepage, paper=data.paper,
                             base_model=data.base_model, parameters=data.parameters, upstream_id=data.upstream_id)
            e.search_text = services.search_text(repo.repo_id, e)
            entries.append(e)
            facets += [CatalogFacet(repo=repo, kind=k, value=v) for k, v in services.facets_of(e)]
        CatalogEntry.objects.bulk_create(entries, batch_size=1000)
        CatalogFacet.objects.bulk_create(facets, batch_size=2000)
        ids = list(CatalogEntry.objects.values_list("pk", flat=True))
        for i in range(0, len(ids), 2000):
            services.refresh_search(ids[i:i + 2000])
    with connection.cursor() as cur:
        # On PostgreSQL, as autovacuum would soon after such a bulk load: the visibility map lets a
        # COUNT read an index alone, and the tsvector UPDATE's dead rows are marked reusable.
        cur.execute("VACUUM ANALYZE" if connection.vendor == "postgresql" else "ANALYZE")
    log(f"built {len(repos):,} repos ({n_datasets:,} datasets) in {len(names):,} organisations, "
        f"{len(facets):,} facet rows, in {time.perf_counter() - started:.1f} s")
    connection.close()


# --- load ---------------------------------------------------------------------------------------------

def _worker(args: tuple[str, list[str], float, int]) -> int:
    import requests

    base, paths, seconds, offset = args
    s = requests.Session()
    n = 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        r = s.get(base + paths[(n + offset) % len(paths)], timeout=30)
        if r.status_code != 200:
            raise RuntimeError(f"{r.status_code} for {r.url}")
        n += 1
    return n


def throughput(pool, base: str, paths: list[str], clients: int, seconds: float) -> float:
    counts = pool.map(_worker, [(base, paths, seconds, i * 3) for i in range(clients)])
    return sum(counts) / seconds


def server_times(log_path: Path, mark: str) -> list[float]:
    """Durations in ms of the access-log lines after the `mark` request."""
    lines = log_path.read_text().splitlines()
    start = max(i for i, line in enumerate(lines) if mark in line)
    out = []
    for line in lines[start + 1:]:
        parts = line.split()
        if len(parts) == 3 and parts[0] == "GET" and "bench-mark" not in parts[1]:
            out.append(int(parts[2]) / 1000)
    return out


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(args, env: dict[str, str], cache_seconds: int) -> None:
    import requests

    port = _free_port()
    env = env | {"HUB_PAGE_CACHE_SECONDS": str(cache_seconds)}
    access = Path(env["HUB_DATA_DIR"]) / f"access-{cache_seconds}.log"
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "hub.wsgi", "-b", f"127.0.0.1:{port}", "-k", "gthread", "--threads", "8",
         "-w", "2", "--access-logfile", str(access), "--access-logformat", "%(m)s %(U)s%(q)s %(D)s"],
        env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if requests.get(f"{base}/healthz", timeout=2).ok:
                    break
            except requests.RequestException:
                time.sleep(0.1)
        s = requests.Session()
        for _, paths in SCENARIOS:  # warm both workers' caches (templates, facet options, tree nodes)
            for p in paths * 4:
                assert s.get(base + p, timeout=30).status_code == 200, p
        results = []
        with multiprocessing.get_context("spawn").Pool(args.clients) as pool:
            for round_ in range(args.rounds):
                for name, paths in SCENARIOS:
                    mark = f"bench-mark-{round_}-{len(results)}"
                    s.get(f"{base}/healthz?{mark}", timeout=30)
                    for i in range(args.sequential):
                        s.get(base + paths[i % len(paths)], timeout=30)
                    time.sleep(0.3)  # let gunicorn flush its access log
                    times = server_times(access, mark)
                    rps = throughput(pool, base, paths, args.clients, args.seconds)
                    results.append((round_, name, times, rps))
                    log(f"round {round_ + 1}: {name}: p50 {pct(times, .5):.2f} ms, {rps:.0f} req/s")
        print_results(args, results, cache_seconds)
    finally:
        server.terminate()
        server.wait(10)


def print_results(args, results, cache_seconds: int) -> None:
    mode = (f"page cache on (HUB_PAGE_CACHE_SECONDS={cache_seconds}: anonymous list pages kept that long)"
            if cache_seconds else "page cache off (HUB_PAGE_CACHE_SECONDS=0: every page rendered)")
    print(f"\n{args.repos:,} repos, {args.vendor}, {mode}; gunicorn 2 workers x 8 threads; server time from "
          f"the access log (%(D)s) over {args.sequential} sequential requests; throughput with {args.clients} "
          f"client processes x {args.seconds:.0f} s; best of {args.rounds} rounds per scenario\n")
    print(f"{'scenario':32} {'p50 ms':>8} {'p95 ms':>8} {'req/s':>8} {'vs trivial':>11}")
    print("-" * 71)
    best: dict[str, tuple[list[float], float]] = {}
    for _, name, times, rps in results:
        if name not in best or rps > best[name][1]:
            best[name] = (times, rps)
    trivial = best[SCENARIOS[0][0]][1]
    for name, _ in SCENARIOS:
        times, rps = best[name]
        print(f"{name:32} {pct(times, .5):8.2f} {pct(times, .95):8.2f} {rps:8.0f} {rps / trivial:10.2f}x")
    cached = "page cache on" if cache_seconds else "uncached"
    for name, _ in SCENARIOS[1:]:
        times, rps = best[name]
        report("catalog", f"{name}, {args.vendor}, {cached} / trivial view (req/s)", ratio=rps / trivial, target=0.5,
               detail=f"{rps:.0f} vs {trivial:.0f} req/s; p50 {pct(times, .5):.2f} ms, p95 {pct(times, .95):.2f} ms")
    all_rounds = {name: [r for _, n, _, r in results if n == name] for name, _ in SCENARIOS}
    print("\nreq/s of every round: " + "; ".join(f"{n}: {', '.join(f'{r:.0f}' for r in rs)}"
                                                 for n, rs in all_rounds.items()))
    print("median server time of every request: " + ", ".join(
        f"{n} {statistics.median([t for _, m, ts, _ in results if m == n for t in ts]):.2f} ms" for n, _ in SCENARIOS))


# --- setup --------------------------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pg(url: str, sql: str) -> None:
    import psycopg

    parsed = urlparse(url)
    admin = urlunparse(parsed._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repos", type=int, default=10_000)
    parser.add_argument("--database-url", help="postgresql://…/<new db> (created and dropped); default SQLite")
    parser.add_argument("--sequential", type=int, default=200, help="requests per latency measurement")
    parser.add_argument("--clients", type=int, default=4, help="client processes for throughput")
    parser.add_argument("--seconds", type=float, default=8.0, help="seconds per throughput measurement")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    data_dir = tempfile.mkdtemp(prefix="catalog-bench-")
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "HUB_STORAGE_URL", "CELERY_BROKER_URL", "DEBUG", "HF_ENDPOINT")}
    env |= {"DJANGO_SETTINGS_MODULE": "hub.settings", "HUB_DATA_DIR": data_dir, "PYTHONPATH": str(ROOT)}
    args.vendor = "SQLite"
    if args.database_url:
        name = urlparse(args.database_url).path.lstrip("/")
        if not name or not args.database_url.startswith(("postgres://", "postgresql://")):
            parser.error("--database-url must be postgresql://…/<name of a database to create>")
        _pg(args.database_url, f'CREATE DATABASE "{name}"')
        env["DATABASE_URL"] = args.database_url
        args.vendor = "PostgreSQL"
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    try:
        subprocess.run([sys.executable, "manage.py", "hub_init"], env=env, cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL)
        build(args.repos)
        for seconds in (15, 0):
            run(args, env, seconds)
    finally:
        if args.database_url:
            _pg(args.database_url, f'DROP DATABASE IF EXISTS "{urlparse(args.database_url).path.lstrip("/")}" WITH (FORCE)')
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
