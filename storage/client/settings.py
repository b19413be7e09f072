"""The client's settings: the hub endpoint and token from the environment — HUB_ENDPOINT and
HUB_TOKEN, falling back to HF_ENDPOINT and HF_TOKEN — or from what `hub login` saved in the config
directory (HUB_CONFIG_DIR, else $XDG_CONFIG_HOME/hub)."""
from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from storage.client.errors import UsageError
from storage.sizes import parse_size


def config_dir() -> Path:
    if os.environ.get("HUB_CONFIG_DIR"):
        return Path(os.environ["HUB_CONFIG_DIR"])
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "hub"


def _credentials_path() -> Path:
    return config_dir() / "credentials.json"


def load_credentials() -> dict:
    """{"endpoint": last endpoint logged in to, "tokens": {endpoint: token}}."""
    try:
        data = json.loads(_credentials_path().read_text())
    except (FileNotFoundError, ValueError):
        return {"endpoint": None, "tokens": {}}
    if not isinstance(data, dict) or not isinstance(data.get("tokens"), dict):
        return {"endpoint": None, "tokens": {}}
    return data


def save_credentials(data: dict) -> Path:
    """Writes the credentials file readable by its owner only (0600), atomically."""
    path = _credentials_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, stat.S_IRUSR | stat.S_IWUSR)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh, indent=1)
    os.replace(tmp, path)
    return path


def normalize_endpoint(url: str) -> str:
    url = url.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"not a hub URL: {url!r} (expected http(s)://host[:port])", code="BadEndpoint")
    return url


NOT_LOGGED_IN = "not logged in: set HUB_TOKEN or run `hub login`"
# Where a token came from (Settings.token_source), as messages name it.
_SOURCES = {"hub login": "the token `hub login` saved", "--token": "--token", "stdin": "stdin",
            "prompt": "the prompt", "argument": "the caller"}


@dataclass(frozen=True)
class Settings:
    endpoint: str
    token: str | None
    # where the token came from: "HUB_TOKEN", "HF_TOKEN", "hub login" (saved), "--token", "stdin" or
    # "prompt" (being given to `hub login`), "argument" (HubClient(token=...)), "" (none)
    token_source: str


def resolve_endpoint(endpoint: str | None = None, creds: dict | None = None) -> str:
    """The hub's URL, normalized: the argument, HUB_ENDPOINT, HF_ENDPOINT, the last `hub login`.
    The one place that decides it (UsageError NoEndpoint if nothing says)."""
    if creds is None and not endpoint:
        creds = load_credentials()
    ep = endpoint or os.environ.get("HUB_ENDPOINT") or os.environ.get("HF_ENDPOINT") or (creds or {}).get("endpoint")
    if not ep:
        raise UsageError("no hub endpoint: set HUB_ENDPOINT=https://your-hub (or run `hub login --endpoint URL`)",
                         code="NoEndpoint")
    return normalize_endpoint(ep)


def resolve_settings(endpoint: str | None = None, token: str | bool | None = None) -> Settings:
    """Endpoint: argument, HUB_ENDPOINT, HF_ENDPOINT, the last `hub login`. Token: argument (False
    means anonymous), HUB_TOKEN, HF_TOKEN, the token `hub login` saved for that endpoint."""
    creds = load_credentials()
    ep = resolve_endpoint(endpoint, creds)
    if token is False:
        return Settings(ep, None, "")
    if isinstance(token, str) and token:
        return Settings(ep, token, "argument")
    for var in ("HUB_TOKEN", "HF_TOKEN"):
        if os.environ.get(var):
            return Settings(ep, os.environ[var].strip(), var)
    saved = creds["tokens"].get(ep)
    return Settings(ep, saved, "hub login" if saved else "")


def user_size(text: str) -> int:
    """A size a person typed or set (--limit-rate, HUB_SEGMENT_SIZE, HUB_CACHE_SIZE), read by
    storage.sizes.parse_size; UsageError (code BadSize) if it is not one."""
    try:
        return parse_size(text)
    except ValueError as err:
        raise UsageError(str(err), code="BadSize") from None
