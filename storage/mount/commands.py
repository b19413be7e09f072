"""`hub mount` and `hub umount`: argparse subcommands (add_parsers) and what they run.

Without --foreground, `hub mount` checks what it can in this process (the token, the repo, the
revision — resolved here, once, to the commit the mount is pinned to), starts a detached mount
process, waits until the kernel has the mount (or the process says why it could not), and returns.
With --foreground the mount process is this one, for systemd and other service managers.
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from storage.client import MODEL, REPO_TYPES, HubClientError, HubPath, UsageError, parse_hub_path
from storage.client.console import dispatch, say

# (The mount machinery, the blob cache and its lock library are imported by the commands that use them:
# `hub` adds these parsers on every command, and the others need none of it.)

EPILOG = ("Settings: HUB_ENDPOINT and HUB_TOKEN (with --auto: HUB_INSTANCE_TOKEN and HUB_MOUNT_ROOT, default "
          "/mnt/hub); HUB_CACHE_DIR (default ~/.cache/hub) and HUB_CACHE_SIZE for the local cache of file bytes "
          "that every mount and `hub pull` share. HUB_DEBUG=1 shows tracebacks.")
READY_TIMEOUT = 120.0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Adds `mount` and `umount` to the `hub` command's subparsers."""
    p = sub.add_parser("mount", help="mount a repo (read-only) or your volume (read-write) with FUSE", epilog=EPILOG,
                       description=(
                           "Mounts REPO[@REV] read-only at PATH, pinned to the commit the revision names now; "
                           "`volume` mounts your volume read-write (a file's new bytes upload when it is closed, "
                           "and appear atomically); --auto mounts what this instance's spec lists under "
                           "HUB_MOUNT_ROOT and sends heartbeats. Bytes are fetched as they are read and kept in a "
                           "local cache shared by all mounts. Returns once the mount is ready, leaving a "
                           "process behind (--foreground: stays attached)."))
    p.add_argument("what", nargs="?", metavar="REPO|volume",
                   help="NS/NAME[@REV] (a model unless --type), datasets/NS/NAME[@REV], models/..., or volume")
    p.add_argument("path", nargs="?", metavar="PATH", help="the mount point (created if missing)")
    p.add_argument("--auto", action="store_true", help="mount this instance's spec (HUB_INSTANCE_TOKEN)")
    p.add_argument("--type", choices=REPO_TYPES, help="the kind of repo NS/NAME is (default: model)")
    p.add_argument("--revision", help="branch, tag or commit (default: the default branch; or REPO@REV)")
    p.add_argument("--root", metavar="DIR", help="with --auto: where to mount (default: HUB_MOUNT_ROOT or /mnt/hub)")
    p.add_argument("-f", "--foreground", action="store_true", help="stay attached (for systemd); Ctrl-C unmounts")
    p.add_argument("--log-file", metavar="FILE", help="log here (default: stderr with --foreground, else a file "
                                                      "under HUB_CACHE_DIR/logs)")
    p.add_argument("--allow-other", action=argparse.BooleanOptionalAction, default=None,
                   help="let other users see the mount (default: yes when run as root)")
    p.add_argument("--no-prefetch", action="store_true", help="do not fetch a listed directory's small files early")
    p.add_argument("--timeout", type=float, default=READY_TIMEOUT, help="seconds to wait for the mount to be ready")
    p.add_argument("-v", "--verbose", action="store_true", help="log more")
    p.add_argument("--ready-fd", type=int, help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_mount)

    p = sub.add_parser("umount", help="unmount what `hub mount` mounted", epilog=EPILOG, description=(
        "Unmounts PATH and waits for its mount process to end (a file open for writing is uploaded when it is "
        "closed, not on unmount). A busy mount is detached lazily and disappears when its last file is closed. "
        "--auto stops `hub mount --auto` and unmounts everything under HUB_MOUNT_ROOT."))
    p.add_argument("path", nargs="?", metavar="PATH")
    p.add_argument("--auto", action="store_true", help="everything `hub mount --auto` mounted")
    p.add_argument("--root", metavar="DIR", help="with --auto: default HUB_MOUNT_ROOT or /mnt/hub")
    p.add_argument("-z", "--lazy", action="store_true", help="detach even when busy")
    p.set_defaults(func=cmd_umount)



