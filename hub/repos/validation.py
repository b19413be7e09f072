"""Checks for every name and path that enters the hub. Paths are repo-relative, '/'-separated."""
from __future__ import annotations

import re
import unicodedata

from hub.errors import BadRequest, InvalidPath

RESERVED_NAMESPACES = {"api", "datasets", "spaces", "models", "kernels", "buckets", "oauth", "admin",
                       "static", "lfs", "accounts", "new", "settings", "volume", "volumes"}
_NAME_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?")
_REF_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")  # no "/": WSGI decodes %2F in URLs
MAX_PATH = 1024
MAX_COMPONENT = 255


def check_name(name: str, *, what: str = "name") -> str:
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name) or ".." in name or "--" in name:
        raise BadRequest(f"invalid {what} {name!r}: use 1-96 letters, digits, '-', '_' or '.', "
                         "starting and ending with a letter or digit (no '--' or '..')")
    if what != "repo name" and name.lower() in RESERVED_NAMESPACES:
        raise BadRequest(f"{name!r} is reserved and cannot be used as a {what}")
    return name


def check_path(path: str) -> str:
    """A normalised, safe repo path, or InvalidPath saying what is wrong with it."""
    if not isinstance(path, str) or not path:
        raise InvalidPath("empty file path")
    if "\x00" in path:
        raise InvalidPath(f"file path {path!r} contains a NUL byte")
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        raise InvalidPath(f"file path {path!r} contains a control character")
    # Invisible and direction-changing characters (U+200B, U+202E…) make a name look like another.
    if any(unicodedata.category(c) in ("Cf", "Cs", "Co", "Cn") or c in "\u2028\u2029" for c in path):
        raise InvalidPath(f"file path {path!r} contains an invisible, direction-changing or unassigned character")
    if "\\" in path:
        raise InvalidPath(f"file path {path!r} contains a backslash; use '/' between directories")
    if path.startswith("/"):
        raise InvalidPath(f"file path {path!r} is absolute; give it relative to the repo root")
    if len(path.encode()) > MAX_PATH:
        raise InvalidPath(f"file path is longer than {MAX_PATH} bytes")
    if unicodedata.normalize("NFC", path) != path:
        raise InvalidPath(f"file path {path!r} is not in Unicode NFC form")
    parts = path.split("/")
    for part in parts:
        if part in ("", ".", ".."):
            raise InvalidPath(f"file path {path!r} has an empty, '.' or '..' component")
        if len(part.encode()) > MAX_COMPONENT:
            raise InvalidPath(f"a component of {path!r} is longer than {MAX_COMPONENT} bytes")
    if parts[0] == ".git":
        raise InvalidPath("paths under .git/ are not allowed")
    return path


def check_dir_path(path: str) -> str:
    """Like check_path, but '' (the root) and a trailing '/' are allowed."""
    path = (path or "").strip("/") if path not in (None, "") else ""
    return check_path(path) if path else ""


def check_ref_name(name: str, what: str = "branch") -> str:
    if (not isinstance(name, str) or not _REF_RE.fullmatch(name) or ".." in name or name.endswith(("/", ".lock"))
            or "//" in name or re.fullmatch(r"[0-9a-f]{40}", name)):
        raise BadRequest(f"invalid {what} name {name!r}")
    return name
