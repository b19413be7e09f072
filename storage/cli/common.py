"""What every `hub` command shares: the epilog, the client for --endpoint, how a repo spelled
on the command line is parsed, and the transfer options."""
from __future__ import annotations

import argparse

from storage.client import (
    MODEL,
    REPO_TYPES,
    HubClient,
    HubPath,
    UsageError,
    parse_hub_path,
)

EPILOG = ("Settings: HUB_ENDPOINT and HUB_TOKEN (or HF_ENDPOINT / HF_TOKEN), else what `hub login` saved. "
          "HUB_DEBUG=1 shows tracebacks; HUB_DISABLE_PROGRESS_BARS=1 hides progress bars.")


def _client(args: argparse.Namespace) -> HubClient:
    return HubClient(getattr(args, "endpoint", None))


def _repo(spec: str, repo_type: str | None) -> HubPath:
    """REPO[@REV][/PATH] with --type, or datasets/NS/NAME... spelled out."""
    hp = parse_hub_path(spec, repo_type or MODEL)
    if hp.kind == "volume":
        return hp
    if repo_type and hp.repo_type != repo_type and spec.split("://")[-1].startswith(("datasets/", "models/")):
        raise UsageError(f"{spec!r} names a {hp.repo_type} repo but --type says {repo_type}", code="BadType")
    return hp


def _no_volumes(hp: HubPath) -> None:
    if hp.kind == "volume":
        raise UsageError("volumes are not supported by this version of the hub client yet", code="NotSupported")


def _progress(args: argparse.Namespace) -> bool:
    from storage.transfer.progress import enabled

    return enabled(getattr(args, "quiet", False))


def _rate(args: argparse.Namespace) -> float | None:
    from storage.client.settings import user_size

    return float(user_size(args.limit_rate)) if getattr(args, "limit_rate", None) else None


def _transfer_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workers", type=int, default=8, help="parallel transfers (default 8)")
    p.add_argument("--limit-rate", metavar="RATE", help="cap the transfer rate, e.g. 50M (bytes/s)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def _type_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--type", choices=REPO_TYPES, default=None,
                   help="repo type when REPO is spelled NS/NAME (default: model)")
