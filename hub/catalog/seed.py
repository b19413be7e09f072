"""Loading the seed catalog (hub/catalog/seed/catalog.yaml) into the hub.

Every entry becomes a public repo under its upstream Hugging Face id — the upstream namespace as an
organisation, so code that sets HF_ENDPOINT runs unchanged — and a CatalogEntry with its metadata.
The repos are created empty (one initial commit): their bytes arrive when an operator mirrors them.
Loading is idempotent: entries are matched by repo id, so a second run updates what changed and
creates only what is new. Repos are never deleted or emptied by a load.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from django.db import transaction

from hub.accounts import services as accounts
from hub.accounts.actor import Actor
from hub.accounts.models import Membership, Namespace
from hub.catalog import services
from hub.catalog.models import CatalogEntry
from hub.errors import HubError
from hub.repos import services as repos
from hub.repos.models import Repo, sort_name
from hub.validation import RESERVED_NAMESPACES, check_name

log = logging.getLogger(__name__)
SEED_FILE = Path(__file__).resolve().parent / "seed" / "catalog.yaml"
BOT = "hub-catalog"  # the account that creates and commits to the catalog's repos
TYPES = {"datasets": Repo.DATASET, "models": Repo.MODEL}
_STR = ("title", "summary", "title_zh", "summary_zh", "license", "homepage", "paper", "base_model", "parameters")
_LISTS = ("tasks", "modality", "languages")
_INTS = ("size_bytes", "file_count")


class SeedError(ValueError):
    """The seed file is malformed; the message names the entry and the field."""


@dataclass
class SeedItem:
    type: str
    namespace: str
    name: str
    data: services.EntryData

    @property
    def repo_id(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class SeedResult:
    organisations_created: int = 0
    repos_created: int = 0
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    skipped: list[str] = field(default_factory=list)

    def summary(self) -> str:
        text = (f"{self.created} entries created, {self.updated} updated, {self.unchanged} unchanged; "
                f"{self.repos_created} repos and {self.organisations_created} organisations created")
        if self.skipped:
            text += f"; {len(self.skipped)} skipped"
        return text


def load(path: Path | str = SEED_FILE) -> list[SeedItem]:
    """Parses and checks a seed file. Raises SeedError on the first problem found."""
    try:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise SeedError(f"cannot read {path}: {err}") from None
    if not isinstance(doc, dict) or not set(doc) <= set(TYPES):
        raise SeedError(f"{path}: expected a mapping with 'datasets:' and 'models:' lists")
    items: list[SeedItem] = []
    seen: set[tuple[str, str]] = set()
    for section, repo_type in TYPES.items():
        rows = doc.get(section) or []
        if not isinstance(rows, list):
            raise SeedError(f"{path}: '{section}' must be a list")
        for i, row in enumerate(rows):
            item = _item(repo_type, row, f"{section}[{i}]")
            if (repo_type, item.repo_id) in seen:
                raise SeedError(f"{section}[{i}]: {item.repo_id} is listed twice")
            seen.add((repo_type, item.repo_id))
            items.append(item)
    return items


def _item(repo_type: str, row, where: str) -> SeedItem:
    if not isinstance(row, dict):
        raise SeedError(f"{where}: expected a mapping")
    repo_id = row.get("repo_id")
    if not isinstance(repo_id, str) or repo_id.count("/") != 1:
        raise SeedError(f"{where}: repo_id must be NAMESPACE/NAME, not {repo_id!r}")
    ns, name = repo_id.split("/")
    try:
        check_name(ns, what="namespace")
        check_name(name, what="repo name")
    except HubError as err:
        raise SeedError(f"{where} ({repo_id}): {err.message}") from None
    if ns.lower() in RESERVED_NAMESPACES:
        raise SeedError(f"{where} ({repo_id}): {ns!r} is a reserved name")
    values: dict = {}
    for key in _STR:
        value = row.get(key)
        if value is not None and not isinstance(value, str | int | float):
            raise SeedError(f"{where} ({repo_id}): {key} must be text")
        values[key] = "" if value is None else str(value).strip()
    for key in _LISTS:
        value = row.get(key) or []
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise SeedError(f"{where} ({repo_id}): {key} must be a list of names")
        values[key] = list(dict.fromkeys(value))
    for key in _INTS:
        value = row.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise SeedError(f"{where} ({repo_id}): {key} must be a whole number or empty")
        values[key] = value
    remote = row.get("trust_remote_code", False)
    if not isinstance(remote, bool) or (remote and repo_type != Repo.MODEL):
        raise SeedError(f"{where} ({repo_id}): trust_remote_code must be true or false, and only on a model")
    if not values["title"]:
        values["title"] = name
    bad = set(values["modality"]) - set(services.MODALITIES)
    if bad:
        raise SeedError(f"{where} ({repo_id}): unknown modality {sorted(bad)}; use {services.MODALITIES}")
    data = services.EntryData(
        title=values["title"][:200], summary=values["summary"], title_zh=values["title_zh"][:200],
        summary_zh=values["summary_zh"], license=values["license"][:64],
        tasks=values["tasks"], modality=values["modality"], languages=values["languages"],
        upstream_size=values["size_bytes"], upstream_files=values["file_count"], homepage=values["homepage"],
        paper=values["paper"], base_model=values["base_model"] if repo_type == Repo.MODEL else "",
        parameters=values["parameters"][:32] if repo_type == Repo.MODEL else "", trust_remote_code=remote,
        upstream_id=repo_id)
    return SeedItem(repo_type, ns, name, data)


def ensure_bot():
    """The catalog's own account: it owns nothing itself, administers the catalog's organisations
    and authors their commits. It has no password, so nobody signs in as it."""
    user = accounts.do_ensure_user(BOT)
    if user.has_usable_password():
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user


def ensure_org(name: str, bot) -> tuple[Namespace | None, bool]:
    """The organisation `name`, created with the bot as admin if missing. (None, False) if the name
    belongs to a user: the catalog does not write into people's accounts."""
    ns = Namespace.objects.filter(name__iexact=name).first()  # (names are case-insensitive)
    if ns is None:
        return accounts.do_create_org(name, bot), True
    if ns.kind != Namespace.ORG:
        return None, False
    if not Membership.objects.filter(namespace=ns, user=bot, role__in=[Membership.WRITE, Membership.ADMIN]).exists():
        accounts.do_add_member(ns, bot, Membership.ADMIN)
    return ns, False


