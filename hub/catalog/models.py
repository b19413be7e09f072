"""What the catalog knows about a repo beyond its files.

A CatalogEntry holds the public metadata of a dataset or model (from the seed file
hub/catalog/seed/catalog.yaml, or from a sample made by hub/catalog/samples.py), one-to-one with the
Repo that holds — or will hold, once mirrored — its bytes. Whether the bytes are there is never
stored here: it is read from the repo's head (see hub.repos.models.MIRRORED).
"""
from __future__ import annotations

from django.contrib.postgres.search import SearchVectorField
from django.db import models

from hub.repos.models import Repo


class CatalogEntry(models.Model):
    # Curated entries (the seed file, the samples) and those read from a repo's own README front
    # matter (CARD: a user's repo gets filters and search from its card; a curated entry wins).
    SEED, SAMPLE, CARD = "seed", "sample", "card"

    repo = models.OneToOneField(Repo, on_delete=models.CASCADE, related_name="catalog")
    upstream_id = models.CharField(max_length=200, blank=True, help_text="Hugging Face id; empty for local samples")
    title = models.CharField(max_length=200)
    summary = models.TextField(blank=True)
    # Chinese (zh-hans) title and summary, shown to those who read the pages in Chinese and searched
    # in both languages; empty when the entry has none (the English one is shown then).
    title_zh = models.CharField(max_length=200, blank=True)
    summary_zh = models.TextField(blank=True)
    license = models.CharField(max_length=64, blank=True)
    tasks = models.JSONField(default=list, blank=True)
    modality = models.JSONField(default=list, blank=True)
    languages = models.JSONField(default=list, blank=True)
    upstream_size = models.BigIntegerField(null=True, blank=True, help_text="approximate bytes upstream")
    upstream_files = models.BigIntegerField(null=True, blank=True, help_text="approximate files upstream")
    homepage = models.URLField(max_length=500, blank=True)
    paper = models.URLField(max_length=500, blank=True)
    base_model = models.CharField(max_length=200, blank=True)
    parameters = models.CharField(max_length=32, blank=True)
    trust_remote_code = models.BooleanField(
        default=False, help_text="the model's own code must run to load it (from_pretrained(..., trust_remote_code=True))")
    source = models.CharField(max_length=8, default=SEED,
                              choices=[(SEED, "seed file"), (SAMPLE, "sample"), (CARD, "the repo's card")])
    # What a search matches (id, title, summary, tasks, ...), derived by services.refresh_search. On
    # PostgreSQL `search` holds its tsvector under a GIN index (migration 0002); elsewhere it stays NULL
    # and search falls back to substring matches on `search_text`.
    search_text = models.TextField(blank=True)
    search = SearchVectorField(null=True, blank=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "catalog entries"

    def __str__(self) -> str:
        return self.title


class CatalogFacet(models.Model):
    """One filterable value of an entry (a task, modality, language or license) as its own row, so
    a filter is an indexed lookup on SQLite and PostgreSQL alike."""

    TASK, MODALITY, LANGUAGE, LICENSE = "task", "modality", "language", "license"
    KINDS = (TASK, MODALITY, LANGUAGE, LICENSE)

    repo = models.ForeignKey(Repo, on_delete=models.CASCADE, related_name="catalog_facets")
    kind = models.CharField(max_length=12)
    value = models.CharField(max_length=64)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["repo", "kind", "value"], name="catalog_facet_unique")]
        indexes = [models.Index(fields=["kind", "value", "repo"], name="catalog_facet_lookup")]
