"""What the repos app tells other apps, without importing them."""
from __future__ import annotations

from django.dispatch import Signal

# Sent once a commit that changed the default branch's README.md is committed; kwargs: repo_pk.
card_changed = Signal()
