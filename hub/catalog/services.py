"""The catalog's read side (search, filters, facets, a repo's card and how to use it) and the one
function that writes catalog metadata (`do_upsert_entry`). Views, the seed command, the samples and
the benchmark all go through these."""
from __future__ import annotations

import itertools
import json
import posixpath
import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from datetime import datetime
from urllib.parse import quote, unquote, urlsplit

import markdown
import nh3
from django.conf import settings
from django.core.cache import cache
from django.core.paginator import Page, Paginator
from django.db import connection, connections, transaction
from django.db.models import (
    BooleanField,
    Case,
    Count,
    ExpressionWrapper,
    F,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    TextField,
    Value,
    When,
    Window,
)
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast, Concat, Length
from django.utils import translation
from django.utils.translation import gettext_lazy

from hub.accounts.models import Namespace
from hub.catalog import sqlite_search
from hub.catalog import words as cjk
from hub.catalog.models import CatalogEntry, CatalogFacet
from hub.config import format_size
from hub.content import blobs
from hub.errors import BlobNotLocal, EntryNotFound, HubError
from hub.repos import services as repos
from hub.repos import trees
from hub.repos.cards import split_card
from hub.repos.models import MIRRORED, Commit, Repo
from hub.validation import check_path

PER_PAGE = 30
_WORD = re.compile(r"\w+", re.UNICODE)
MAX_QUERY = 200
FACET_TTL = 3600  # seconds a version of the filter options is kept (a new version replaces it at once)

SIZE_BUCKETS: list[tuple[str, str, int | None, int | None]] = [
    ("lt100m", gettext_lazy("< 100 MB"), 0, 10**8),
    ("100m-1g", gettext_lazy("100 MB – 1 GB"), 10**8, 10**9),
    ("1g-10g", gettext_lazy("1 – 10 GB"), 10**9, 10**10),
    ("10g-100g", gettext_lazy("10 – 100 GB"), 10**10, 10**11),
    ("gt100g", gettext_lazy("> 100 GB"), 10**11, None),
    ("unknown", gettext_lazy("size unknown"), None, None),
]
SORTS = {
    # Each is served by an index of migration catalog.0005 (updated: 0004); ties go by name. Relevance
    # (the default with search words; without, it is "downloads") ranks the matches: see _by_relevance.
    "relevance": (gettext_lazy("Best match"), ["-downloads", "sort_name", "pk"]),
    "downloads": (gettext_lazy("Most downloaded"), ["-downloads", "sort_name", "pk"]),
    "updated": (gettext_lazy("Recently updated"), ["-last_modified", "-pk"]),
    "size": (gettext_lazy("Largest"), [F("listed_size").desc(nulls_last=True), "sort_name", "pk"]),
    "name": (gettext_lazy("Name"), ["sort_name", "pk"]),
}
FACETS = (CatalogFacet.TASK, CatalogFacet.MODALITY, CatalogFacet.LANGUAGE, CatalogFacet.LICENSE)  # Query fields
MODALITIES = ["text", "image", "audio", "video", "tabular", "multimodal", "code"]
# Names in the page's language (lazy: the filters' options are kept in the cache across languages).
LANGUAGE_NAMES = {
    "ar": gettext_lazy("Arabic"), "bg": gettext_lazy("Bulgarian"), "bn": gettext_lazy("Bengali"),
    "cs": gettext_lazy("Czech"), "de": gettext_lazy("German"), "el": gettext_lazy("Greek"),
    "en": gettext_lazy("English"), "es": gettext_lazy("Spanish"), "et": gettext_lazy("Estonian"),
    "fi": gettext_lazy("Finnish"), "fr": gettext_lazy("French"), "gu": gettext_lazy("Gujarati"),
    "hi": gettext_lazy("Hindi"), "hr": gettext_lazy("Croatian"), "hu": gettext_lazy("Hungarian"),
    "id": gettext_lazy("Indonesian"), "it": gettext_lazy("Italian"), "ja": gettext_lazy("Japanese"),
    "kk": gettext_lazy("Kazakh"), "ko": gettext_lazy("Korean"), "lt": gettext_lazy("Lithuanian"),
    "nl": gettext_lazy("Dutch"), "pl": gettext_lazy("Polish"), "pt": gettext_lazy("Portuguese"),
    "ro": gettext_lazy("Romanian"), "ru": gettext_lazy("Russian"), "sk": gettext_lazy("Slovak"),
    "sl": gettext_lazy("Slovenian"), "sw": gettext_lazy("Swahili"), "te": gettext_lazy("Telugu"),
    "th": gettext_lazy("Thai"), "tr": gettext_lazy("Turkish"), "ur": gettext_lazy("Urdu"),
    "vi": gettext_lazy("Vietnamese"), "yo": gettext_lazy("Yoruba"), "zh": gettext_lazy("Chinese"),
}
# Shown on the home page when they are in the catalog (the flagship entries).
HIGHLIGHTS = [
    (Repo.DATASET, "ILSVRC/imagenet-1k"), (Repo.DATASET, "detection-datasets/coco"),
    (Repo.DATASET, "phiyodr/coco2017"), (Repo.DATASET, "shareAI/ShareGPT-Chinese-English-90k"),
    (Repo.MODEL, "THUDM/chatglm3-6b"), (Repo.MODEL, "baichuan-inc/Baichuan2-13B-Chat"),
    (Repo.MODEL, "Qwen/Qwen2.5-7B-Instruct"), (Repo.MODEL, "hfl/chinese-alpaca-2-7b"),
]


