"""Opaque pagination cursors: the last key a page returned, base64url-encoded."""
from __future__ import annotations

import base64
import binascii

from hub.errors import BadRequest


def encode_cursor(after: str | None) -> str | None:
    return base64.urlsafe_b64encode(after.encode()).decode() if after is not None else None


def decode_cursor(cursor: str | None, *, hint: str = "") -> str | None:
    """The key a cursor stands for (None for no cursor); a BadRequest ending with `hint` otherwise."""
    if not cursor:
        return None
    try:
        return base64.b64decode(cursor.encode(), altchars=b"-_", validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise BadRequest(f"invalid cursor{': ' + hint if hint else ''}") from None