def _target(args: argparse.Namespace) -> HubPath:
    if not args.what or not args.path:
        raise UsageError("usage: hub mount REPO PATH, hub mount volume PATH, or hub mount --auto", code="Usage")
    hp = parse_hub_path(args.what, args.type or MODEL)
    if hp.path:
        raise UsageError(f"mount a whole {'volume' if hp.kind == 'volume' else 'repo'}, not a path inside it "
                         f"({hp.path!r})", code="BadPath")
    if hp.kind == "volume" and args.revision:
        raise UsageError("a volume has no revisions", code="Usage")
    return hp


def cmd_mount(args: argparse.Namespace) -> int:
    if args.auto:
        from storage.mount.agent import cmd_auto

        if args.what or args.path:
            raise UsageError("hub mount --auto takes no REPO or PATH (the instance's spec says what goes where)",
                             code="Usage")
        return cmd_auto(args)
    hp = _target(args)
    from storage.mount import system
    from storage.mount.process import default_log, spawn

    system.check_fuse()
    from storage.mount.common import MountClient

    client = MountClient()
    if hp.kind == "volume":
        from storage.fs import volume

        volume.stat(client, "")  # the token may use the volume: fail here, not in the background
        what = "volume"
    else:
        commit = client.resolve_commit(hp.repo_type, hp.repo_id, args.revision or hp.revision)
        what = f"{hp.repo_type}s/{hp.repo_id}@{commit}"
        notice = next(client.manifest(hp.repo_type, hp.repo_id, commit, limit=1)).get("notice")
        if notice:  # (it mounts all the same: the files appear once mirrored and mounted again)
            say(f"warning: {notice}")
    mountpoint = system.prepare_mountpoint(args.path)
    if args.foreground:
        return serve(what, mountpoint, client=client, log_file=args.log_file, ready_fd=args.ready_fd,
                     allow_other=args.allow_other, prefetch=not args.no_prefetch, verbose=args.verbose)
    log_file = args.log_file or default_log(mountpoint)
    extra = [*(["--no-prefetch"] if args.no_prefetch else []), *(["-v"] if args.verbose else []),
             *([] if args.allow_other is None else ["--allow-other" if args.allow_other else "--no-allow-other"])]
    spawn(["mount", what, mountpoint, *extra], log_file=log_file, timeout=args.timeout)
    pinned = f" at {what.rsplit('@', 1)[1][:12]}" if "@" in what else ""
    say(f"mounted {hp.prefix.split('@')[0]}{pinned} on {mountpoint} (log: {log_file})")
    return 0


def cmd_umount(args: argparse.Namespace) -> int:
    from storage.mount import system
    from storage.mount.process import mount_root

    if args.auto:
        from storage.mount.agent import umount_auto

        return umount_auto(mount_root(args), lazy=args.lazy)
    if not args.path:
        raise UsageError("usage: hub umount PATH, or hub umount --auto", code="Usage")
    path = os.path.abspath(args.path)
    if not system.is_mounted(path):
        raise HubClientError(f"{path} is not mounted", code="NotMounted")
    note = system.unmount(path, lazy=args.lazy)
    say(note or f"unmounted {path}")
    return 0


# --- the mount process ------------------------------------------------------------------------------

