"""Helpers the RGW benchmarks share: a hub of their own on PostgreSQL + Ceph RGW, the page cache
dropped between timed sides, and the store keys behind a repo's files."""
from __future__ import annotations

import subprocess
import uuid
from pathlib import Path
from urllib.parse import unquote, urlsplit

from storage.client import HubClient


def start_hub(tmp: Path):
    """A hub server (gunicorn) on a PostgreSQL database and an RGW bucket of its own; returns
    (hub, rgw env, bucket, stop), where stop() stops the server, drops the database and empties and
    deletes the bucket."""
    import psycopg

    from tests.conftest import _rgw
    from tests.support.servers import PG_ADMIN_URL, Hub, base_env, drop_bucket

    _rgw("start")
    rgw = dict(line.split("=", 1) for line in _rgw("env").split() if "=" in line)
    suffix = uuid.uuid4().hex[:10]
    db = f"hub_bench_{suffix}"
    with psycopg.connect(f"{PG_ADMIN_URL}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{db}"')
    env = base_env() | rgw | {"HUB_DATA_DIR": str(tmp / "data"), "DATABASE_URL": f"{PG_ADMIN_URL}/{db}",
                              "HUB_STORAGE_URL": f"s3://hub-bench-{suffix}", "HUB_MULTIPART_CHUNK": "64MiB"}
    (tmp / "data").mkdir()
    hub = Hub("bench", env, tmp / "data")

    def stop() -> None:
        hub.stop()
        with psycopg.connect(f"{PG_ADMIN_URL}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        drop_bucket(rgw, f"hub-bench-{suffix}")  # the one-node RGW has 20 GiB: give the space back

    try:
        hub.start(tmp / "server.log")
    except BaseException:
        stop()
        raise
    return hub, rgw, f"hub-bench-{suffix}", stop


def drop_page_cache() -> None:
    """Each side starts from the same state: what the one before wrote is flushed (else the next one
    pays for its writeback) and the page cache dropped (the store reads from disk for every side)."""
    subprocess.run(["sync"], check=False)
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError:
        pass  # not root: flushed, at least


def keys_of(client: HubClient, repo_id: str) -> list[tuple[str, int]]:
    """(store key, size) of every file of the dataset repo `repo_id`, from its manifest's URLs."""
    out = []
    for page in client.manifest("dataset", repo_id):
        for f in page["files"]:
            path = unquote(urlsplit(f["url"]).path).lstrip("/")
            out.append((path.split("/", 1)[1], f["size"]))  # drop the bucket
    return out
