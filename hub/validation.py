"""Checks for every name and path that enters the hub. Paths are repo-relative, '/'-separated."""
from __future__ import annotations

import re

from django.utils.translation import gettext, pgettext_lazy

from hub.errors import BadRequest, InvalidPath
from storage.paths import path_problem

RESERVED_NAMESPACES = {"api", "datasets", "spaces", "models", "kernels", "buckets", "oauth", "admin",
                       "static", "lfs", "accounts", "new", "settings", "volume", "volumes"}
_NAME_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?")
_REF_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")  # no "/": WSGI decodes %2F in URLs
# What the checks name, in the reader's language (callers pass the English word, which they also test).
_WORDS = {"name": pgettext_lazy("what is checked", "name"),
          "repo name": pgettext_lazy("what is checked", "repo name"),
          "namespace": pgettext_lazy("what is checked", "namespace"),
          "upstream namespace": pgettext_lazy("what is checked", "upstream namespace"),
          "instance name": pgettext_lazy("what is checked", "instance name"),
          "user name": pgettext_lazy("what is checked", "user name"),
          "organisation name": pgettext_lazy("what is checked", "organisation name"),
          "branch": pgettext_lazy("what is checked", "branch"),
          "tag": pgettext_lazy("what is checked", "tag")}


def word(what: str) -> str:
    return str(_WORDS.get(what, what))


def check_name(name: str, *, what: str = "name") -> str:
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name) or ".." in name or "--" in name:
        raise BadRequest(gettext("invalid %(what)s %(name)r: use 1-96 letters, digits, '-', '_' or '.', "
                                 "starting and ending with a letter or digit (no '--' or '..')") % {"what": word(what), "name": name})
    if what != "repo name" and name.lower() in RESERVED_NAMESPACES:
        raise BadRequest(gettext("%(name)r is reserved and cannot be used as a %(what)s") % {"name": name, "what": word(what)})
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
        raise BadRequest(gettext("invalid %(what)s name %(name)r") % {"what": word(what), "name": name})
    return name
