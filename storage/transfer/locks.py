"""The one inter-process lock of the client: an exclusive flock(2) on a lock file — the lock
huggingface_hub takes on the same files (`.locks/<repo>/<etag>.lock` in its cache, through the
`filelock` library, whose Unix lock is this same flock), so `hub pull` and huggingface_hub never
fetch the same blob at once; and the lock the blob cache's processes (mounts, `hub pull`) take on
`locks/ab/<sha256>.lock` and `evict.lock`.

The lock belongs to the open file, not to a thread: two FileLock objects on one path exclude each
other even within a process, and a job may take a lock in one thread and give it back in another.

flock is called directly rather than through `filelock`: filelock 4 tracks every lock it opens for
forks and reentrancy, Python work that made up half of a mount's CPU while it prefetched 5,000 small
files (one lock each) and slowed `ls -lR` beside it eightfold (tests/test_locks.py checks that the
two still exclude each other).
"""
from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path


class FileLock:
    """An exclusive lock on the file at `path` (created, with its directory, if missing; never
    removed). acquire(blocking=False) returns False at once if another holder has it. release()
    gives it back whoever took it, and does nothing if it is not held."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._fd: int | None = None
        self._mu = threading.Lock()  # (the descriptor, between threads of this process)

    def acquire(self, blocking: bool = True) -> bool:
        """Takes the lock, waiting for it (blocking) or not; True if it is now held."""
        with self._mu:
            if self._fd is not None:
                return True
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except FileNotFoundError:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:  # (Ctrl-C while waiting)
            os.close(fd)
            raise
        with self._mu:
            if self._fd is None:
                self._fd = fd
                return True
        os.close(fd)  # (another thread of ours took it meanwhile through this object: it is held)
        return True

    def release(self) -> None:
        with self._mu:
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # (closing the only descriptor of the open file drops its flock)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
