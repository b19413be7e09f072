"""Quotas: limits, usage and reservations.

Usage of an account = bytes of the distinct blobs its repos (every revision) and its volume
reference. Every change of those references, and every reservation, happens inside a transaction
that first locks the account's Namespace row (`lock()`): on PostgreSQL that is a row lock, on
SQLite the whole database is written by one transaction at a time. So the check "used + reserved +
needed ≤ limit" and the update that follows cannot interleave with another upload of the account.

A reservation lives only while something can still complete it — the rule, in one place:

* **Held by a running request or task** (a commit's inline files, a volume PUT, an LFS batch before it
  hands its objects on, a mirror job): `Hold`. Its lease (`expires`) is HUB_RESERVATION_LEASE seconds,
  renewed by a heartbeat while the holder runs; when the holder ends, whatever it did not convert is
  released at once, whatever the outcome. A holder that dies (kill -9, a lost machine) stops renewing,
  and its reservations lapse within the lease.
* **Held by an upload session** (LFS multipart, volume uploads): until the session ends — completed
  (converted, or handed on as below), aborted or expired (released). The client can resume it.
* **Bytes uploaded, awaiting their commit** (LFS objects: the client commits once every upload is
  done): HUB_COMMIT_WINDOW seconds from the upload's end (`await_commit`); a commit naming them
  converts them, a commit naming them that fails releases them (`release_blobs`).

Lapsed reservations are released by the periodic sweep (`expire_reservations`) and, so that the
figures are right without one (the embedded default runs no beat), by every reservation, charge and
report of the account, under its lock.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, connections, transaction
from django.db.models import F, Sum
from django.utils import timezone
from django.utils.translation import gettext

from hub.accounts.models import Namespace
from hub.config import format_size
from hub.content import refs
from hub.content.models import Blob, UploadSession
from hub.errors import PayloadTooLarge
from hub.quotas.models import Plan, Reservation

log = logging.getLogger("hub.quotas")

RESERVATION_TTL = timedelta(days=1)  # reservations that an upload session holds (it outlives them)


def lease() -> timedelta:
    """How long a reservation of a running request or task lives without its heartbeat."""
    return timedelta(seconds=settings.HUB_RESERVATION_LEASE)


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


def _lapse(ns: Namespace) -> None:
    """Call after lock(ns): releases the account's reservations whose holder is gone (expired)."""
    lapsed = list(Reservation.objects.filter(namespace=ns, expires__lt=timezone.now()).values_list("pk", "size"))
    if not lapsed:
        return
    gone = Reservation.objects.filter(pk__in=[pk for pk, _ in lapsed]).delete()[0]
    freed = sum(size for _, size in lapsed) if gone == len(lapsed) else None
    if freed is None:  # (cannot happen under the lock; recount rather than guess)
        freed = ns.reserved_bytes - (Reservation.objects.filter(namespace=ns).aggregate(s=Sum("size"))["s"] or 0)
    Namespace.objects.filter(pk=ns.pk).update(reserved_bytes=F("reserved_bytes") - freed)
    ns.reserved_bytes -= freed
    log.info("quota of %s: %d lapsed reservation(s) released (%d bytes)", ns.name, len(lapsed), freed)


def _exceeded(ns: Namespace, limit: int, need: int) -> QuotaExceeded:
    used = ns.used_bytes + ns.reserved_bytes
    names = {"name": ns.name, "used": format_size(used), "limit": format_size(limit), "need": format_size(need),
             "reserved": format_size(ns.reserved_bytes)}
    if ns.reserved_bytes:
        return QuotaExceeded(gettext("quota exceeded for %(name)s: %(used)s of %(limit)s used (%(reserved)s of it "
                                     "reserved by uploads in progress: `hub quota` lists them, `hub quota --abort` "
                                     "gives their bytes back), this upload needs %(need)s. Delete files or repos, "
                                     "or ask for a larger quota.") % names)
    return QuotaExceeded(gettext("quota exceeded for %(name)s: %(used)s of %(limit)s used, this upload needs "
                                 "%(need)s. Delete files or repos, or ask for a larger quota.") % names)


