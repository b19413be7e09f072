"""Reading settings from the environment: small helpers that fail loudly on nonsense."""
from __future__ import annotations

import os
import re
from datetime import timedelta

from storage import sizes
from storage.sizes import format_size  # noqa: F401 - one way to write a size, shared with the client


class ConfigError(ValueError):
    pass


def parse_size(text: str) -> int:
    """storage.sizes.parse_size (the client's reading: 50M is 50 MiB, 50MB is 50 million bytes),
    failing as every setting does, with a ConfigError."""
    try:
        return sizes.parse_size(text)
    except ValueError as err:
        raise ConfigError(str(err)) from None


_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> timedelta:
    """'30d' -> 30 days; also 45s, 90m, 12h, 2w: a whole number and one unit (m is minutes)."""
    m = re.fullmatch(r"\s*([0-9]+)\s*([smhdw])\s*", str(text))
    if not m:
        raise ConfigError(f"not a duration: {text!r} (use a whole number and a unit, e.g. 30d, 12h, 2w, 90m or 45s)")
    try:
        return timedelta(seconds=int(m.group(1)) * _DURATION_UNITS[m.group(2)])
    except OverflowError:
        raise ConfigError(f"not a duration: {text!r} (far longer than a calendar goes)") from None


def env(name: str, default: str | None = None) -> str | None:
    """A variable, or NAME_FILE's contents (for secrets mounted as files)."""
    if name in os.environ:
        return os.environ[name]
    path = os.environ.get(f"{name}_FILE")
    if path:
        with open(path) as fh:
            return fh.read().strip()
    return default


def envbool(name: str, default: bool = False) -> bool:
    value = env(name)
    if value is None or value == "":
        return default
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name} must be true or false, not {value!r}")


def envint(name: str, default: int) -> int:
    value = env(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"{name} must be an integer, not {value!r}") from None


def envsize(name: str, default: str) -> int:
    return parse_size(env(name) or default)
