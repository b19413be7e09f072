"""The reference registry: what holds a blob, declared once per kind by the app that owns it.

A reference is a row whose foreign key names a blob (a repo's commits through RepoBlob, a volume's
files through VolumeEntry). Each kind says, as query lookups, which account it belongs to and who
may read it. From the declarations alone the content store answers the questions that define usage
and safety:

* quotas: which blobs an account references (`referenced`, `used_by`) — its usage is their bytes,
  each blob counted once however many references it has;
* garbage collection: which blobs nothing references (`unreferenced`);
* proof of possession: which blobs a user may name by hash without uploading them (`readable_by`).

Adding a third kind of reference is one `declare(...)` in that app's AppConfig.ready().
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from django.apps import apps
from django.db.models import Exists, OuterRef, Q, QuerySet


@dataclass(frozen=True)
class Kind:
    """One kind of reference to blobs."""

    name: str  # as the quota report lists it: "repo", "volume", …
    model: str  # "app_label.Model" of the referencing rows
    blob: str  # the foreign key to content.Blob on those rows
    namespace: str  # lookup from a row to the account (Namespace) it counts against
    # Rows whose blobs `user` (None: anonymous) may read, as a Q on the model; None: no one else's.
    readable: Callable[[object], Q] | None = None
    # The account's largest consumers of this kind: [(kind, id, bytes)], largest first.
    consumers: Callable[[object, int], list[tuple[str, str, int]]] | None = None

    def rows(self) -> QuerySet:
        return apps.get_model(self.model).objects.all()


_KINDS: dict[str, Kind] = {}


def declare(kind: Kind) -> None:
    """Registers a kind of reference (idempotent: AppConfig.ready() may run twice in tests)."""
    _KINDS[kind.name] = kind


def kinds() -> list[Kind]:
    return list(_KINDS.values())


def referenced(ns, sha256s: Iterable[str]) -> set[str]:
    """Which of these blobs the account references already, by any kind."""
    wanted = set(sha256s)
    found: set[str] = set()
    for kind in kinds():
        if not wanted - found:
            break
        found |= set(kind.rows().filter(**{kind.namespace: ns, f"{kind.blob}__in": wanted - found})
                     .values_list(f"{kind.blob}_id", flat=True))
    return found


def used_by(ns) -> Q:
    """A filter on Blob: the distinct blobs the account references (its usage is their bytes)."""
    q = Q(pk__in=[])
    for kind in kinds():
        q |= Q(pk__in=kind.rows().filter(**{kind.namespace: ns}).values(f"{kind.blob}_id"))
    return q


def unreferenced(blobs: QuerySet) -> QuerySet:
    """The blobs of `blobs` that no reference of any kind names."""
    for kind in kinds():
        blobs = blobs.filter(~Exists(kind.rows().filter(**{kind.blob: OuterRef("pk")})))
    return blobs


def readable_by(user, sha256s: Iterable[str]) -> set[str]:
    """Which of these blobs a reference that `user` may read holds (their own volume's files, a
    repo they can read)."""
    wanted = set(sha256s)
    found: set[str] = set()
    for kind in kinds():
        if kind.readable is None or not wanted - found:
            continue
        found |= set(kind.rows().filter(kind.readable(user), **{f"{kind.blob}__in": wanted - found})
                     .values_list(f"{kind.blob}_id", flat=True))
    return found


def consumers(ns, top: int) -> list[tuple[str, str, int]]:
    """The account's largest consumers over every kind, largest first."""
    out: list[tuple[str, str, int]] = []
    for kind in kinds():
        if kind.consumers is not None:
            out += kind.consumers(ns, top)
    out.sort(key=lambda c: -c[2])
    return out[:top]
