"""What the repos app tells other apps, without importing them."""
from __future__ import annotations

from django.dispatch import Signal

# Sent once a commit that changed the default branch's README.md is committed; kwargs: repo_pk.
card_changed = Signal()
# Sent once a commit to a dataset's default branch is committed; kwargs: repo_pk, commit_pk.
commit_landed = Signal()
