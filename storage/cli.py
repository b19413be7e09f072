"""The `hub` command: thin subcommands over storage.client, .pull, .push and .transfer.

Data goes to stdout (paths, listings, URLs); progress, summaries and errors go to stderr. A known
failure is one line, `error: ...`, and exit status 1; a usage error exits 2; Ctrl-C 130. Set
HUB_DEBUG=1 for a traceback. Imports no Django.
"""
from __future__ import annotations

import argparse
import errno
import getpass
import os
import shutil
import sys
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from storage.client import (
    MODEL,
    REPO_TYPES,
    HubClient,
    HubClientError,
    HubPath,
    NotFoundError,
    Settings,
    UsageError,
    load_credentials,
    normalize_endpoint,
    parse_hub_path,
    resolve_settings,
    save_credentials,
)
from storage.progress import format_size, plural

EPILOG = ("Settings: HUB_ENDPOINT and HUB_TOKEN (or HF_ENDPOINT / HF_TOKEN), else what `hub login` saved. "
          "HUB_DEBUG=1 shows tracebacks; HUB_DISABLE_PROGRESS_BARS=1 hides progress bars.")


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


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
    from storage.progress import enabled

    return enabled(getattr(args, "quiet", False))


def _rate(args: argparse.Namespace) -> float | None:
    from storage.transfer import parse_size

    return float(parse_size(args.limit_rate)) if getattr(args, "limit_rate", None) else None


# --- account ----------------------------------------------------------------------------------------

def cmd_login(args: argparse.Namespace) -> int:
    endpoint = normalize_endpoint(args.endpoint) if args.endpoint else resolve_settings(token=False).endpoint
    token, source = args.token, "--token"
    if not token:
        source = "prompt" if sys.stdin.isatty() else "stdin"
        token = (getpass.getpass("token: ") if source == "prompt" else sys.stdin.readline()).strip()
    if not token:
        raise UsageError("no token given: pass --token, or type or pipe it in", code="NoToken")
    me = HubClient(settings=Settings(endpoint, token, source)).whoami()
    creds = load_credentials()
    creds["tokens"][endpoint] = token
    creds["endpoint"] = endpoint
    path = save_credentials(creds)
    say(f"logged in to {endpoint} as {me['name']} (token saved in {path})")
    for var in ("HUB_TOKEN", "HF_TOKEN"):
        if os.environ.get(var):
            say(f"note: {var} is set and takes precedence over the saved token")
            break
    return 0


def cmd_logout(args: argparse.Namespace) -> int:
    endpoint = normalize_endpoint(args.endpoint) if args.endpoint else resolve_settings(token=False).endpoint
    creds = load_credentials()
    if creds["tokens"].pop(endpoint, None) is None:
        say(f"not logged in to {endpoint}")
        return 0
    save_credentials(creds)
    say(f"logged out of {endpoint}")
    return 0


def cmd_whoami(args: argparse.Namespace) -> int:
    client = _client(args)
    me = client.whoami()
    print(me["name"])
    orgs = [o["name"] for o in me.get("orgs") or []]
    if orgs:
        print(f"orgs: {', '.join(orgs)}")
    say(f"endpoint: {client.endpoint} (token from {client.settings.token_source})")
    return 0


def cmd_quota(args: argparse.Namespace) -> int:
    q = _client(args).quota(args.namespace)
    limit, used, reserved = q["limit"], q["used"], q["reserved"]
    frac = (used + reserved) / limit if limit else 1.0
    width = 40
    filled = min(width, round(frac * width))
    print(f"{q['namespace']}: {format_size(used)} used of {format_size(limit)}, {format_size(reserved)} reserved "
          f"by uploads in progress, {format_size(q['available'])} available")
    print(f"[{'#' * filled}{'.' * (width - filled)}] {frac:6.1%}")
    for c in q.get("largest_consumers") or []:
        print(f"  {format_size(c['bytes']):>10}  {c['kind']} {c['id']}")
    return 0


# --- repos ------------------------------------------------------------------------------------------

def cmd_pull(args: argparse.Namespace) -> int:
    from storage.pull import pull

    hp = _repo(args.repo, args.type)
    _no_volumes(hp)
    if hp.path:
        raise UsageError(f"pull takes a repo, not a path inside one ({hp.path!r}): use --include, or `hub cp`",
                         code="BadRepoId")
    result = pull(_client(args), hp.repo_type, hp.repo_id, revision=args.revision or hp.revision,
                  include=args.include or (), exclude=args.exclude or (), local_dir=args.local_dir,
                  cache_dir=args.cache_dir, workers=args.workers, limit_rate=_rate(args), progress=_progress(args))
    s = result.stats
    say(f"pulled {hp.prefix.split('@')[0]} at {result.commit[:12]} ({result.revision}): "
        f"{plural(result.files, 'file')}, {format_size(result.bytes)}; fetched {plural(s.bytes_down, 'byte')} "
        f"({format_size(s.bytes_down)}) for {plural(s.files_down, 'file')}, {s.files_present} already present")
    print(result.path)
    return 0


