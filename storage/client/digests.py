"""What a download is checked against: the blake3 the hub recorded beside a checked sha256 where it
has one (a fifth of sha256's CPU per byte; a match proves the bytes are those the hub found to
have that sha256), else the sha256 itself."""
from __future__ import annotations

import hashlib

from blake3 import blake3 as new_blake3


def hasher(blake3: str):
    """A new hash of the kind a file with this recorded `blake3` ("" if none) is checked with."""
    return new_blake3() if blake3 else hashlib.sha256()


def expected(sha256: str, blake3: str) -> str:
    """The hex digest `hasher(blake3)` must give for the right bytes."""
    return blake3 or sha256


def mismatch(label: str, digest: str, sha256: str, blake3: str) -> str:
    """What is wrong with bytes of `label` whose `hasher(blake3)` gave `digest`."""
    if blake3:
        return (f"{label}: the bytes received hash to blake3 {digest}, not the {blake3} the hub recorded "
                f"for sha256 {sha256}")
    return f"{label}: the bytes received hash to {digest}, not {sha256}"
