"""What a download is checked against: the blake3 the hub recorded beside a checked sha256 where it
has one (a fifth of sha256's CPU per byte; a match proves the bytes are those the hub found to
have that sha256), else the sha256 itself."""
from __future__ import annotations

import hashlib

from blake3 import blake3 as new_blake3

from storage.client.errors import IntegrityError


def hasher(blake3: str):
    """A new hash of the kind a file with this recorded `blake3` ("" if none) is checked with."""
    return new_blake3() if blake3 else hashlib.sha256()


def matches(digest: str, sha256: str, blake3: str) -> bool:
    """Whether `digest` (of `hasher(blake3)`) is that of the right bytes."""
    return digest == (blake3 or sha256)


def check(label: str, digest: str, sha256: str, blake3: str, *, then: str = "") -> None:
    """Raises IntegrityError (ChecksumMismatch) unless bytes of `label` whose `hasher(blake3)` gave
    `digest` are the right ones; `then` ends the message (what happened to them, what to do)."""
    if matches(digest, sha256, blake3):
        return
    if blake3:
        what = (f"{label}: the bytes received hash to blake3 {digest}, not the {blake3} the hub recorded "
                f"for sha256 {sha256}")
    else:
        what = f"{label}: the bytes received hash to {digest}, not {sha256}"
    raise IntegrityError(f"{what}; {then}" if then else what, code="ChecksumMismatch")
