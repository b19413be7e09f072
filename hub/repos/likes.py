"""Likes: a person marks a repo they can read; Repo.likes counts them for listings and repo info.

Only these functions write RepoLike rows or Repo.likes, each in one transaction with the counter moved
by F() (never read-modify-write): the one-like-per-user constraint lets one of two concurrent likes
insert, and only a delete that removed a row takes one off, so the count matches the rows."""
from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import F, QuerySet

from hub.accounts.actor import Actor
from hub.errors import Forbidden, NotFound, Unauthorized
from hub.repos.models import Repo, RepoLike
from hub.repos.services import visible_repos


def _check_can_like(actor: Actor) -> None:
    if actor.user is None:
        raise Unauthorized("log in (pass a token) to like a repo")
    if actor.on_instance or not actor.can_write:
        # A like is made in the person's name: not with a read-only or an instance token.
        raise Forbidden("this token cannot like repos (it is read-only or an instance's); use a write token "
                        "or the repo's page")


def do_like(actor: Actor, repo: Repo) -> bool:
    """The caller likes the repo (which they can read: see access_repo). True if it is new; liking
    twice changes nothing."""
    _check_can_like(actor)
    try:
        with transaction.atomic():
            RepoLike.objects.create(user=actor.user, repo=repo)
            Repo.objects.filter(pk=repo.pk).update(likes=F("likes") + 1)
    except IntegrityError:
        return False
    return True


def do_unlike(actor: Actor, repo: Repo) -> bool:
    """The caller takes their like back. True if there was one."""
    _check_can_like(actor)
    with transaction.atomic():
        removed, _ = RepoLike.objects.filter(user=actor.user, repo=repo).delete()
        if removed:
            Repo.objects.filter(pk=repo.pk).update(likes=F("likes") - 1)
    return bool(removed)


def forget_likes_of(sender, instance, **kwargs) -> None:
    """pre_delete of a user, whose likes the deletion cascades away: each repo they liked counts one
    fewer. Runs inside the deletion's transaction, before the rows go."""
    Repo.objects.filter(liked_by__user=instance).update(likes=F("likes") - 1)


def likes_repo(actor: Actor, repo: Repo) -> bool:
    return actor.user is not None and RepoLike.objects.filter(user=actor.user, repo=repo).exists()


def likers(repo: Repo, *, before: int | None = None, limit: int = 1000) -> list[RepoLike]:
    """Who likes the repo (the caller can read it: see access_repo), newest first; `before` is the
    last like id of the previous page."""
    qs = RepoLike.objects.filter(repo=repo).select_related("user").order_by("-id")
    if before is not None:
        qs = qs.filter(id__lt=before)
    return list(qs[:limit])


def liked_by(actor: Actor, username: str, *, before: int | None = None, limit: int = 1000) -> list[RepoLike]:
    """The repos `username` likes that the caller may see (a private repo shows only to those who
    can read it), newest first."""
    user = get_user_model().objects.filter(username__iexact=username).order_by("pk").first()
    if user is None:
        raise NotFound(f"user {username!r} not found")
    seen: QuerySet[Repo] = visible_repos(actor.user)
    qs = (RepoLike.objects.filter(user=user, repo__in=seen.values("pk"))
          .select_related("repo__namespace").order_by("-id"))
    if before is not None:
        qs = qs.filter(id__lt=before)
    return list(qs[:limit])
