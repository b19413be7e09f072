"""Versioned repos on content-addressed storage.

Bytes live in the object store under their sha256 (Blob). A commit points at a root tree; trees are
immutable, content-addressed TreeNode rows (see trees.py), so a commit that changes k files writes
O(k · depth) rows and shares everything else with its parent."""
from __future__ import annotations

from django.conf import settings
from django.db import models

from hub.accounts.models import Namespace
from hub.content.models import Blob

# What do_create_repo commits as a new repo's only file. A repo whose head holds more than this is
# "mirrored" (its bytes are on the hub); a catalog repo holds only this until it is mirrored.
GITATTRIBUTES = b"""*.7z filter=lfs diff=lfs merge=lfs -text
*.arrow filter=lfs diff=lfs merge=lfs -text
*.bin filter=lfs diff=lfs merge=lfs -text
*.gz filter=lfs diff=lfs merge=lfs -text
*.h5 filter=lfs diff=lfs merge=lfs -text
*.npy filter=lfs diff=lfs merge=lfs -text
*.onnx filter=lfs diff=lfs merge=lfs -text
*.parquet filter=lfs diff=lfs merge=lfs -text
*.pt filter=lfs diff=lfs merge=lfs -text
*.pth filter=lfs diff=lfs merge=lfs -text
*.safetensors filter=lfs diff=lfs merge=lfs -text
*.tar filter=lfs diff=lfs merge=lfs -text
*.zip filter=lfs diff=lfs merge=lfs -text
"""
MIRRORED = models.Q(file_count__gt=1) | models.Q(total_size__gt=len(GITATTRIBUTES))


def sort_name(namespace: str, name: str) -> str:
    """A repo's case-folded id: the key it is found by (repo ids are case-insensitive, as upstream's
    are: one repo per type and folded id) and listed in name order by. The space sorts before every
    character a name may hold, so this orders as (namespace, name) does."""
    return f"{namespace} {name}".lower()


class Repo(models.Model):
    MODEL, DATASET = "model", "dataset"
    TYPES = [(MODEL, "model"), (DATASET, "dataset")]

    namespace = models.ForeignKey(Namespace, on_delete=models.PROTECT, related_name="repos")
    name = models.CharField(max_length=96)
    type = models.CharField(max_length=8, choices=TYPES, default=MODEL)
    private = models.BooleanField(default=False)
    # Gated, as upstream: anyone who can see the repo sees its files listed, but downloads need the
    # caller's access request accepted first (members of its namespace need not). On an "auto" gate
    # a request is accepted as it is made; on a "manual" one it waits for a writer of the namespace
    # to accept it (hub.repos.gating).
    AUTO, MANUAL = "auto", "manual"
    gated = models.BooleanField(default=False)
    gate_mode = models.CharField(max_length=8, choices=[(AUTO, "auto: accepted at once"),
                                                        (MANUAL, "manual: the owners review each request")],
                                 default=AUTO)
    gate_prompt = models.TextField(blank=True, help_text="the conditions shown before access is granted")
    default_branch = models.CharField(max_length=200, default="main")
    created = models.DateTimeField(auto_now_add=True)
    last_modified = models.DateTimeField(auto_now_add=True)
    downloads = models.BigIntegerField(default=0)
    likes = models.IntegerField(default=0)
    # From the README card's YAML front matter on the default branch, refreshed on every commit there.
    card_data = models.JSONField(default=dict, blank=True)
    # Head of the default branch, denormalised for listings.
    head_sha = models.CharField(max_length=40, blank=True)
    file_count = models.BigIntegerField(default=0)
    total_size = models.BigIntegerField(default=0)
    # Kept for the catalog lists, so that every sort and filter reads this one table (an index each)
    # instead of sorting a join: the name key (set with namespace and name: do_create_repo,
    # do_move_repo, save), the catalog's upstream size estimate (hub.catalog.services.do_upsert_entry),
    # and the size a list shows and sorts by, computed by the database: the bytes at the head once
    # mirrored, the upstream estimate before.
    sort_name = models.CharField(max_length=200, default="", editable=False)
    upstream_size = models.BigIntegerField(null=True, blank=True, editable=False)
    listed_size = models.GeneratedField(
        expression=models.Case(models.When(MIRRORED, then=models.F("total_size")), default=models.F("upstream_size")),
        output_field=models.BigIntegerField(null=True), db_persist=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["type", "namespace", "name"], name="repo_unique_id"),
                       models.UniqueConstraint(fields=["type", "sort_name"], name="repo_unique_folded_id")]
        indexes = [models.Index(fields=["type", "private", "-last_modified"])]

    @property
    def repo_id(self) -> str:
        return f"{self.namespace.name}/{self.name}"

    @property
    def gating(self) -> str | bool:
        """The gate as the Hugging Face protocol names it: False, "auto" or "manual"."""
        return self.gate_mode if self.gated else False

    def save(self, *args, **kwargs) -> None:
        self.sort_name = sort_name(self.namespace.name, self.name)
        if kwargs.get("update_fields") is not None:
            kwargs["update_fields"] = {*kwargs["update_fields"], "sort_name"}
        super().save(*args, **kwargs)

    def __str__(self) -> str:
        return f"{self.type}:{self.repo_id}"