def do_seed(items: list[SeedItem]) -> SeedResult:
    """Creates or updates the organisations, repos and entries of `items` (see the module doc)."""
    result = SeedResult()
    bot = ensure_bot()
    actor = Actor(bot)
    orgs: dict[str, Namespace | None] = {}
    for ns_name in sorted({i.namespace for i in items}):
        with transaction.atomic():
            orgs[ns_name], created = ensure_org(ns_name, bot)
        result.organisations_created += created
    existing = {(r.type, r.sort_name): r for r in Repo.objects.select_related("namespace")
                .filter(namespace__in=[ns for ns in orgs.values() if ns is not None])}
    for item in items:
        ns = orgs[item.namespace]
        repo = existing.get((item.type, sort_name(item.namespace, item.name)))
        if repo is None:
            if ns is None:
                result.skipped.append(f"{item.repo_id}: the name {item.namespace!r} belongs to a user")
                continue
            repo = repos.do_create_repo(actor, item.namespace, item.name, item.type, private=False)
            result.repos_created += 1
        _, outcome = services.do_upsert_entry(repo, item.data)
        setattr(result, outcome, getattr(result, outcome) + 1)
    return result


def entries_not_in(items: list[SeedItem]) -> int:
    """How many seeded entries of the database the file no longer lists (they are kept)."""
    ids = {(i.type, i.repo_id) for i in items}
    rows = CatalogEntry.objects.filter(source=CatalogEntry.SEED).values_list("repo__type", "upstream_id")
    return sum(1 for t, rid in rows if (t, rid) not in ids)