def language_name(code: str, *, english: bool = False) -> str:
    """The language's name in the page's language, or in English (as the search text holds it,
    whatever language the request that indexes an entry was in)."""
    if english:
        with translation.override(None):
            return str(LANGUAGE_NAMES.get(code, code))
    return str(LANGUAGE_NAMES.get(code, code))


def size_bucket(size: int | None) -> str:
    for key, _, low, high in SIZE_BUCKETS:
        if size is None:
            if low is None and high is None:
                return key
        elif low is not None and size >= low and (high is None or size < high):
            return key
    return "unknown"


# --- writing metadata ---------------------------------------------------------------------------------

@dataclass
class EntryData:
    """Catalog metadata of one repo, as the seed file or a sample states it."""

    title: str
    summary: str = ""
    title_zh: str = ""
    summary_zh: str = ""
    license: str = ""
    tasks: list[str] = field(default_factory=list)
    modality: list[str] = field(default_factory=list)
    languages: list[str] = field(default_factory=list)
    upstream_size: int | None = None
    upstream_files: int | None = None
    homepage: str = ""
    paper: str = ""
    base_model: str = ""
    parameters: str = ""
    trust_remote_code: bool = False
    upstream_id: str = ""
    source: str = CatalogEntry.SEED


def do_upsert_entry(repo: Repo, data: EntryData) -> tuple[CatalogEntry, str]:
    """Creates or updates the repo's entry with `data`, its facets and its search text. Returns the
    entry and what happened: "created", "updated" or "unchanged" (nothing written)."""
    values = {f.name: getattr(data, f.name) for f in fields(EntryData)}
    entry = CatalogEntry.objects.filter(repo=repo).first()
    if entry is not None and all(getattr(entry, k) == v for k, v in values.items()):
        return entry, "unchanged"
    with transaction.atomic():
        if entry is None:
            entry = CatalogEntry(repo=repo, **values)
            outcome = "created"
        else:
            for k, v in values.items():
                setattr(entry, k, v)
            outcome = "updated"
        entry.search_text = search_text(repo.repo_id, entry)
        entry.save()
        Repo.objects.filter(pk=repo.pk).update(upstream_size=entry.upstream_size)  # for the lists' size
        _set_facets(repo, entry)
        refresh_search([entry.pk])
    return entry, outcome


def _card_strings(value, limit: int = 20) -> list[str]:
    """A front-matter field as clean, distinct, short strings (a string or a list of them; anything
    else is ignored: cards are written by hand)."""
    items = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    out: list[str] = []
    for v in items:
        v = v.strip() if isinstance(v, str) else ""
        if v and len(v) <= 64 and v not in out:
            out.append(v)
    return out[:limit]


def entry_from_card(repo: Repo, meta: dict) -> EntryData | None:
    """Catalog metadata from a repo's README front matter, in the Hub's card fields: license,
    task_categories (datasets) or pipeline_tag (models), language, `modality:` tags, pretty_name,
    base_model. None when it names nothing to filter on."""
    tasks = _card_strings(meta.get("task_categories")) + _card_strings(meta.get("pipeline_tag"))
    modality = [t.split(":", 1)[1] for t in _card_strings(meta.get("tags"), 100) if t.startswith("modality:")]
    languages = [v.lower() for v in _card_strings(meta.get("language"))]
    license = [v.lower() for v in _card_strings(meta.get("license"))][:1]
    if not (tasks or modality or languages or license):
        return None
    title = _card_strings(meta.get("pretty_name"))[:1] or [repo.name]
    base = _card_strings(meta.get("base_model"))[:1]
    return EntryData(title=title[0][:200], license=license[0] if license else "", tasks=list(dict.fromkeys(tasks)),
                     modality=modality[:10], languages=list(dict.fromkeys(languages)), base_model=base[0] if base else "",
                     source=CatalogEntry.CARD)


def do_index_card(repo: Repo) -> str:
    """Keeps the catalog metadata of a repo without a curated entry in step with its card (after a
    commit changed its README.md, or at seed time for older repos): so a pushed repo's license,
    tasks and languages appear in the list filters and search. Returns what it did."""
    entry = CatalogEntry.objects.filter(repo=repo).only("source").first()
    if entry is not None and entry.source != CatalogEntry.CARD:
        return "curated"
    data = entry_from_card(repo, repo.card_data or {})
    if data is not None:
        return do_upsert_entry(repo, data)[1]
    if entry is None:
        return "none"
    with transaction.atomic():
        CatalogFacet.objects.filter(repo=repo).delete()
        entry.delete()
    return "removed"


def index_cards() -> int:
    """do_index_card for every repo whose card says something and that has no entry yet (repos
    pushed before cards were read). Returns how many got one."""
    n = 0
    for repo in Repo.objects.filter(catalog__isnull=True).exclude(card_data={}).iterator():
        n += do_index_card(repo) == "created"
    return n


def search_text(repo_id: str, e: CatalogEntry) -> str:
    """What a search matches for this entry: ids, title, summary, tasks, modality, language names, license.
    The ids and the title come twice: as written, and as the words a search is split into. PostgreSQL's
    parser reads "llama-2" as 'llama' and the number '-2', and "org-1e5" as 'org' and a float, so a
    search for "llama 2" would not find them by their original spelling alone."""
    words = " ".join(_WORD.findall(f"{repo_id} {e.upstream_id} {e.title}".replace("_", " ")))
    parts = [repo_id, e.upstream_id, e.title, words, e.title_zh, e.summary, e.summary_zh, " ".join(e.tasks).replace("-", " "),
             " ".join(e.modality), " ".join(language_name(c, english=True) for c in e.languages), e.license, e.base_model,
             e.parameters]
    parts.append(cjk.grams(" ".join([e.title, e.title_zh, e.summary, e.summary_zh])))
    return " ".join(p for p in parts if p)


