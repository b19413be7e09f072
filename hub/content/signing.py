"""The one scheme for the capability URLs the hub hands out for bytes it receives or serves itself
(the local backend's basic uploads, parts, completions and downloads, by whichever door asked for
them): a token signed with the hub's secret that names what it allows (`kind` and its claims) and
until when. Whoever holds the URL may do that one thing until then, and nothing else; the lifetime is
chosen where the URL is made (a part URL lives as long as its session, a download URL as long as a
presigned store URL would)."""
from __future__ import annotations

import time

from django.conf import settings
from django.core import signing

from hub.errors import NotFound

SALT = "hub.content.url"
KINDS = ("upload", "part", "complete", "put", "object", "xet", "xorb")  # what a token may be for


def base_url(request) -> str:
    """The hub's public URL as clients reach it (HUB_PUBLIC_URL, else the request's own host)."""
    if settings.HUB_PUBLIC_URL:
        return settings.HUB_PUBLIC_URL.rstrip("/")
    return f"{request.scheme}://{request.get_host()}"


def sign(kind: str, claims: dict, lifetime: float) -> str:
    """A token allowing `kind` with these claims for `lifetime` seconds."""
    assert kind in KINDS, kind
    return signing.dumps({"k": kind, "x": int(time.time() + lifetime), **claims}, salt=SALT, compress=True)


def unsign(kind: str, token: str, *, what: str = "upload URL") -> dict:
    """The claims of a valid, unexpired token for `kind`; otherwise 404 saying which it is."""
    try:
        claims = signing.loads(token, salt=SALT)
    except signing.BadSignature:
        raise NotFound(f"this {what} is not valid") from None
    if not isinstance(claims, dict) or claims.pop("k", None) != kind:
        raise NotFound(f"this {what} is not valid")
    if claims.pop("x", 0) < time.time():
        raise NotFound(f"this {what} has expired; start the upload again" if kind != "object"
                       else f"this {what} has expired; ask for the file again")
    return claims