def room_for(ns: Namespace, size: int) -> str | None:
    """None if `size` more bytes fit the account now; else the message a refusal would give. (An
    early word for clients that will only show a bare status when the refusal comes: Xet uploads.)"""
    ns = Namespace.objects.get(pk=ns.pk)
    limit = limit_of(ns)
    if ns.used_bytes + ns.reserved_bytes + size <= limit:
        return None
    return _exceeded(ns, limit, size).message


def referenced(ns: Namespace, sha256s) -> set[str]:
    """Which of these blobs the account already references (so they cost it nothing more)."""
    return refs.referenced(ns, sha256s)


def reserve(ns: Namespace, size: int, *, user=None, sha256: str = "", purpose: str = "",
            ttl: timedelta = RESERVATION_TTL) -> Reservation | None:
    """Reserves `size` bytes for an upload before its bytes land, or raises QuotaExceeded.
    Returns None when nothing needs reserving: the account already references these bytes, or an
    earlier reservation of it covers them."""
    if size < 0:
        raise ValueError("negative size")
    with transaction.atomic():
        ns = lock(ns)
        _lapse(ns)
        if sha256:
            if sha256 in referenced(ns, [sha256]):
                return None
            existing = Reservation.objects.filter(namespace=ns, sha256=sha256).first()
            if existing is not None:
                until = timezone.now() + ttl
                Reservation.objects.filter(pk=existing.pk, expires__lt=until).update(expires=until)
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


def charge(ns: Namespace, new_refs: dict[str, int], *, reservations=(), enforce: bool = True) -> Namespace:
    """Call inside a transaction, after lock(ns) and BEFORE writing the new references: adds the
    blobs in `new_refs` ({sha256: size}) that the account does not reference yet to its usage,
    converting the given reservations and any reservations of these very blobs. Raises
    QuotaExceeded if the bytes not covered by a reservation do not fit."""
    _lapse(ns)
    # Re-read under the lock: a reservation released meanwhile (expiry) must not be freed twice.
    res = {r.pk: r for r in Reservation.objects.filter(pk__in=[r.pk for r in reservations], namespace=ns)}
    if new_refs:
        for r in Reservation.objects.filter(namespace=ns, sha256__in=list(new_refs)):
            res[r.pk] = r
    already = referenced(ns, new_refs)
    added = sum(size for sha, size in new_refs.items() if sha not in already)
    freed = sum(r.size for r in res.values())
    limit = limit_of(ns)
    if enforce and added > freed and ns.used_bytes + ns.reserved_bytes - freed + added > limit:
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


def recount(ns: Namespace) -> tuple[int, int]:
    """(used, reserved) from the truth: the distinct blobs the account references, by every kind of
    reference (hub.content.refs: its repos and its volume; a blob in both counts once), and its
    reservations."""
    used = Blob.objects.filter(refs.used_by(ns)).aggregate(s=Sum("size"))["s"] or 0
    reserved = Reservation.objects.filter(namespace=ns).aggregate(s=Sum("size"))["s"] or 0
    return used, reserved


def reconcile(ns: Namespace) -> tuple[int, int]:
    """Recomputes used and reserved from the truth (recount) and corrects drift. Returns them."""
    with transaction.atomic():
        ns = lock(ns)
        used, reserved = recount(ns)
        Namespace.objects.filter(pk=ns.pk).update(used_bytes=used, reserved_bytes=reserved)
    return used, reserved


def expire_reservations() -> int:
    """Releases reservations whose holder is gone (the periodic sweep). Returns how many."""
    n = 0
    for r in Reservation.objects.filter(expires__lt=timezone.now())[:1000]:
        release(r)
        n += 1
    return n


def renew(pks: list[int], until: datetime | None = None) -> None:
    """Extends these reservations to `until` (default: a lease from now); never shortens one."""
    until = until or timezone.now() + lease()
    if pks:
        Reservation.objects.filter(pk__in=pks, expires__lt=until).update(expires=until)


def name_reservation(pk: int, sha256: str) -> None:
    """A reservation made before its bytes' sha256 was known (an upload hashed while it is sent)
    gets it: a commit naming those bytes converts it, as any other upload's."""
    Reservation.objects.filter(pk=pk, sha256="").update(sha256=sha256)