def facets_of(e: CatalogEntry) -> set[tuple[str, str]]:
    return ({(CatalogFacet.TASK, v) for v in e.tasks} | {(CatalogFacet.MODALITY, v) for v in e.modality}
            | {(CatalogFacet.LANGUAGE, v) for v in e.languages}
            | ({(CatalogFacet.LICENSE, e.license)} if e.license else set()))


def _set_facets(repo: Repo, e: CatalogEntry) -> None:
    wanted = facets_of(e)
    have = set(CatalogFacet.objects.filter(repo=repo).values_list("kind", "value"))
    for kind, value in have - wanted:
        CatalogFacet.objects.filter(repo=repo, kind=kind, value=value).delete()
    CatalogFacet.objects.bulk_create([CatalogFacet(repo=repo, kind=k, value=v[:64]) for k, v in wanted - have])


def refresh_search(entry_ids: list[int]) -> None:
    """Recomputes the stored tsvector of these entries (PostgreSQL only; a no-op elsewhere)."""
    if connection.vendor != "postgresql" or not entry_ids:
        return
    CatalogEntry.objects.filter(pk__in=entry_ids).update(search=search_vector())


def search_vector():
    """The stored tsvector's expression: the title weighs more than the rest of the search text."""
    from django.contrib.postgres.search import SearchVector

    return (SearchVector("title", weight="A", config="simple")
            + SearchVector("search_text", weight="B", config="english"))


# --- searching --------------------------------------------------------------------------------------

@dataclass
class Query:
    """A list page's search, filters, sort and page, already checked (unknown values are dropped)."""

    type: str
    q: str = ""
    task: str = ""
    modality: str = ""
    language: str = ""
    license: str = ""
    size: str = ""
    mirrored: str = ""  # "yes", "no" or "" (either)
    sort: str = "downloads"
    page: int = 1

    FILTERS = ("task", "modality", "language", "license", "size", "mirrored")

    @classmethod
    def from_params(cls, repo_type: str, params) -> Query:
        def one(name: str, limit: int = 64) -> str:
            return (params.get(name) or "").strip()[:limit]

        size = one("size")
        sort = one("sort")
        try:
            page = max(1, int(params.get("p") or 1))
        except ValueError:
            page = 1
        q = one("q", MAX_QUERY)
        if sort not in SORTS or (sort == "relevance" and not _terms(q)):
            sort = "relevance" if _terms(q) else "downloads"
        return cls(type=repo_type, q=q, task=one("task"), modality=one("modality"),
                   language=one("language"), license=one("license"),
                   size=size if size in {b[0] for b in SIZE_BUCKETS} else "",
                   mirrored=one("mirrored") if one("mirrored") in ("yes", "no") else "",
                   sort=sort, page=min(page, 10_000))

    @property
    def active_filters(self) -> list[tuple[str, str]]:
        return [(k, getattr(self, k)) for k in self.FILTERS if getattr(self, k)]


def sort_choices(query: Query) -> list[tuple[str, str]]:
    """The sorts a list offers: relevance only when there are search words to be relevant to."""
    return [(k, v[0]) for k, v in SORTS.items() if k != "relevance" or query.sort == "relevance" or _terms(query.q)]


def _terms(q: str) -> list[str]:
    return _WORD.findall(q.lower())[:12]


def _text_filter(q: str) -> Q | None:
    """Every word of `q` must match: the id, title, summary, tasks, languages, license. PostgreSQL
    matches words (and word prefixes, so 'imagen' finds ImageNet) through a GIN-indexed tsvector per
    repo (migration 0006); SQLite matches substrings through a trigram index (sqlite_search); other
    engines scan for substrings. Repos without catalog metadata match by their id. The match is a
    subquery of repo ids, so the outer query needs no join to filter."""
    terms = _terms(q)
    if not terms:
        return None
    if sqlite_search.ready(Repo.objects.db):
        return Q(pk__in=RawSQL(*sqlite_search.matching(terms)))
    if connection.vendor == "postgresql":
        # One tsvector per repo (migration 0006): the entry's, or its id's words. OFFSET 0 keeps the
        # match a subquery of its own, read once from the GIN index and hashed; pulled up into a
        # join, the planner walks the sort's index and tests each repo's vector (10 ms for a word
        # that matches a quarter of the catalog, against 3 ms).
        return Q(pk__in=RawSQL("SELECT repo_id FROM catalog_repo_search "
                               "WHERE search @@ to_tsquery('english', %s) OFFSET 0", [cjk.tsquery(terms)]))
    by_name = Q()
    for t in terms:
        by_name &= Q(name__icontains=t) | Q(namespace__in=Namespace.objects.filter(name__icontains=t).values("pk"))
    # (Engines without a search index.) Matched on the outer query's rows behind a hashed "has no
    # entry" test, and with no join, so the word match over the entries runs once.
    bare = ~Q(pk__in=CatalogEntry.objects.values("repo_id")) & by_name
    matches = CatalogEntry.objects.all()
    for t in terms:
        matches = matches.filter(search_text__icontains=t)
    return Q(pk__in=matches.values("repo_id")) | bare


