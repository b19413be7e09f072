"""What a revision's own `.gitattributes` and `.gitignore` say about a path, as upstream reads them.

Upstream decides a file's upload mode at preupload: a path an LFS rule of the revision's
`.gitattributes` matches (`*.parquet filter=lfs …`), a binary sample, or a size of 10 MB or more is
`lfs`, anything else `regular`. Clients act on the answer: `datasets` deletes a shard's temp file
once it was preuploaded as LFS, so answering `regular` for a Parquet file loses it. The root
`.gitignore` of the revision is honoured as well as the one a commit carries.

Both files are parsed once per content (keyed by their sha256) and kept, so a preupload of 256 paths
costs a lookup of each path, not a read of the files."""
from __future__ import annotations

import functools
import shlex
from dataclasses import dataclass

from django.conf import settings
from pathspec import GitIgnoreSpec
from pathspec.patterns.gitignore.basic import GitIgnoreBasicPattern

from hub.content import blobs
from hub.repos import trees

LFS, REGULAR = "lfs", "regular"
# Only so much of either file is read: a .gitattributes of megabytes is an attack, not a config.
MAX_RULES_BYTES = 1_000_000


@dataclass(frozen=True)
class LfsRules:
    """The `filter` attribute of each .gitattributes line, in order: True sets filter=lfs, False
    unsets it (`-filter`, `!filter`, `filter=other`). As in git, the last line that matches wins."""

    rules: tuple[tuple[GitIgnoreBasicPattern, bool], ...] = ()

    @classmethod
    def parse(cls, text: str) -> LfsRules:
        rules = []
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            try:
                pattern, *attrs = shlex.split(line, comments=False, posix=True)
            except ValueError:  # an unbalanced quote: git ignores the line too
                continue
            if pattern.startswith("!"):  # negative patterns are forbidden in .gitattributes
                continue
            value = None
            for attr in attrs:
                if attr.startswith("filter="):
                    value = attr == "filter=lfs"
                elif attr in ("-filter", "!filter"):
                    value = False
            if value is None:
                continue
            try:
                rules.append((GitIgnoreBasicPattern(pattern), value))
            except (ValueError, TypeError):
                continue
        return cls(tuple(rules))

    def lfs(self, path: str) -> bool:
        for pattern, value in reversed(self.rules):
            if pattern.match_file(path) is not None:
                return value
        return False


def is_binary(sample: bytes) -> bool:
    """git's own test: a NUL byte among the first bytes."""
    return b"\x00" in sample


def upload_mode(rules: LfsRules, path: str, size: int, sample: bytes) -> str:
    if size >= settings.HUB_LFS_THRESHOLD or (size > 0 and (rules.lfs(path) or is_binary(sample))):
        return LFS
    return REGULAR


@functools.lru_cache(maxsize=256)
def _lfs_rules(sha256: str) -> LfsRules:
    return LfsRules.parse(_text(sha256))


@functools.lru_cache(maxsize=256)
def _ignore_spec(sha256: str) -> GitIgnoreSpec:
    return ignore_spec(_text(sha256))


def _text(sha256: str) -> str:
    data = blobs.object_store().read_bytes(blobs.key_for(sha256))[:MAX_RULES_BYTES]
    return data.decode("utf-8", "replace")


def ignore_spec(text: str) -> GitIgnoreSpec:
    return GitIgnoreSpec.from_lines(text.splitlines())


def _root_file(store: trees.NodeStore, tree: str | None, name: str) -> str | None:
    if tree is None:
        return None
    entry = trees.lookup(store, tree, name)
    return entry.ref if entry is not None and not entry.is_dir and entry.size <= MAX_RULES_BYTES else None


def revision_rules(store: trees.NodeStore, tree: str | None) -> tuple[LfsRules, GitIgnoreSpec | None]:
    """(LFS rules, ignore rules or None) of the revision whose root tree is `tree` (None: a revision
    that does not exist yet, which has neither file)."""
    attributes = _root_file(store, tree, ".gitattributes")
    ignore = _root_file(store, tree, ".gitignore")
    return (_lfs_rules(attributes) if attributes else LfsRules(),
            _ignore_spec(ignore) if ignore else None)
