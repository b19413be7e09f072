"""`hub ls` and `hub cp`: files of repos and of your volume, listed and copied in every direction
the hub allows (repos are written with `hub push`)."""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from storage.cli.common import (
    EPILOG,
    _client,
    _progress,
    _rate,
    _repo,
    _transfer_options,
    _type_option,
)
from storage.cli.volumes import _volume_isdir, _volume_path
from storage.client import (
    HubClient,
    HubPath,
    NotFoundError,
    UsageError,
)
from storage.client.console import say
from storage.sizes import format_size
from storage.transfer.progress import plural


def cmd_ls(args: argparse.Namespace) -> int:
    hp = _repo(args.path, args.type)
    client = _client(args)
    if hp.kind == "volume":
        return _ls_volume(client, hp.path, args)
    rev = hp.revision or "main"
    if not hp.revision:
        rev = client.resolve_commit(hp.repo_type, hp.repo_id)
    try:
        entries = list(client.list_tree(hp.repo_type, hp.repo_id, rev, hp.path, recursive=args.recursive))
    except NotFoundError as err:
        if err.code != "EntryNotFound" or not hp.path:
            raise
        entries = client.paths_info(hp.repo_type, hp.repo_id, rev, [hp.path])
        if not entries:
            raise NotFoundError(f"{hp.path!r} not found in {hp.repo_id} at {rev}", code="EntryNotFound") from None
    for e in entries:
        if e["type"] == "directory":
            print(f"{'-':>12}  {e['path']}/")
        else:
            size = format_size(e["size"]) if args.human else str(e["size"])
            print(f"{size:>12}  {e['path']}")
    return 0


def _print_entry(e: dict, human_sizes: bool) -> None:
    if e["type"] == "directory":
        print(f"{'-':>12}  {e['path']}/")
    else:
        size = format_size(e["size"]) if human_sizes else str(e["size"])
        print(f"{size:>12}  {e['path']}")


def _ls_volume(client: HubClient, path: str, args: argparse.Namespace) -> int:
    from storage.fs import volume

    entry = volume.stat(client, path)
    if entry["type"] == "file":
        _print_entry(entry, args.human)
        return 0
    for e in (volume.walk if args.recursive else volume.ls)(client, path):
        _print_entry(e, args.human)
    return 0


_EXPLICIT = ("datasets/", "models/", "volume/")


def _hub_side(spec: str, repo_type: str | None, *, source: bool) -> HubPath | None:
    """The hub path `spec` names, or None for a local path. hub://... always names the hub;
    datasets/..., models/... and volume/... do unless a local path of that name exists. A source
    may also be spelled NS/NAME[@REV][/PATH] (a repo of --type, model by default) when no local
    path of that name exists; a destination so spelled is a local path."""
    if spec.startswith("hub://"):
        return _repo(spec, repo_type)
    if os.path.exists(spec):
        return None
    if spec == "volume" or spec.startswith(_EXPLICIT):
        return _repo(spec, repo_type)
    if not source or spec.startswith(("/", ".", "~")) or "/" not in spec.strip("/"):
        return None
    try:
        return _repo(spec, repo_type)
    except UsageError:
        return None


STDIO = "-"  # as SRC, stdin (into a volume file); as DST, stdout (one file, written once verified)


def cmd_cp(args: argparse.Namespace) -> int:
    src = None if args.src == STDIO else _hub_side(args.src, args.type, source=True)
    dst = None if args.dst == STDIO else _hub_side(args.dst, args.type, source=False)
    if dst is not None and dst.kind == "repo":
        raise UsageError("copying into a repo is not supported: use `hub push DIR REPO` to commit files",
                         code="NotSupported")
    if args.src == STDIO:
        return _cp_from_stdin(args)
    if src is None:
        if dst is None:
            raise UsageError("one of SRC and DST must be a hub path (hub://datasets/..., hub://models/..., "
                             "hub://volume/...)", code="BadPath")
        return _cp_to_volume(args)
    client = _client(args)
    bare = not args.src.startswith(("hub://", *_EXPLICIT))
    try:
        if dst is not None:
            return _cp_within_hub(client, src, dst.path, args)
        if args.dst == STDIO:
            return _cp_to_stdout(client, src, args)
        if src.kind == "volume":
            return _cp_from_volume(client, src.path, args)
        return _cp_from_repo(client, src, args)
    except NotFoundError as err:
        if bare and src.kind == "repo":  # perhaps a local path was meant
            err.message += f" (and there is no local file or directory {args.src!r})"
        raise