def cmd_push(args: argparse.Namespace) -> int:
    from storage.push import push

    hp = _repo(args.repo, args.type)
    _no_volumes(hp)
    if hp.path or hp.revision:
        raise UsageError("push takes a repo id (namespace/name); give the branch with --revision", code="BadRepoId")
    result = push(_client(args), args.dir, hp.repo_type, hp.repo_id, revision=args.revision, message=args.message,
                  private=args.private, workers=args.workers, limit_rate=_rate(args), progress=_progress(args))
    s = result.stats
    if result.created_repo:
        say(f"created {'private ' if args.private else ''}{hp.repo_type} {hp.repo_id}")
    if result.commit is None:
        say(f"nothing to commit: {hp.repo_id}@{args.revision or 'main'} already has "
            f"{'this file' if result.files == 1 else f'these {result.files} files'}")
        return 0
    say(f"pushed {result.changed} of {plural(result.files, 'file')} to {hp.repo_id}@{args.revision or 'main'}; "
        f"uploaded {plural(s.bytes_up, 'byte')} ({format_size(s.bytes_up)})")
    print(result.commit_url)
    return 0


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
    from storage import volume

    entry = volume.stat(client, path)
    if entry["type"] == "file":
        _print_entry(entry, args.human)
        return 0
    for e in (volume.walk if args.recursive else volume.ls)(client, path):
        _print_entry(e, args.human)
    return 0


def _volume_path(spec: str) -> str:
    hp = parse_hub_path(spec)
    if hp.kind != "volume":
        raise UsageError(f"{spec!r} is not a volume path (volume/PATH)", code="BadPath")
    return hp.path


def cmd_rm(args: argparse.Namespace) -> int:
    from storage import volume

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
    from storage import volume

    client = _client(args)
    src, dst = _volume_path(args.src), _volume_path(args.dst)
    if args.dst.endswith("/") or _volume_isdir(client, dst):
        dst = f"{dst}/{src.rsplit('/', 1)[-1]}" if dst else src.rsplit("/", 1)[-1]
    volume.move(client, src, dst, overwrite=args.force)
    say(f"moved volume/{src} to volume/{dst}")
    return 0


def cmd_mkdir(args: argparse.Namespace) -> int:
    from storage import volume

    client = _client(args)
    for spec in args.paths:
        path = _volume_path(spec)
        volume.mkdir(client, path, parents=args.parents)
    return 0


def _volume_isdir(client: HubClient, path: str) -> bool:
    from storage import volume

    try:
        return volume.stat(client, path)["type"] == "directory"
    except NotFoundError:
        return False


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
    from storage import volume
    from storage.progress import Progress
    from storage.transfer import Stats

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
    from storage.pull import _safe_relpath, download_files

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
    from storage.pull import download_files

    commit, items = _manifest_items(client, src)
    by_path = {i["path"]: i for i in items}

    def fetch(batch, targets: dict[str, Path]):
        return download_files(client, src.repo_type, src.repo_id, commit, [by_path[s.key] for s in batch],
                              targets, workers=args.workers, limit_rate=_rate(args), progress=_progress(args))

    return _HubFiles(f"{src.prefix}/{src.path}".rstrip("/") + f" at {commit[:12]}",
                     f"{src.path}/" if src.path else "", [(i["path"], i["size"], i.get("sha256")) for i in items],
                     [], len(items) == 1 and items[0]["path"] == src.path and src.path != "", fetch)


def _volume_files(client: HubClient, src: HubPath, args: argparse.Namespace) -> _HubFiles:
    from storage import volume

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
    from storage import volume

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
    from storage import volume

    try:
        volume.stat(client, path)
        return True
    except NotFoundError:
        return False


def _local_files(folder: Path) -> list[Path]:
    """Every file under `folder` for `cp -r`, links to files followed (the volume is the user's own,
    as with `cp -rL`). Links to directories are not followed, and named in a warning, as push does:
    a `data -> /mnt/disk/data` left out without a word would look copied."""
    from storage.push import warn_skipped

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
    from storage import volume
    from storage.progress import Progress
    from storage.transfer import Stats

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
    from storage import volume
    from storage.pull import _safe_relpath

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


# --- parser -----------------------------------------------------------------------------------------

