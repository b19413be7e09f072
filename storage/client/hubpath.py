"""What users type to name something on the hub: `datasets/NS/NAME[@REV][/PATH]`, `models/...`,
`volume[/PATH]`, with or without `hub://`."""
from __future__ import annotations

from dataclasses import dataclass

from storage.client.errors import UsageError

MODEL, DATASET = "model", "dataset"
REPO_TYPES = (MODEL, DATASET)


@dataclass(frozen=True)
class HubPath:
    """A parsed `[hub://]datasets/NS/NAME[@REV][/PATH]`, `models/...`, or `volume[/PATH]`."""

    kind: str  # "repo" or "volume"
    repo_type: str | None = None
    repo_id: str | None = None
    revision: str | None = None
    path: str = ""

    @property
    def prefix(self) -> str:
        """The spelling of the repo part: datasets/NS/NAME[@REV], or volume."""
        if self.kind == "volume":
            return "volume"
        rev = f"@{self.revision}" if self.revision else ""
        return f"{self.repo_type}s/{self.repo_id}{rev}"


def _check_name(part: str, text: str) -> str:
    ok = part and part[0].isalnum() and all(c.isalnum() or c in "._-" for c in part)
    if not ok:
        raise UsageError(f"not a repo id: {text!r} (expected namespace/name)", code="BadRepoId")
    return part


def parse_hub_path(text: str, default_type: str | None = None) -> HubPath:
    """Parses what users type: `datasets/alice/x@v1/dir/f.csv`, `hub://models/alice/m`, `volume/ckpt`,
    or `alice/x@main/f` when `default_type` says which kind of repo that is. A revision with '/'
    (refs/pr/1) is recognised as such, or may be given percent-encoded."""
    from urllib.parse import unquote

    raw = text
    if text.startswith("hub://"):
        text = text[len("hub://"):]
    text = text.strip("/")
    if text == "volume" or text.startswith("volume/"):
        return HubPath("volume", path=text[len("volume"):].strip("/"))
    parts = text.split("/")
    if parts[0] in ("datasets", "models"):
        repo_type = parts[0][:-1]
        parts = parts[1:]
    elif default_type in REPO_TYPES:
        repo_type = default_type
    else:
        raise UsageError(f"not a hub path: {raw!r} (expected datasets/NS/NAME[@REV]/PATH, models/... or volume/...)",
                         code="BadPath")
    if len(parts) < 2:
        raise UsageError(f"not a repo id: {raw!r} (expected namespace/name)", code="BadRepoId")
    ns, name = parts[0], parts[1]
    rest = parts[2:]
    revision = None
    if "@" in name:
        name, revision = name.split("@", 1)
        if revision.startswith("refs/") or (revision == "refs" and rest):
            # refs/pr/1 and friends: the revision swallows two more segments
            tail = revision.split("/")[1:] if revision.startswith("refs/") else []
            need = 2 - len(tail)
            revision = "/".join(["refs", *tail, *rest[:need]])
            rest = rest[need:]
        revision = unquote(revision)
        if not revision:
            raise UsageError(f"empty revision in {raw!r}", code="BadRevision")
    _check_name(ns, raw)
    _check_name(name, raw)
    return HubPath("repo", repo_type, f"{ns}/{name}", revision, "/".join(p for p in rest if p))
