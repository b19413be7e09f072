"""Mirror jobs: importing a repo from another hub (the Hugging Face protocol), an S3 prefix or a
directory on the server into a catalog repo, one commit per upstream revision.

Rows here are bookkeeping only. The repo, its commits, refs and blobs are written by the repo
services (hub.repos), quota by hub.quotas; a job remembers what it fetched (MirrorFile) and which
upstream revision became which commit (MirrorRevision), so that a re-run or a re-delivered task
skips what is done instead of repeating it."""
from __future__ import annotations

import hashlib

from django.conf import settings
from django.db import models

from hub.repos.models import Commit, Repo
from hub.sealed import SealedJSONField


class MirrorJob(models.Model):
    QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"
    STATES = [(QUEUED, "queued"), (RUNNING, "running"), (DONE, "done"), (FAILED, "failed")]
    HF, S3, LOCAL = "hf", "s3", "local"
    KINDS = [(HF, "Hugging Face protocol"), (S3, "S3 bucket/prefix"), (LOCAL, "server directory")]

    repo = models.ForeignKey(Repo, on_delete=models.CASCADE, related_name="mirror_jobs")
    source_kind = models.CharField(max_length=8, choices=KINDS)
    # hf: the endpoint (https://huggingface.co); s3: s3://bucket/prefix; local: an absolute directory.
    source_url = models.CharField(max_length=1000)
    source_repo = models.CharField(max_length=200, blank=True, help_text="hf: the upstream repo id")
    source_type = models.CharField(max_length=8, blank=True, help_text="hf: the upstream repo type")
    s3_endpoint_url = models.CharField(max_length=500, blank=True)
    # An upstream token or S3 keys: sealed at rest (hub.sealed), never rendered by the API or the admin.
    credentials = SealedJSONField(default=dict, blank=True)
    revisions = models.JSONField(default=list, blank=True, help_text="requested; empty = all branches and tags")
    max_rate = models.BigIntegerField(null=True, blank=True, help_text="bytes per second, all files together")

    state = models.CharField(max_length=8, choices=STATES, default=QUEUED, db_index=True)
    error = models.TextField(blank=True)
    notes = models.TextField(blank=True, help_text="what was skipped and why")
    attempts = models.IntegerField(default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")

    # Progress. files/bytes "done" include files found already stored ("skipped": nothing fetched);
    # bytes_fetched counts what came over the network, bytes_resumed what a partial download kept.
    files_total = models.BigIntegerField(default=0)
    files_done = models.BigIntegerField(default=0)
    files_skipped = models.BigIntegerField(default=0)
    bytes_total = models.BigIntegerField(default=0)
    bytes_done = models.BigIntegerField(default=0)
    bytes_skipped = models.BigIntegerField(default=0)
    bytes_fetched = models.BigIntegerField(default=0)
    bytes_resumed = models.BigIntegerField(default=0)
    rate = models.FloatField(default=0.0, help_text="bytes per second, recent")

    created = models.DateTimeField(auto_now_add=True)
    started = models.DateTimeField(null=True, blank=True, help_text="start of the current or last attempt")
    updated = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)
    # Who runs it: a run claims the job with a fresh lease and keeps the heartbeat fresh; a run
    # whose lease was taken over (its worker was presumed dead) stops before touching anything.
    lease = models.CharField(max_length=32, blank=True)
    worker = models.CharField(max_length=200, blank=True)
    heartbeat = models.DateTimeField(null=True, blank=True)
    reservation_ids = models.JSONField(default=list, blank=True)
    # What the job made of each revision: [{"name", "kind", "upstream", "commit"}].
    results = models.JSONField(default=list, blank=True)

    class Meta:
        indexes = [models.Index(fields=["repo", "-created"])]

    def __str__(self) -> str:
        return f"mirror #{self.pk} {self.source_display} → {self.repo}"

    @property
    def source_display(self) -> str:
        if self.source_kind == self.HF:
            prefix = "datasets/" if self.source_type == Repo.DATASET else ""
            return f"{self.source_url.rstrip('/')}/{prefix}{self.source_repo}"
        return self.source_url

    @property
    def source_key(self) -> str:
        """Identity of the source, for recognising files and revisions mirrored before."""
        if self.source_kind == self.HF:
            return f"hf {self.source_url.rstrip('/')} {self.source_type} {self.source_repo}"
        if self.source_kind == self.S3:
            return f"s3 {self.s3_endpoint_url} {self.source_url.rstrip('/')}"
        return f"local {self.source_url.rstrip('/')}"

    @property
    def source_hash(self) -> str:
        return source_hash(self.source_key)


def source_hash(key: str) -> str:
    return hashlib.sha1(key.encode()).hexdigest()