def await_commit(ns: Namespace | int, *sha256s: str) -> None:
    """The upload of these bytes ended: their reservations wait HUB_COMMIT_WINDOW for the commit."""
    until = timezone.now() + timedelta(seconds=settings.HUB_COMMIT_WINDOW)
    if sha256s:
        Reservation.objects.filter(namespace=ns, sha256__in=sha256s).update(expires=until)


def release_blobs(ns: Namespace | int, sha256s, user=None) -> None:
    """What was reserved in `ns` for these blobs (only `user`'s, if given) is given back: a commit
    naming them failed (a retried commit is charged again, and checked against the limit then), or
    their uploader will not send them after all (the file changed under the upload)."""
    mine = Reservation.objects.filter(namespace=ns, sha256__in=list(sha256s))
    for r in mine.filter(user=user) if user is not None else mine:
        release(r)


@dataclass
class Hold:
    """Reservations a running request or task holds (see the module's rule). Use as a context:

        with quotas.Hold() as hold:
            hold.reserve_many(ns, {sha: size}, user=user, purpose="commit")
            ...  # the work; a commit converts them (charge)
        # left the block: released whatever happened, unless handed on with keep_until()

    A heartbeat thread renews the leases every third of HUB_RESERVATION_LEASE while the block runs."""

    reservations: list[Reservation] = field(default_factory=list)
    _until: datetime | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def reserve(self, ns: Namespace, size: int, *, user=None, purpose: str = "") -> Reservation:
        """`size` bytes not tied to a blob (a stream whose hash is not known yet)."""
        r = reserve(ns, size, user=user, purpose=purpose, ttl=lease())
        self._add([r])
        return r

    def reserve_many(self, ns: Namespace, items: dict[str, int], **kw) -> list[Reservation]:
        made = reserve_many(ns, items, ttl=lease(), **kw)
        self._add(made)
        return made

    def keep_until(self, until: datetime) -> None:
        """Hands what is still held on (to an upload session, to the commit to come) until `until`."""
        self._until = until

    def _add(self, made: list[Reservation]) -> None:
        self.reservations += made
        if made and self._thread is None:
            self._thread = threading.Thread(target=self._beat, name="quota-hold", daemon=True)
            self._thread.start()

    def __enter__(self) -> Hold:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if not self.reservations:
            return
        if self._until is not None and exc_type is None:
            renew([r.pk for r in self.reservations], self._until)
            return
        for r in self.reservations:  # (those converted are gone already: release skips them)
            try:
                release(r)
            except DatabaseError as err:  # the database is away: the lease lapses on its own
                log.warning("reservation %s not released now (%s); it lapses within the lease", r.pk, err)
        self.reservations = []

    def _beat(self) -> None:
        try:
            while not self._stop.wait(max(0.2, settings.HUB_RESERVATION_LEASE / 3)):
                try:
                    renew([r.pk for r in self.reservations])
                except DatabaseError as err:  # the next beat tries again
                    log.warning("could not renew reservations: %s", err)
        finally:
            connections.close_all()  # (this thread's own connections)


@dataclass
class QuotaReport:
    name: str
    limit: int
    used: int
    reserved: int
    consumers: list[dict]
    reservations: list[dict] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"namespace": self.name, "limit": self.limit, "used": self.used, "reserved": self.reserved,
                "available": max(0, self.limit - self.used - self.reserved),
                "limit_human": format_size(self.limit), "used_human": format_size(self.used),
                "largest_consumers": self.consumers,
                "reservations": [r | {"created": r["created"].isoformat(), "expires": r["expires"].isoformat()}
                                 for r in self.reservations]}


def report(ns: Namespace, top: int = 10) -> QuotaReport:
    """Limit, usage and the largest consumers — each kind of reference lists its own (repos, the
    volume), each by the bytes of the distinct blobs it holds (a file copied twice within the volume
    counts once, as in the usage; a file in a repo and in the volume is listed under both)."""
    if Reservation.objects.filter(namespace=ns, expires__lt=timezone.now()).exists():
        with transaction.atomic():
            _lapse(lock(ns))
    ns = Namespace.objects.select_related("plan").get(pk=ns.pk)
    consumers = [{"kind": kind, "id": ident, "bytes": size} for kind, ident, size in refs.consumers(ns, top)]
    return QuotaReport(ns.name, limit_of(ns), ns.used_bytes, ns.reserved_bytes, consumers, reservations_of(ns))


