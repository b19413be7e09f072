"""Secrets the hub must keep in a form it can use again later (a mirror job's upstream token or S3
keys), sealed at rest: Fernet (AES-128-CBC + HMAC-SHA256) with a key derived from SECRET_KEY, so a
database dump or backup alone does not hand them out. Keys listed in SECRET_KEY_FALLBACKS still
open what they sealed, which lets SECRET_KEY rotate (see docs/operations.md); `manage.py
reseal_secrets` then seals everything again under the current key."""
from __future__ import annotations

import base64
import json
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.db import models

# What a sealed value reads as when no configured key opens it (SECRET_KEY changed and the old one
# is not among the fallbacks): a dict, so that listing jobs still works; users of the secret check it.
UNREADABLE = "__unreadable__"


@lru_cache(maxsize=4)
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    def one(secret: str) -> Fernet:
        derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"hub sealed secrets v1").derive(
            secret.encode())
        return Fernet(base64.urlsafe_b64encode(derived))

    return MultiFernet([one(k) for k in keys])


def _keys() -> MultiFernet:
    return _fernet((settings.SECRET_KEY, *settings.SECRET_KEY_FALLBACKS))


def seal(value: dict) -> str:
    return _keys().encrypt(json.dumps(value, sort_keys=True).encode()).decode()


def unseal(token: str) -> dict:
    try:
        return json.loads(_keys().decrypt(token.encode()))
    except InvalidToken:
        return {UNREADABLE: True}


def is_sealed(text: str) -> bool:
    return text.startswith("gAAAAA")  # every Fernet token (version byte 0x80, then a timestamp)


class SealedJSONField(models.TextField):
    """A dict stored sealed: Python code sees the dict, the database a Fernet token ('' for {})."""

    def from_db_value(self, value, expression, connection):
        return self.to_python(value)

    def to_python(self, value):
        if isinstance(value, str):
            return unseal(value) if value else {}
        return {} if value is None else value

    def get_prep_value(self, value) -> str:
        if not value:
            return ""
        if isinstance(value, dict) and value.get(UNREADABLE):
            raise ValueError("refusing to seal a secret that could not be read")
        return seal(value)