def serve(what: str, mountpoint: str, *, client=None, log_file: str | None = None, ready_fd: int | None = None,
          allow_other: bool | None = None, prefetch: bool = True, verbose: bool = False) -> int:
    """Mounts `what` (`volume`, or TYPEs/NS/NAME@COMMIT) at `mountpoint` and serves it until it is
    unmounted (or this process gets SIGTERM/SIGINT). Returns the exit status."""
    import logging

    from storage.mount import system
    from storage.mount.common import MountClient, configure_logging
    from storage.mount.process import Ready
    from storage.transfer.blobcache import BlobCache, cache_dir, cache_limit

    configure_logging(log_file, verbose)
    log = logging.getLogger("hub.mount")
    ready = Ready(ready_fd)
    try:
        try:
            from storage.mount.listing import HubFUSE  # (loads libfuse)
        except (ImportError, OSError) as err:
            raise UsageError(f"cannot load libfuse3 ({err}): install it (apt-get install fuse3) and mfusepy",
                             code="NoFuse") from None
        _raise_open_files_limit()  # every open file, cached blob and part file holds a descriptor
        client = client or MountClient()
        root = cache_dir()
        cache = BlobCache(root, cache_limit(root))
        from storage.mount.fetch import Fetcher

        fetcher = Fetcher(client, cache)
        hp = parse_hub_path(what)
        readahead = False

        def on_ready() -> None:
            if readahead:  # before anyone can open a file: an open file keeps the window it opened with
                _raise_readahead(mountpoint)
            log.info("mounted %s on %s (cache %s, up to %.1f GiB)", what, mountpoint, cache.root, cache.limit / 2**30)
            ready.ok()

        if hp.kind == "volume":
            from storage.mount.volumefs import VolumeOps

            ops = VolumeOps(client, fetcher, cache.root / "spool", on_ready=on_ready)
            fsname = "hub:volume"
        else:
            from storage.mount.repofs import RepoOps, RepoTree

            commit = hp.revision
            info = client.repo_info(hp.repo_type, hp.repo_id, commit)
            if info.get("sha") != commit:
                raise HubClientError(f"{hp.repo_id} has no commit {commit}", code="RevisionNotFound")
            tree = RepoTree(client, hp.repo_type, hp.repo_id, commit)
            tree.load()
            ops = RepoOps(tree, fetcher, mtime=_timestamp(info.get("lastModified")), prefetch=prefetch,
                          on_ready=on_ready)
            fsname = f"hub:{hp.repo_type}s/{hp.repo_id}@{commit[:12]}"
            readahead = True
        system.write_pidfile(mountpoint, what=what)
        if allow_other is None:
            allow_other = os.geteuid() == 0
        options = {"fsname": fsname, "subtype": "hub"}
        if allow_other:
            options["allow_other"] = True
        log.info("mounting %s on %s", what, mountpoint)
        try:
            HubFUSE(ops, mountpoint, foreground=True, raw_fi=True, **options)
        except RuntimeError as err:
            raise HubClientError(f"could not mount on {mountpoint} (libfuse status {err}); see "
                                 f"{log_file or 'the messages above'}", code="MountFailed") from None
        finally:
            system.remove_pidfile(mountpoint)
        return 0
    except HubClientError as err:
        log.error("cannot mount %s on %s: %s", what, mountpoint, err.message)
        ready.error(err.message)
        raise
    except BaseException as err:
        ready.error(f"{type(err).__name__}: {err}")
        raise


def _raise_open_files_limit() -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            pass


def _timestamp(text: str | None) -> float:
    from datetime import datetime

    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return time.time()


def _raise_readahead(mountpoint: str) -> None:
    """Lets the kernel read ahead READAHEAD (not 128 KiB) on a repo mount, in requests of up to 1 MiB:
    fewer, larger reads into Python. Called while libfuse initialises, before the mount is reported
    ready: the kernel copies a mount's read-ahead into each file's state when the file is opened, so
    a reader that opened a file before the raise kept 128 KiB (about half of the cold reads in the
    benchmark did: 8,205 requests instead of 1,047, 3.2-3.9 s instead of ~2.5). The mount table
    names the device without a request to this filesystem. Needs root; harmless to skip."""
    from storage.mount import system
    from storage.mount.common import READAHEAD

    dev = system.device_of(mountpoint)
    if dev:
        try:
            Path(f"/sys/class/bdi/{dev}/read_ahead_kb").write_text(str(READAHEAD >> 10))
        except OSError:
            pass


# --- `python -m storage.mount` ------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hub", description="Mount repos and your volume of the hub.")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND")
    add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The same conventions as `hub` (storage.client.console.dispatch); Ctrl-C on a foreground mount just ends it."""
    return dispatch(build_parser(), argv, interrupted=None)