def _cp_to_stdout(client: HubClient, src: HubPath, args: argparse.Namespace) -> int:
    """One file to stdout: fetched and verified into a temporary directory like any copy, then written out."""
    with tempfile.TemporaryDirectory(prefix="hub-cp-") as tmp:
        args.dst = f"{tmp}/"
        args.stdout = True
        code = _cp_from_volume(client, src.path, args) if src.kind == "volume" else _cp_from_repo(client, src, args)
        with open(Path(tmp) / Path(src.path).name, "rb") as fh:
            shutil.copyfileobj(fh, sys.stdout.buffer, 1 << 20)
        sys.stdout.flush()
    return code


def _no_directory_to_stdout(args: argparse.Namespace) -> None:
    if getattr(args, "stdout", False):
        raise UsageError(f"{args.src} is a directory: only a file can be copied to stdout (-)", code="IsADirectory")


def _cp_from_stdin(args: argparse.Namespace) -> int:
    """stdin to one volume file: spooled to a temporary file first (an upload needs its size and sha256)."""
    from storage.fs import volume
    from storage.transfer.engine import Stats
    from storage.transfer.progress import Progress

    dst = _volume_path(args.dst)
    client = _client(args)
    if not dst or args.dst.endswith("/") or _volume_isdir(client, dst):
        raise UsageError("stdin has no file name: give one, as in `hub cp - volume/DIR/NAME`", code="BadPath")
    stats = Stats()
    with tempfile.TemporaryDirectory(prefix="hub-cp-") as tmp:
        spool = Path(tmp) / "stdin"
        with open(spool, "wb") as fh:
            shutil.copyfileobj(sys.stdin.buffer, fh, 1 << 20)
        size = spool.stat().st_size
        with Progress(f"cp to volume/{dst}", show=_progress(args)) as progress:
            volume.upload(client, spool, dst, workers=args.workers, limit_rate=_rate(args), progress=progress,
                          stats=stats)
    say(f"copied stdin ({format_size(size)}) to volume/{dst}; uploaded {plural(stats.bytes_up, 'byte')}")
    return 0


def _manifest_items(client: HubClient, hp: HubPath) -> tuple[str, list[dict]]:
    """(commit, every manifest item under hp.path), all pages at the commit the first resolved."""
    pages = client.manifest(hp.repo_type, hp.repo_id, hp.revision, path=hp.path, limit=5000)
    first = next(pages)
    items = list(first["files"])
    for page in pages:
        items += page["files"]
    return first["commit"], items


def _cp_from_repo(client: HubClient, hp: HubPath, args: argparse.Namespace) -> int:
    from storage.transfer.pull import _safe_relpath, download_files

    commit, items = _manifest_items(client, hp)
    dst = Path(args.dst)
    single = len(items) == 1 and items[0]["path"] == hp.path and hp.path != ""
    if single:
        target = dst / Path(hp.path).name if (dst.is_dir() or args.dst.endswith("/")) else dst
        targets = {items[0]["path"]: target}
    else:
        _no_directory_to_stdout(args)
        if not args.recursive:
            raise UsageError(f"{args.src} is a directory: use -r to copy it", code="IsADirectory")
        if dst.exists() and not dst.is_dir():
            raise UsageError(f"{dst} exists and is not a directory", code="NotADirectory")
        base = f"{hp.path}/" if hp.path else ""
        targets = {i["path"]: dst / _safe_relpath(i["path"][len(base):]) for i in items}
    stats = download_files(client, hp.repo_type, hp.repo_id, commit, items, targets, workers=args.workers,
                           limit_rate=_rate(args), progress=_progress(args))
    say(f"copied {plural(len(items), 'file')} ({format_size(sum(i['size'] for i in items))}) from {hp.prefix} at "
        f"{commit[:12]}; fetched {plural(stats.bytes_down, 'byte')}")
    return 0


@dataclass
class _HubFiles:
    """What a hub source holds: its files as (path, size, sha256), directories that hold no file
    (copied too), whether it is a single file, and how to fetch some of its files' bytes."""

    origin: str
    base: str  # prefix of the paths below the source ('' for a root, unused for a single file)
    files: list[tuple[str, int, str | None]]
    empty_dirs: list[str]
    single: bool
    fetch: Callable