def reservations_of(ns: Namespace, top: int = 100) -> list[dict]:
    """What makes up `reserved`, largest first: each reservation with what it is for and, when an
    upload session holds it (a volume upload, an LFS multipart upload; an interrupted one keeps its
    bytes reserved until it is resumed and completed, or lapses), that session's id — its owner
    gives the bytes back by ending it (DELETE /api/volume/uploads/{id} or /api/v1/uploads/{id};
    `hub quota --abort`). Reservations without a session (an LFS batch's single-request uploads, a
    commit or volume write running now) lapse on their own when they expire."""
    rows = list(Reservation.objects.filter(namespace=ns, expires__gte=timezone.now()).select_related("user")
                .order_by("-size", "created")[:top])
    if not rows:
        return []
    live = UploadSession.objects.filter(state=UploadSession.OPEN).select_related("repo__namespace")
    by_reservation = {s.reservation_id: s for s in live.filter(reservation__in=[r.pk for r in rows])}
    by_blob = {}  # an LFS batch reserves by sha256; its multipart session carries the same sha256
    for s in live.filter(purpose="lfs", repo__namespace=ns,
                         sha256__in=[r.sha256 for r in rows if r.sha256 and r.pk not in by_reservation]):
        by_blob.setdefault((s.sha256, s.user_id), s)
    out = []
    for r in rows:
        session = by_reservation.get(r.pk) or (by_blob.get((r.sha256, r.user_id)) if r.sha256 else None)
        out.append({"bytes": r.size, "what": _held_for(r, session),
                    "upload": str(session.pk) if session is not None else None,
                    "kind": session.purpose if session is not None else None,
                    "user": r.user.username if r.user is not None else None,
                    "created": r.created, "expires": r.expires})
    return out


def _held_for(r: Reservation, session: UploadSession | None) -> str:
    """What a reservation is for, in words: the volume path or the repo (and path) an upload goes to."""
    target = (session.target or {}) if session is not None else {}
    if session is not None and session.purpose == "volume":
        return f"volume: {target.get('path', '')}"
    if session is not None and session.repo is not None:
        repo = session.repo
        what = f"{'' if repo.type == 'model' else repo.type + 's/'}{repo.repo_id}"
    else:
        what = r.purpose or "an upload"
    if target.get("path"):
        return f"{what}: {target['path']}"
    return f"{what} (sha256 {r.sha256[:12]})" if r.sha256 else what


def namespace_for(user, name: str | None = None) -> Namespace:
    """The user's own namespace, or an organisation they belong to (404 otherwise)."""
    from hub.errors import NotFound

    if not name or name == user.username:
        return Namespace.objects.get(user=user)
    ns = Namespace.objects.filter(name=name, kind=Namespace.ORG, memberships__user=user).first()
    if ns is None:
        raise NotFound(gettext("no organisation %(name)r that you belong to") % {"name": name})
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
        _lapse(ns)
        already = referenced(ns, items)
        existing = {r.sha256: r for r in Reservation.objects.filter(namespace=ns, sha256__in=list(items))}
        new = {sha: size for sha, size in items.items() if sha not in already and sha not in existing}
        need = sum(new.values())
        limit = limit_of(ns)
        if need and ns.used_bytes + ns.reserved_bytes + need > limit:
            raise _exceeded(ns, limit, need)
        expires = timezone.now() + ttl
        if existing:  # (extended, never shortened: another holder's may outlive this one)
            Reservation.objects.filter(pk__in=[r.pk for r in existing.values()], expires__lt=expires).update(
                expires=expires)
        created = Reservation.objects.bulk_create(
            [Reservation(namespace=ns, user=user, sha256=sha, size=size, purpose=purpose, expires=expires)
             for sha, size in new.items()])
        if need:
            Namespace.objects.filter(pk=ns.pk).update(reserved_bytes=F("reserved_bytes") + need)
        return created