class MirrorFile(models.Model):
    """One file (path + upstream ETag) of a job. `sha256` is what its bytes hash to, once known:
    with (source, path, etag, size) it lets a later job skip files that have not changed even
    where the source's ETags are not sha256 (S3, git blob ids)."""

    PENDING, DONE = "pending", "done"
    job = models.ForeignKey(MirrorJob, on_delete=models.CASCADE, related_name="files")
    source_hash = models.CharField(max_length=40)
    path = models.CharField(max_length=1024)
    etag = models.CharField(max_length=200)
    size = models.BigIntegerField()
    sha256 = models.CharField(max_length=64, blank=True)
    git_oid = models.CharField(max_length=40, blank=True)
    lfs = models.BooleanField(default=False)
    state = models.CharField(max_length=8, default=PENDING)
    fetched = models.BooleanField(default=False, help_text="this job downloaded the bytes (else: already stored)")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "path", "etag"], name="mirrorfile_unique")]
        indexes = [models.Index(fields=["source_hash", "path"])]


class MirrorRevision(models.Model):
    """Upstream revision → our commit, written in the transaction of the commit: a task that runs
    again finds it and does not commit twice. `upstream` is the upstream commit id, or for S3 and
    directories a digest of the listing."""

    repo = models.ForeignKey(Repo, on_delete=models.CASCADE, related_name="+")
    source_hash = models.CharField(max_length=40)
    upstream = models.CharField(max_length=80)
    commit = models.ForeignKey(Commit, on_delete=models.CASCADE, related_name="+")
    job = models.ForeignKey(MirrorJob, null=True, blank=True, on_delete=models.SET_NULL, related_name="commits")
    name = models.CharField(max_length=200, blank=True, help_text="the revision as requested (branch or tag)")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["repo", "source_hash", "upstream"],
                                               name="mirrorrevision_unique")]


class OnDemandRepo(models.Model):
    """A catalog repo served from its upstream on first use (hub.mirrors.ondemand): which upstream,
    which upstream commit its default branch was last pinned at, and when that was checked. A check
    is claimed with `checking_until` (a short lease), so that one process asks the upstream while the
    others wait for its answer, on any number of web replicas."""

    repo = models.OneToOneField(Repo, on_delete=models.CASCADE, related_name="ondemand")
    source_url = models.CharField(max_length=1000, help_text="the upstream hub (Hugging Face protocol)")
    source_repo = models.CharField(max_length=200)
    source_type = models.CharField(max_length=8)
    upstream_commit = models.CharField(max_length=80, blank=True, help_text="of the default branch, last pinned")
    commit = models.ForeignKey(Commit, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    checked = models.DateTimeField(null=True, blank=True, help_text="last answer from the upstream")
    checking_until = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True, help_text="the upstream's last failure, if the last check failed")
    pinned = models.BooleanField(default=False, help_text="fetched whole by an operator; never evicted")

    class Meta:
        verbose_name = "on-demand repo"

    def __str__(self) -> str:
        return f"{self.repo} ← {self.source_url}"

    @property
    def source_key(self) -> str:
        """As MirrorJob.source_key: a later `manage.py mirror` of the same upstream knows its commits."""
        return f"hf {self.source_url.rstrip('/')} {self.source_type} {self.source_repo}"


class OnDemandBlob(models.Model):
    """Bytes of a pinned file that are fetched from the upstream on their first read. One fetch at a
    time: a reader claims it with a lease (on this node's disk, under HUB_DATA_DIR/ondemand) and
    keeps `heartbeat` fresh; readers on the same node follow its partial file, a fetch whose
    heartbeat went stale is taken over and resumed from the bytes its partial file holds."""

    blob = models.OneToOneField("content.Blob", primary_key=True, on_delete=models.CASCADE, related_name="ondemand")
    origin = models.ForeignKey(OnDemandRepo, on_delete=models.CASCADE, related_name="blobs")
    upstream_commit = models.CharField(max_length=80)
    path = models.CharField(max_length=1024)
    lease = models.CharField(max_length=32, blank=True)
    node = models.CharField(max_length=200, blank=True, help_text="the host whose disk holds the partial file")
    heartbeat = models.DateTimeField(null=True, blank=True)
    fetched = models.DateTimeField(null=True, blank=True, help_text="when its bytes last landed in the store")
    evicted = models.DateTimeField(null=True, blank=True, help_text="when its bytes were last evicted")
    last_used = models.DateTimeField(null=True, blank=True, db_index=True)
    fetches = models.IntegerField(default=0, help_text="upstream transfers started (a resume counts again)")
    bytes_fetched = models.BigIntegerField(default=0)
    error = models.TextField(blank=True)

    class Meta:
        verbose_name = "on-demand file"

    def __str__(self) -> str:
        return f"{self.path} ({self.blob_id[:12]})"
