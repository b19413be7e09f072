"""`hub rm`, `hub mv`, `hub mkdir`: your volume's files and directories."""
from __future__ import annotations

import argparse

from storage.cli.common import (
    EPILOG,
    _client,
)
from storage.client import (
    HubClient,
    NotFoundError,
    UsageError,
    parse_hub_path,
)
from storage.client.console import say


def _volume_path(spec: str) -> str:
    hp = parse_hub_path(spec)
    if hp.kind != "volume":
        raise UsageError(f"{spec!r} is not a volume path (volume/PATH)", code="BadPath")
    return hp.path


def cmd_rm(args: argparse.Namespace) -> int:
    from storage.fs import volume

    client = _client(args)
    for spec in args.paths:
        path = _volume_path(spec)
        if not path:
            raise UsageError("refusing to remove the root of the volume", code="BadPath")
        if not args.recursive and volume.stat(client, path)["type"] == "directory":
            raise UsageError(f"volume/{path} is a directory: use -r to remove it", code="IsADirectory")
        volume.delete(client, path, recursive=args.recursive)
        say(f"removed volume/{path}")
    return 0


def cmd_mv(args: argparse.Namespace) -> int:
    from storage.fs import volume

    client = _client(args)
    src, dst = _volume_path(args.src), _volume_path(args.dst)
    if args.dst.endswith("/") or _volume_isdir(client, dst):
        dst = f"{dst}/{src.rsplit('/', 1)[-1]}" if dst else src.rsplit("/", 1)[-1]
    volume.move(client, src, dst, overwrite=args.force)
    say(f"moved volume/{src} to volume/{dst}")
    return 0


def cmd_mkdir(args: argparse.Namespace) -> int:
    from storage.fs import volume

    client = _client(args)
    for spec in args.paths:
        path = _volume_path(spec)
        volume.mkdir(client, path, parents=args.parents)
    return 0


def _volume_isdir(client: HubClient, path: str) -> bool:
    from storage.fs import volume

    try:
        return volume.stat(client, path)["type"] == "directory"
    except NotFoundError:
        return False


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rm", help="remove files of your volume", epilog=EPILOG,
                       description="Removes volume/PATH (a directory only with -r).")
    p.add_argument("paths", metavar="volume/PATH", nargs="+")
    p.add_argument("-r", "--recursive", action="store_true", help="remove directories and their contents")
    p.set_defaults(func=cmd_rm)

    p = sub.add_parser("mv", help="rename or move within your volume", epilog=EPILOG, description=(
        "Renames volume/SRC to volume/DST (metadata only, whatever the size); into DST if it is a directory."))
    p.add_argument("src", metavar="volume/SRC")
    p.add_argument("dst", metavar="volume/DST")
    p.add_argument("-f", "--force", action="store_true", help="replace an existing file at DST")
    p.set_defaults(func=cmd_mv)

    p = sub.add_parser("mkdir", help="create a directory in your volume", epilog=EPILOG,
                       description="Creates volume/PATH.")
    p.add_argument("paths", metavar="volume/PATH", nargs="+")
    p.add_argument("-p", "--parents", action="store_true", help="create parents; fine if it exists")
    p.set_defaults(func=cmd_mkdir)

