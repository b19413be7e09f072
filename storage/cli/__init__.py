"""The `hub` command line: thin command groups over the client library, one module per group.

    auth     login, logout, whoami, quota
    repos    pull, push
    files    ls, cp (repos and your volume)
    volumes  rm, mv, mkdir (your volume)
    storage.mount.commands  mount, umount

Every command runs under storage.client.console.dispatch: one `error: ...` line for a person.
"""
from __future__ import annotations

import argparse
import sys

from storage.cli import auth, files, repos, volumes
from storage.cli.common import EPILOG
from storage.client.console import dispatch


def _version() -> str:
    from storage.client.http import _version as v

    return v()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hub", description="Datasets, models and volumes of the hub.",
                                     epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"hub {_version()}")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND")
    for group in (auth, repos, files, volumes):
        group.add_parsers(sub)

    from storage.mount import add_parsers  # `hub mount` / `hub umount` (libfuse loads only when mounting)

    add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    return dispatch(build_parser(), argv)


def run() -> None:
    sys.exit(main())
