"""Sizes as people write them and read them, one way for the server and the client alike.

Dependency-free (the server imports it; it imports nothing of either side).
"""
from __future__ import annotations

import re

_UNITS = {"": 1, "B": 1,
          # bare letters are binary, as in curl's --limit-rate and dd: 50M is 50 MiB
          "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50,
          "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "PB": 10**15,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40, "PIB": 2**50}
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([A-Za-z]*)\s*")


def parse_size(text: str) -> int:
    """A size as written in settings and options, in bytes (rounded down to a whole byte).

    Accepted: a non-negative number, whole or decimal, optionally followed (spaces allowed) by a
    unit, in any case:

        B                      bytes (as is a bare number: '1024')
        K, M, G, T, P          binary: KiB, MiB, GiB, TiB, PiB ('50M' = 50 · 2**20)
        KiB, MiB, GiB, TiB, PiB  binary
        KB, MB, GB, TB, PB     decimal ('50GB' = 50 · 10**9), as quotas are sold

    Examples: '32MiB', '50M', '1.5 GB', '10mb', '1024'. Raises ValueError with a sentence that says
    what is accepted on anything else (a negative number, an exponent, an unknown unit)."""
    m = _SIZE.fullmatch(str(text))
    if not m or m.group(2).upper() not in _UNITS:
        raise ValueError(f"not a size: {text!r} (use e.g. 50M, 2GiB, 1.5GB or a number of bytes)")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def format_size(n: float) -> str:
    """Decimal units, as quotas are sold: 49.2 GB, 20 kB, 512 B."""
    for unit, factor in (("PB", 10**15), ("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if abs(n) >= factor:
            return f"{n / factor:.1f} {unit}".replace(".0 ", " ")
    return f"{n:.0f} B"