def _transfer_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workers", type=int, default=8, help="parallel transfers (default 8)")
    p.add_argument("--limit-rate", metavar="RATE", help="cap the transfer rate, e.g. 50M (bytes/s)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def _type_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--type", choices=REPO_TYPES, default=None,
                   help="repo type when REPO is spelled NS/NAME (default: model)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hub", description="Datasets, models and volumes of the hub.",
                                     epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"hub {_version()}")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND")

    p = sub.add_parser("login", help="save a token for the hub", description="Checks a token against the hub "
                       "and saves it (readable by you only) for HUB_ENDPOINT or --endpoint.", epilog=EPILOG)
    p.add_argument("--token", help="the token (else typed at a prompt, or read from stdin)")
    p.add_argument("--endpoint", help="the hub's URL (default: HUB_ENDPOINT / HF_ENDPOINT / last login)")
    p.set_defaults(func=cmd_login)

    p = sub.add_parser("logout", help="forget the saved token", description="Forgets the token saved for the "
                       "endpoint.", epilog=EPILOG)
    p.add_argument("--endpoint", help="the hub's URL (default: HUB_ENDPOINT / HF_ENDPOINT / last login)")
    p.set_defaults(func=cmd_logout)

    p = sub.add_parser("whoami", help="show who the token belongs to", description="Prints the user the token "
                       "belongs to, and their organisations.", epilog=EPILOG)
    p.set_defaults(func=cmd_whoami)

    p = sub.add_parser("quota", help="storage used, reserved and allowed", description="Shows the account's "
                       "storage: used, reserved by uploads in progress, limit, and the largest consumers.",
                       epilog=EPILOG)
    p.add_argument("--namespace", help="an organisation you belong to (default: your account)")
    p.set_defaults(func=cmd_quota)

    p = sub.add_parser("pull", help="download a repo snapshot", epilog=EPILOG, description=(
        "Downloads a repo snapshot in parallel, verifying every file's sha256. Without --local-dir it fills "
        "the huggingface_hub cache (HF_HUB_CACHE), so huggingface_hub and transformers can load it with "
        "local_files_only=True. An interrupted pull continues from the bytes already on disk. Prints the "
        "snapshot's path."))
    p.add_argument("repo", metavar="REPO", help="NS/NAME, or datasets/NS/NAME / models/NS/NAME")
    _type_option(p)
    p.add_argument("--revision", help="branch, tag or commit (default: the default branch)")
    p.add_argument("--include", action="append", metavar="GLOB", help="only paths matching (repeatable)")
    p.add_argument("--exclude", action="append", metavar="GLOB", help="skip paths matching (repeatable)")
    p.add_argument("--local-dir", metavar="DIR", help="write the files into DIR instead of the cache")
    p.add_argument("--cache-dir", metavar="DIR", help="cache root (default: HF_HUB_CACHE)")
    _transfer_options(p)
    p.set_defaults(func=cmd_pull)

    p = sub.add_parser("push", help="commit a folder to a repo", epilog=EPILOG, description=(
        "Commits the files of DIR to REPO in one commit, creating the repo (and branch) if needed. Large files "
        "go in resumable multipart uploads: run the same command again after an interruption. Prints the "
        "commit's URL."))
    p.add_argument("dir", metavar="DIR")
    p.add_argument("repo", metavar="REPO", help="NS/NAME, or datasets/NS/NAME / models/NS/NAME")
    _type_option(p)
    p.add_argument("--revision", metavar="BRANCH", help="branch to commit to (default: main)")
    p.add_argument("-m", "--message", help="commit title")
    p.add_argument("--private", action="store_true", help="create the repo private")
    _transfer_options(p)
    p.set_defaults(func=cmd_push)

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

    from storage.mount import add_parsers  # `hub mount` / `hub umount` (libfuse loads only when mounting)

    add_parsers(sub)
    return parser


def _version() -> str:
    from storage.client import _version as v

    return v()


def main(argv: list[str] | None = None) -> int:
    return dispatch(build_parser(), argv)


def dispatch(parser: argparse.ArgumentParser, argv: list[str] | None = None, *,
             interrupted: str | None = "interrupted: run the same command again to continue") -> int:
    """Runs the chosen subcommand under the conventions of every `hub` command: one `error: ...`
    line on stderr, status 1 (2 for usage errors, 130 for Ctrl-C), HUB_DEBUG=1 for a traceback."""
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    debug = os.environ.get("HUB_DEBUG", "") not in ("", "0")
    try:
        return args.func(args)
    except UsageError as err:
        if debug:
            traceback.print_exc()
        say(f"error: {err.message}")
        return 2
    except HubClientError as err:
        if debug:
            traceback.print_exc()
        say(f"error: {err.message}")
        return 1
    except KeyboardInterrupt:
        if interrupted:
            say(interrupted)
        return 130
    except BrokenPipeError:
        return 1
    except Exception as err:  # noqa: BLE001 - the one top-level handler
        if debug:
            traceback.print_exc()
        if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
            where = f" (writing {err.filename})" if err.filename else ""
            say(f"error: no space left on the disk{where}: free some space (or write elsewhere), then run the "
                "same command again; it continues from what is already on disk")
        else:
            say(f"error: {type(err).__name__}: {err} (set HUB_DEBUG=1 for a traceback)")
        return 1


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
