"""The mount agent: repos (read-only, pinned to a commit) and the caller's volume (read-write) as FUSE
filesystems, over the hub's HTTP API, with a local cache of file bytes shared by every mount and by
`hub pull` (storage.transfer.blobcache). Imports no Django; libfuse is loaded only when something is mounted.

    hub mount alice/model@v1 /mnt/model        hub mount volume /mnt/vol        hub mount --auto
    hub umount /mnt/model                      hub umount --auto

Modules: commands (the `mount`/`umount` subcommands: add_parsers), agent (--auto), process
(starting a detached mount process and hearing back from it), repofs and volumefs (the FUSE
operations), fetch and blocks (bytes into the cache), system (mount table, fusermount3), common
(the retry policy, errno values, logging).
"""
from __future__ import annotations

import os

# mfusepy loads libfuse 2 when both are installed; the mounts are written for libfuse 3. (Set here,
# before anything imports mfusepy; cheap, as `hub` imports this package on every command.)
os.environ.setdefault("FUSE_LIBRARY_NAME", "fuse3")

from storage.mount.commands import add_parsers  # noqa: E402

__all__ = ["add_parsers"]
