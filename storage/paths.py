"""The rules a file path in a repo must follow, written once: the hub enforces them
(hub.repos.validation.check_path) and `hub push` checks a folder against them before it creates
anything on the hub. Imports no Django. Paths are repo-relative and '/'-separated."""
from __future__ import annotations

import unicodedata

MAX_PATH = 1024
MAX_COMPONENT = 255


def path_problem(path: str) -> str | None:
    """What is wrong with `path` as a repo file path, as a sentence; None if nothing is."""
    if not isinstance(path, str) or not path:
        return "empty file path"
    if "\x00" in path:
        return f"file path {path!r} contains a NUL byte"
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        return f"file path {path!r} contains a control character"
    # Invisible and direction-changing characters (U+200B, U+202E…) make a name look like another.
    if any(unicodedata.category(c) in ("Cf", "Cs", "Co", "Cn") or c in "\u2028\u2029" for c in path):
        return f"file path {path!r} contains an invisible, direction-changing or unassigned character"
    if "\\" in path:
        return f"file path {path!r} contains a backslash; use '/' between directories"
    if path.startswith("/"):
        return f"file path {path!r} is absolute; give it relative to the repo root"
    if len(path.encode()) > MAX_PATH:
        return f"file path is longer than {MAX_PATH} bytes"
    if unicodedata.normalize("NFC", path) != path:
        return f"file path {path!r} is not in Unicode NFC form"
    for part in path.split("/"):
        if part in ("", ".", ".."):
            return f"file path {path!r} has an empty, '.' or '..' component"
        if len(part.encode()) > MAX_COMPONENT:
            return f"a component of {path!r} is longer than {MAX_COMPONENT} bytes"
        # What the name becomes where it lands: NFKC folding (a file system or a tool may apply it)
        # turns '‥' and '．．' into '..', and '／' into '/'.
        folded = unicodedata.normalize("NFKC", part)
        if folded != part and (folded in (".", "..") or ".." in folded or "/" in folded or "\\" in folded):
            return f"file path {path!r} has a component that reads as '..' or holds a '/' once normalized (NFKC)"
        if _is_dot_git(folded):
            return (f"file path {path!r} has a .git component: a downloaded folder holding it would be "
                    "a git work tree with the uploader's configuration")
    return None


def _is_dot_git(name: str) -> bool:
    """'.git' in any case, and the names that are '.git' on Windows and macOS file systems
    (trailing dots and spaces dropped, the NTFS short name GIT~1), as git itself refuses them."""
    name = name.casefold()
    return name.rstrip(". ") == ".git" or name == "git~1"
