"""What the dataset viewer keeps: for each data file it has read, a copy laid out for paging (or the
file itself when its row groups are already small), and for each commit of a dataset the splits it
found and where their files' copies are.

A `ViewerFile` is keyed by what it was made from (the source blob, its format, the size limit), so
a commit that leaves a file unchanged reuses its copy; a `ViewerRun` is made once per commit."""
from __future__ import annotations

from django.db import models
from django.utils import timezone

from hub.repos.models import Commit, Repo


class ViewerFile(models.Model):
    """One data file, readable a row group at a time: `key` is a Parquet object in the store whose
    row groups start at the rows `row_groups` lists (the source blob itself, or a copy the task
    wrote under viewer/). `partial`: only the rows of its first HUB_VIEWER_MAX_BYTES are there."""

    digest = models.CharField(max_length=64, primary_key=True)
    sha256 = models.CharField(max_length=64, db_index=True, help_text="the source blob")
    format = models.CharField(max_length=16)
    key = models.CharField(max_length=300, blank=True)
    size = models.BigIntegerField(default=0, help_text="bytes of the object at key")
    num_rows = models.BigIntegerField(default=0)
    num_bytes = models.BigIntegerField(default=0, help_text="uncompressed bytes of its rows (Arrow)")
    row_groups = models.JSONField(default=list, blank=True, help_text="first row of each row group")
    features = models.JSONField(default=list, blank=True)
    partial = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    used = models.DateTimeField(default=timezone.now,
                                help_text="made, or last reused by a run (hub_gc counts its grace from here)")


class ViewerRun(models.Model):
    """The viewer of one commit of a dataset repo; `splits` is a list of {config, split, paths,
    partial} once ready (the paths' files are in `files`)."""

    PENDING, RUNNING, READY, FAILED, WAITING = "pending", "running", "ready", "failed", "waiting"
    STATES = [(PENDING, "pending"), (RUNNING, "running"), (READY, "ready"), (FAILED, "failed"),
              (WAITING, "waiting for files to be fetched")]

    repo = models.ForeignKey(Repo, on_delete=models.CASCADE, related_name="+")
    commit = models.OneToOneField(Commit, on_delete=models.CASCADE, related_name="+")
    state = models.CharField(max_length=8, choices=STATES, default=PENDING)
    splits = models.JSONField(default=list, blank=True)
    files = models.JSONField(default=dict, blank=True, help_text="path → ViewerFile digest, every data file read")
    error = models.TextField(blank=True)
    attempts = models.IntegerField(default=0, help_text="times the task computed it (once, normally)")
    created = models.DateTimeField(auto_now_add=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"viewer of {self.commit_id} ({self.state})"
