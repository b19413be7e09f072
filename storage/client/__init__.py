"""The hub's client library: what the `hub` CLI, the `hub://` filesystem and the mount build on.

    errors    HubClientError and its kinds, and the errno each becomes in a filesystem
    retry     the retry policy (which failures are tried again, and how long to wait)
    settings  endpoint and token from the environment or from `hub login`
    hubpath   parsing `datasets/NS/NAME[@REV]/PATH`, `models/...`, `volume/...`
    http      HubClient: one endpoint, one token, a pool of connections
    console   the one top-level handler that turns errors into one line for a person

Imports no Django and nothing of the server (`hub`). The names below are the ones most callers need.
"""
from storage.client.errors import (
    RUN_AGAIN,
    AuthError,
    ConflictError,
    HubClientError,
    IntegrityError,
    NotFoundError,
    PermissionDeniedError,
    QuotaExceededError,
    TransportError,
    UsageError,
    errno_of,
    file_changed,
)
from storage.client.http import FileSpan, HubClient, api_prefix, body_chunks, file_prefix, origin
from storage.client.hubpath import DATASET, MODEL, REPO_TYPES, HubPath, parse_hub_path
from storage.client.retry import COMMIT_RETRY, COMPLETE_RETRY, NO_RETRY, RETRY, RETRYABLE_ERRORS, RetryPolicy
from storage.client.settings import (
    NOT_LOGGED_IN,
    Settings,
    config_dir,
    load_credentials,
    normalize_endpoint,
    resolve_endpoint,
    resolve_settings,
    save_credentials,
)

__all__ = [
    "errno_of", "file_changed", "RUN_AGAIN", "AuthError", "ConflictError", "HubClientError", "IntegrityError", "NotFoundError", "PermissionDeniedError",
    "QuotaExceededError", "TransportError", "UsageError", "FileSpan", "HubClient", "api_prefix", "body_chunks", "file_prefix", "origin",
    "DATASET", "MODEL", "REPO_TYPES", "HubPath", "parse_hub_path", "COMMIT_RETRY", "COMPLETE_RETRY", "NO_RETRY",
    "RETRY", "RETRYABLE_ERRORS", "RetryPolicy", "NOT_LOGGED_IN", "Settings", "config_dir", "load_credentials",
    "normalize_endpoint", "resolve_endpoint", "resolve_settings", "save_credentials",
]
