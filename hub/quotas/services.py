"""Quotas: limits, usage and reservations.

Usage of an account = bytes of the distinct blobs its repos (every revision) and its volume
reference. Every change of those references, and every reservation, happens inside a transaction
that first locks the account's Namespace row (`lock()`): on PostgreSQL that is a row lock, on
SQLite the whole database is written by one transaction at a time. So the check "used + reserved +
needed ≤ limit" and the update that follows cannot interleave with another upload of the account.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Sum
from django.utils import timezone

from hub.accounts.models import Namespace
from hub.config import format_size
from hub.errors import PayloadTooLarge
from hub.quotas.models import Plan, Reservation

RESERVATION_TTL = timedelta(days=1)


class QuotaExceeded(PayloadTooLarge):
    code = "QuotaExceeded"


def limit_of(ns: Namespace) -> int:
    if ns.quota_bytes is not None:
        return ns.quota_bytes
    plan = ns.plan if ns.plan_id else Plan.objects.filter(is_default=True).first()
    if plan is not None and plan.quota_bytes is not None:
        return plan.quota_bytes
    return settings.HUB_DEFAULT_QUOTA


def lock(ns: Namespace | int) -> Namespace:
    """The namespace row, locked until the end of the current transaction (which must be open)."""
    pk = ns.pk if isinstance(ns, Namespace) else ns
    return Namespace.objects.select_for_update(of=("self",)).select_related("plan").get(pk=pk)


def _exceeded(ns: Namespace, limit: int, need: int) -> QuotaExceeded:
    used = ns.used_bytes + ns.reserved_bytes
    extra = f" ({format_size(ns.reserved_bytes)} of it reserved by uploads in progress)" if ns.reserved_bytes else ""
    return QuotaExceeded(f"quota exceeded for {ns.name}: {format_size(used)} of {format_size(limit)} used{extra}, "
                         f"this upload needs {format_size(need)}. Delete files or repos, or ask for a larger quota.")


def referenced(ns: Namespace, sha256s) -> set[str]:
    """Which of these blobs the account already references (so they cost it nothing more)."""
    from hub.repos.models import RepoBlob
    from hub.volumes.models import VolumeEntry

    wanted = set(sha256s)
    if not wanted:
        return set()
    found = set(RepoBlob.objects.filter(repo__namespace=ns, blob_id__in=wanted).values_list("blob_id", flat=True))
    rest = wanted - found
    if rest:
        found |= set(VolumeEntry.objects.filter(volume__namespace=ns, blob_id__in=rest)
                     .values_list("blob_id", flat=True))
    return found


def reserve(ns: Namespace, size: int, *, user=None, sha256: str = "", purpose: str = "",
            ttl: timedelta = RESERVATION_TTL) -> Reservation | None:
    """Reserves `size` bytes for an upload before its bytes land, or raises QuotaExceeded.
    Returns None when nothing needs reserving: the account already references these bytes, or an
    earlier reservation of it covers them."""
    if size < 0:
        raise ValueError("negative size")
    with transaction.atomic():
        ns = lock(ns)
        if sha256:
            if sha256 in referenced(ns, [sha256]):
                return None
            existing = Reservation.objects.filter(namespace=ns, sha256=sha256).first()
            if existing is not None:
                Reservation.objects.filter(pk=existing.pk).update(expires=timezone.now() + ttl)
                return existing
        limit = limit_of(ns)
        if ns.used_bytes + ns.reserved_bytes + size > limit:
            raise _exceeded(ns, limit, size)
        Namespace.objects.filter(pk=ns.pk).update(reserved_bytes=F("reserved_bytes") + size)
        return Reservation.objects.create(namespace=ns, user=user, sha256=sha256, size=size, purpose=purpose,
                                          expires=timezone.now() + ttl)


def release(reservation: Reservation | None) -> None:
    """Gives a reservation back (upload aborted, failed or expired). Safe to call twice."""
    if reservation is None:
        return
    with transaction.atomic():
        lock(reservation.namespace_id)
        if Reservation.objects.filter(pk=reservation.pk).delete()[0]:
            Namespace.objects.filter(pk=reservation.namespace_id).update(
                reserved_bytes=F("reserved_bytes") - reservation.size)


def charge(ns: Namespace, new_refs: dict[str, int], *, reservations=()) -> Namespace:
    """Call inside a transaction, after lock(ns) and BEFORE writing the new references: adds the
    blobs in `new_refs` ({sha256: size}) that the account does not reference yet to its usage,
    converting the given reservations and any reservations of these very blobs. Raises
    QuotaExceeded if the bytes not covered by a reservation do not fit."""
    # Re-read under the lock: a reservation released meanwhile (expiry) must not be freed twice.
    res = {r.pk: r for r in Reservation.objects.filter(pk__in=[r.pk for r in reservations], namespace=ns)}
    if new_refs:
        for r in Reservation.objects.filter(namespace=ns, sha256__in=list(new_refs)):
            res[r.pk] = r
    already = referenced(ns, new_refs)
    added = sum(size for sha, size in new_refs.items() if sha not in already)
    freed = sum(r.size for r in res.values())
    limit = limit_of(ns)
    if added > freed and ns.used_bytes + ns.reserved_bytes - freed + added > limit:
        raise _exceeded(ns, limit, added - freed)
    if res:
        Reservation.objects.filter(pk__in=list(res)).delete()
    if added or freed:
        Namespace.objects.filter(pk=ns.pk).update(used_bytes=F("used_bytes") + added,
                                                  reserved_bytes=F("reserved_bytes") - freed)
    ns.used_bytes += added
    ns.reserved_bytes -= freed
    return ns


def uncharge(ns: Namespace, candidates: dict[str, int]) -> int:
    """Call inside a transaction, after lock(ns) and AFTER removing references: gives back the bytes
    of those candidate blobs that the account no longer references. Returns the bytes freed."""
    still = referenced(ns, candidates)
    freed = sum(size for sha, size in candidates.items() if sha not in still)
    if freed:
        Namespace.objects.filter(pk=ns.pk).update(used_bytes=F("used_bytes") - freed)
        ns.used_bytes -= freed
    return freed


def reconcile(ns: Namespace) -> tuple[int, int]:
    """Recomputes used and reserved from the truth (references and live reservations) and corrects
    drift. Returns (used, reserved)."""
    from hub.repos.models import Blob

    with transaction.atomic():
        ns = lock(ns)
        repo_blobs = Blob.objects.filter(repo_refs__repo__namespace=ns).values("sha256")
        vol_blobs = Blob.objects.filter(volume_entries__volume__namespace=ns).values("sha256")
        used = Blob.objects.filter(sha256__in=repo_blobs).aggregate(s=Sum("size"))["s"] or 0
        # a blob in a repo and in the volume counts once
        only_vol = Blob.objects.filter(sha256__in=vol_blobs).exclude(sha256__in=repo_blobs)
        used += only_vol.aggregate(s=Sum("size"))["s"] or 0
        reserved = Reservation.objects.filter(namespace=ns).aggregate(s=Sum("size"))["s"] or 0
        Namespace.objects.filter(pk=ns.pk).update(used_bytes=used, reserved_bytes=reserved)
    return used, reserved


def expire_reservations() -> int:
    n = 0
    for r in Reservation.objects.filter(expires__lt=timezone.now())[:1000]:
        release(r)
        n += 1
    return n


@dataclass
class QuotaReport:
    name: str
    limit: int
    used: int
    reserved: int
    consumers: list[dict]

    def as_dict(self) -> dict:
        return {"namespace": self.name, "limit": self.limit, "used": self.used, "reserved": self.reserved,
                "available": max(0, self.limit - self.used - self.reserved),
                "limit_human": format_size(self.limit), "used_human": format_size(self.used),
                "largest_consumers": self.consumers}


def report(ns: Namespace, top: int = 10) -> QuotaReport:
    """Limit, usage and the largest consumers: repos and the volume, each by the bytes of the distinct
    blobs it holds (a file copied twice within the volume counts once, as in the usage; a file in a
    repo and in the volume is listed under both)."""
    from hub.repos.models import Blob, Repo
    from hub.volumes.models import VolumeEntry

    ns = Namespace.objects.select_related("plan").get(pk=ns.pk)
    repos = (Repo.objects.filter(namespace=ns).annotate(bytes=Sum("blob_refs__blob__size"))
             .order_by(F("bytes").desc(nulls_last=True))[:top])
    consumers = [{"kind": r.type, "id": r.repo_id, "bytes": r.bytes or 0} for r in repos]
    held = VolumeEntry.objects.filter(volume__namespace=ns, is_dir=False).values("blob_id")
    vol = Blob.objects.filter(sha256__in=held).aggregate(s=Sum("size"))["s"]
    if vol:
        consumers.append({"kind": "volume", "id": f"{ns.name}/volume", "bytes": vol})
    consumers.sort(key=lambda c: -c["bytes"])
    return QuotaReport(ns.name, limit_of(ns), ns.used_bytes, ns.reserved_bytes, consumers[:top])


def namespace_for(user, name: str | None = None) -> Namespace:
    """The user's own namespace, or an organisation they belong to (404 otherwise)."""
    from hub.errors import NotFound

    if not name or name == user.username:
        return Namespace.objects.get(user=user)
    ns = Namespace.objects.filter(name=name, kind=Namespace.ORG, memberships__user=user).first()
    if ns is None:
        raise NotFound(f"no organisation {name!r} that you belong to")
    return ns