def _facet_ids(kind: str, value: str):
    """The ids of repos with this facet value, as a subquery read once (from its index) and hashed.
    On PostgreSQL, OFFSET 0 keeps the planner from pulling it up into a join that probes the facet
    index once per repo of the sort's index walk: the page's LIMIT makes that look cheap, but the
    window count reads every match (9 ms for a facet of 1,600 datasets, against 3 ms)."""
    if connection.vendor == "postgresql":
        return RawSQL(f"SELECT repo_id FROM {CatalogFacet._meta.db_table} WHERE kind = %s AND value = %s OFFSET 0",
                      [kind, value])
    return CatalogFacet.objects.filter(kind=kind, value=value).values("repo_id")


def listing(user, query: Query) -> QuerySet[Repo]:
    """Repos of `query.type` the user may see, searched, filtered and sorted as `query` says."""
    qs = repos.visible_repos(user).filter(type=query.type)
    text = _text_filter(query.q)
    if text is not None:
        qs = qs.filter(text)
    for kind in FACETS:
        value = getattr(query, kind)
        if value:
            qs = qs.filter(pk__in=_facet_ids(kind, value))
    if query.mirrored == "yes":
        qs = qs.filter(MIRRORED)
    elif query.mirrored == "no":
        qs = qs.exclude(MIRRORED)
    if query.size:
        _, _, low, high = next(b for b in SIZE_BUCKETS if b[0] == query.size)
        if low is None:
            qs = qs.filter(listed_size__isnull=True)
        else:
            qs = qs.filter(listed_size__gte=low)
            if high is not None:
                qs = qs.filter(listed_size__lt=high)
    if query.sort == "relevance" and text is not None:
        return _by_relevance(qs, query.q)
    return qs.order_by(*SORTS[query.sort][1])


def _by_relevance(qs: QuerySet[Repo], q: str) -> QuerySet[Repo]:
    """A search's matches (`qs`) in order of how well they match: the repo id or name itself, then
    names that start with the words (or repos of a namespace of that name), then titles holding
    every word, then tasks and modalities holding them, then the rest (the words are in the
    summary or elsewhere); within each, the most downloaded first, then the largest (on a fresh
    hub nothing is downloaded yet: the full set before its samples and variants, ImageNet-1k before
    Imagenette), then shorter (more canonical) names. Computed over the matches only (the words'
    match is a subquery before it)."""
    terms = _terms(q)
    phrase = " ".join(terms)
    names = {phrase, phrase.replace(" ", "-"), phrase.replace(" ", "_"), "".join(terms)}
    exact = Q()
    prefix = Q(namespace__name__iexact=phrase)
    for n in names:
        exact |= Q(name__iexact=n)
        prefix |= Q(name__istartswith=n)
    if "/" in q.strip():
        ns, _, name = q.strip().partition("/")
        exact |= Q(namespace__name__iexact=ns.strip(), name__iexact=name.strip())
    in_title = Q()
    in_tags = Q()
    for t in terms:
        in_title &= _word_in("catalog__title", t) | _word_in("catalog__title_zh", t)
        in_tags &= _word_in("tags_text", t)
    tags = Concat(Cast("catalog__tasks", TextField()), Value(" "), Cast("catalog__modality", TextField()),
                  output_field=TextField())
    tier = Case(When(exact, then=Value(0)), When(prefix, then=Value(1)), When(in_title, then=Value(2)),
                When(in_tags, then=Value(3)), default=Value(4), output_field=IntegerField())
    return qs.annotate(tags_text=tags).order_by(tier.asc(), F("downloads").desc(),
                                                F("listed_size").desc(nulls_last=True), Length("name").asc(),
                                                "sort_name", "pk")


def _word_in(field: str, term: str) -> Q:
    """`field` holds a word starting with `term` ("code" is in "Code Llama", not in "Cross-Encoder"),
    or holds a CJK term anywhere (CJK text has no spaces between its words)."""
    if cjk.has_cjk(term):
        return Q(**{f"{field}__icontains": term})
    starts = Q(**{f"{field}__istartswith": term})
    for sep in (" ", "-", "_", "/", "(", '"', "."):
        starts |= Q(**{f"{field}__icontains": sep + term})
    return starts


def web_path(repo_type: str, repo_id: str) -> str:
    """Where a repo's page is: /datasets/ns/name for datasets, /ns/name for models (as upstream)."""
    return ("/datasets/" if repo_type == Repo.DATASET else "/") + repo_id


