"""`hub pull` and `hub push`: whole repos between the hub and a local folder or cache."""
from __future__ import annotations

import argparse

from storage.cli.common import (
    EPILOG,
    _client,
    _no_volumes,
    _progress,
    _rate,
    _repo,
    _transfer_options,
    _type_option,
)
from storage.client import (
    UsageError,
)
from storage.client.console import say
from storage.sizes import format_size
from storage.transfer.progress import plural


def cmd_pull(args: argparse.Namespace) -> int:
    from storage.transfer.pull import pull

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
    from storage.transfer.push import push

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


def add_parsers(sub: argparse._SubParsersAction) -> None:
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