def _repo_files(client: HubClient, src: HubPath, args: argparse.Namespace) -> _HubFiles:
    from storage.transfer.pull import download_files

    commit, items = _manifest_items(client, src)
    by_path = {i["path"]: i for i in items}

    def fetch(batch, targets: dict[str, Path]):
        return download_files(client, src.repo_type, src.repo_id, commit, [by_path[s.key] for s in batch],
                              targets, workers=args.workers, limit_rate=_rate(args), progress=_progress(args))

    return _HubFiles(f"{src.prefix}/{src.path}".rstrip("/") + f" at {commit[:12]}",
                     f"{src.path}/" if src.path else "", [(i["path"], i["size"], i.get("sha256")) for i in items],
                     [], len(items) == 1 and items[0]["path"] == src.path and src.path != "", fetch)


def _volume_files(client: HubClient, src: HubPath, args: argparse.Namespace) -> _HubFiles:
    from storage.fs import volume

    entry = volume.stat(client, src.path)
    walked = [entry] if entry["type"] == "file" else list(volume.walk(client, src.path))
    by_path = {e["path"]: e for e in walked if e["type"] == "file"}
    holding = {p.rsplit("/", i)[0] for p in by_path for i in range(1, p.count("/") + 1)}

    def fetch(batch, targets: dict[str, Path]):
        return volume.download(client, [by_path[s.key] for s in batch], targets, workers=args.workers,
                               limit_rate=_rate(args), progress=_progress(args))

    return _HubFiles(f"volume/{src.path}".rstrip("/"), f"{src.path}/" if src.path else "",
                     [(e["path"], e["size"], e["etag"]) for e in by_path.values()],
                     [e["path"] for e in walked if e["type"] == "directory" and e["path"] not in holding],
                     entry["type"] == "file", fetch)


def _cp_within_hub(client: HubClient, src: HubPath, dst: str, args: argparse.Namespace) -> int:
    """A file or (-r) directory of a repo or of the volume to the volume: by hash where the hub
    allows it (no bytes move), else through temporary local copies."""
    from storage.fs import volume

    if src.kind == "volume" and (not src.path or dst == src.path or dst.startswith(f"{src.path}/")):
        raise UsageError(f"cannot copy {src.prefix}/{src.path} onto or into itself".replace("/ ", " "),
                         code="BadPath")
    into_dir = not dst or args.dst.endswith("/") or _volume_isdir(client, dst)
    found = (_volume_files if src.kind == "volume" else _repo_files)(client, src, args)
    if found.single:
        path, size, sha256 = found.files[0]
        target = f"{dst}/{path.rsplit('/', 1)[-1]}".lstrip("/") if into_dir else dst
        if src.kind == "volume" and target == src.path:
            raise UsageError(f"volume/{src.path} and volume/{target} are the same file", code="SameFile")
        sources = [volume.CopySource(path, target, size, sha256)]
    else:
        if not args.recursive:
            raise UsageError(f"{found.origin} is a directory: use -r to copy it", code="IsADirectory")
        if dst and not into_dir and _volume_exists(client, dst):
            raise UsageError(f"volume/{dst} exists and is not a directory", code="NotADirectory")
        n = len(found.base)
        sources = [volume.CopySource(p, f"{dst}/{p[n:]}".lstrip("/"), size, sha256) for p, size, sha256 in found.files]
        for d in [*found.empty_dirs, *([] if sources or not dst else [found.base])]:
            volume.mkdir(client, f"{dst}/{d[n:]}".strip("/"), parents=True)
    result = volume.copy_in(client, sources, found.fetch, workers=args.workers, limit_rate=_rate(args),
                            progress=_progress(args))
    say(f"copied {plural(result.files, 'file')} ({format_size(result.bytes)}) from {found.origin} to "
        f"volume/{sources[0].dst if found.single else dst}; {result.by_hash} by hash (no bytes moved for those), "
        f"fetched {plural(result.bytes_down, 'byte')}, uploaded {plural(result.bytes_up, 'byte')}")
    return 0


def _volume_exists(client: HubClient, path: str) -> bool:
    from storage.fs import volume

    try:
        volume.stat(client, path)
        return True
    except NotFoundError:
        return False


def _local_files(folder: Path) -> list[Path]:
    """Every file under `folder` for `cp -r`, links to files followed (the volume is the user's own,
    as with `cp -rL`). Links to directories are not followed, and named in a warning, as push does:
    a `data -> /mnt/disk/data` left out without a word would look copied."""
    from storage.transfer.push import warn_skipped

    files, linked = [], []
    for dirpath, dirnames, filenames in os.walk(folder):
        here = Path(dirpath)
        dirnames.sort()
        linked += [f"{(here / d).relative_to(folder).as_posix()} -> {os.readlink(here / d)}" for d in dirnames
                   if (here / d).is_symlink()]  # os.walk does not descend into them
        files += [here / f for f in sorted(filenames) if (here / f).is_file()]
    warn_skipped(linked, "link", "to a directory (cp -r does not follow them; copy the directory itself)")
    return files