@dataclass(frozen=True, slots=True)
class CardRow:
    """What a list shows of one repo, read as plain values: no model instances, no JSON columns
    the card does not show."""

    pk: int
    type: str
    namespace: str
    name: str
    private: bool
    last_modified: datetime
    downloads: int
    entry: int | None  # the catalog entry's id; None for a repo without catalog metadata
    title: str | None
    summary: str | None
    title_zh: str | None
    summary_zh: str | None
    license: str | None
    tasks: list[str] | None
    modality: list[str] | None
    parameters: str | None
    mirrored: bool
    size: int | None

    @property
    def repo_id(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def url(self) -> str:
        return web_path(self.type, self.repo_id)


_CARD_COLUMNS = ("pk", "type", "ns", "name", "private", "last_modified", "downloads", "catalog__id",
                 "catalog__title", "catalog__summary", "catalog__title_zh", "catalog__summary_zh", "catalog__license", "catalog__tasks", "catalog__modality",
                 "catalog__parameters", "mirrored", "listed_size")


def _with_card_columns(qs: QuerySet[Repo]) -> QuerySet:
    # The namespace's name by a subquery per row, not a join: for a page of rows PostgreSQL hashed
    # the whole namespace table (4,650 rows: 1 ms of a 1.3 ms query) rather than look 30 names up.
    ns = Subquery(Namespace.objects.filter(pk=OuterRef("namespace_id")).values("name")[:1])
    return (qs.annotate(ns=ns, mirrored=ExpressionWrapper(MIRRORED, output_field=BooleanField()))
            .values_list(*_CARD_COLUMNS))


def card_rows(qs: QuerySet[Repo], limit: int | None = None) -> list[CardRow]:
    """The cards of the repos of `qs`, in its order (at most `limit`)."""
    rows = _with_card_columns(qs)
    return [CardRow(*r) for r in (rows[:limit] if limit is not None else rows)]


_MARK = -(10**9)  # stands for the n-th id in the compiled query (no repo has a negative id)
_CARDS_BY_ID: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # per database connection


def cards_by_id(ids: list[int]) -> list[CardRow]:
    """The cards of up to PER_PAGE repos by id, in that order: `card_rows` with the SQL compiled
    once per database connection instead of on every list page (compiling it was a third of the
    query's time); ids fill the compiled statement's id slots, padded with one that matches nothing."""
    if not ids:
        return []
    if len(ids) > PER_PAGE:
        return _in_order(card_rows(Repo.objects.filter(pk__in=ids)), ids)
    conn = connections[Repo.objects.db]
    compiled = _CARDS_BY_ID.get(conn)
    if compiled is None:
        marks = [_MARK - i for i in range(PER_PAGE)]
        qs = _with_card_columns(Repo.objects.filter(pk__in=marks))
        compiler = qs.query.get_compiler(connection=conn)
        sql, params = compiler.as_sql()
        slots = [i for i, p in enumerate(params) if isinstance(p, int) and _MARK - PER_PAGE < p <= _MARK]
        assert len(slots) == PER_PAGE, "the compiled card query lost its id slots"
        converters = compiler.get_converters([s[0] for s in compiler.select[:compiler.col_count]])
        convert = [(i, _converter(expr, funcs, conn)) for i, (funcs, expr) in converters.items()]
        compiled = _CARDS_BY_ID[conn] = (sql, list(params), slots, convert)
    sql, params, slots, convert = compiled
    params = list(params)
    for slot, i in zip(slots, itertools.chain(ids, itertools.repeat(0)), strict=False):
        params[slot] = i
    with conn.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    if convert:
        rows = [list(r) for r in rows]
        for r in rows:
            for i, f in convert:
                if r[i] is not None:
                    r[i] = f(r[i])
    return _in_order([CardRow(*r) for r in rows], ids)


def _converter(expression, funcs: list, conn) -> Callable:
    """One column's conversion from what the database driver returns, for `cards_by_id`: Django's
    own converters, called per value through a generic loop that reads settings each time, were a
    third of that query's time. The kinds a card has (SQLite's 0/1 booleans and datetime text, JSON
    text) are done directly, as Django does them; anything else goes through Django's."""
    kind = expression.output_field.get_internal_type()
    if kind == "BooleanField":
        return bool
    if kind == "DateTimeField":
        tz = conn.timezone if settings.USE_TZ else None

        def as_datetime(value):
            if not isinstance(value, datetime):
                value = datetime.fromisoformat(value)
            return value.replace(tzinfo=tz) if tz is not None and value.tzinfo is None else value

        return as_datetime
    if kind == "JSONField":
        def as_json(value):
            if not isinstance(value, str):
                return value
            try:
                return json.loads(value)
            except json.JSONDecodeError:
                return value

        return as_json

    def django(value):
        for f in funcs:
            value = f(value, expression, conn)
        return value

    return django


def _in_order(cards: list[CardRow], ids: list[int]) -> list[CardRow]:
    found = {c.pk: c for c in cards}
    return [found[i] for i in ids if i in found]


def search(user, query: Query, per_page: int = PER_PAGE) -> Page:
    """One page of `listing()` as CardRows; a page number past the end gives the last page.

    Without search words or facet filters: a plain COUNT (an index walk) and the page's ids in the
    listing's order (the indexes of migrations 0004/0005 serve every sort, so only the page's rows are
    read). With them, matching is the cost (a word match, intersecting facet lists), so it runs once:
    the page's ids and the total come from one query with a window count over the matches. Then one
    query reads the page's 30 cards. A window count over all 7,000 rows of an unfiltered list was
    most of its time."""
    number = query.page
    if (query.q and _terms(query.q)) or any(getattr(query, k) for k in FACETS):
        ordered = listing(user, query)
        counted = ordered.annotate(total=Window(Count("pk"))).values_list("pk", "total")
        rows = list(counted[(number - 1) * per_page:number * per_page])
        if not rows and number > 1:  # past the end: the last page, as Paginator.get_page does
            number = max(1, -(-ordered.count() // per_page))
            rows = list(counted[(number - 1) * per_page:number * per_page])
        count = rows[0][1] if rows else 0
        ids = [pk for pk, _ in rows]
    else:
        count = _plain_count(user, query)
        number = max(1, min(number, -(-count // per_page)))
        ids = _page_ids(user, query, (number - 1) * per_page, per_page)
    paginator = Paginator([], per_page)
    paginator.count = count  # a cached_property: set, it is never computed
    return Page(cards_by_id(ids), number, paginator)


def _plain_count(user, query: Query) -> int:
    """How many repos a list without search words or facet filters holds. A visitor's unfiltered
    list (the one every visitor opens) changes length only when a public repo comes or goes, which
    bumps facet_version, so its count is kept under that version: exact, and a COUNT over 7,000 rows
    (plus the ORM building it) less on every page."""
    if user is not None or query.size or query.mirrored:
        return listing(user, query).order_by().count()
    key = f"catalog:count:{query.type}:{facet_version()}"
    count = cache.get(key)
    if count is None:
        count = listing(user, query).order_by().count()
        cache.set(key, count, FACET_TTL)
    return count


_PAGE_IDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # per database connection


def _page_ids(user, query: Query, offset: int, limit: int) -> list[int]:
    """The ids of one page of a list without search words or facet filters. For a visitor, each
    such list (type × sort × size bucket × mirrored: a few hundred at most) is one statement, compiled
    once per database connection; building and compiling it through the ORM cost more than running it."""
    if user is not None:
        return list(listing(user, query).values_list("pk", flat=True)[offset:offset + limit])
    conn = connections[Repo.objects.db]
    statements = _PAGE_IDS.setdefault(conn, {})
    shape = (query.type, query.sort, query.size, query.mirrored)
    found = statements.get(shape)
    if found is None:
        ids = listing(user, query).values_list("pk", flat=True)
        sql, params = ids.query.get_compiler(connection=conn).as_sql()
        found = statements[shape] = (sql + " LIMIT %s OFFSET %s", list(params))
    sql, params = found
    with conn.cursor() as cursor:
        cursor.execute(sql, [*params, limit, offset])
        return [row[0] for row in cursor.fetchall()]


def count_matches(user, repo_type: str, q: str) -> int:
    """How many repos of `repo_type` the user may see match the search words `q` (no filters): what
    an empty search of the other kind points to."""
    return listing(user, Query(type=repo_type, q=q)).order_by().count()


def facet_version() -> int:
    """A number that changes whenever the filter options' counts or the set of public repos can
    (catalog migrations 0007 and 0010: bumped by triggers when facet rows come or go, or a repo is
    created, changes visibility or is deleted)."""
    with connections[Repo.objects.db].cursor() as cur:
        cur.execute("SELECT n FROM catalog_facet_version WHERE id = 1")
        row = cur.fetchone()
    return row[0] if row else 0


def facet_options(repo_type: str) -> dict[str, list[tuple[str, str, int]]]:
    """For each filter, its values among public repos of this type: (value, label, repos). Kept per
    process (or in the shared cache) under the facets' version, so the counts shown are never older
    than the data; computing them reads every facet row (10-30 ms with 10,000 repos)."""
    key = f"catalog:facets:{repo_type}:{facet_version()}"
    language = translation.get_language()
    labeled = _FACETS_LABELED.get((key, language))
    if labeled is not None:
        return labeled
    found = cache.get(key)
    if found is None:
        rows = (CatalogFacet.objects.filter(repo__type=repo_type, repo__private=False)
                .values_list("kind", "value").annotate(n=Count("id")).order_by("kind", "-n", "value"))
        found = {k: [] for k in CatalogFacet.KINDS}
        for kind, value, n in rows:
            found[kind].append((value, n))
        # (languages by their English names, whoever fills it: one order in every language)
        found[CatalogFacet.LANGUAGE].sort(key=lambda r: (-r[1], language_name(r[0], english=True)))
        cache.set(key, found, FACET_TTL)
    # Plain values and counts are kept (unpickling a lazy translation per label cost more than the
    # page's queries); the labels are made here, in the page's language.
    names = {code: language_name(code) for code, _ in found[CatalogFacet.LANGUAGE]}
    labeled = {kind: [(v, names[v] if kind == CatalogFacet.LANGUAGE else v, n) for v, n in rows]
               for kind, rows in found.items()}
    if len(_FACETS_LABELED) > 64:
        _FACETS_LABELED.clear()
    _FACETS_LABELED[(key, language)] = labeled  # (per process: a new version is a new key)
    return labeled


_FACETS_LABELED: dict[tuple[str, str | None], dict] = {}


# --- home -----------------------------------------------------------------------------------------

@dataclass
class HomeStats:
    datasets: int
    models: int
    mirrored_datasets: int  # each links to its list filtered by mirrored=yes, so they count what it lists
    mirrored_models: int
    organisations: int
    highlights: list[CardRow]
    ready: list[CardRow]
    tasks: dict[str, list[tuple[str, str, int]]]
    languages: list[tuple[str, str, int]]

    @property
    def mirrored(self) -> int:
        return self.mirrored_datasets + self.mirrored_models


def home(user) -> HomeStats:
    visible = repos.visible_repos(user)
    counts = dict(visible.values_list("type").annotate(n=Count("id")).order_by())
    wanted = Q()
    for t, repo_id in HIGHLIGHTS:
        ns, name = repo_id.split("/")
        wanted |= Q(type=t, namespace__name=ns, name=name)
    order = {k: i for i, k in enumerate(HIGHLIGHTS)}
    highlights = sorted(card_rows(visible.filter(wanted)), key=lambda r: order.get((r.type, r.repo_id), 99))
    ready = card_rows(visible.filter(MIRRORED).order_by("-downloads", "-last_modified"), limit=6)
    orgs = visible.filter(catalog__isnull=False).values("namespace").distinct().count()
    mirrored = dict(visible.filter(MIRRORED).values_list("type").annotate(n=Count("id")).order_by())
    datasets, models = facet_options(Repo.DATASET), facet_options(Repo.MODEL)
    return HomeStats(counts.get(Repo.DATASET, 0), counts.get(Repo.MODEL, 0), mirrored.get(Repo.DATASET, 0),
                     mirrored.get(Repo.MODEL, 0), orgs, highlights, ready, {"datasets": datasets[CatalogFacet.TASK][:12],
                                               "models": models[CatalogFacet.TASK][:8]},
                     datasets[CatalogFacet.LANGUAGE][:12])


# --- one repo -----------------------------------------------------------------------------------------

def entry_of(repo: Repo) -> CatalogEntry | None:
    return CatalogEntry.objects.filter(repo=repo).first()


def is_mirrored(repo: Repo) -> bool:
    return repo.file_count > 1 or repo.total_size > len(repos.GITATTRIBUTES)


def upstream_of(repo: Repo) -> str | None:
    """The Hugging Face id a curated catalog entry comes from (None for samples and users' repos)."""
    return (CatalogEntry.objects.filter(repo=repo, source=CatalogEntry.SEED).exclude(upstream_id="")
            .values_list("upstream_id", flat=True).first())


def not_mirrored_notice(repo: Repo) -> str | None:
    """For a catalog entry whose files are not on this hub yet, what its page says, in one sentence
    (for the API, `hub pull`, mounts and downloads that would otherwise just find no files); None
    for anything else, a user's own empty repo included."""
    if is_mirrored(repo):
        return None
    entry = (CatalogEntry.objects.filter(repo=repo).exclude(source=CatalogEntry.CARD)
             .values("upstream_size", "upstream_files").first())
    if entry is None:
        return None
    upstream = ""
    if entry["upstream_size"]:
        upstream = f" (upstream: about {format_size(entry['upstream_size'])}"
        upstream += f" in {entry['upstream_files']:,} files)" if entry["upstream_files"] else ")"
    dataset = repo.type == Repo.DATASET
    return (f"{'datasets/' if dataset else ''}{repo.repo_id} is in this hub's catalog, but its files are not on "
            f"this hub yet{upstream}; ask an operator to mirror it (python manage.py mirror {repo.repo_id}"
            f"{' --type dataset' if dataset else ''})")


class _LRU:
    def __init__(self, capacity: int) -> None:
        self.capacity, self.items, self.lock = capacity, OrderedDict(), threading.Lock()

    def get(self, key):
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key]
        return None

    def put(self, key, value) -> None:
        with self.lock:
            self.items[key] = value
            while len(self.items) > self.capacity:
                self.items.popitem(last=False)


_CARDS = _LRU(256)  # rendered cards by (README blob's sha256, repo@commit): the same bytes render the same


@dataclass
class Card:
    meta: dict
    html: str


def render_markdown(text: str, files: str | None = None) -> str:
    """Markdown to HTML that is safe to embed: raw HTML in the source is sanitized by nh3
    (scripts, event handlers, javascript: URLs and unknown tags removed). With `files` (a repo's
    web path at a commit, e.g. /datasets/ns/name@<oid>), relative links and images point at the
    repo's files as a card on the Hub does: images at their bytes, links at their page."""
    html = markdown.markdown(text, extensions=["fenced_code", "tables", "sane_lists"], output_format="html")
    return nh3.clean(html, link_rel="noopener noreferrer nofollow", url_schemes={"http", "https", "mailto"},
                     attribute_filter=_repo_links(files) if files else None)


def _repo_links(files: str) -> Callable[[str, str, str], str | None]:
    web, _, oid = files.rpartition("@")

    def rewrite(element: str, attribute: str, value: str) -> str | None:
        if (element, attribute) not in (("img", "src"), ("a", "href")) or not value or value.startswith(("#", "/")) \
                or urlsplit(value).scheme or value.startswith("//"):
            return value
        parts = urlsplit(value)
        path = posixpath.normpath(unquote(parts.path).removeprefix("./"))
        if path.startswith("..") or path == ".":
            return value  # (outside the repo: left as written)
        view = "resolve" if element == "img" else "blob"
        return f"{web}/{view}/{oid}/{quote(path)}" + (f"#{parts.fragment}" if parts.fragment else "")

    return rewrite


def card(commit: Commit, web: str | None = None) -> Card | None:
    """The README.md card at this commit: its YAML front matter and its body rendered as safe HTML,
    relative links pointing into the repo at `web` (its web path) at this commit. None when there is
    no README (or it is too large to be a card)."""
    entry = repos.entry_at(commit, repos.README)
    if entry is None or entry.is_dir or entry.size > repos.CARD_MAX_BYTES:
        return None
    files = f"{web}@{commit.oid}" if web else None
    found = _CARDS.get((entry.ref, files))
    if found is None:
        text = blobs.object_store().read_bytes(blobs.key_for(entry.ref)).decode("utf-8", "replace")
        meta, body = split_card(text)
        found = Card(meta, render_markdown(body, files))
        _CARDS.put((entry.ref, files), found)
    return found


def card_facts(repo: Repo, entry: CatalogEntry | None, card_meta: dict) -> list[tuple[str, str, list[str]]]:
    """The sidebar's metadata as (label, text, chips): the catalog's where the repo has a curated
    entry, else what the card's front matter says (all of it, tags included)."""
    def listed(value) -> list[str]:
        if isinstance(value, str):
            return [value]
        return [str(v) for v in value] if isinstance(value, list) else []

    if entry is not None and entry.source != CatalogEntry.CARD:
        facts = [(gettext_lazy("License"), entry.license, []), (gettext_lazy("Tasks"), "", entry.tasks),
                 (gettext_lazy("Modality"), "", entry.modality),
                 (gettext_lazy("Languages"), "", [language_name(c) for c in entry.languages]),
                 (gettext_lazy("Parameters"), entry.parameters, []), (gettext_lazy("Base model"), entry.base_model, []),
                 (gettext_lazy("Custom code"),
                  gettext_lazy("loads with trust_remote_code=True") if entry.trust_remote_code else "", []),
                 (gettext_lazy("Upstream size"), format_size(entry.upstream_size) if entry.upstream_size else "", []),
                 (gettext_lazy("Upstream files"), f"{entry.upstream_files:,}" if entry.upstream_files else "", [])]
    else:
        facts = [(gettext_lazy("License"), str(card_meta.get("license") or ""), []),
                 (gettext_lazy("Tasks"), "", listed(card_meta.get("task_categories") or card_meta.get("pipeline_tag"))),
                 (gettext_lazy("Languages"), "", listed(card_meta.get("language"))),
                 (gettext_lazy("Tags"), "", listed(card_meta.get("tags")))]
    return [f for f in facts if f[1] or f[2]]


@dataclass
class Snippets:
    pull: str
    python: str
    fsspec: str
    instance: str


def snippets(repo: Repo, base_url: str, example_file: str | None, entry: CatalogEntry | None = None) -> Snippets:
    """How to use the repo from each front door: the CLI, HF_ENDPOINT code, hub:// and an instance.
    A model whose catalog entry says it needs its own code loads with trust_remote_code=True."""
    rid = repo.repo_id
    remote = ", trust_remote_code=True" if entry is not None and entry.trust_remote_code else ""
    if repo.type == Repo.DATASET:
        pull = f"hub pull datasets/{rid}"
        python = (f"export HF_ENDPOINT={base_url}\n\n"
                  f"from datasets import load_dataset\nds = load_dataset(\"{rid}\")")
        url = f"hub://datasets/{rid}/{example_file or ''}"
        mount = f"/mnt/hub/datasets/{rid}"
    else:
        pull = f"hub pull {rid}"
        python = (f"export HF_ENDPOINT={base_url}\n\n"
                  f"from transformers import AutoModel, AutoTokenizer\n"
                  f"tokenizer = AutoTokenizer.from_pretrained(\"{rid}\"{remote})\n"
                  f"model = AutoModel.from_pretrained(\"{rid}\"{remote})")
        url = f"hub://models/{rid}/{example_file or ''}"
        mount = f"/mnt/hub/models/{rid}"
    if url.endswith("/"):  # no file to name (an empty repo): list it
        fsspec = f"import fsspec\nfs = fsspec.filesystem(\"hub\")\nprint(fs.ls(\"{url.removeprefix('hub://').rstrip('/')}\"))"
    else:
        fsspec = f"import fsspec\nwith fsspec.open(\"{url}\", \"rb\") as f:\n    head = f.read(1024)"
    return Snippets(pull, python, fsspec, mount)


# --- browsing a revision ------------------------------------------------------------------------------

TREE_PAGE = 200
PREVIEW_MAX = 256 * 1024
_TEXT_SUFFIXES = (".md", ".txt", ".csv", ".tsv", ".json", ".jsonl", ".yaml", ".yml", ".py", ".cfg", ".toml",
                  ".ini", ".sh", ".gitattributes", ".gitignore")


@dataclass
class Listing:
    path: str
    entry: trees.Entry
    items: list[tuple[str, trees.Entry]]
    next_after: str | None


def entry_at(repo: Repo, commit: Commit, path: str) -> trees.Entry:
    """The file or directory at `path` ('' = root) of this commit, or EntryNotFound."""
    path = path.strip("/")
    try:
        if path:
            check_path(path)
    except HubError:
        path = None
    entry = repos.entry_at(commit, path) if path is not None else None
    if entry is None:
        raise EntryNotFound(f"{path!r} not found in {repo.repo_id} at {commit.oid[:12]}")
    return entry


def browse(repo: Repo, commit: Commit, path: str, after: str | None = None, limit: int = TREE_PAGE) -> Listing:
    """One page of the directory at `path`, by name, after the name `after`. O(depth) reads."""
    path = path.strip("/")
    entry = entry_at(repo, commit, path)
    if not entry.is_dir:
        raise EntryNotFound(f"{path!r} is a file, not a directory")
    base = f"{path}/" if path else ""
    rows = list(itertools.islice(trees.list_dir(trees.NodeStore(), entry.ref, after=after or None), limit + 1))
    more = len(rows) > limit
    rows = rows[:limit]
    after_name = rows[-1].name if more else None
    rows.sort(key=lambda e: not e.is_dir)  # directories first on each page (the sort is stable)
    return Listing(path, entry, [(base + e.name, e) for e in rows], after_name)


def preview(path: str, entry: trees.Entry) -> str | None:
    """The text of a small text file, for showing it; None for binary or large files."""
    if entry.is_dir or entry.size > PREVIEW_MAX or not path.lower().endswith(_TEXT_SUFFIXES):
        return None
    try:
        data = blobs.object_store().read_bytes(blobs.key_for(entry.ref))
    except BlobNotLocal:  # fetched from upstream on its first download: not read for a preview
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def example_file(commit: Commit) -> str | None:
    """A file worth naming in the hub:// snippet: a data or weights file near the root, if any."""
    preferred = (".parquet", ".safetensors", ".csv", ".jsonl", ".json", ".bin", ".txt")
    found = [p for p, e in itertools.islice(trees.walk(trees.NodeStore(), commit.tree), 200)
             if not e.is_dir and p not in (".gitattributes", repos.README)]
    for suffix in preferred:
        for p in found:
            if p.endswith(suffix):
                return p
    return found[0] if found else None


def repos_of(user, limit: int = 200) -> list[Repo]:
    """Repos in the user's own namespace and in organisations they belong to, latest first."""
    qs = (Repo.objects.filter(Q(namespace__user=user) | Q(namespace__memberships__user=user)).distinct()
          .select_related("namespace").order_by("-last_modified"))
    return list(qs[:limit])