def set_quota(ns: Namespace, quota_bytes: int | None, plan: Plan | None = None) -> None:
    fields = {"quota_bytes": quota_bytes}
    if plan is not None:
        fields["plan"] = plan
    Namespace.objects.filter(pk=ns.pk).update(**fields)


def reserve_many(ns: Namespace, items: dict[str, int], *, user=None, purpose: str = "",
                 ttl: timedelta = RESERVATION_TTL) -> list[Reservation]:
    """Reserves several blobs (by sha256) at once, all or nothing: the bytes of those the account
    neither references nor has reserved already must fit together. Returns the new reservations
    (earlier ones of the same blobs are only extended)."""
    with transaction.atomic():
        ns = lock(ns)
        already = referenced(ns, items)
        existing = {r.sha256: r for r in Reservation.objects.filter(namespace=ns, sha256__in=list(items))}
        new = {sha: size for sha, size in items.items() if sha not in already and sha not in existing}
        need = sum(new.values())
        limit = limit_of(ns)
        if need and ns.used_bytes + ns.reserved_bytes + need > limit:
            raise _exceeded(ns, limit, need)
        expires = timezone.now() + ttl
        if existing:
            Reservation.objects.filter(pk__in=[r.pk for r in existing.values()]).update(expires=expires)
        created = Reservation.objects.bulk_create(
            [Reservation(namespace=ns, user=user, sha256=sha, size=size, purpose=purpose, expires=expires)
             for sha, size in new.items()])
        if need:
            Namespace.objects.filter(pk=ns.pk).update(reserved_bytes=F("reserved_bytes") + need)
        return created
