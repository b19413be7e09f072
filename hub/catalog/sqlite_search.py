"""Search words on SQLite (the embedded default) through an FTS5 trigram index instead of a LIKE
scan of every entry's text.

`catalog_repo_search` holds one row per repo, its rowid the repo's id: the catalog entry's
search_text, or "namespace/name" for a repo without catalog metadata — exactly what the LIKE match
looked at, so a search finds the same repos. A trigram index answers a substring of three or more
characters (case-insensitively) from the index; shorter words fall back to LIKE on the same rows.

Triggers on repos_repo and catalog_catalogentry keep it current. They are (re)made after every
`migrate` (post_migrate), not by a migration, because a later migration that rebuilds one of those
tables (SQLite alters a table by copying it) drops its triggers; when any was missing, the index is
rebuilt from the tables. PostgreSQL has its own table and triggers (catalog migration 0006).

The triggers that bump the filter options' version (catalog migration 0007) are made here too,
for the same reason."""
from __future__ import annotations

from django.db import connections

TABLE = "catalog_repo_search"
_BARE = "(SELECT n.name FROM accounts_namespace n WHERE n.id = {r}.namespace_id) || '/' || {r}.name"
_TEXT = f"COALESCE((SELECT e.search_text FROM catalog_catalogentry e WHERE e.repo_id = {{r}}.id), {_BARE})"
TRIGGERS = {
    "catalog_repo_search_repo_ins": f"""AFTER INSERT ON repos_repo BEGIN
        INSERT INTO {TABLE}(rowid, text) VALUES (new.id, {_TEXT.format(r='new')}); END""",
    "catalog_repo_search_repo_upd": f"""AFTER UPDATE OF name, namespace_id ON repos_repo BEGIN
        DELETE FROM {TABLE} WHERE rowid = old.id;
        INSERT INTO {TABLE}(rowid, text) VALUES (new.id, {_TEXT.format(r='new')}); END""",
    "catalog_repo_search_repo_del": f"""AFTER DELETE ON repos_repo BEGIN
        DELETE FROM {TABLE} WHERE rowid = old.id; END""",
    "catalog_repo_search_entry_ins": f"""AFTER INSERT ON catalog_catalogentry BEGIN
        DELETE FROM {TABLE} WHERE rowid = new.repo_id;
        INSERT INTO {TABLE}(rowid, text) VALUES (new.repo_id, new.search_text); END""",
    "catalog_repo_search_entry_upd": f"""AFTER UPDATE OF search_text, repo_id ON catalog_catalogentry BEGIN
        DELETE FROM {TABLE} WHERE rowid IN (old.repo_id, new.repo_id);
        INSERT INTO {TABLE}(rowid, text) VALUES (new.repo_id, new.search_text); END""",
    # A repo's entry deleted (the repo may stay): it is found by its name again.
    "catalog_repo_search_entry_del": f"""AFTER DELETE ON catalog_catalogentry BEGIN
        DELETE FROM {TABLE} WHERE rowid = old.repo_id;
        INSERT INTO {TABLE}(rowid, text) SELECT r.id, {_TEXT.format(r='r')} FROM repos_repo r
            WHERE r.id = old.repo_id; END""",
}
# The filter options' version (catalog migrations 0007, 0010; PostgreSQL has its own triggers there).
_BUMP = "UPDATE catalog_facet_version SET n = n + 1 WHERE id = 1"
FACET_TRIGGERS = {
    "catalog_facet_version_facets_ins": f"AFTER INSERT ON catalog_catalogfacet BEGIN {_BUMP}; END",
    "catalog_facet_version_facets_del": f"AFTER DELETE ON catalog_catalogfacet BEGIN {_BUMP}; END",
    "catalog_facet_version_private": f"""AFTER UPDATE OF private ON repos_repo
        WHEN old.private <> new.private BEGIN {_BUMP}; END""",
    "catalog_facet_version_repo_del": f"AFTER DELETE ON repos_repo BEGIN {_BUMP}; END",
    # (0010) a new repo changes the visitors' list counts kept under the version
    "catalog_facet_version_repo_ins": f"AFTER INSERT ON repos_repo BEGIN {_BUMP}; END",
}
_READY: dict[str, bool] = {}  # per database alias: whether the index is there


def drop_triggers(using: str = "default") -> None:
    """Drops the search index's triggers (before migrations run: see the app's pre_migrate). They
    name catalog_catalogentry and accounts_namespace inside their bodies, and SQLite checks every
    trigger when a migration renames a rebuilt table into place — with one of those tables dropped
    at that moment, the migration fails. `ensure` makes them again, and refills the index, after."""
    conn = connections[using]
    if conn.vendor != "sqlite":
        return
    with conn.cursor() as cur:
        for name in TRIGGERS:
            cur.execute(f"DROP TRIGGER IF EXISTS {name}")
    _READY.pop(using, None)


def ensure(using: str = "default") -> bool:
    """Makes the index and its triggers where missing, and fills the index when anything was
    missing. False when this SQLite has no FTS5 trigram tokenizer (searches then scan with LIKE)."""
    conn = connections[using]
    if conn.vendor != "sqlite":
        return False
    with conn.cursor() as cur:
        cur.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'trigger')")
        have = {row[0] for row in cur.fetchall()}
        if "repos_repo" not in have or "catalog_catalogentry" not in have:
            return False  # migrating an app at a time; the last post_migrate does it
        if "catalog_facet_version" in have:
            for name, body in FACET_TRIGGERS.items():
                if name not in have:
                    cur.execute(f"CREATE TRIGGER IF NOT EXISTS {name} {body}")
                    cur.execute(_BUMP)  # (whatever changed while it was missing)
        missing = [name for name in (TABLE, *TRIGGERS) if name not in have]
        if missing:
            try:
                cur.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {TABLE} USING fts5(text, tokenize='trigram')")
            except Exception:  # noqa: BLE001 — built without FTS5, or older than 3.34 (no trigram)
                _READY[using] = False
                return False
            for name, body in TRIGGERS.items():
                cur.execute(f"CREATE TRIGGER IF NOT EXISTS {name} {body}")
            cur.execute(f"DELETE FROM {TABLE}")
            cur.execute(f"INSERT INTO {TABLE}(rowid, text) SELECT r.id, {_TEXT.format(r='r')} FROM repos_repo r")
    _READY[using] = True
    return True


def ready(using: str = "default") -> bool:
    """Whether searches on this database can use the index (looked up once per process)."""
    if using not in _READY:
        conn = connections[using]
        if conn.vendor != "sqlite":
            _READY[using] = False
        else:
            with conn.cursor() as cur:
                cur.execute("SELECT 1 FROM sqlite_master WHERE name = %s", [TABLE])
                _READY[using] = cur.fetchone() is not None
    return _READY[using]


def matching(terms: list[str]) -> tuple[str, list[str]]:
    """SQL selecting the ids of repos whose text holds every term (a substring, any case), and its
    parameters. Terms of three characters or more go to the index as one MATCH of quoted phrases
    (a term is \\w+, so it never holds a quote); shorter ones are LIKE tests on the rows found."""
    long = [t for t in terms if len(t) >= 3]
    where, params = [], []
    if long:
        where.append(f"{TABLE} MATCH %s")
        params.append(" ".join(f'"{t}"' for t in long))
    for t in terms:
        if len(t) < 3:
            where.append("text LIKE %s ESCAPE '\\'")
            params.append("%" + t.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%")
    return f"SELECT rowid FROM {TABLE} WHERE " + " AND ".join(where), params