class RepoRedirect(models.Model):
    """A repo's former id: requests for it are redirected to the repo (307), as upstream keeps a
    moved repo answering at its old name, until a repo is created under that id."""

    type = models.CharField(max_length=8, choices=Repo.TYPES)
    key = models.CharField(max_length=200, help_text="the former id, case-folded (see sort_name)")
    former_id = models.CharField(max_length=200)
    repo = models.ForeignKey(Repo, on_delete=models.CASCADE, related_name="redirects")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["type", "key"], name="reporedirect_unique_key")]

    def __str__(self) -> str:
        return f"{self.type}:{self.former_id} -> {self.repo_id}"






class RepoBlob(models.Model):
    """Which blobs a repo's commits reference (any revision): for quotas and garbage collection.
    Where the repo first held them (path, ref, when, as LFS or not) is what `list_lfs_files` shows;
    `lfs` is None on rows from before it was recorded (hub.repos.history fills them in)."""

    repo = models.ForeignKey(Repo, on_delete=models.CASCADE, related_name="blob_refs")
    blob = models.ForeignKey(Blob, on_delete=models.PROTECT, related_name="repo_refs")
    path = models.CharField(max_length=1024, blank=True, default="")
    ref = models.CharField(max_length=200, blank=True, default="")
    lfs = models.BooleanField(null=True, blank=True)
    created = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["repo", "blob"], name="repoblob_unique")]


class TreeNode(models.Model):
    """One immutable node of a directory tree: a leaf chunk of sorted entries, or an index over leaf
    chunks for large directories. `data` is zlib-compressed JSON; `digest` is sha1 of the content."""

    digest = models.CharField(max_length=40, primary_key=True)
    data = models.BinaryField()


class Commit(models.Model):
    repo = models.ForeignKey(Repo, on_delete=models.CASCADE, related_name="commits")
    oid = models.CharField(max_length=40, unique=True)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    tree = models.CharField(max_length=40)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    author_name = models.CharField(max_length=150)
    title = models.CharField(max_length=500)
    message = models.TextField(blank=True)
    created = models.DateTimeField()
    file_count = models.BigIntegerField(default=0)
    total_size = models.BigIntegerField(default=0)

    class Meta:
        indexes = [models.Index(fields=["repo", "-created"])]

    def __str__(self) -> str:
        return self.oid[:12]


class Ref(models.Model):
    BRANCH, TAG, PR = "branch", "tag", "pr"
    repo = models.ForeignKey(Repo, on_delete=models.CASCADE, related_name="refs")
    kind = models.CharField(max_length=8, choices=[(BRANCH, "branch"), (TAG, "tag"), (PR, "pull request")])
    name = models.CharField(max_length=200)  # a pull request's ref is its number: refs/pr/<name>
    commit = models.ForeignKey(Commit, on_delete=models.PROTECT, related_name="+")
    message = models.TextField(blank=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["repo", "kind", "name"], name="ref_unique")]




class AccessRequest(models.Model):
    """A user's request for a gated repo's files, one per user and repo (hub.repos.gating). It is
    accepted as it is made on an "auto" gate and pending on a "manual" one until a writer of the
    repo's namespace accepts or rejects it; they may also move it back to pending (cancel) or grant
    access to someone who never asked. Only an accepted request opens the files."""

    PENDING, ACCEPTED, REJECTED = "pending", "accepted", "rejected"
    STATUSES = [(PENDING, "pending"), (ACCEPTED, "accepted"), (REJECTED, "rejected")]

    repo = models.ForeignKey(Repo, on_delete=models.CASCADE, related_name="access_requests")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    status = models.CharField(max_length=8, choices=STATUSES, default=PENDING)
    created = models.DateTimeField(auto_now_add=True, help_text="when it was asked for (or granted)")
    # Whoever handled it last, when, and why a rejection (shown to the requester).
    decided = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    rejection_reason = models.CharField(max_length=200, blank=True)
    # What the requester filled in, if the gate asked for more than agreement.
    fields = models.JSONField(default=dict, blank=True)
    # Given by an owner without a request: the person shared nothing, so their email is not listed.
    granted = models.BooleanField(default=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["repo", "user"], name="access_request_once")]
        indexes = [models.Index(fields=["repo", "status", "-id"], name="access_request_list")]

    @property
    def request_id(self) -> str:
        """The id huggingface_hub's AccessRequest carries (24 hex, as upstream's)."""
        return f"{self.pk:024x}"

    def __str__(self) -> str:
        return f"{self.user} → {self.repo} ({self.status})"


class RepoLike(models.Model):
    """A user likes a repo. Repo.likes counts these rows; only hub.repos.likes writes either, in one
    transaction, so the count stays right."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    repo = models.ForeignKey(Repo, on_delete=models.CASCADE, related_name="liked_by")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "repo"], name="repolike_once")]
        indexes = [models.Index(fields=["repo", "-id"], name="repolike_likers")]

    def __str__(self) -> str:
        return f"{self.user} ♥ {self.repo}"
