"""Checks for every name and path that enters the hub. Paths are repo-relative, '/'-separated."""
from __future__ import annotations

import re

from hub.errors import BadRequest, InvalidPath
from storage.paths import path_problem

RESERVED_NAMESPACES = {"api", "datasets", "spaces", "models", "kernels", "buckets", "oauth", "admin",
                       "static", "lfs", "accounts", "new", "settings", "volume", "volumes"}
_NAME_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?")
_REF_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")  # no "/": WSGI decodes %2F in URLs


def check_name(name: str, *, what: str = "name") -> str:
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name) or ".." in name or "--" in name:
        raise BadRequest(f"invalid {what} {name!r}: use 1-96 letters, digits, '-', '_' or '.', "
                         "starting and ending with a letter or digit (no '--' or '..')")
    if what != "repo name" and name.lower() in RESERVED_NAMESPACES:
        raise BadRequest(f"{name!r} is reserved and cannot be used as a {what}")
    return name


def check_path(path: str) -> str:
    """A normalised, safe repo path, or InvalidPath saying what is wrong with it (storage.paths)."""
    problem = path_problem(path)
    if problem:
        raise InvalidPath(problem)
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
