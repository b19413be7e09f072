"""The one inter-process lock of the client: an exclusive flock(2) on a lock file, taken through the
`filelock` library — the lock huggingface_hub takes on the same files (`.locks/<repo>/<etag>.lock`
in its cache), so `hub pull` and huggingface_hub never fetch the same blob at once, and the lock
the blob cache's processes (mounts, `hub pull`) take on `locks/ab/<sha256>.lock` and `evict.lock`.

The lock belongs to the open file, not to a thread: two FileLock objects on one path exclude each
other even within a process, and a job may take a lock in one thread and give it back in another.
"""
from __future__ import annotations

from pathlib import Path

import filelock


class FileLock:
    """An exclusive lock on the file at `path` (created, with its directory, if missing; never
    removed). acquire(blocking=False) returns False at once if another holder has it. release()
    gives it back whoever took it, and does nothing if it is not held."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        # thread_local=False: held by the object, so any thread may release it
        self._lock = filelock.UnixFileLock(self.path, thread_local=False)

    def acquire(self, blocking: bool = True) -> bool:
        """Takes the lock, waiting for it (blocking) or not; True if it is now held."""
        if not self.path.parent.is_dir():
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._lock.acquire(blocking=blocking, poll_interval=0.02)
        except filelock.Timeout:
            return False
        return True

    def release(self) -> None:
        self._lock.release(force=True)

    @property
    def held(self) -> bool:
        return self._lock.is_locked

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