def _cp_to_volume(args: argparse.Namespace) -> int:
    from storage.fs import volume
    from storage.transfer.engine import Stats
    from storage.transfer.progress import Progress

    src = Path(args.src)
    dst = _volume_path(args.dst)
    client = _client(args)
    if src.is_dir():
        if not args.recursive:
            raise UsageError(f"{src} is a directory: use -r to copy it", code="IsADirectory")
        pairs = [(p, f"{dst}/{p.relative_to(src).as_posix()}".lstrip("/")) for p in _local_files(src)]
    elif src.is_file():
        if not dst or args.dst.endswith("/") or _volume_isdir(client, dst):
            dst = f"{dst}/{src.name}".lstrip("/")
        pairs = [(src, dst)]
    else:
        raise UsageError(f"{src}: no such file or directory", code="NotFound")
    stats = Stats()
    with Progress(f"cp to volume/{dst}", show=_progress(args)) as progress:
        for local, path in pairs:
            volume.upload(client, local, path, workers=args.workers, limit_rate=_rate(args), progress=progress,
                          stats=stats)
    say(f"copied {plural(len(pairs), 'file')} ({format_size(sum(p.stat().st_size for p, _ in pairs))}) to "
        f"volume/{dst}; uploaded {plural(stats.bytes_up, 'byte')}")
    return 0


def _cp_from_volume(client: HubClient, path: str, args: argparse.Namespace) -> int:
    from storage.fs import volume
    from storage.transfer.pull import _safe_relpath

    entry = volume.stat(client, path)
    dst = Path(args.dst)
    if entry["type"] == "file":
        entries = [entry]
        target = dst / Path(path).name if (dst.is_dir() or args.dst.endswith("/")) else dst
        targets = {path: target}
    else:
        _no_directory_to_stdout(args)
        if not args.recursive:
            raise UsageError(f"volume/{path} is a directory: use -r to copy it", code="IsADirectory")
        if dst.exists() and not dst.is_dir():
            raise UsageError(f"{dst} exists and is not a directory", code="NotADirectory")
        entries = [e for e in volume.walk(client, path) if e["type"] == "file"]
        base = f"{path}/" if path else ""
        targets = {e["path"]: dst / _safe_relpath(e["path"][len(base):]) for e in entries}
        dst.mkdir(parents=True, exist_ok=True)
    stats = volume.download(client, entries, targets, workers=args.workers, limit_rate=_rate(args),
                            progress=_progress(args))
    say(f"copied {plural(len(entries), 'file')} ({format_size(sum(e['size'] for e in entries))}) from "
        f"volume/{path}; fetched {plural(stats.bytes_down, 'byte')}")
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ls", help="list files of a repo or of your volume", epilog=EPILOG, description=(
        "Lists REPO[@REV][/PATH] or volume[/PATH]: one line per entry, size in bytes (or - for directories) "
        "and path."))
    p.add_argument("path", metavar="REPO[@REV][/PATH] | volume[/PATH]")
    _type_option(p)
    p.add_argument("-R", "--recursive", action="store_true", help="list everything below")
    p.add_argument("--human", action="store_true", help="sizes in kB/MB/GB (decimal, as `hub quota`)")
    p.set_defaults(func=cmd_ls)

    p = sub.add_parser("cp", help="copy files from a repo, to and from your volume", epilog=EPILOG, description=(
        "Copies a file or (with -r) a directory from a repo or your volume to a local path, verified by "
        "sha256; from a local path to your volume (large files in resumable parallel parts); or from a "
        "repo or your volume to your volume, by hash where the hub already holds the bytes (nothing is "
        "downloaded or uploaded then). Repos are written with `hub push`. Hub paths: "
        "hub://datasets/NS/NAME[@REV]/PATH, hub://models/..., hub://volume/PATH (hub:// optional; a "
        "source may also be NS/NAME[@REV]/PATH, a repo of --type)."))
    p.add_argument("src", metavar="SRC", help="a hub path, a local path, or - for stdin (into a volume file)")
    p.add_argument("dst", metavar="DST", help="a volume path, a local path, or - for stdout (one file)")
    _type_option(p)
    p.add_argument("-r", "--recursive", action="store_true", help="copy directories")
    _transfer_options(p)
    p.set_defaults(func=cmd_cp)
