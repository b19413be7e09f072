"""Search words on PostgreSQL through one narrow table of every repo's tsvector, as SQLite has its
FTS5 table (hub.catalog.sqlite_search): `catalog_repo_search` holds, per repo, its catalog entry's
stored tsvector, or for a repo without catalog metadata the words of its id. Triggers on repos_repo
and catalog_catalogentry keep it current.

Why: a search matched the entries' tsvector in the wide entry rows (a word matching a quarter of
the catalog read and rechecked 2,500 of them: 7-8 ms of a 10,000-repo search) and matched repos
without metadata by a LIKE over every repo and namespace behind an OR, so no plan could start from
the GIN index. With one narrow table for both, the match is a bitmap scan of the index (~1 ms) that
the outer query hashes. The entries' own GIN index is no longer read and is dropped."""
from django.db import migrations

# The words of a repo id (namespace/name), as services.search_text spells an id for a search: as
# written and split into words, so "llama-2" is found by "llama 2" too.
BARE = """(SELECT to_tsvector('english', n.name || '/' || r.name || ' '
                                || regexp_replace(n.name || ' ' || r.name, '[^[:alnum:]]+', ' ', 'g'))
           FROM repos_repo r JOIN accounts_namespace n ON n.id = r.namespace_id WHERE r.id = rid)"""

FORWARD = [
    """CREATE TABLE IF NOT EXISTS catalog_repo_search (
           repo_id bigint PRIMARY KEY REFERENCES repos_repo (id) ON DELETE CASCADE,
           search tsvector NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS catalog_repo_search_gin ON catalog_repo_search USING gin (search)",
    f"""CREATE OR REPLACE FUNCTION catalog_repo_search_vector(rid bigint) RETURNS tsvector
        LANGUAGE sql STABLE AS $$
            SELECT COALESCE((SELECT e.search FROM catalog_catalogentry e WHERE e.repo_id = rid), {BARE},
                            ''::tsvector) $$""",
    """CREATE OR REPLACE FUNCTION catalog_repo_search_put(rid bigint) RETURNS void
        LANGUAGE sql AS $$
            INSERT INTO catalog_repo_search (repo_id, search)
            SELECT r.id, catalog_repo_search_vector(r.id) FROM repos_repo r WHERE r.id = rid
            ON CONFLICT (repo_id) DO UPDATE SET search = EXCLUDED.search $$""",
    """CREATE OR REPLACE FUNCTION catalog_repo_search_repo() RETURNS trigger
        LANGUAGE plpgsql AS $$ BEGIN PERFORM catalog_repo_search_put(NEW.id); RETURN NULL; END $$""",
    # An entry added, changed or removed: its repo's row again (a removed entry: the repo's id words;
    # a repo being deleted has no row left to write, and its own row goes with it by the cascade).
    """CREATE OR REPLACE FUNCTION catalog_repo_search_entry() RETURNS trigger
        LANGUAGE plpgsql AS $$ BEGIN
            IF TG_OP <> 'INSERT' THEN PERFORM catalog_repo_search_put(OLD.repo_id); END IF;
            IF TG_OP <> 'DELETE' AND (TG_OP = 'INSERT' OR NEW.repo_id <> OLD.repo_id) THEN
                PERFORM catalog_repo_search_put(NEW.repo_id);
            END IF;
            RETURN NULL; END $$""",
    "DROP TRIGGER IF EXISTS catalog_repo_search_repo ON repos_repo",
    """CREATE TRIGGER catalog_repo_search_repo AFTER INSERT OR UPDATE OF name, namespace_id ON repos_repo
        FOR EACH ROW EXECUTE FUNCTION catalog_repo_search_repo()""",
    "DROP TRIGGER IF EXISTS catalog_repo_search_entry ON catalog_catalogentry",
    """CREATE TRIGGER catalog_repo_search_entry AFTER INSERT OR DELETE OR UPDATE OF search, repo_id
        ON catalog_catalogentry FOR EACH ROW EXECUTE FUNCTION catalog_repo_search_entry()""",
    """INSERT INTO catalog_repo_search (repo_id, search)
       SELECT id, catalog_repo_search_vector(id) FROM repos_repo
       ON CONFLICT (repo_id) DO UPDATE SET search = EXCLUDED.search""",
    "DROP INDEX IF EXISTS catalog_entry_search_gin",
    "ANALYZE catalog_repo_search",
]

BACKWARD = [
    "CREATE INDEX IF NOT EXISTS catalog_entry_search_gin ON catalog_catalogentry USING gin (search)",
    "DROP TRIGGER IF EXISTS catalog_repo_search_entry ON catalog_catalogentry",
    "DROP TRIGGER IF EXISTS catalog_repo_search_repo ON repos_repo",
    "DROP TABLE IF EXISTS catalog_repo_search",
    "DROP FUNCTION IF EXISTS catalog_repo_search_entry()",
    "DROP FUNCTION IF EXISTS catalog_repo_search_repo()",
    "DROP FUNCTION IF EXISTS catalog_repo_search_put(bigint)",
    "DROP FUNCTION IF EXISTS catalog_repo_search_vector(bigint)",
]


def forward(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        for sql in FORWARD:
            schema_editor.execute(sql)


def backward(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        for sql in BACKWARD:
            schema_editor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [("catalog", "0005_listing_keys")]
    operations = [migrations.RunPython(forward, backward)]
