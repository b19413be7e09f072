"""Discussions and pull requests on a repo, as upstream Hugging Face has them.

A pull request is a discussion whose changes live on the ref refs/pr/<num> (hub.repos Ref of kind
PR): commits land there through the one commit path (hub.repos.services.do_commit), and merging
applies them to its target branch as one new commit. Numbers are per repo, shared by discussions
and pull requests. A thread is a list of events: comments, status changes, commits, title changes."""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from hub.repos.models import Repo


class Discussion(models.Model):
    OPEN, CLOSED, MERGED, DRAFT = "open", "closed", "merged", "draft"
    STATUSES = [(OPEN, "open"), (CLOSED, "closed"), (MERGED, "merged"), (DRAFT, "draft")]

    repo = models.ForeignKey(Repo, on_delete=models.CASCADE, related_name="discussions")
    num = models.PositiveIntegerField()
    title = models.CharField(max_length=200)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="+")
    is_pull_request = models.BooleanField(default=False)
    status = models.CharField(max_length=8, choices=STATUSES, default=OPEN)
    created = models.DateTimeField(default=timezone.now)
    updated = models.DateTimeField(default=timezone.now)
    # A pull request: the branch its changes are for; the commit it started from (the base its
    # changes are counted from: always an ancestor of refs/pr/<num>, so pruning keeps it); once
    # merged, the commit on the target branch that merged it. Ids rather than foreign keys: they are
    # what clients are shown, and a row here must not stop pruning a deleted branch's commits.
    target_branch = models.CharField(max_length=200, blank=True)
    base_oid = models.CharField(max_length=40, blank=True)
    merge_oid = models.CharField(max_length=40, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["repo", "num"], name="discussion_num_unique")]
        indexes = [models.Index(fields=["repo", "status", "-num"])]

    @property
    def git_reference(self) -> str | None:
        return f"refs/pr/{self.num}" if self.is_pull_request else None

    @property
    def is_active(self) -> bool:
        """Open for changes: open, or a draft pull request."""
        return self.status in (self.OPEN, self.DRAFT)

    def __str__(self) -> str:
        return f"{self.repo}#{self.num}"


class Event(models.Model):
    COMMENT, STATUS, COMMIT, TITLE = "comment", "status-change", "commit", "title-change"
    KINDS = [(COMMENT, "comment"), (STATUS, "status change"), (COMMIT, "commit"), (TITLE, "title change")]

    discussion = models.ForeignKey(Discussion, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=16, choices=KINDS)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="+")
    created = models.DateTimeField(default=timezone.now)
    # A comment: its markdown now, and the versions it had before (newest first: [{"raw", "at",
    # "by"}]). Hiding one erases both, irreversibly: hiding is for what must not stay readable.
    content = models.TextField(blank=True)
    previous = models.JSONField(default=list, blank=True)
    edited_at = models.DateTimeField(null=True, blank=True)
    edited_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                  related_name="+")
    hidden = models.BooleanField(default=False)
    # The other kinds: {"status"}, {"oid", "subject"}, {"from", "to"}.
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        indexes = [models.Index(fields=["discussion", "created"])]

    @property
    def hex_id(self) -> str:
        """The id clients see: hexadecimal, as upstream's."""
        return f"{self.pk:024x}"

    def __str__(self) -> str:
        return f"{self.discussion} {self.kind} {self.hex_id}"
